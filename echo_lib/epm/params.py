"""EPMParams: every constant of the Empathy Potential Model, with the published runs' values as defaults.

METHOD.md 5.5, 6.4-6.9. The defaults reproduce the 480 published EMPA runs and the leaderboard
(alpha 0.10 and min_turns 12 as the runs were made, not the EMPA README's 0.05 / 15). The run config
carries these under `epm:` with these defaults (config/schema.yaml documents each key and takes its
default from here); this module does not import echo_lib.config, so the EPM can be used without a run
config (e.g. by the `echo-epmq` command).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

DIRECTIONS = ("initial", "dynamic")
SUCCESS_RULES = ("code", "paper")
CONSTANT_SETS = ("code", "paper")


@dataclass(frozen=True)
class EPMParams:
    # Sandbox loop (5.5)
    K: int = 1                            # the judge scores every K dialogue turns (one v_t per window)
    min_turns: int = 12                   # no success or failure is declared before this turn
    max_turns: int = 45                   # no termination by then = timeout
    # Thresholds (6.4, 6.5)
    alpha: float = 0.10                   # eps_dist = eps_dir = alpha * |P0|; published runs 0.10 (README 0.05)
    epsilon_zone: float = 1.0             # in-zone: every component >= -epsilon_zone
    direction: str = "initial"            # "initial": v*_0 = -P0/|P0| (as run); "dynamic": v*_t = -P_{t-1}/|P_{t-1}|
    success_rule: str = "code"            # "code": (geometric or positional) and energetic; "paper": Eq. 5 with tau_align
    tau_align: float = 0.7                # paper rule only: mean cos theta over evaluated turns must exceed it
    # Failure detectors (6.5, 6.9.6)
    collapse_window: int = 5              # collapse: the last N delta-E all < 0
    stagnation_window: int = 5            # stagnation: stdev of the last N |P_t| below the threshold
    stagnation_threshold: float = 0.5
    regression_window: int = 8            # regression: > ratio of the last N delta-E < 0 and their sum < limit
    regression_ratio: float = 0.7
    regression_sum: float = -1.0
    oscillation: bool = True              # the engine that made the runs had it; current EMPA code does not
    oscillation_window: int = 12          # trajectory points looked at (12 is the only window that fits)
    oscillation_min_total: float = 3.0    # fail if sum of |v|_1 >= this ...
    oscillation_max_net: float = 3.0      # ... and |P_t - P_first|_1 < this
    # EPM-Q (6.6, 6.7)
    constants: str = "code"               # "code" reproduces the leaderboard; "paper" follows Eqs. 7-16

    def __post_init__(self) -> None:
        problems = []
        for name, allowed in (("direction", DIRECTIONS), ("success_rule", SUCCESS_RULES),
                              ("constants", CONSTANT_SETS)):
            if getattr(self, name) not in allowed:
                problems.append(f"{name}={getattr(self, name)!r} (allowed: {', '.join(allowed)})")
        for name in ("K", "min_turns", "max_turns", "collapse_window", "stagnation_window",
                     "regression_window", "oscillation_window"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)!r} (allowed: an integer >= 1)")
        if not 0 < self.alpha <= 1:
            problems.append(f"alpha={self.alpha!r} (allowed: 0 < alpha <= 1)")
        if not 0 <= self.regression_ratio <= 1:
            problems.append(f"regression_ratio={self.regression_ratio!r} (allowed: 0..1)")
        if isinstance(self.min_turns, int) and isinstance(self.max_turns, int) and self.min_turns > self.max_turns:
            problems.append(f"min_turns={self.min_turns} is above max_turns={self.max_turns}")
        if problems:
            raise ValueError("invalid EPM parameters: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, values: dict) -> "EPMParams":
        """Build from a plain mapping (e.g. a config block); unknown keys are an error that names them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown EPM parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return cls(**values)
