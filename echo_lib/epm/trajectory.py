"""The project's trajectory type: one sandbox run of one case, as the EPM needs it.

A `CaseRun` is the evidence of a run: the nine IEDR levels (-> P0) and, for every evaluation, the
dialogue turn and the judge's six MDEP levels. Everything else (positions, energies, termination,
EPM-Q) is *derived* from it by `echo_lib.epm.engine.replay`, so a run is scored the same way whether
it came from our sandbox or from an EMPA result file. The optional fields carry the rest of a result
file (dialogue, scenario, judge evidence) so a run can be written back in the EMPA schema.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from echo_lib.epm.mdep import Rubric


@dataclass
class CaseRun:
    case_id: str                         # e.g. "script_003"
    model: str                           # the tested model (the folder name for EMPA runs)
    iedr: dict[str, int]                 # C.1 .. P.3 levels 0..3
    rubrics: list[Rubric]                # one per evaluation, oldest first
    eval_turns: list[int]                # dialogue turn of each evaluation (1..T with K = 1)
    total_turns: int                     # dialogue turns played
    termination_reason: str = ""         # as stored (EMPA text); "" for a run still going
    judge_failed: list[bool] = field(default_factory=list)   # evaluations without a rubric (scored 0)
    # What the file stored, for checks only (never used to score): E_total_final, P_final, trajectory blocks.
    stored: dict = field(default_factory=dict, repr=False)
    # Payload for writing an EMPA result file; empty for runs built from numbers only.
    history: list[dict] = field(default_factory=list, repr=False)
    scenario: dict = field(default_factory=dict, repr=False)
    roles: dict[str, str] = field(default_factory=dict)      # test_model_name, actor_model, judger_model, director_model
    judge_details: list[dict | None] = field(default_factory=list, repr=False)  # full MDEP judge JSON per evaluation
    iedr_details: dict = field(default_factory=dict, repr=False)               # full IEDR judge JSON (27 fields)
    source: str = ""                     # file it was read from, for messages
    rubric_version: str = ""             # the judge rubric that scored it, in words (empa_io.rubric_version)
    notes: list[str] = field(default_factory=list, repr=False)   # what reading it found odd (scored as published)

    def __post_init__(self) -> None:
        where = self.source or f"{self.model}/{self.case_id}"
        if len(self.rubrics) != len(self.eval_turns):
            raise ValueError(f"{where}: {len(self.rubrics)} rubrics but {len(self.eval_turns)} evaluation turns; "
                             "give one turn number per evaluation")
        if any(b <= a for a, b in zip(self.eval_turns, self.eval_turns[1:])) or any(t < 1 for t in self.eval_turns):
            raise ValueError(f"{where}: evaluation turns {self.eval_turns} must be increasing and >= 1")
        if not self.judge_failed:
            self.judge_failed = [False] * len(self.rubrics)

    @classmethod
    def from_levels(cls, case_id: str, model: str, iedr: dict[str, int], levels: list[dict | None],
                    K: int = 1, **extra) -> "CaseRun":
        """A run from numbers only: `levels[i]` is the judge's `{field}_level` dict of evaluation i
        (None = the judge failed), evaluated every K turns."""
        rubrics = [Rubric.from_judge(lv) for lv in levels]
        turns = [K * (i + 1) for i in range(len(levels))]
        extra.setdefault("total_turns", turns[-1] if turns else 0)
        return cls(case_id=case_id, model=model, iedr=dict(iedr), rubrics=rubrics, eval_turns=turns,
                   judge_failed=[lv is None for lv in levels], **extra)
