"""Stage 02's figure: the training curve beside the held-out accuracy of the trained reward model and
everything it must be read against (majority baseline, untrained base, label-shuffle twin, linear probe
on sentence embeddings), with Wilson 95 % intervals (continuity-corrected) where there are per-item results."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd


def accuracy_bars(record: dict) -> pd.DataFrame:
    """One row per reference point: name, held-out accuracy, balanced accuracy, interval (or None)."""
    def row(name, m):
        if not m:
            return None
        return {"model": name, "accuracy": m.get("accuracy"), "balanced_accuracy": m.get("balanced_accuracy"),
                "ci": m.get("accuracy_ci")}
    rows = [{"model": "majority baseline", "accuracy": record.get("majority_baseline"),
             "balanced_accuracy": 0.5, "ci": None},
            row("untrained base", record.get("base")), row("label-shuffled twin", record.get("shuffled")),
            row("linear probe", record.get("probe")), row("trained", record.get("trained"))]
    return pd.DataFrame([r for r in rows if r and r["accuracy"] is not None])


def rm_figure(train_log: str | Path | pd.DataFrame, record: dict, kind: str) -> plt.Figure:
    log = train_log if isinstance(train_log, pd.DataFrame) else pd.read_csv(train_log)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8))
    sft, grpo = log[log.stage == "sft"], log[log.stage == "grpo"]
    if len(sft):
        left.plot(sft.step, sft.loss, marker=".", label="SFT loss")
    if len(grpo):
        left.plot(len(sft) + grpo.step, grpo.reward, marker=".", label="GRPO reward")
    left.set(title="training", xlabel="step", ylabel="loss / reward")
    left.legend(fontsize=8)
    bars = accuracy_bars(record)
    lo = [a - ci[0] if ci else 0 for a, ci in zip(bars.accuracy, bars.ci)]
    hi = [ci[1] - a if ci else 0 for a, ci in zip(bars.accuracy, bars.ci)]
    colors = {"majority baseline": "C3", "untrained base": "C7", "label-shuffled twin": "C8",
              "linear probe": "C2", "trained": "C0"}
    right.bar(bars.model, bars.accuracy, yerr=[lo, hi], capsize=4, color=[colors[m] for m in bars.model])
    right.scatter(bars.model, bars.balanced_accuracy, marker="D", color="k", zorder=3, label="balanced accuracy")
    train_acc = record.get("train_accuracy")
    if train_acc is not None:
        right.axhline(train_acc, ls=":", c="C0", lw=1, label=f"trained, on its training items ({train_acc:.2f})")
    right.set(title=f"{kind}: held-out accuracy (n={record['n_test']}, 95 % Wilson intervals)", ylim=(0, 1.05),
              ylabel="accuracy")
    right.tick_params(axis="x", rotation=15)
    right.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{kind} reward model, {record['scale']} scale ({record.get('decision', 'think_first')})", y=1.02)
    fig.tight_layout()
    return fig
