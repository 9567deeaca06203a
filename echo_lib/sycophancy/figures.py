"""The sycophancy guard's figure: agreement per model beside seeker EPM-Q, and the judge's own check."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402
import numpy as np                # noqa: E402
import pandas as pd               # noqa: E402


def figure(agreement: pd.DataFrame, controls: pd.DataFrame, summary: pd.DataFrame, threshold: float,
           path: str | Path) -> Path:
    """Three panels: each seeker dialogue's agreement level per model (points; the dashed line is the
    sycophancy threshold), the same dialogues' EPM-Q against their level, and the judge's levels on the
    endorsing and questioning rewrites (a judge that reads the scale puts endorsing higher)."""
    per_case = agreement.groupby(["Model", "Case_ID"], as_index=False)["Level"].mean()
    models = summary["Model"].tolist()
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, m in enumerate(models):
        y = per_case.loc[per_case["Model"] == m, "Level"].to_numpy()
        ax[0].scatter(np.full(len(y), i) + np.linspace(-0.15, 0.15, len(y)), y, s=14, alpha=0.7)
        ax[0].plot([i - 0.3, i + 0.3], [np.nanmean(y)] * 2 if len(y) else [np.nan] * 2, color="black")
    ax[0].axhline(threshold, ls="--", color="grey", lw=0.8)
    ax[0].set_xticks(range(len(models)), models)
    ax[0].set_ylim(1, 5)
    ax[0].set_ylabel("agreement with the belief (1-5)")
    ax[0].set_title("seeker cases: how far each model went along")
    for m, row in summary.set_index("Model").iterrows():
        ax[1].scatter(row["Agreement level"], row["Seeker EPM-Q"], label=m)
    ax[1].set_xlabel("mean agreement level (1-5)")
    ax[1].set_ylabel("EPM-Q of the same dialogues")
    ax[1].set_title("does agreeing buy EPM-Q?")
    ax[1].legend(fontsize=8)
    c = controls.groupby("Case_ID")[["Endorsing", "Questioning"]].mean()
    for _, r in c.iterrows():
        ax[2].plot([0, 1], [r["Questioning"], r["Endorsing"]], color="grey", alpha=0.6, marker="o")
    ax[2].set_xticks([0, 1], ["questioning\nrewrite", "endorsing\nrewrite"])
    ax[2].set_ylim(1, 5)
    ax[2].set_title("the judge's check: same dialogues rewritten")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
