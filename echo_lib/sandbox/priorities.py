"""Where P0's three priority indicators come from: the judge, or the scenario's declared priorities (issue 36).

Three of the IEDR's nine indicators are the persona's priority for each kind of empathy (C.3 cognitive, A.3
affective, P.3 motivational; echo_lib.epm.iedr), and every scenario file declares them (`priorities:`,
High / Medium / Low). They decide P0's direction, so the ideal direction, the normalisation by |P0| and the
per-axis slices of the EPM. `sandbox_run.judge.iedr_priorities` says who gives them:

- judge (the published method): the Judge rates them as it rates the other six;
- declared: the scenario file's levels, Low -> 1 (secondary), Medium -> 2 (core), High -> 3 (highest), the
  IEDR's own wording of the levels (echo_lib.sandbox.judge.IEDR). The tiny run uses this: its 135M judge
  does not read the priorities from the profile (judges/sensitivity.json "iedr"), and a starting point that
  is the same for every case says nothing about the case. The other six indicators still come from the judge.

The judge's own answer is kept beside the declared level (`{indicator}_judge_level`), and the result file's
`iedr_details.source` says which gave P0.
"""
from __future__ import annotations

from typing import Sequence

from echo_lib.sandbox.params import PRIORITY_SOURCES as SOURCES
from echo_lib.scenarios.schema import Scenario

PRIORITY_INDICATORS = {"C.3": "cognitive", "A.3": "affective", "P.3": "motivational"}   # -> priorities.<need>
PRIORITY_LEVELS = {"Low": 1, "Medium": 2, "High": 3}   # secondary, core, highest
JUDGE, DECLARED = SOURCES


def declared_levels(sc: Scenario) -> dict[str, int]:
    """C.3 / A.3 / P.3 as the scenario file declares them."""
    pr = sc.priorities
    return {k: PRIORITY_LEVELS[getattr(pr, need).level] for k, need in PRIORITY_INDICATORS.items()}


def with_priorities(verdicts: list, scenarios: Sequence[Scenario], priorities: str, judge_source: str) -> list:
    """The IEDR verdicts with their priority levels from `priorities` (judge or declared), each answered
    verdict naming its source (`iedr_source`) unless it is the judge's plain answer. `judge_source` is who
    answered for the judge (its LM head: "judge", or its read-out heads)."""
    if priorities not in SOURCES:
        raise ValueError(f"sandbox_run.judge.iedr_priorities is {priorities!r}; allowed: {', '.join(SOURCES)}")
    source = judge_source if priorities == JUDGE else (
        "declared priorities (C.3/A.3/P.3 from the scenario file); the other 6 indicators: "
        + ("the judge's LM head" if judge_source == JUDGE else judge_source))
    for sc, v in zip(scenarios, verdicts):
        if not v.ok:
            continue
        if priorities == DECLARED:
            for k, level in declared_levels(sc).items():
                v.details[f"{k}_judge_level"] = v.details[f"{k}_level"]
                v.details[f"{k}_level"] = level
        if source != JUDGE:
            v.details["iedr_source"] = source
    return verdicts


def judge_answer(details: dict) -> dict[str, int] | None:
    """The nine levels as the judge answered them, where declared priorities replaced its C.3 / A.3 / P.3
    (with_priorities kept them as `{indicator}_judge_level`); None where P0 is the judge's own answer."""
    from echo_lib.epm.iedr import INDICATORS
    if not any(f"{k}_judge_level" in details for k in PRIORITY_INDICATORS):
        return None
    return {k: details.get(f"{k}_judge_level", details[f"{k}_level"]) for k in INDICATORS}
