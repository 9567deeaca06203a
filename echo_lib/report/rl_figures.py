"""Figures of the training stages: policy RL curves (echo vs the scalar ablation, METHOD.md 4.3) and the
reward models' accuracy, untrained vs trained.

Each function draws only what it is given and returns a matplotlib Figure (echo_lib.report.epm_figures.
save_figure writes PNG + PDF).
"""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import numpy as np
import pandas as pd

VARIANT_COLORS = {"echo": "#3b75af", "scalar": "#d1495b"}
# (column of train_log.csv, panel title); the reward of the two variants comes from different reward
# models, so its panel compares shapes, not levels (the caption in main.tex says so).
CURVES = [("reward", "Training reward (own RM)"), ("reward_empathy", "Reward, empathy prompts"),
          ("reward_chitchat", "Reward, chit-chat prompts"), ("win_rate", "Win rate vs reference"),
          ("tie_rate", "Tie rate"), ("frac_reward_zero_std", "Groups with tied rewards"),
          ("humanlike_rate", "Humanlike rate"), ("kl", "KL to the base"),
          ("entropy", "Entropy"), ("reply_length", "Reply length (tokens)"),
          ("ornate_rate", "Ornate / bracketed-action rate"), ("advice_list_rate", "Advice-list rate"),
          ("repetition", "Repetition across the group")]

# The reward-hacking panels (issue 16 section 3): the reward against what a hacked reward drags along.
HACKING_CURVES = [("reward", "Training reward (own RM)"), ("reply_length", "Reply length (tokens)"),
                  ("repetition", "Repetition across the group"), ("ornate_rate", "Ornate / bracketed-action rate")]


def rl_curves(logs: Mapping[str, pd.DataFrame], curves: list[tuple[str, str]] = CURVES) -> plt.Figure:
    """One panel per monitored quantity, the variants side by side as lines over optimizer steps.
    A quantity a variant did not log (column absent or all empty) is left out of that panel, and a
    panel nobody logged says so instead of drawing an empty axis. Sized for a page (7 in wide), so the
    paper prints it near 1:1 and its labels stay legible."""
    ncols = min(4, len(curves))
    nrows = int(np.ceil(len(curves) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.75 * ncols, 1.6 * nrows + 0.35), squeeze=False)
    for ax, (column, title) in zip(axes.flat, curves):
        drawn = False
        for variant, log in logs.items():
            if column not in log.columns:
                continue
            data = log[["step", column]].apply(pd.to_numeric, errors="coerce").dropna()
            if data.empty:
                continue
            ax.plot(data["step"], data[column], marker="o", ms=2.5, lw=1.3,
                    color=VARIANT_COLORS.get(variant), label=variant)
            drawn = True
        ax.set_title(title, fontsize=7.5)
        ax.set_xlabel("optimizer step", fontsize=7)
        ax.tick_params(labelsize=6.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if not drawn:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="grey", fontsize=7)
    for ax in list(axes.flat)[len(curves):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if not handles:   # the first panel may be empty; take the legend from any panel that has lines
        handles, labels = next((a.get_legend_handles_labels() for a in axes.flat if a.get_lines()), ([], []))
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()), h_pad=0.6, w_pad=0.4)
    return fig


def rm_accuracy_bars(table: pd.DataFrame) -> plt.Figure:
    """Accuracy of each reward model, untrained base vs trained, with the majority baseline as a tick
    (the accuracy of always giving the commonest label: read the bars against it)."""
    kinds = list(dict.fromkeys(table["Reward model"]))
    fig, ax = plt.subplots(figsize=(max(3.6, 1.0 * len(kinds) + 1.2), 2.9))   # printed at about 1:1
    width = 0.38
    for i, (model, color) in enumerate((("base", "#9e9e9e"), ("trained", "#3b75af"))):
        rows = table[table["Model"] == model].set_index("Reward model").reindex(kinds)
        ax.bar(np.arange(len(kinds)) + (i - 0.5) * width, rows["Accuracy"].astype(float), width,
               color=color, label=model)
    baseline = table[table["Model"] == "trained"].set_index("Reward model").reindex(kinds)["Majority baseline"]
    for x, b in enumerate(baseline.astype(float)):
        ax.plot([x - width, x + width], [b, b], color="black", lw=1.2, ls="--",
                label="majority baseline" if x == 0 else None)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylim(0, 1)
    ax.set_xlabel("reward model")
    ax.set_ylabel("accuracy (held-out)")
    ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    fig.tight_layout()
    return fig
