"""The EPM engine: update the state after every evaluation and decide when the run ends
(METHOD.md 5.5 EPM.update, 6.4, 6.5, 6.9).

`EPM` is incremental, for the sandbox (call `update` after each judge verdict, stop when it returns a
Termination); `replay` runs it over a stored `CaseRun`. The trajectory keeps P0 as point 0 with v = 0,
delta-E = 0 and cos = 0: the leaderboard's (n + 1) denominators count that point.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from echo_lib.epm import physics, termination as term
from echo_lib.epm.iedr import initial_deficit
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.epm.trajectory import CaseRun

log = logging.getLogger(__name__)
r2 = lambda x: round(float(x), physics.STORE_DECIMALS)  # noqa: E731  stored precision


@dataclass(frozen=True)
class Point:
    """One trajectory point: the state after the evaluation at dialogue turn `turn` (0 = P0)."""
    turn: int
    P: tuple[int, int, int]
    v: tuple[int, int, int]
    rubric: Rubric | None      # None for P0
    delta_E: float             # work of v (unrounded; stored at 2 dp)
    sign: int                  # exact sign of that work (+1, 0, -1)
    E_total: float             # running sum of unrounded delta-E
    cos: float                 # alignment of v with the ideal direction
    r: float                   # |P_t|, the remaining resistance
    projection: float          # P_t . v*_0
    distance: float            # distance to the target zone
    in_zone: bool


class EPM:
    def __init__(self, P0, params: EPMParams = EPMParams()):
        self.p = params
        self.P0 = np.asarray(P0, dtype=int)
        self.v0 = physics.ideal_direction(self.P0)
        self.eps_dist, self.eps_dir, self.eps_energy = physics.thresholds(self.P0, params.alpha)
        self.points: list[Point] = [self._point(0, self.P0, np.zeros(3, int), None, 0.0, 0, 0.0, 0.0)]
        self.termination: term.Termination | None = None

    def _point(self, turn, P, v, rubric, dE, sign, E, cos) -> Point:
        eps = self.p.epsilon_zone
        return Point(turn=turn, P=tuple(int(x) for x in P), v=tuple(int(x) for x in v), rubric=rubric,
                     delta_E=dE, sign=sign, E_total=E, cos=cos, r=physics.norm(P),
                     projection=physics.projection(P, self.v0), distance=physics.distance_to_zone(P, eps),
                     in_zone=physics.in_zone(P, eps))

    def update(self, turn: int, rubric: Rubric) -> term.Termination | None:
        """Apply one judge verdict (the window ending at dialogue `turn`); return the Termination if the run ends."""
        if self.termination is not None:
            raise RuntimeError(f"the run already ended at turn {self.termination.turn}; start a new EPM")
        prev = self.points[-1]
        if turn <= prev.turn:
            raise ValueError(f"evaluation turn {turn} is not after the previous one ({prev.turn})")
        v = rubric.v
        # initial: the fixed v*_0 (as run); dynamic: the direction from where this move started
        P_from = self.P0 if self.p.direction == "initial" else np.asarray(prev.P)
        direction = self.v0 if self.p.direction == "initial" else physics.ideal_direction(P_from)
        dE = physics.work(v, direction)
        cos = physics.cos_theta(v, direction)
        P = np.asarray(prev.P) + v
        self.points.append(self._point(turn, P, v, rubric, dE, physics.work_sign(v, P_from), prev.E_total + dE, cos))
        self.termination = self._check(turn)
        return self.termination

    # ---- termination ------------------------------------------------------------------------------
    def _check(self, turn: int) -> term.Termination | None:
        p = self.p
        if turn >= p.min_turns:
            for check in (self._success, self._failure, self._oscillation):
                ended = check(turn)
                if ended:
                    return ended
        if turn >= p.max_turns:
            return term.Termination(term.TIMEOUT, turn, ("max_turns",), term.timeout_text(p.max_turns))
        return None

    def _energetic(self, strict: bool) -> bool:
        last = self.points[-1]
        if self.p.direction == "initial":
            # With v*_0 fixed, E_total - |P0| = P_t . v*_0 exactly, so the test is the sign of the integer
            # P_t . (-P0) (6.9.7); float sums with the rounded v*_0 would misjudge the two published ties.
            s = int(np.dot(np.asarray(last.P, np.int64), -self.P0.astype(np.int64)))
            return s > 0 if strict else s >= 0
        return last.E_total > self.eps_energy if strict else last.E_total >= self.eps_energy

    def _success(self, turn: int) -> term.Termination | None:
        last = self.points[-1]
        geometric = r2(last.r) <= self.eps_dist
        if self.p.success_rule == "code":
            positional = r2(last.projection) >= -self.eps_dir
            kinds = [k for k, ok in (("geometric", geometric), ("positional", positional)) if ok]
            if kinds and self._energetic(strict=False):
                return term.Termination(term.SUCCESS, turn, (kinds[0],), term.success_text(kinds[0]),
                                        {"achieved": kinds + ["energetic"]})
            return None
        # paper Eq. 5: E_total > eps_energy and (|P_T| < eps_dist or mean cos theta > tau_align)
        mean_cos = float(np.mean([pt.cos for pt in self.points[1:]]))
        kinds = [k for k, ok in (("geometric", r2(last.r) < self.eps_dist),
                                 ("alignment", mean_cos > self.p.tau_align)) if ok]
        if kinds and self._energetic(strict=True):
            return term.Termination(term.SUCCESS, turn, (kinds[0],), term.success_text(kinds[0]),
                                    {"achieved": kinds + ["energetic"], "mean_cos": mean_cos})
        return None

    def _failure(self, turn: int) -> term.Termination | None:
        evaluated = self.points[1:]
        signs = [pt.sign for pt in evaluated]
        works = [pt.delta_E for pt in evaluated]
        fired = {
            "collapse": term.collapse(signs, self.p),
            "stagnation": term.stagnation([pt.r for pt in evaluated], self.p),
            "regression": term.regression(signs, works, self.p),
        }
        if fired["collapse"] or (fired["stagnation"] and fired["regression"]):
            reasons = tuple(k for k, ok in fired.items() if ok)
            return term.Termination(term.FAILURE, turn, reasons, term.failure_text(reasons, self.p))
        return None

    def _oscillation(self, turn: int) -> term.Termination | None:
        fired, total, net = term.oscillation([pt.v for pt in self.points], [pt.P for pt in self.points], self.p)
        if fired:
            return term.Termination(term.FAILURE, turn, ("oscillation",),
                                    term.failure_text(("oscillation",), self.p, total, net),
                                    {"total_change": total, "net_change": net})
        return None


@dataclass
class Replay:
    """A run scored by the EPM: its trajectory (P0 first) and how it ended."""
    run: CaseRun
    params: EPMParams
    P0: np.ndarray
    v_star_0: np.ndarray
    thresholds: tuple[float, float, float]     # eps_dist, eps_dir, eps_energy
    points: list[Point]
    termination: term.Termination | None       # None: the run had not ended (and did not reach max_turns)

    @property
    def label(self) -> str:
        """success / failure / timeout; an unfinished run is labelled from its stored text (e.g. a Director stop)."""
        return self.termination.label if self.termination else term.label_from_text(self.run.termination_reason)

    @property
    def total_turns(self) -> int:
        """Dialogue turns T: the stop turn if the EPM ended the run, else the turns the run played."""
        return self.termination.turn if self.termination else max(self.run.total_turns, self.points[-1].turn)

    @property
    def n_eval(self) -> int:
        return len(self.points) - 1

    @property
    def E_total(self) -> float:
        return self.points[-1].E_total

    @property
    def final_P(self) -> tuple[int, int, int]:
        return self.points[-1].P

    @property
    def delta_E(self) -> list[float]:
        return [pt.delta_E for pt in self.points[1:]]


def replay(run: CaseRun, params: EPMParams = EPMParams()) -> Replay:
    """Score a run from its judge levels alone (never from stored totals). Evaluations after the
    EPM ends the run are ignored (they cannot happen in a run made with the same parameters)."""
    P0 = initial_deficit(run.iedr, where=f"{run.source or run.case_id}: IEDR")
    epm = EPM(P0, params)
    for turn, rubric in zip(run.eval_turns, run.rubrics):
        if epm.update(turn, rubric):
            break
    if epm.termination and epm.termination.turn < run.eval_turns[-1]:
        log.warning("%s: the EPM ends this run at turn %d but it goes on to turn %d; it was made with other "
                    "EPM parameters, and the turns after %d are not scored", run.source or run.case_id,
                    epm.termination.turn, run.eval_turns[-1], epm.termination.turn)
    return Replay(run=run, params=params, P0=P0, v_star_0=epm.v0,
                  thresholds=(epm.eps_dist, epm.eps_dir, epm.eps_energy),
                  points=epm.points, termination=epm.termination)
