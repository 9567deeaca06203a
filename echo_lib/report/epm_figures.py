"""The EPM evaluation figures (METHOD.md 8.8; EMPA Figs. 7, 8, 12-16), from the tables of
echo_lib.epm.epmq / slices and the replayed trajectories.

Every function returns a matplotlib Figure (or writes an HTML file) and draws only what it is given;
`save_figure` writes PNG + PDF. Models are ordered by EPM-Q, best first, everywhere.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from echo_lib.epm.engine import Replay
from echo_lib.epm.epmq import GROUPS

OUTCOME_COLORS = {"success": "#3b75af", "failure": "#d1495b", "timeout": "#9e9e9e"}
INDEX_TITLES = {"Idx_RDI": "RDI", "Idx_Etot": "Total effective energy", "Idx_Snet": "Net MDEP score",
                "Idx_Rho": "Energy per turn (rho)", "Idx_Sproj": "Mean projection", "Idx_Tau": "Path tortuosity",
                "Idx_Rpos": "Positive-energy turns", "Idx_Align": "Mean cos theta", "Idx_Pen": "Penalty rate"}
PROJECTIONS = (("C", "A", 0, 1), ("C", "P", 0, 2), ("A", "P", 1, 2))


def model_order(summary: pd.DataFrame) -> list[str]:
    return summary.sort_values("EPM-Q", ascending=False)["Model"].tolist()


def save_figure(fig: plt.Figure, out_dir: str | Path, name: str, close: bool = True) -> list[Path]:
    """Write `name`.png (150 dpi) and `name`.pdf into out_dir; close the figure unless a notebook shows it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    if close:
        plt.close(fig)
    return paths


def outcome_bars(summary: pd.DataFrame) -> plt.Figure:
    """Success / failure / timeout counts per model, stacked (EMPA Fig. 7)."""
    order = model_order(summary)
    table = summary.set_index("Model").loc[order]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(order) + 1.5), 3.6))
    bottom = np.zeros(len(order))
    for label, column in (("success", "Success"), ("failure", "Failure"), ("timeout", "Timeout")):
        values = table[column].to_numpy(dtype=float)
        ax.bar(order, values, bottom=bottom, color=OUTCOME_COLORS[label], label=label)
        for x, (b, v) in enumerate(zip(bottom, values)):
            if v:
                ax.text(x, b + v / 2, f"{int(v)}", ha="center", va="center", color="white", fontsize=8)
        bottom += values
    ax.set_ylabel("cases")
    ax.set_title("How the sandbox runs ended")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return fig


def index_panel(per_case: pd.DataFrame, order: list[str]) -> plt.Figure:
    """3 x 3 panel, one EPM-Q index per panel (rows: Outcome, Efficiency, Stability): mean +/- sd per
    model with the per-case values jittered on top (EMPA Fig. 8)."""
    fig, axes = plt.subplots(3, 3, figsize=(7.0, 6.4), sharex=True)   # a page wide: printed at about 1:1
    rng = np.random.default_rng(0)                   # jitter only; fixed so reruns draw the same picture
    colors = plt.get_cmap("tab10")
    for row, (group, keys) in enumerate(GROUPS.items()):
        for col, key in enumerate(keys):
            ax = axes[row, col]
            for x, model in enumerate(order):
                values = per_case.loc[per_case["Model"] == model, key].to_numpy(dtype=float)
                ax.bar(x, values.mean(), yerr=values.std(ddof=0), color=colors(x % 10), alpha=0.55, capsize=3)
                ax.scatter(x + rng.uniform(-0.25, 0.25, len(values)), values, s=6, color="black", alpha=0.6)
            ax.set_title(f"{group}: {INDEX_TITLES[key]}", fontsize=7.5)
            ax.axhline(100, color="grey", lw=0.6, ls=":")
            ax.tick_params(labelsize=6.5)
        axes[row, 0].set_ylabel("index (100 = reference)", fontsize=7)
    for ax in axes[-1]:
        ax.set_xticks(range(len(order)), order, rotation=25, ha="right", fontsize=7)
    fig.tight_layout()
    return fig


def radar_grid(wide: pd.DataFrame, title: str, order: list[str] | None = None) -> plt.Figure:
    """One small radar per model over the slices of one slicing (EMPA Figs. 12-14); radial value = mean
    per-case EPM-Q of the slice. A slice without cases is drawn at 0 and marked n/a."""
    order = [m for m in (order or list(wide.index)) if m in wide.index]
    labels = list(wide.columns)
    angles = np.linspace(0, 2 * np.pi, len(labels), endpoint=False).tolist()
    ncols = min(4, max(1, len(order)))
    nrows = math.ceil(len(order) / ncols)
    fig, axes = plt.subplots(nrows, ncols, subplot_kw={"projection": "polar"},
                             figsize=(3.2 * ncols, 3.3 * nrows + 0.4), squeeze=False)
    top = max(110.0, float(np.nanmax(wide.to_numpy(dtype=float))) if wide.size else 110.0)
    for ax, model in zip(axes.flat, order):
        values = wide.loc[model].to_numpy(dtype=float)
        shown = np.nan_to_num(values).tolist()
        ax.plot(angles + angles[:1], shown + shown[:1], color="#3b75af", lw=1.5)
        ax.fill(angles + angles[:1], shown + shown[:1], color="#3b75af", alpha=0.25)
        ax.set_xticks(angles, [lab if not np.isnan(v) else f"{lab}\n(n/a)" for lab, v in zip(labels, values)],
                      fontsize=7)
        ax.set_ylim(0, top)
        ax.set_yticks([50, 100], ["50", "100"], fontsize=6)
        ax.set_title(model, fontsize=9, pad=12)
    for ax in list(axes.flat)[len(order):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def case_heatmap(per_case: pd.DataFrame, order: list[str]) -> plt.Figure:
    """EPM-Q per case (columns, easiest first by mean EPM-Q) and model (rows, best first) (EMPA Fig. 16)."""
    import seaborn as sns

    grid = per_case.pivot(index="Model", columns="Case_ID", values="EPM-Q").loc[order]
    grid = grid[grid.mean().sort_values(ascending=False).index]
    # at most a page wide (7 in), so the paper prints it near 1:1 even with EMPA's 30 cases
    fig, ax = plt.subplots(figsize=(min(7.0, max(5.0, 0.32 * grid.shape[1] + 2.5)), 0.45 * len(order) + 1.6))
    sns.heatmap(grid, ax=ax, cmap="RdYlBu", vmin=0, vmax=max(110.0, float(np.nanmax(grid.to_numpy()))),
                cbar_kws={"label": "EPM-Q (per case)"}, linewidths=0.3)
    ax.set_xlabel("case")
    ax.set_ylabel("model")
    ax.tick_params(axis="x", labelsize=6, rotation=90)
    ax.tick_params(axis="y", rotation=0)
    fig.tight_layout()
    return fig


def _paths(replays: list[Replay], model: str):
    for rep in replays:
        if rep.run.model == model:
            yield rep, np.array([pt.P for pt in rep.points], dtype=float)


def trajectory_grid(replays: list[Replay], order: list[str]) -> plt.Figure:
    """C-A-P trajectories per model: a 3-D view and the C-A, C-P, A-P projections (EMPA Fig. 15).
    Blue = success, red = failure, grey = timeout; the origin (the target) is the black cross.
    Lines join the evaluated positions straight (EMPA smooths them with B-splines; we do not)."""
    fig = plt.figure(figsize=(15, 3.4 * len(order)))
    for row, model in enumerate(order):
        ax3 = fig.add_subplot(len(order), 4, 4 * row + 1, projection="3d")
        flats = [fig.add_subplot(len(order), 4, 4 * row + k) for k in (2, 3, 4)]
        for rep, path in _paths(replays, model):
            color = OUTCOME_COLORS.get(rep.label, "black")
            ax3.plot(path[:, 0], path[:, 1], path[:, 2], color=color, lw=0.8, alpha=0.7)
            ax3.scatter(*path[0], color=color, s=6)
            for ax, (xa, ya, i, j) in zip(flats, PROJECTIONS):
                ax.plot(path[:, i], path[:, j], color=color, lw=0.8, alpha=0.7)
                ax.scatter(path[0, i], path[0, j], color=color, s=5)
        ax3.scatter(0, 0, 0, marker="x", color="black", s=40)
        ax3.set_xlabel("C"), ax3.set_ylabel("A"), ax3.set_zlabel("P")
        ax3.set_title(model, fontsize=9)
        for ax, (xa, ya, _, _) in zip(flats, PROJECTIONS):
            ax.scatter(0, 0, marker="x", color="black", s=40, zorder=5)
            ax.axhline(0, color="grey", lw=0.4), ax.axvline(0, color="grey", lw=0.4)
            ax.set_xlabel(xa), ax.set_ylabel(ya)
            ax.set_title(f"{model}: {xa}-{ya}", fontsize=8)
    fig.tight_layout()
    return fig


def trajectory_html(replays: list[Replay], order: list[str], path: str | Path) -> Path | None:
    """Interactive 3-D trajectories (plotly, self-contained HTML, one dropdown entry per model).
    Returns None without writing anything if plotly is not installed."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        return None
    fig = go.Figure()
    owners = []
    for model in order:
        for rep, p in _paths(replays, model):
            fig.add_trace(go.Scatter3d(
                x=p[:, 0], y=p[:, 1], z=p[:, 2], mode="lines+markers", name=f"{model} {rep.run.case_id}",
                legendgroup=model, line={"color": OUTCOME_COLORS.get(rep.label, "black"), "width": 3},
                marker={"size": 2}, text=[f"{model} {rep.run.case_id} turn {pt.turn}, E={pt.E_total:.2f}"
                                          for pt in rep.points], hoverinfo="text"))
            owners.append(model)
    fig.add_trace(go.Scatter3d(x=[0], y=[0], z=[0], mode="markers", name="target (origin)",
                               marker={"symbol": "x", "size": 6, "color": "black"}))
    owners.append(None)
    buttons = [{"label": "all models", "method": "update", "args": [{"visible": [True] * len(owners)}]}]
    buttons += [{"label": m, "method": "update", "args": [{"visible": [o in (m, None) for o in owners]}]}
                for m in order]
    fig.update_layout(title="C-A-P trajectories (blue success, red failure, grey timeout)",
                      scene={"xaxis_title": "C", "yaxis_title": "A", "zaxis_title": "P"}, showlegend=False,
                      updatemenus=[{"buttons": buttons, "x": 0.0, "y": 1.08, "xanchor": "left"}],
                      margin={"l": 0, "r": 0, "t": 60, "b": 0})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(path, include_plotlyjs=True, full_html=True)
    return path
