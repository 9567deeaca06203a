"""EPM-Q: nine process indices per case, three group scores and the weighted index
(METHOD.md 6.6 paper definitions, 6.7 the code that made the leaderboard, 6.8 per-case EPM-Q).

Two constant sets:
- `code` (default) reproduces the published leaderboard: r_0 is the distance from P0 to the target zone,
  energy scaled by beta = 1.2, S_net in MDEP *levels* scaled by 1.5, rho_max = 2.5, and every per-turn
  mean counts the P0 point (n_eval + 1 denominators).
- `paper` follows Eqs. 7-16: r_0 = |P0|, no beta, S_net in scores scaled by 1.2, rho_max = sqrt(12),
  per-turn means over evaluated turns only, bounded metrics mapped with Phi (Table 10).
Every table that shows EPM-Q should say which set it used (the `Constants` column of summary tables).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from echo_lib.epm import physics
from echo_lib.epm.engine import Replay
from echo_lib.epm.termination import FAILURE, SUCCESS, TIMEOUT

INDICES = ("Idx_RDI", "Idx_Etot", "Idx_Snet", "Idx_Rho", "Idx_Sproj", "Idx_Tau", "Idx_Rpos", "Idx_Align", "Idx_Pen")
GROUPS = {"Outcome": INDICES[0:3], "Efficiency": INDICES[3:6], "Stability": INDICES[6:9]}
SUMMARY_COLUMNS = ("Model", *INDICES, "Outcome", "Efficiency", "Stability", "EPM-Q",
                   "Success", "Failure", "Timeout", "Mean_Turns")
R0_GUARD = 1e-6


@dataclass(frozen=True)
class EPMQConstants:
    name: str
    r0: str               # "zone": distance_to_zone(P0) (code); "norm": |P0| (paper)
    beta: float           # E_total scale: Idx_Etot = E / (beta r_0)
    alpha: float          # S_net scale: Idx_Snet = S_net / (alpha r_0)
    rho_max: float        # Idx_Rho = (E / T) / rho_max, Idx_Sproj = S_proj / rho_max
    snet_units: str       # "levels" (code) or "scores" (paper)
    count_p0: bool        # per-turn means include the P0 point (cos 0, delta-E 0, no penalty)
    weights: tuple[float, float, float] = (0.4, 0.2, 0.4)


CONSTANTS = {
    "code": EPMQConstants("code", r0="zone", beta=1.2, alpha=1.5, rho_max=2.5, snet_units="levels", count_p0=True),
    "paper": EPMQConstants("paper", r0="norm", beta=1.0, alpha=1.2, rho_max=math.sqrt(12), snet_units="scores",
                           count_p0=False),
}


def get_constants(name: str | EPMQConstants) -> EPMQConstants:
    if isinstance(name, EPMQConstants):
        return name
    if name not in CONSTANTS:
        raise ValueError(f"unknown EPM-Q constant set {name!r}; allowed: {', '.join(CONSTANTS)}")
    return CONSTANTS[name]


def phi(x: float, x0: float, x100: float) -> float:
    """Eq. 14: map x linearly so x0 -> 0 and x100 -> 100, clamped to [0, 100]."""
    return float(np.clip((x - x0) / (x100 - x0) * 100.0, 0.0, 100.0))


def tortuosity(rep: Replay) -> float:
    """Path length over straight-line displacement, P0 included. No movement -> 1; movement that returns to
    P0 exactly -> 0 in the code, which the index clamps to 1 (a quirk reproduced on purpose, 6.7)."""
    path = sum(physics.norm(pt.v) for pt in rep.points[1:])
    displacement = physics.norm(np.subtract(rep.points[-1].P, rep.points[0].P))
    if path == 0:
        return 1.0
    if displacement < 1e-9:
        return 0.0
    return path / displacement


def case_metrics(rep: Replay, constants: str | EPMQConstants = "code") -> dict:
    """The raw process metrics and the nine indices of one replayed case, plus its own EPM-Q (6.8)."""
    c = get_constants(constants)
    eps_zone = rep.params.epsilon_zone
    evaluated = rep.points[1:]
    n = len(evaluated)
    per_turn = rep.points if c.count_p0 else evaluated      # the points per-turn means run over
    denom = max(len(per_turn), 1)
    T = max(rep.total_turns, 1)
    E = round(rep.E_total, physics.STORE_DECIMALS)           # the last point's stored E_total (6.9.2)

    if c.r0 == "zone":
        d0 = physics.distance_to_zone(rep.P0, eps_zone)
        dT = physics.distance_to_zone(rep.points[-1].P, eps_zone)
        r0 = d0 if d0 > R0_GUARD else 1.0
    else:
        d0, dT = physics.norm(rep.P0), physics.norm(rep.points[-1].P)
        r0 = d0 + R0_GUARD
    rdi = (d0 - dT) / d0 * 100.0 if d0 > 0 else 0.0         # % of the initial distance closed

    if c.snet_units == "levels":
        s_net = sum(pt.rubric.level_sum for pt in evaluated)
    else:
        s_net = sum(pt.rubric.score_sum for pt in evaluated)
    # S_proj averages delta-E as stored (2 dp): without it two published cells miss by 0.012 (6.9.1)
    s_proj = sum(round(pt.delta_E, physics.STORE_DECIMALS) for pt in per_turn) / denom
    tau = tortuosity(rep)
    r_pos = 100.0 * sum(pt.sign > 0 for pt in per_turn) / denom
    mean_cos = sum(round(pt.cos, physics.COS_DECIMALS) for pt in per_turn) / denom   # cos as stored (4 dp)
    r_pen = sum(pt.rubric.penalty for pt in per_turn if pt.rubric is not None) / denom

    idx = {
        "Idx_RDI": phi(rdi / 100.0, -1.0, 1.0),
        "Idx_Etot": max(0.0, E) / (c.beta * r0) * 100.0,
        "Idx_Snet": max(0.0, s_net) / (c.alpha * r0) * 100.0,
        "Idx_Rho": max(0.0, E / T) / c.rho_max * 100.0,
        "Idx_Sproj": max(0.0, s_proj) / c.rho_max * 100.0,
        "Idx_Tau": max(0.0, (3.0 - max(tau, 1.0)) / 2.0 * 100.0),
        "Idx_Rpos": r_pos,
        # code: (mean cos + 1) / 2 unclamped; paper: Phi, the same map clamped (mean cos is in [-1, 1] anyway)
        "Idx_Align": (mean_cos + 1.0) / 2.0 * 100.0 if c.name == "code" else phi(mean_cos, -1.0, 1.0),
        "Idx_Pen": max(0.0, (3.0 - r_pen) / 3.0 * 100.0),
    }
    groups = {g: float(np.mean([idx[k] for k in keys])) for g, keys in GROUPS.items()}
    w = c.weights
    raw = {"RDI%": rdi, "E_total": E, "S_net": s_net, "rho": E / T, "S_proj": s_proj, "tau": tau,
           "R_pos%": r_pos, "mean_cos": mean_cos, "R_pen": r_pen, "r0": r0}
    return {**raw, **idx, **groups,
            "EPM-Q": w[0] * groups["Outcome"] + w[1] * groups["Efficiency"] + w[2] * groups["Stability"],
            "n_eval": n}


def per_case_table(replays: list[Replay], constants: str | EPMQConstants = "code") -> pd.DataFrame:
    """One row per (model, case): identity, how the run ended, raw metrics, indices and per-case EPM-Q."""
    c = get_constants(constants)
    rows = []
    for rep in replays:
        t = rep.termination
        rows.append({
            "Model": rep.run.model, "Case_ID": rep.run.case_id, "Outcome_Label": rep.label,
            "Turns": rep.total_turns, "Termination": t.text if t else rep.run.termination_reason,
            "P0_C": int(rep.P0[0]), "P0_A": int(rep.P0[1]), "P0_P": int(rep.P0[2]),
            "P0_norm": round(physics.norm(rep.P0), 2),
            "P_final_C": rep.final_P[0], "P_final_A": rep.final_P[1], "P_final_P": rep.final_P[2],
            "Judge_Failures": sum(rep.run.judge_failed[:rep.n_eval]),
            **case_metrics(rep, c), "Constants": c.name})
    return pd.DataFrame(rows)


def summary_table(per_case: pd.DataFrame, constants: str | EPMQConstants = "code") -> pd.DataFrame:
    """One row per model (Eqs. 15-16): mean of each index over its cases, group scores, EPM-Q, outcome
    counts and mean turns. Columns as `echo-epmq` writes them (SUMMARY_COLUMNS)."""
    c = get_constants(constants)
    rows = []
    for model, cases in per_case.groupby("Model", sort=False):
        means = {k: float(cases[k].mean()) for k in INDICES}
        groups = {g: float(np.mean([means[k] for k in keys])) for g, keys in GROUPS.items()}
        w = c.weights
        labels = cases["Outcome_Label"]
        rows.append({"Model": model, **means, **groups,
                     "EPM-Q": w[0] * groups["Outcome"] + w[1] * groups["Efficiency"] + w[2] * groups["Stability"],
                     "Success": int((labels == SUCCESS).sum()), "Failure": int((labels == FAILURE).sum()),
                     "Timeout": int((labels == TIMEOUT).sum()), "Mean_Turns": float(cases["Turns"].mean())})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
