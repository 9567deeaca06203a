"""Did RL move the policy? The tiny scale's targets (issue 33), read from one variant's stage-03 results.

    filter_kept_share    kept / drawn prompts of the hard filter                       >= 0.60
    zero_spread_share    mean share of a step's groups whose rewards all tie           <= 0.25
    reward_trend         mean training reward, last quarter of the steps minus first   >= 0.20
    rm_win_rate          the Empathy RM's position-consistent win rate against the base
                         on the held-out prompts: >= 0.60, its 95 % interval above 0.50, on >= 40 prompts
    greedy_changed       held-out prompts whose greedy reply the adapter changed       >= 1
    stage_seconds        the whole stage for this variant                               <= 600

The independent judge's win rate is reported beside them with its interval and has no target: it is
the check on the reward model, whatever it says. So is, with policy.both_orders, the RM's win rate read
the way the echo reward reads it (rm_debiased_win_rate: position-debiased probabilities, not argmaxes). Each target is {value, target, met}; metrics.json
keeps them under "targets".
"""
from __future__ import annotations

from typing import Sequence

MIN_HELDOUT = 40


def _mean(xs: Sequence[float]) -> float | None:
    xs = [float(x) for x in xs if x is not None and x == x]
    return sum(xs) / len(xs) if xs else None


def quarter_trend(values: Sequence[float | None]) -> float | None:
    """Mean of the last quarter of the steps minus the mean of the first (None under 4 steps)."""
    x = [float(v) for v in values if v is not None and v == v]
    if len(x) < 4:
        return None
    q = len(x) // 4
    return sum(x[-q:]) / q - sum(x[:q]) / q


def _target(value, text: str, ok) -> dict:
    return {"value": None if value is None else round(value, 4), "target": text,
            "met": bool(value is not None and ok(value))}


def rl_targets(rows: Sequence[dict], data_report: dict, winrate_summary: Sequence[dict], greedy: dict,
               stage_seconds: float) -> dict:
    """The targets of one variant from its train_log rows, filter report, win-rate rows and greedy check."""
    drawn = sum((data_report.get("drawn") or {}).values())
    kept = sum((data_report.get("kept") or {}).values())
    judges = {r["judge"]: r for r in winrate_summary}
    rm, ind = judges.get("empathy_rm", {}), judges.get("independent", {})
    rm_ok = (rm.get("n", 0) >= MIN_HELDOUT and (rm.get("ci_low") or 0) > 0.5
             and not rm.get("ci_degenerate", False))
    out = {
        "filter_kept_share": _target(kept / drawn if drawn else None, ">= 0.60", lambda v: v >= 0.6),
        "zero_spread_share": _target(_mean([r.get("frac_reward_zero_std") for r in rows]), "<= 0.25",
                                     lambda v: v <= 0.25),
        "reward_trend": _target(quarter_trend([r.get("reward") for r in rows]), ">= 0.20", lambda v: v >= 0.2),
        "rm_win_rate": {**_target(rm.get("win_rate"), f">= 0.60, 95 % interval above 0.50, n >= {MIN_HELDOUT}",
                                  lambda v: v >= 0.6 and rm_ok),
                        "ci": [rm.get("ci_low"), rm.get("ci_high")], "n": rm.get("n"), "ci_method": rm.get("ci_method"),
                        "position_consistency": rm.get("position_consistency")},
        "greedy_changed": _target(greedy.get("changed"), ">= 1 held-out prompt", lambda v: v >= 1),
        "stage_seconds": _target(stage_seconds, "<= 600", lambda v: v <= 600),
    }
    if "empathy_rm_debiased" in judges:   # the RM as the echo reward reads it: reported, no target
        d = judges["empathy_rm_debiased"]
        out["rm_debiased_win_rate"] = {"value": d.get("win_rate"), "ci": [d.get("ci_low"), d.get("ci_high")],
                                       "n": d.get("n"), "ci_method": d.get("ci_method"),
                                       "target": "reported, no target"}
    out["independent_win_rate"] = {"value": ind.get("win_rate"), "ci": [ind.get("ci_low"), ind.get("ci_high")],
                                   "n": ind.get("n"), "ci_method": ind.get("ci_method"),
                                   "position_consistency": ind.get("position_consistency"),
                                   "target": "reported, no target"}
    out["all_met"] = all(v["met"] for k, v in out.items() if isinstance(v, dict) and "met" in v)
    return out
