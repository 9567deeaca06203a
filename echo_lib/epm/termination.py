"""When a sandbox dialogue ends: success, the failure detectors, timeout, and their labels
(METHOD.md 5.5, 5.7, 6.5, 6.9.6-8).

All checks run at an evaluated turn t >= min_turns, in this order: success, then the failure
detectors (collapse; stagnation together with regression), then oscillation. A run that reaches
max_turns without any of them is a timeout (a failure for success-rate purposes).

The texts are the ones the published engine wrote into `termination_reason`, so our result files read
like EMPA's and EMPA's read like ours; `label_from_text` maps any such text to success / failure / timeout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from echo_lib.epm.params import EPMParams

SUCCESS, FAILURE, TIMEOUT = "success", "failure", "timeout"
LABELS = (SUCCESS, FAILURE, TIMEOUT)


@dataclass(frozen=True)
class Termination:
    """How and when a run ended. `reasons` name the conditions that held, e.g. ("positional",) or
    ("collapse", "regression"); `text` is the EMPA-style termination_reason."""
    label: str
    turn: int
    reasons: tuple[str, ...]
    text: str
    details: dict = field(default_factory=dict, compare=False)


# ---- failure detectors: pure functions of the evaluated turns so far (oldest first) ----------------

def collapse(signs: list[int], p: EPMParams) -> bool:
    """Direction collapse: the last `collapse_window` moves all did negative work."""
    w = p.collapse_window
    return len(signs) >= w and all(s < 0 for s in signs[-w:])


def stagnation(radii: list[float], p: EPMParams) -> bool:
    """Stagnation: the remaining resistance |P_t| barely moves over the last `stagnation_window` turns."""
    w = p.stagnation_window
    return len(radii) >= w and float(np.std(radii[-w:])) < p.stagnation_threshold


def regression(signs: list[int], works: list[float], p: EPMParams) -> bool:
    """Persistent regression: most of the last `regression_window` moves did negative work, and in sum too."""
    w = p.regression_window
    if len(signs) < w:
        return False
    negative = sum(s < 0 for s in signs[-w:])
    return negative / w > p.regression_ratio and sum(works[-w:]) < p.regression_sum


def oscillation(moves: list, positions: list, p: EPMParams) -> tuple[bool, int, int]:
    """Vector oscillation over the last `oscillation_window` trajectory points (P0 included, with v = 0):
    much movement (sum of |v|_1) but little net displacement (|P_t - P_first|_1). Returns (fired, total, net)."""
    w = p.oscillation_window
    if not p.oscillation or len(positions) < w:
        return False, 0, 0
    total = int(np.abs(np.asarray(moves[-w:])).sum())
    net = int(np.abs(np.asarray(positions[-1]) - np.asarray(positions[-w])).sum())
    return total >= p.oscillation_min_total and net < p.oscillation_max_net, total, net


# ---- texts and labels -----------------------------------------------------------------------------

def success_text(kind: str) -> str:
    return {
        "geometric": "EPM v2.0 Success: Geometric Victory (reached near origin)",
        "positional": "EPM v2.0 Success: Positional Victory (crossed/approached target zone)",
        "alignment": "EPM v2.0 Success: Alignment Victory (mean cos theta above tau_align)",
    }[kind]


def failure_text(reasons: tuple[str, ...], p: EPMParams, total: int = 0, net: int = 0) -> str:
    parts = {
        "collapse": f"{p.collapse_window} consecutive negative-energy turns (Direction Collapse)",
        "stagnation": f"Stagnation (|P| stdev < {p.stagnation_threshold:g} over {p.stagnation_window} turns)",
        "regression": (f"Persistent Regression ({p.regression_ratio:.0%} negative in "
                       f"{p.regression_window} turns)"),
        "oscillation": f"Vector Oscillation (total change {total}, net change {net})",
    }
    return "EPM v2.0 Failure: " + ", ".join(parts[r] for r in reasons)


def timeout_text(max_turns: int) -> str:
    return f"Reached max turns ({max_turns}), timeout"


def label_from_text(text: str | None) -> str:
    """success / failure / timeout from a termination_reason (6.9.8): "Success" -> success,
    "max turns" -> timeout, anything else (EPM failure, a Director stop) -> failure."""
    text = text or ""
    if "success" in text.lower():
        return SUCCESS
    if "max turns" in text.lower():
        return TIMEOUT
    return FAILURE


def reasons_from_text(text: str | None) -> tuple[str, ...]:
    """The condition names a published termination text mentions (for comparing replays with files)."""
    text = (text or "").lower()
    keys = (("geometric", "geometric victory"), ("positional", "positional victory"),
            ("alignment", "alignment victory"), ("collapse", "direction collapse"),
            ("stagnation", "stagnation"), ("regression", "regression"),
            ("oscillation", "oscillation"), ("max_turns", "max turns"))
    return tuple(name for name, needle in keys if needle in text)
