"""Figures of stage 06: NEE per model and dimension with 95% intervals; position bias and win rates."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from echo_lib.nee.dimensions import BY_KEY


def nee_panel(summary: pd.DataFrame, dimensions: pd.DataFrame) -> plt.Figure:
    """Grouped bars: the overall NEE and each dimension (0-100), one bar per model, with 95% intervals."""
    models = summary["model"].tolist()
    overall = summary.rename(columns={"nee": "score", "nee_ci_low": "ci_low", "nee_ci_high": "ci_high"}).assign(
        dimension="NEE")
    table = pd.concat([overall[["model", "dimension", "score", "ci_low", "ci_high"]], dimensions], ignore_index=True)
    groups = ["NEE", *[k for k in BY_KEY if k in set(dimensions["dimension"])]]
    width = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(1.4 * len(groups) + 2, 4))
    x = np.arange(len(groups))
    for i, model in enumerate(models):
        rows = table[table["model"] == model].set_index("dimension").reindex(groups)
        err = np.vstack([rows["score"] - rows["ci_low"], rows["ci_high"] - rows["score"]])
        ax.bar(x + (i - (len(models) - 1) / 2) * width, rows["score"], width, label=model,
               yerr=np.nan_to_num(err), capsize=3)
    ax.set_xticks(x, ["NEE (all)"] + [BY_KEY[k].title for k in groups[1:]],
                  rotation=20, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (0-100) with 95% CI")
    ax.axvline(0.5, color="grey", lw=0.6)
    ax.legend(title="model", fontsize=8)
    ax.set_title("NEE panel: (mean Likert - 1) / 4 x 100 per model and dimension")
    return fig


def pairwise_panel(summary: pd.DataFrame, reference: str) -> plt.Figure | None:
    """Win rate against the reference and position-bias rate per compared model (None with no pairs)."""
    rows = summary.dropna(subset=["position_bias"])
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(2 + 1.2 * len(rows), 3.5))
    x = np.arange(len(rows))
    win = rows["pairwise_win_rate"].to_numpy(float)
    err = None
    if {"pairwise_win_ci_low", "pairwise_win_ci_high"} <= set(rows.columns):
        err = np.abs(np.vstack([win - rows["pairwise_win_ci_low"], rows["pairwise_win_ci_high"] - win]))
    ax.bar(x - 0.2, win, 0.4, yerr=err, capsize=3, label=f"wins against {reference} (95 % interval over cases)")
    ax.bar(x + 0.2, rows["position_bias"], 0.4, label="position bias (verdict flips with A/B order)")
    ax.set_xticks(x, rows["model"])
    ax.set_ylim(0, 1)
    ax.axhline(0.5, color="grey", ls=":", lw=0.8)
    ax.legend(fontsize=8)
    ax.set_title("Pairwise A/B, both orders")
    return fig
