# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · EPM analysis: how far did each model move its users?
#
# The sandbox (stage 04) leaves one result file per model and case, in EMPA's schema. Here every run is
# **replayed from the judge's rubric levels alone** with the Empathy Potential Model (EPM) of EMPA
# (arXiv 2603.00552), never from totals stored in the files:
#
# * **State.** The user starts at a deficit point $P_0=(C,A,P)$ in cognitive, affective and motivational
#   space, rated once by the judge (IEDR, nine indicators); the origin is equilibrium.
# * **Moves.** After every turn the judge scores progress and regress on each axis (MDEP rubric); the
#   scores give the action vector $v_t$ and $P_t = P_{t-1} + v_t$.
# * **Work.** The effective work of a reply is its component along the ideal direction
#   $v^*_0 = -P_0/\lVert P_0\rVert$: $\Delta E_t = v_t\cdot v^*_0 = \lVert v_t\rVert\cos\theta_t$; $E_{total}=\sum_t \Delta E_t$.
# * **Ending.** From turn 12 on, a run succeeds when it has paid off the deficit energy
#   ($E_{total}\ge\lVert P_0\rVert$) and has reached or crossed the target (geometric / positional); it fails on
#   directional collapse, stagnation with regression, or oscillation; at turn 45 it times out.
# * **EPM-Q.** Nine process indices in three groups (Outcome: RDI, $E_{total}$, $S_{net}$; Efficiency:
#   $\rho$, $S_{proj}$, $\tau$; Stability: $R_{pos}$, alignment, penalty) give
#   EPM-Q $= 0.4\,$Outcome $+ 0.2\,$Efficiency $+ 0.4\,$Stability (100 = the benchmark's reference level).
#
# The constants are those of the published runs (`epm:` block of the run config); with them this
# notebook reproduces all 480 published EMPA runs and the leaderboard to two decimals
# (tests/test_epm_*.py check 90 of them from their numbers; with `ECHO_EMPA_DIR` naming an EMPA clone,
# against its files too). EMPA is fetched by the DAG (rule `empa`, config section `empa:`). The DAG runs
# this notebook twice: on this run's sandbox results (rule `epm`, into `epm/`), which is also what it does
# by hand with its defaults, and on EMPA's published runs (rule `epm_published`, into `epm_published/`);
# by hand it prints where those are and how to analyse them, or why that part is skipped.
# **EPM-Q is comparable with the EMPA leaderboard only when the judge is the same model (Gemini 2.5 Pro)**;
# at the tiny scale the judge is a small local model and the numbers describe this run only.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
result_dirs = []                       # folders of result files, one sub-folder per model; empty: this run's sandbox results
out_dir = ""                           # empty: <run_dir>/epm
case_meta_source = "scenario"          # EMPA need priorities: scenario reads the case text, empa_stats follows EMPA statistics (the published persona slices)

# %%
from echo_lib.notebook import start
from echo_lib.upstream import published_note, require, sandbox_dirs
cfg = start(config or config_path, stage="epm")     # chdir to project root, validate config, seed
if not result_dirs:   # by hand: this run's sandbox results, the folders the DAG's rule epm passes
    require(cfg, "epm")   # stage 04's summaries; a missing file names the snakemake command
    result_dirs = sandbox_dirs(cfg)
    print(published_note(cfg))   # EMPA's published runs: the DAG's second job of this notebook

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from echo_lib.empa_source import configured_layout
from echo_lib.epm.scoring import known_case_meta, score_folders, write_tables
from echo_lib.epm.slices import slice_table, slice_wide
from echo_lib.report import epm_figures as figs

empa = configured_layout(cfg.sandbox.empa_dir, cfg.empa)   # None until the DAG's rule `empa` has fetched it
empa_dir = empa.root if empa else None
dirs = [Path(d) for d in result_dirs]
out = Path(out_dir or cfg.layout.epm.dir)
print("scoring:", ", ".join(map(str, dirs)), "->", out)
print("EPM parameters:", cfg.epm)

# %% [markdown]
# ## Replay and score every run
# A file that cannot be read is named and skipped; the others still count.

# %%
scored = score_folders(dirs, cfg.epm)
for s in scored.skipped:
    print("skipped:", s.reason)
tables = write_tables(scored, out, cfg.epm.constants)
order = figs.model_order(scored.summary)
scored.summary.set_index("Model").loc[order].round(2)

# %% [markdown]
# ## The central comparisons, with their uncertainty
# EPM-Q, its three group scores and the success rate of every model over its cases, each with a 95 %
# interval (`echo_lib.stats`: a t-interval for the scores, Wilson with continuity correction for the
# success rate; their coverage at n = 3, 10 and 30 is tested), and the paired differences the paper argues
# about (each RL variant minus the base, echo minus scalar, within each RL seed of `policy.seeds`) over the
# cases both models ran, with a paired t-interval and a verdict at that n. A difference whose interval
# spans 0 is **no difference at this scale**; below 10 cases no interval is printed and no verdict given
# (**n too small**). The judge's own
# sensitivity (stage 04, printed first) says whether the judge could see a difference at all.

# %%
from echo_lib.epm.compare import seed_pairs, write_comparisons
from echo_lib.policy.params import trained_models
from echo_lib.judges.stage import trust_note

print(trust_note(cfg.run_dir))
pairs = seed_pairs(list(scored.summary["Model"]), trained_models(cfg.policy.variants, cfg.policy.seeds),
                   reference=cfg.roles.policy)   # per RL seed: each variant - base, echo - scalar
intervals, paired = write_comparisons(scored.per_case, pairs, out)
display(intervals.pivot(index="Model", columns="Metric", values="CI").loc[order])
paired

# %% [markdown]
# ## How the runs ended
# Success needs both the energy and the position; a timeout counts as a failure in the success rate.

# %%
fig = figs.outcome_bars(scored.summary)
figs.save_figure(fig, out, "fig_outcomes", close=False)
plt.show()

# %% [markdown]
# ## The nine indices
# Mean ± sd over cases with every case as a dot; the dotted line is the reference level 100.

# %%
fig = figs.index_panel(scored.per_case, order)
figs.save_figure(fig, out, "fig_indices", close=False)
plt.show()

# %% [markdown]
# ## Slices: mechanism, persona, life domain
# Mean per-case EPM-Q over the cases of a slice. *Mechanism*: the case's dominant deficit axis, Routine
# (Easy, Medium) vs Hard (Hard, Very Hard). *Persona*: need type (affective or cognitive priority High;
# motivational High or Medium) × Receptive (threshold Low/Medium) vs Defensive (High). Case metadata comes
# from the scenario files (the project's own set, and EMPA's cases once it is fetched); runs of
# cases without metadata are left out of the slices. For EMPA's cases, `case_meta_source = "empa_stats"`
# takes the need priorities as EMPA's own statistics list them: they differ from the case text in 7 of the
# 30 cases, and only with them do the persona slices equal the published ones.

# %%
meta = known_case_meta(empa_dir, priorities=case_meta_source)
known = scored.per_case["Case_ID"].isin(meta)
print(f"case metadata for {known.sum()} of {len(known)} runs ({case_meta_source})")
slices = slice_table(scored.per_case[known], meta) if known.any() else pd.DataFrame()
if not slices.empty:
    slices.to_csv(out / "slices.csv", index=False)
    for slicing in ("mechanism", "persona", "domain"):
        fig = figs.radar_grid(slice_wide(slices, slicing), f"EPM-Q by {slicing}", order)
        figs.save_figure(fig, out, f"fig_radar_{slicing}", close=False)
        plt.show()

# %% [markdown]
# ## Every case, every model
# Columns run from the case the models found easiest to the hardest (mean EPM-Q).

# %%
fig = figs.case_heatmap(scored.per_case, order)
figs.save_figure(fig, out, "fig_case_heatmap", close=False)
plt.show()

# %% [markdown]
# ## Trajectories in C-A-P space
# Each line is one run from $P_0$ (dot) towards the origin (cross); blue succeeded, red failed, grey
# timed out. The interactive version (`trajectories.html`) can be rotated and filtered by model.

# %%
fig = figs.trajectory_grid(scored.replays, order)
figs.save_figure(fig, out, "fig_trajectories", close=False)
plt.show()
html = figs.trajectory_html(scored.replays, order, out / "trajectories.html")
print("interactive trajectories:", html or "not written (plotly is not installed)")

# %%
print("outputs:", *sorted(p.name for p in out.iterdir()), sep="\n  ")
