"""Stage 03's figure: the RL curves of the variants side by side (reward by domain, KL, entropy, and the
reward-hacking monitors), one column per variant so a reward that rises while a monitor drifts shows."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

PANELS = [("reward", ["reward", "reward_empathy", "reward_chitchat"]),
          ("anchor verdicts", ["win_rate", "tie_rate", "humanlike_rate", "unparsed_rate"]),
          ("KL / entropy", ["kl", "entropy"]),
          ("monitors", ["repetition", "ornate_rate", "advice_list_rate", "format_violation_rate"]),
          ("reply length (tokens)", ["reply_length"])]


def training_curves(logs: dict[str, str | Path | pd.DataFrame]) -> plt.Figure:
    """`logs` maps a variant to its train_log.csv (or the DataFrame)."""
    frames = {v: (x if isinstance(x, pd.DataFrame) else pd.read_csv(x)) for v, x in logs.items()}
    fig, axes = plt.subplots(len(PANELS), len(frames), figsize=(4.6 * len(frames), 2.3 * len(PANELS)),
                             squeeze=False, sharex="col")
    for col, (variant, df) in enumerate(frames.items()):
        for row, (title, series) in enumerate(PANELS):
            ax = axes[row][col]
            for s in series:
                if s in df and df[s].notna().any():
                    ax.plot(df.step, df[s], marker=".", label=s)
            ax.set_title(f"{variant}: {title}", fontsize=9)
            if ax.lines:
                ax.legend(fontsize=7)
        axes[-1][col].set_xlabel("RL step")
    fig.tight_layout()
    return fig
