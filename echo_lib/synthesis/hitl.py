"""Human-in-the-loop check of the empathy data (METHOD.md 2.5).

Echo-N1's annotators checked that the model-inferred user profiles and response strategies match what
they intended. Here the unit is a scenario: its gold profile and its theorems (the derived strategy).
`export_sample` writes a stratified sample to a CSV an annotator fills (one row per scenario and
annotator: profile_consistent, strategy_consistent as yes/no); `read_verdicts` imports filled files;
`agreement` reports % agreement and Cohen's kappa where two annotators rated the same scenarios; and
`rejected_scenarios` lists those any annotator judged inconsistent, whose items are dropped.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from echo_lib.provenance import write_text
from echo_lib.scenarios.cases import stratified_order
from echo_lib.scenarios.schema import Scenario

CHECKS = ("profile_consistent", "strategy_consistent")
COLUMNS = ("scenario_id", "dominant_axis", "profile", "theorems", "annotator", *CHECKS, "comment")
ANSWERS = {"yes": True, "no": False}


@dataclass(frozen=True)
class Verdict:
    scenario_id: str
    annotator: str
    profile_consistent: bool
    strategy_consistent: bool

    @property
    def accepted(self) -> bool:
        return self.profile_consistent and self.strategy_consistent


def sample_size(n: int, fraction: float, minimum: int) -> int:
    return min(n, max(minimum, round(n * fraction)))


def export_sample(scenarios: Sequence[Scenario], profiles: dict[str, dict], theorems: dict[str, list[str]],
                  fraction: float, minimum: int, seed: int, path: str | Path) -> list[str]:
    """Write the annotation sheet (blank verdict columns); returns the sampled scenario ids."""
    chosen = stratified_order(list(scenarios), sample_size(len(scenarios), fraction, minimum), seed)
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    for s in chosen:
        writer.writerow({"scenario_id": s.id, "dominant_axis": s.labels.dominant_axis,
                         "profile": "; ".join(f"{k}: {v}" for k, v in profiles[s.id].items()),
                         "theorems": " | ".join(theorems[s.id]), "annotator": "",
                         "profile_consistent": "", "strategy_consistent": "", "comment": ""})
    write_text(path, buf.getvalue())   # atomic (UTF-8): a kill mid-write leaves no half sheet
    return [s.id for s in chosen]


def read_verdicts(paths: Iterable[str | Path]) -> list[Verdict]:
    """Filled sheets -> verdicts. Rows without an annotator are skipped (not yet annotated)."""
    verdicts = []
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"verdict file {path} does not exist; fix data.hitl.verdicts in the config")
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"scenario_id", "annotator", *CHECKS} - set(reader.fieldnames or [])
            if missing:
                raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}; "
                                 f"an annotation sheet has {', '.join(COLUMNS)}")
            for line, row in enumerate(reader, start=2):
                if not row["annotator"].strip():
                    continue
                answers = {}
                for check in CHECKS:
                    value = row[check].strip().lower()
                    if value not in ANSWERS:
                        raise ValueError(f"{path}, line {line}, column {check}: {row[check]!r}; "
                                         "allowed: yes or no")
                    answers[check] = ANSWERS[value]
                verdicts.append(Verdict(row["scenario_id"].strip(), row["annotator"].strip(), **answers))
    return verdicts


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' yes/no answers (None when chance agreement is total)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def agreement(verdicts: Sequence[Verdict]) -> dict:
    """Acceptance rate, and for the first two annotators on their common scenarios: % agreement and kappa."""
    by_annotator: dict[str, dict[str, Verdict]] = {}
    for v in verdicts:
        by_annotator.setdefault(v.annotator, {})[v.scenario_id] = v
    report = {"annotators": sorted(by_annotator), "verdicts": len(verdicts),
              "scenarios": len({v.scenario_id for v in verdicts}),
              "accept_rate": sum(v.accepted for v in verdicts) / len(verdicts) if verdicts else None}
    if len(by_annotator) >= 2:
        first, second = (by_annotator[a] for a in sorted(by_annotator)[:2])
        common = sorted(set(first) & set(second))
        report["common_scenarios"] = len(common)
        for check in CHECKS:
            a = [getattr(first[s], check) for s in common]
            b = [getattr(second[s], check) for s in common]
            report[f"{check}_agreement"] = sum(x == y for x, y in zip(a, b)) / len(common) if common else None
            report[f"{check}_kappa"] = cohen_kappa(a, b) if common else None
    return report


def rejected_scenarios(verdicts: Sequence[Verdict]) -> set[str]:
    """Scenarios any annotator judged inconsistent: their items are dropped (or regenerated)."""
    return {v.scenario_id for v in verdicts if not v.accepted}
