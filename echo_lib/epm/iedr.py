"""IEDR (Initial Empathy Deficit Rating) -> P0, the user's starting point in C-A-P space (METHOD.md 6.1-6.2).

The judge rates nine indicators 0..3 once per case. Each level costs one base deficit unit (-2) times
the indicator's multiplier; an axis's deficit is the sum over its three indicators, so
P0 = (C, A, P) holds negative integers (e.g. script_003: (-17, -18, -13)).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

AXES = ("C", "A", "P")
BASE_DEFICIT_UNIT = -2

# indicator -> multiplier. C.3 / A.3 / P.3 are the persona's stated priority for that kind of empathy.
MULTIPLIERS: dict[str, float] = {
    "C.1": 1.0,  # situation complexity
    "C.2": 1.0,  # depth of the cognitive problem
    "C.3": 1.5,  # cognitive priority
    "A.1": 1.0,  # emotion intensity
    "A.2": 2.0,  # emotion accessibility (hidden or conflicted emotion is harder to reach)
    "A.3": 1.5,  # affective priority
    "P.1": 1.0,  # initial agency
    "P.2": 2.0,  # value relevance
    "P.3": 1.5,  # motivational priority
}
INDICATORS = tuple(MULTIPLIERS)


def indicator_score(indicator: str, level: int) -> int:
    """Deficit contributed by one indicator at one level (0 .. -18)."""
    return int(BASE_DEFICIT_UNIT * MULTIPLIERS[indicator] * level)


def check_levels(levels: Mapping[str, object], where: str = "IEDR") -> dict[str, int]:
    """The nine levels as ints, or a ValueError that names the indicator and what is allowed."""
    out = {}
    for name in INDICATORS:
        if name not in levels:
            raise ValueError(f"{where}: indicator {name!r} is missing; give all nine of {', '.join(INDICATORS)}")
        value = levels[name]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 3:
            raise ValueError(f"{where}: indicator {name!r} has level {value!r}; allowed: an integer 0..3")
        out[name] = int(value)
    return out


def initial_deficit(levels: Mapping[str, object], where: str = "IEDR") -> np.ndarray:
    """P0 = (sum C, sum A, sum P) of the indicator scores, as an int array."""
    levels = check_levels(levels, where)
    return np.array([sum(indicator_score(f"{axis}.{i}", levels[f"{axis}.{i}"]) for i in (1, 2, 3))
                     for axis in AXES], dtype=int)


def dominant_axis(P0) -> str:
    """The axis with the largest deficit (most negative component); ties go to the first of C, A, P."""
    return AXES[int(np.argmin(np.asarray(P0)))]
