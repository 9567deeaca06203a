"""Stage 02's figure: the training curve (SFT loss; GRPO reward and its parts) beside base-vs-trained bars."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd


BARS = ["accuracy", "parse_failure_rate", "position_bias", "length_bias"]


def rm_figure(train_log: str | Path | pd.DataFrame, record: dict, kind: str) -> plt.Figure:
    log = train_log if isinstance(train_log, pd.DataFrame) else pd.read_csv(train_log)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    sft, grpo = log[log.stage == "sft"], log[log.stage == "grpo"]
    ax = axes[0]
    if len(sft):
        ax.plot(sft.step, sft.loss, marker=".")
    ax.set(title="SFT warm start", xlabel="step", ylabel="loss")
    ax = axes[1]
    for col in ["reward", "correct", "process", "format"]:
        if len(grpo) and grpo[col].notna().any():
            ax.plot(grpo.step, grpo[col], marker=".", label=col)
    ax.set(title="GRPO on the reward model", xlabel="step", ylabel="mean reward")
    if len(grpo):
        ax.legend(fontsize=8)
    ax = axes[2]
    rows = [(m, name, record[name].get(m)) for m in BARS for name in ("base", "trained")]
    df = pd.DataFrame(rows, columns=["metric", "model", "value"]).dropna()
    if len(df):
        wide = df.pivot(index="metric", columns="model", values="value").reindex([m for m in BARS if m in set(df.metric)])
        wide.plot.bar(ax=ax, rot=20)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set(title=f"{kind}: held-out (n={record['n_test']})", xlabel="", ylabel="value")
    fig.suptitle(f"{kind} reward model, {record['scale']} scale", y=1.02)
    fig.tight_layout()
    return fig
