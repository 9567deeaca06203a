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

VARIANT_COLORS = {"echo": "#3b75af", "scalar": "#d1495b", "epm": "#2e8b57"}
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


# The held-out win-rate judges (echo_lib.policy.winrate), in the order the progress figure draws them.
JUDGES = [("empathy_rm", "RM"), ("empathy_rm_debiased", "RM debiased"), ("independent", "independent")]
# The targets of echo_lib.policy.targets, in the order the targets table lists them.
TARGETS = ["filter_kept_share", "zero_spread_share", "reward_trend", "rm_win_rate", "rm_debiased_win_rate",
           "independent_win_rate",
           "greedy_changed", "stage_seconds"]


def _series(log: pd.DataFrame | None, column: str) -> pd.DataFrame:
    """(step, column) as numbers without the empty rows; empty when the column is absent or all NaN."""
    if log is None or column not in log.columns or "step" not in log.columns:
        return pd.DataFrame(columns=["step", column], dtype=float)
    return log[["step", column]].apply(pd.to_numeric, errors="coerce").dropna()


def _not_logged(ax, text: str = "not logged") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey", fontsize=7)


def _number(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _reward_panel(ax, log: pd.DataFrame | None, color: str) -> None:
    """Reward per step (points and a rolling mean) and, on a twin axis, the share of groups that tie."""
    reward = _series(log, "reward")
    if not reward.empty:
        window = max(1, min(5, len(reward) // 4))
        ax.plot(reward["step"], reward["reward"], "o", ms=2.5, color=color, alpha=0.5, label="reward")
        ax.plot(reward["step"], reward["reward"].rolling(window, min_periods=1).mean(), lw=1.4, color=color,
                label=f"rolling mean ({window})")
    tied = _series(log, "frac_reward_zero_std")
    if not tied.empty:
        twin = ax.twinx()
        twin.plot(tied["step"], tied["frac_reward_zero_std"], ls="--", lw=1.0, marker=".", ms=3, color="grey",
                  label="zero-spread share")
        twin.set_ylim(-0.02, 1.02)
        twin.set_ylabel("zero-spread share", fontsize=6.5, color="grey")
        twin.tick_params(labelsize=6, colors="grey")
    if reward.empty and tied.empty:
        _not_logged(ax)
    ax.set_title("(a) training reward, zero-spread share (dashed)", fontsize=7.5)


def _kl_panel(ax, log: pd.DataFrame | None, color: str) -> None:
    kl = _series(log, "kl")
    if kl.empty:
        _not_logged(ax)
    else:
        ax.plot(kl["step"], kl["kl"], marker="o", ms=2.5, lw=1.3, color=color)
    ax.set_title("(b) KL to the base", fontsize=7.5)
    ax.set_ylabel("KL", fontsize=7)


def _winrate_panel(ax, record: Mapping | None, color: str) -> None:
    """Held-out win rate against the base per judge, with its 95 % interval; an interval not shown (ci_degenerate:
    fewer than stats.MIN_N prompts) hollow."""
    rows = {r.get("judge"): r for r in (record or {}).get("winrate") or []}
    labels = []
    for x, (judge, name) in enumerate(JUDGES):
        row = rows.get(judge)
        if row is None:
            labels.append(f"{name}\nnot judged")
            continue
        rate, lo, hi = (_number(row.get(k)) for k in ("win_rate", "ci_low", "ci_high"))
        degenerate = bool(row.get("ci_degenerate"))
        consistency = _number(row.get("position_consistency"))
        labels.append(f"{name}\nn={row.get('n', 0)}\nconsist. {consistency:.2f}"
                      + ("\ninterval\nnot shown" if degenerate else ""))
        if np.isnan(rate):
            continue
        err = None
        if not (degenerate or np.isnan(lo) or np.isnan(hi)):
            err = [[max(rate - lo, 0.0)], [max(hi - rate, 0.0)]]
        ax.errorbar([x], [rate], yerr=err, fmt="o", ms=6, capsize=4, color=color,
                    mfc="white" if degenerate else color, mew=1.5)
    if not rows:
        _not_logged(ax, "no held-out win rate")
    ax.axhline(0.5, ls="--", lw=0.9, color="black")
    ax.set_xlim(-0.8, len(JUDGES) - 0.2)
    ax.set_xticks(range(len(JUDGES)), labels, fontsize=6)
    ax.set_ylim(0, 1)
    ax.set_title("(c) held-out win rate vs the base (95 % CI)", fontsize=7.5)
    ax.set_ylabel("win rate", fontsize=7)


def rl_progress_figure(logs: Mapping[str, pd.DataFrame], metrics: Mapping[str, Mapping]) -> plt.Figure:
    """Did RL move the policy (issue 33)? One row per variant: (a) the training reward per step, points
    and a rolling mean, with the share of groups whose rewards all tie (GRPO learns nothing from them)
    on a twin axis; (b) the KL to the base per step; (c) the held-out win rate against the base by the
    Empathy RM and by the independent judge, with 95 % intervals, the number of prompts and the share
    whose two orders agree (Wilson intervals, policy.winrate). An interval not to be read (ci_degenerate:
    fewer than stats.MIN_N prompts) is drawn hollow, without its bar, and named under its judge. A variant
    with a log but no metrics (or the reverse) draws what it has."""
    variants = list(dict.fromkeys([*logs, *metrics])) or ["(none trained)"]
    fig, axes = plt.subplots(len(variants), 3, figsize=(7.5, 2.3 * len(variants) + 0.2), squeeze=False,
                             gridspec_kw={"width_ratios": (1.1, 1, 1.3)})
    for row, variant in zip(axes, variants):
        color = VARIANT_COLORS.get(variant, "#555555")
        log = logs.get(variant)
        _reward_panel(row[0], log, color)
        _kl_panel(row[1], log, color)
        _winrate_panel(row[2], metrics.get(variant), color)
        row[0].set_ylabel(f"{variant}\nreward (own RM)", fontsize=7)
        steps = (pd.to_numeric(log["step"], errors="coerce").dropna() if log is not None and "step" in log.columns
                 else pd.Series(dtype=float))
        for ax in row[:2]:
            ax.set_xlabel("optimizer step", fontsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if steps.nunique() == 1:   # a single step: give its point a readable axis
                ax.set_xlim(steps.iloc[0] - 1, steps.iloc[0] + 1)
        for ax in row:
            ax.tick_params(labelsize=6.5)
    fig.tight_layout(h_pad=0.8, w_pad=0.6)
    return fig


def targets_table(metrics: Mapping[str, Mapping]) -> pd.DataFrame:
    """One row per (variant, target) of echo_lib.policy.targets: value, the target as text, met, and for
    the win rates the interval, n and position consistency. The independent judge's win rate has no
    target (met is empty); the last row of each variant says whether all targets are met."""
    out = []
    for variant, record in metrics.items():
        targets = (record or {}).get("targets") or {}
        for name in [*TARGETS, *(k for k in targets if k not in TARGETS and k != "all_met")]:
            t = targets.get(name)
            if not isinstance(t, Mapping):
                continue
            ci = t.get("ci") or [None, None]
            detail = ""
            if "ci" in t:
                lo, hi, pc = _number(ci[0]), _number(ci[1]), _number(t.get("position_consistency"))
                method = f" ({t['ci_method']})" if t.get("ci_method") else ""
                detail = f"95 % CI{method} [{lo:.2f}, {hi:.2f}], n={t.get('n')}, consistent {pc:.2f}"
            out.append({"variant": variant, "target": name, "value": _number(t.get("value")),
                        "required": t.get("target", ""), "met": t.get("met"), "detail": detail})
        if "all_met" in targets:
            out.append({"variant": variant, "target": "all met", "value": float("nan"),
                        "required": "every target above", "met": bool(targets["all_met"]), "detail": ""})
    return pd.DataFrame(out, columns=["variant", "target", "value", "required", "met", "detail"])


def sample_replies(metrics: Mapping) -> pd.DataFrame:
    """One variant's greedy examples (metrics.json "greedy"): held-out prompts whose greedy reply the
    adapter changed, the user's last message, the base's reply (before RL) and the trained policy's."""
    examples = ((metrics or {}).get("greedy") or {}).get("examples") or []
    return pd.DataFrame([{"prompt_id": e.get("prompt_id"), "user message": e.get("user"),
                          "before RL": e.get("base"), "after RL": e.get("trained")} for e in examples],
                        columns=["prompt_id", "user message", "before RL", "after RL"])


# The epm variant's panels (echo_lib.policy.multiturn train_log.csv): its reward is per turn, in units of |P0|
MULTITURN_CURVES = [("reward", "Per-turn reward (EPM distance gained / |P0|)"), ("return", "Discounted return"),
                    ("loss", "Policy-gradient loss"), ("kl", "KL to the base"), ("reply_words", "Reply length (words)"),
                    ("epm_ended", "Dialogues the EPM ended early")]


def multiturn_curves(rows, name: str) -> plt.Figure:
    """The multi-turn variant's training over its steps: the per-turn reward with its spread (one standard
    deviation over the step's turns) and the means of the first and last quarter of the steps, then the
    return, loss, KL, reply length and early endings (a panel whose column was not logged says so)."""
    log = pd.DataFrame(list(rows))
    fig, axes = plt.subplots(2, 3, figsize=(7.5, 4.2), squeeze=False)
    color = VARIANT_COLORS["epm"]
    for ax, (column, title) in zip(axes.flat, MULTITURN_CURVES):
        ax.set_title(title, fontsize=7.5)
        ax.set_xlabel("optimizer step", fontsize=7)
        ax.tick_params(labelsize=6.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        data = log[["step", column]].apply(pd.to_numeric, errors="coerce").dropna() if column in log else pd.DataFrame()
        if data.empty:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="grey", fontsize=7)
            continue
        ax.plot(data["step"], data[column], marker="o", ms=2.5, lw=1.3, color=color, label=name)
        if column == "reward" and "reward_std" in log:
            sd = pd.to_numeric(log["reward_std"], errors="coerce").fillna(0).to_numpy()
            mean, step = log["reward"].astype(float).to_numpy(), log["step"].astype(float).to_numpy()
            ax.fill_between(step, mean - sd, mean + sd, color=color, alpha=0.15, lw=0)
            q = max(1, len(step) // 4)
            for part in (slice(0, q), slice(len(step) - q, len(step))):
                ax.hlines(mean[part].mean(), step[part][0], step[part][-1], colors="k", lw=1.2)
            ax.axhline(0, color="grey", lw=0.6, ls=":")
    fig.suptitle(f"{name}: multi-turn RL in the sandbox", fontsize=8.5)
    fig.tight_layout()
    return fig
