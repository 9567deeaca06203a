"""Axioms -> theorems (METHOD.md 2.2-2.3): universal principles, instantiated for one user.

Human preferences differ, so Echo-N1 treats universal values as axioms and one person's needs as
theorems derived from them and a mined user profile. Here the profile is the scenario's gold persona
(what the Empathy reward model must later recover in its reasoning, and what the process reward
checks). The derivation is a transparent rule, not a model call: an axiom applies with the weight of
the need it serves for this user, and the user's threshold, constraints and dislikes become
theorems of their own. [DEFAULT] — the paper's derivation prompt is not published.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from echo_lib.scenarios.schema import Scenario

AXIS_NAMES = {"C": "cognitive", "A": "affective", "P": "motivational"}


@dataclass(frozen=True)
class Axiom:
    id: str
    axis: str          # C | A | P | all
    principle: str
    violation: str


def load_axioms(path: str | Path) -> list[Axiom]:
    path = Path(path)
    records = yaml.safe_load(path.read_text())
    if not isinstance(records, list) or not records:
        raise ValueError(f"{path}: expected a list of axioms (id, axis, principle, violation)")
    axioms = []
    for i, record in enumerate(records):
        missing = {"id", "axis", "principle", "violation"} - set(record or {})
        if missing:
            raise ValueError(f"{path}: axiom #{i + 1} lacks {', '.join(sorted(missing))}")
        if record["axis"] not in (*AXIS_NAMES, "all"):
            raise ValueError(f"{path}: axiom {record['id']!r} has axis {record['axis']!r}; allowed: C, A, P, all")
        axioms.append(Axiom(**{k: record[k] for k in ("id", "axis", "principle", "violation")}))
    return axioms


def gold_profile(scenario: Scenario) -> dict:
    """The user profile the Empathy RM should infer (the EMPA persona fields, METHOD.md 2.2)."""
    p = scenario.priorities
    return {
        "traits": f"{scenario.persona.social_persona} Underneath: {scenario.persona.inner_core}",
        "current_emotion": scenario.story.trigger,
        "vent": scenario.needs.vent,
        "hoped_for": scenario.needs.hoped_for,
        "threshold": scenario.threshold.level,
        "priorities": {"cognitive": p.cognitive.level, "affective": p.affective.level,
                       "motivational": p.motivational.level},
        "dislikes": list(scenario.dislikes),
    }


def derive_theorems(scenario: Scenario, axioms: list[Axiom]) -> list[str]:
    """What this user needs from a reply, most important first."""
    name = scenario.persona.name.split()[0]
    levels = {"C": scenario.priorities.cognitive, "A": scenario.priorities.affective,
              "P": scenario.priorities.motivational}
    rank = {"High": 0, "Medium": 1, "Low": 2}
    theorems = []
    for axis in sorted(levels, key=lambda a: rank[levels[a].level]):
        need = levels[axis]
        for axiom in (a for a in axioms if a.axis == axis):
            if need.level == "High":
                theorems.append(f"{name} needs a reply that will {axiom.principle} ({AXIS_NAMES[axis]} need "
                                f"is high: {need.reason.rstrip('.')}); a reply that {axiom.violation} fails {name}.")
            elif need.level == "Medium":
                theorems.append(f"It helps {name} when a reply will {axiom.principle}.")
    for axiom in (a for a in axioms if a.axis == "all"):
        theorems.append(f"For {name}, a reply that {axiom.violation} is a negative.")
    if scenario.threshold.level == "High":
        theorems.append(f"{name} is hard to reach: a generic or templated line will feel hollow. "
                        f"{scenario.threshold.description}")
    theorems.append(f"In practice: {scenario.needs.constraints}")
    theorems += [f"{name} is pushed away by: {d}." for d in scenario.dislikes]
    return theorems
