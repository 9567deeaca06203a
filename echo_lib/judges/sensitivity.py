"""Judge sensitivity: on items with a known better reply, how often does each instrument prefer it? (issue 16)

Sandbox judge (echo_lib.sandbox.judge, the MDEP rubric): each reply is rated as the last turn of the
item's chat. Its judged *effect* is the rubric's expected progress minus expected regress, summed over the
three axes, where each expected level is sum_k k * p_k over the judge's option probabilities (choose mode)
or the level it wrote (JSON mode). An item counts 1 when the good reply's effect is higher, 0.5 on a tie.
The judge rates one reply at a time, so there is no order to swap.

NEE panel (echo_lib.nee): every judge of the panel rates both replies' transcripts on the six dimensions
(expected 1-5 levels) and compares them A/B in both orders.
- accuracy per judge: the good transcript's mean score above the poor one's; the panel: the judges'
  mean scores averaged first;
- alpha: interval Krippendorff alpha between the judges over (reply, item, dimension) units, the
  agreement stage 06 reports;
- position bias: the share of (item, judge) comparisons whose winner changes when A and B swap;
- pairwise accuracy: P(good wins) averaged over the two orders above 0.5.
Every accuracy carries a 95 % Wilson score interval with continuity correction over the items
(echo_lib.stats.proportion_interval; a tie counts half an item), with its n and method.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

import pandas as pd

from echo_lib.epm.mdep import FIELDS
from echo_lib.judges.sensitivity_set import SensitivityItem
from echo_lib.stats import proportion_interval
from echo_lib.sandbox.dialogue import Exchange

REPLIES = ("good", "poor")
AXIS_FIELDS = {"cognitive": ("C_Prog", "C_Neg"), "affective": ("A_Prog", "A_Neg"), "proactive": ("P_Prog", "P_Neg")}


# ---- small pieces ------------------------------------------------------------------------------------------

def preference(good: float, poor: float) -> float:
    """1 when the good reply scores higher, 0.5 on a tie, 0 otherwise."""
    return 1.0 if good > poor else 0.5 if good == poor else 0.0


def summarise(scores: Sequence[float]) -> dict:
    """Mean preference (a share of items, a tie half an item), its Wilson interval, n and the interval's method."""
    ci = proportion_interval(scores)
    return {"accuracy": round(sum(scores) / len(scores), 4) if scores else None,
            "accuracy_ci": ci.bounds, "n": len(scores), "ci_method": ci.method}


def by_group(items: Sequence[SensitivityItem], scores: Sequence[float], key: str) -> dict[str, float]:
    groups = defaultdict(list)
    for it, s in zip(items, scores):
        groups[getattr(it, key)].append(s)
    return {k: round(sum(v) / len(v), 4) for k, v in sorted(groups.items())}


def history(item: SensitivityItem, reply: str) -> list[Exchange]:
    """The item's chat with `reply` as the companion's answer to its last message."""
    earlier = [Exchange(i + 1, u, r) for i, (u, r) in enumerate(item.context)]
    return earlier + [Exchange(len(earlier) + 1, item.user, reply)]


# ---- the sandbox judge ----------------------------------------------------------------------------------------

def expected(details: dict, field: str) -> float:
    """Expected level of one MDEP field: progress 0..2 positive, regress severity 0..2 (as a positive number)."""
    probs = details.get(f"{field}_probs")
    if probs:
        total = sum(probs.values())
        return sum(int(k) * p for k, p in probs.items()) / total
    return abs(details[f"{field}_level"])


def axis_effects(details: dict) -> dict[str, float]:
    """Per axis: expected progress minus expected regress."""
    return {axis: expected(details, prog) - expected(details, neg) for axis, (prog, neg) in AXIS_FIELDS.items()}


def sandbox_judge_sensitivity(judge, items: Sequence[SensitivityItem]) -> dict:
    """Preference accuracy of a sandbox Judge over the items (see the module docstring); items whose good or
    poor rating failed are counted in `n_failed` and left out."""
    cases = [(it.profile, history(it, it.reply(which))) for it in items for which in REPLIES]
    verdicts = judge.mdep(cases, k=1)
    rows, kept, scores = [], [], []
    for n, it in enumerate(items):
        good, poor = verdicts[2 * n], verdicts[2 * n + 1]
        if not (good.ok and poor.ok):
            rows.append({"id": it.id, "error": good.error or poor.error})
            continue
        eg, ep = axis_effects(good.details), axis_effects(poor.details)
        s = preference(sum(eg.values()), sum(ep.values()))
        kept.append(it)
        scores.append(s)
        rows.append({"id": it.id, "axis": it.axis, "kind": it.kind, "effect_good": round(sum(eg.values()), 4),
                     "effect_poor": round(sum(ep.values()), 4), "preferred": s,
                     **{f"{a}_good": round(eg[a], 4) for a in eg}, **{f"{a}_poor": round(ep[a], 4) for a in ep}})
    mean_fields = {which: {f: _mean([expected(v.details, f) for v in verdicts[w::2] if v.ok]) for f in FIELDS}
                   for w, which in enumerate(REPLIES)}
    return {**summarise(scores), "n_failed": len(items) - len(kept),
            "by_axis": by_group(kept, scores, "axis"), "by_kind": by_group(kept, scores, "kind"),
            "mean_expected_levels": mean_fields, "items": rows}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


# ---- the NEE panel --------------------------------------------------------------------------------------------

def transcript(item: SensitivityItem, reply: str, model: str, blind):
    """The item's chat with `reply` last, blinded, as the NEE panel reads a sandbox transcript."""
    from echo_lib.nee.blinding import Transcript
    turns = [t for u, r in item.context for t in (("User", blind(u)), ("Companion", blind(r)))]
    turns += [("User", blind(item.user)), ("Companion", blind(reply))]
    return Transcript(model, item.id, f"The user: {blind(item.profile)}", tuple(turns))


def transcripts(items: Sequence[SensitivityItem], blind) -> list:
    """Each item as two blinded transcripts, model "good" / "poor", case_id the item id."""
    return [transcript(it, it.reply(which), which, blind) for it in items for which in REPLIES]


def rating_preferences(ratings: pd.DataFrame, items: Sequence[SensitivityItem]) -> dict[str, list[float]]:
    """Per judge, and for the panel ("panel"), each item's preference from the mean score over dimensions."""
    done = ratings.dropna(subset=["score"])
    means = done.groupby(["judge", "case_id", "model"])["score"].mean()
    panel = means.groupby(["case_id", "model"]).mean()
    out = {}
    for judge in sorted(done["judge"].unique()):
        m = means.loc[judge]
        out[judge] = [preference(m[(it.id, "good")], m[(it.id, "poor")]) for it in items
                      if (it.id, "good") in m.index and (it.id, "poor") in m.index]
    out["panel"] = [preference(panel[(it.id, "good")], panel[(it.id, "poor")]) for it in items
                    if (it.id, "good") in panel.index and (it.id, "poor") in panel.index]
    return out


def pairwise_preferences(pairwise: pd.DataFrame, items: Sequence[SensitivityItem]) -> dict[str, list[float]]:
    """Per judge and for the panel: P(good wins) averaged over both orders, compared with 0.5."""
    done = pairwise.dropna(subset=["p_first"])
    p_good = done["p_first"].where(done["order"] == "model_first", 1 - done["p_first"])
    by = done.assign(p_good=p_good).groupby(["judge", "case_id"])["p_good"].mean()
    out = {judge: [preference(p, 0.5) for p in by.loc[judge]] for judge in sorted(done["judge"].unique())}
    panel = by.groupby("case_id").mean()
    out["panel"] = [preference(panel[it.id], 0.5) for it in items if it.id in panel.index]
    return out


def nee_sensitivity(panel, askers: dict, items: Sequence[SensitivityItem], blind, seed: int = 0) -> dict:
    """The panel's figures on the items (see the module docstring). `panel` is echo_lib.nee.panel.make_panel's
    list, `askers` maps a judge model name to its Asker."""
    from echo_lib.nee.scores import position_bias
    from echo_lib.nee.rating import PAIR_COLUMNS, RATING_COLUMNS, agreement, compare, rate

    shown = transcripts(items, blind)
    pairs = list(zip(shown[0::2], shown[1::2]))            # (good, poor): the good reply plays the "model"
    rating_rows, pair_rows = [], []
    for judge in panel:
        rating_rows += rate(judge, askers[judge.model], shown, blind, seed)[0]
        pair_rows += compare(judge, askers[judge.model], pairs, blind)
    ratings = pd.DataFrame(rating_rows, columns=RATING_COLUMNS)
    pairwise = pd.DataFrame(pair_rows, columns=PAIR_COLUMNS)
    by_rating, by_pair = rating_preferences(ratings, items), pairwise_preferences(pairwise, items)
    alpha = agreement(ratings)["interval_alpha"]
    bias = position_bias(pairwise)
    panel_row = summarise(by_rating.pop("panel"))
    pair_panel = summarise(by_pair.pop("panel"))
    return {**panel_row, "alpha": alpha, "position_bias": None if math.isnan(bias) else round(bias, 4),
            "pairwise_accuracy": pair_panel["accuracy"], "pairwise_accuracy_ci": pair_panel["accuracy_ci"],
            "pairwise_n": pair_panel["n"], "pairwise_ci_method": pair_panel["ci_method"],
            "judges": {j: {"accuracy": summarise(s)["accuracy"],
                           "pairwise_accuracy": summarise(by_pair.get(j, []))["accuracy"]}
                       for j, s in by_rating.items()},
            "n_failed_ratings": int(ratings["score"].isna().sum()),
            "n_failed_comparisons": int(pairwise["p_first"].isna().sum())}
