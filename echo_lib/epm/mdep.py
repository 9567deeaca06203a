"""MDEP-PR rubric levels -> the action vector v_t (METHOD.md 6.3, 6.9.3-4).

Every K turns the judge gives six levels: progress C/A/P_Prog in {0, 1, 2} and regress C/A/P_Neg in
{0, -1, -2}. Levels map to scores (the rubric's "consistent linear mapping" is in fact non-linear at the
top: a level-2 progress is worth 3, a severe affective or motivational regress costs 5), and
v_t = (C_Prog + C_Neg, A_Prog + A_Neg, P_Prog + P_Neg) in scores.
The leaderboard's S_net and R_pen use the levels themselves, so both are kept.
"""
from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Mapping

import numpy as np

FIELDS = ("C_Prog", "C_Neg", "A_Prog", "A_Neg", "P_Prog", "P_Neg")

# level -> score, per field. A level outside these tables maps to 0, as the published runs did.
PROG_SCORES = {0: 0, 1: 1, 2: 3}
SCORES: dict[str, dict[int, int]] = {
    "C_Prog": PROG_SCORES,
    "C_Neg": {0: 0, -1: -2, -2: -4},
    "A_Prog": PROG_SCORES,
    "A_Neg": {0: 0, -1: -2, -2: -5},   # -2: judging/blaming, or repeated templated performative empathy
    "P_Prog": PROG_SCORES,
    "P_Neg": {0: 0, -1: -2, -2: -5},   # -2: negates the core motive, implies effort is pointless
}


def _level(value: object, field: str) -> int:
    """A level as the published engine read it: an integer inside the rubric, anything else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        return 0
    try:
        whole = int(value)
    except (ValueError, OverflowError):   # NaN, +-Infinity: no level (a reader names them; here they never raise)
        return 0
    if value != whole or whole not in SCORES[field]:
        return 0
    return whole


def invalid_levels(judged: Mapping[str, object] | None) -> dict[str, object]:
    """The exact-name level keys whose value is no level of the rubric (scored 0 by from_judge, as the
    published engine did); a reader reports them rather than scoring them 0 in silence."""
    judged = judged or {}
    return {f"{f}_level": judged[f"{f}_level"] for f in FIELDS
            if f"{f}_level" in judged and _level(judged[f"{f}_level"], f) != judged[f"{f}_level"]}


@dataclass(frozen=True)
class Rubric:
    """The six MDEP levels of one evaluation window."""
    C_Prog: int = 0
    C_Neg: int = 0
    A_Prog: int = 0
    A_Neg: int = 0
    P_Prog: int = 0
    P_Neg: int = 0

    @classmethod
    def from_judge(cls, judged: Mapping[str, object] | None) -> "Rubric":
        """Read `<field>_level` keys by their exact names; a missing key, a misspelt key (e.g. `PNeg_level`)
        or a level outside the rubric counts 0. `None` (the judge failed) is all zeros (6.9.3-4)."""
        judged = judged or {}
        return cls(**{f: _level(judged.get(f"{f}_level", 0), f) for f in FIELDS})

    def to_judge(self) -> dict[str, int]:
        return {f"{f}_level": getattr(self, f) for f in FIELDS}

    def scores(self) -> dict[str, int]:
        return {f: SCORES[f][getattr(self, f)] for f in FIELDS}

    @property
    def v(self) -> np.ndarray:
        """The action vector v_t = net score per axis (C, A, P)."""
        s = self.scores()
        return np.array([s["C_Prog"] + s["C_Neg"], s["A_Prog"] + s["A_Neg"], s["P_Prog"] + s["P_Neg"]], dtype=int)

    @property
    def level_sum(self) -> int:
        """Sum of all six levels (Neg levels are negative): the leaderboard's S_net contribution."""
        return sum(astuple(self))

    @property
    def penalty(self) -> int:
        """|C_Neg| + |A_Neg| + |P_Neg| in levels: the leaderboard's R_pen contribution."""
        return -(self.C_Neg + self.A_Neg + self.P_Neg)

    @property
    def score_sum(self) -> int:
        return int(self.v.sum())
