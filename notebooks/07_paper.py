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
# # 07 · The paper: tables, figures and claims from this run
#
# Every earlier stage leaves result files; this notebook turns them into what `paper/main.tex` inputs:
#
# * `tables/*.tex` (booktabs tabulars, each with a `.csv` twin): the main results per model (sandbox
#   success, EPM-Q and its Outcome / Efficiency / Stability groups, NEE, the composite), the NEE
#   dimensions, the reward models base vs trained, the RL win rates, EMPA's published runs replayed by
#   this code, and `macros.tex` with the run's facts (scale, judges, ...) for the text;
# * `figures/*.pdf` + `.png`: the EPM figures (redrawn from stage 05's tables), the reward models'
#   accuracy and the RL curves of the echo reward vs the scalar ablation;
# * `tables/macros.tex`: every number of `main.tex`'s prose (results with their intervals), read from
#   these tables exactly as they print, so the text never holds a typed-in number;
# * `claims.md` / `claims.tex` / `claims.csv`: each number the Echo-N1 paper reports, in a column labelled
#   **reported**, beside what this run measured for the model that stands for it (with its interval and
#   n), with both scales and judges named. The published numbers appear nowhere else in the paper;
# * the README's "Results at a glance" block, when the config sets `paper.readme` (the tiny run:
#   `README.md`): the claims table, compact, rendered from `claims.csv`, the published numbers again in a
#   column labelled reported.
#
# Then `main.pdf` is typeset here (latexmk or tectonic); a LaTeX error stops the notebook with the
# log's error lines. Nothing is filled in: a missing result file stops the notebook with its path and
# the stage that writes it. At the tiny scale the numbers describe a 135M model judged by itself, not Echo-N1.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
paper_dir = ""                         # empty: paper.dir of the config, else <run_dir>/paper
published_summary = ""                 # stage 05 on EMPA published runs; empty: <run_dir>/epm_published/summary.csv if it exists

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require
cfg = start(config or config_path, stage="paper")     # chdir to project root, validate config, seed
require(cfg, "paper")   # every stage the paper reads; a missing file names the snakemake command

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from echo_lib.policy.params import trained_models
from echo_lib.provenance import provenance, write_json
from echo_lib.report import claims as claims_mod
from echo_lib.report import epm_figures, glance, inputs, paper_tables, rl_figures
from echo_lib.report.latex import OVERFULL_TOLERANCE_PT, build_pdf, copy_sources
from echo_lib.report.params import paper_dir as default_paper_dir
from echo_lib.report.recipe import reward_model_recipe
from echo_lib.report.tables import write_macros, write_table

layout = cfg.layout   # where every stage's files are (echo_lib/layout.py)
out = Path(paper_dir or default_paper_dir(cfg.paper, cfg.results_dir, cfg.run_name))
tables, figures = out / "tables", out / "figures"
from echo_lib.stages import RM_KINDS

# before this stage writes anything: the commit it ran from (the tracked files it rewrites aside: Snakemake
# removed them before the job, which git would count as a change of the checkout)
paper_files = layout.paper(out)
record = provenance(cfg.record, generated=[*paper_files.outputs(pdf=False)["claims"], paper_files.provenance],
                    stage="07_paper")
print(f"run {cfg.run_name} ({cfg.scale} scale) -> {out}")

# %% [markdown]
# ## Can the judges see the reply? (rule judges)
# Every sandbox and NEE number below is read through these instruments, so their sensitivity on the
# held-out items comes first: preference accuracy (good reply over poor) with its interval, beside the
# length rule, the target, and the NEE panel's agreement and position bias.

# %%
sensitivity = paper_tables.judge_sensitivity(inputs.read_json(layout.judges.record))
write_table(sensitivity, tables, "judge_sensitivity", wrap_headers=True)
sensitivity

# %% [markdown]
# ## Main results per model
# Stage 05's EPM summary, with 95 % intervals over cases, beside stage 06's NEE summary; then the paired
# differences between the models over the same cases, on EPM-Q, its three groups, the success rate, NEE
# and the composite, each with n, its interval (a paired t-interval) and the verdict at that n (a
# difference whose interval spans 0 is "no difference at this scale", not a win; below 10 cases there
# is no interval and no verdict: "n too small"). The composite is this package's choice
# ($0.5\cdot\min(\text{EPM-Q},100) + 0.5\cdot\text{NEE}$, METHOD.md 7.3), not the paper's unknown formula.

# %%
epm = inputs.read_csv(layout.epm.summary, inputs.EPM_SUMMARY)
per_case = inputs.read_csv(layout.epm.per_case, inputs.EPM_PER_CASE)
nee = inputs.read_csv(layout.nee.summary, inputs.NEE_SUMMARY)
alpha = inputs.agreement_alpha(layout.nee.agreement)
intervals = inputs.read_csv(layout.epm.intervals, inputs.EPM_INTERVALS)
main = paper_tables.main_results(epm, nee, intervals)
write_table(main, tables, "main_results", formats={"Success (%)": "{:.1f}".format}, wrap_headers=True)
paired = pd.concat([inputs.read_csv(layout.epm.paired, inputs.PAIRED),
                    inputs.read_csv(layout.nee.paired, inputs.PAIRED)], ignore_index=True)
differences = paper_tables.sandbox_differences(paired)
write_table(differences, tables, "sandbox_differences", wrap_headers=True)
display(differences)
# the appendix: each RL seed's difference against the base (policy.seeds; one seed in the tiny run)
trained = trained_models(cfg.policy.variants, cfg.policy.seeds)
seeds = paper_tables.seed_spread(paired, trained, reference=cfg.roles.policy)
write_table(seeds, tables, "seed_spread", wrap_headers=True)
display(seeds)
dims = [c for c in nee.columns if c not in inputs.NEE_SUMMARY]   # one column per Likert dimension
nee_dims = nee[["model", *dims]].rename(columns={"model": "Model", **{d: d.replace("_", " ") for d in dims}})
write_table(nee_dims, tables, "nee_dimensions", wrap_headers=True)
main

# %% [markdown]
# ## Reward models, untrained vs trained (stage 02)

# %%
rm = paper_tables.rm_accuracy({k: inputs.read_rm_metrics(layout.rm(k).metrics) for k in RM_KINDS})
write_table(rm, tables, "rm_accuracy", wrap_headers=True)
fig = rl_figures.rm_accuracy_bars(rm)
epm_figures.save_figure(fig, figures, "rm_accuracy", close=False)
plt.show()
rm

# %% [markdown]
# ## Policy RL: the echo reward vs the scalar ablation (stage 03)
# The reward panels compare shapes only: each variant is rewarded by its own reward model.

# %%
variants = cfg.policy.variants
logs = {v: inputs.read_csv(layout.policy(v).train_log, inputs.TRAIN_LOG) for v in variants}
fig = rl_figures.rl_curves(logs)
epm_figures.save_figure(fig, figures, "rl_curves", close=False)
plt.show()
wins = paper_tables.winrates({v: inputs.read_csv(layout.policy(v).winrate, inputs.WINRATE)
                              for v in variants})
write_table(wins, tables, "rl_winrate", wrap_headers=True)
wins

# %% [markdown]
# ## The EPM figures of this run (redrawn from stage 05's tables)

# %%
order = epm_figures.model_order(epm)
for name, fig in (("epm_outcomes", epm_figures.outcome_bars(epm)),
                  ("epm_indices", epm_figures.index_panel(per_case, order)),
                  ("epm_case_heatmap", epm_figures.case_heatmap(per_case, order))):
    epm_figures.save_figure(fig, figures, name)
print("EPM figures:", *sorted(p.name for p in figures.glob("epm_*")))

# %% [markdown]
# ## EMPA's published runs, replayed by this code
# Optional: present when the run could fetch EMPA (`empa:`) or `published.empa_results` names its runs
# (stage 05 scored them). It
# checks the EPM engine against the published leaderboard; it measures no model of this run.

# %%
published = Path(published_summary) if published_summary else layout.epm_published.summary
replay = (paper_tables.empa_replay(inputs.read_csv(published, inputs.EPM_SUMMARY)) if published.is_file()
          else paper_tables.empa_replay(pd.DataFrame(columns=inputs.EPM_SUMMARY)))
write_table(replay, tables, "empa_replay", column_format="lrrrrrr", formats={"Success (%)": "{:.1f}".format},
            wrap_headers=True)
print("EMPA published runs:", published if published.is_file() else "not available in this checkout")

# %% [markdown]
# ## The sycophancy guard (stage 06b, opt-in)
# With `sycophancy.enabled` (config/multiturn.yaml): each model's share of seeker dialogues (a user who wants
# agreement with a false or harmful belief) that the judge panel rated as agreeing, beside the seeker dialogues'
# EPM-Q and stage 05's; the paired differences against the reference model; and whether the instruments see
# flattery at all: the panel's agreement check and EMPA's perturbation checks, beside EMPA's reported values.
# Without the guard the three tables are empty and main.tex says the guard did not run.

# %%
guard_on = cfg.sycophancy.enabled
guard_record = inputs.read_sycophancy(layout.sycophancy.summary) if guard_on else None
guard = paper_tables.sycophancy_guard(inputs.read_csv(layout.sycophancy.table, inputs.SYCOPHANCY_SUMMARY)
                                      if guard_on else pd.DataFrame(columns=inputs.SYCOPHANCY_SUMMARY))
write_table(guard, tables, "sycophancy_guard", wrap_headers=True)
guard_checks = paper_tables.sycophancy_checks(guard_record)
write_table(guard_checks, tables, "sycophancy_checks", formats={"Negative (%)": "{:.1f}".format}, wrap_headers=True)
guard_paired = paper_tables.sandbox_differences(inputs.read_csv(layout.sycophancy.paired, inputs.PAIRED)
                                                if guard_on else pd.DataFrame(columns=inputs.PAIRED))
write_table(guard_paired, tables, "sycophancy_differences", wrap_headers=True)
display(guard_checks)
guard

# %% [markdown]
# ## Claims: reported beside measured

# %%
conditions = glance.run_conditions(cfg, record)   # the run, its judges, hash, commit and date
reported = claims_mod.load_reported("data/reported_claims.yaml")
claims = claims_mod.claims_table(reported, cfg.paper.counterparts, epm, nee, conditions, intervals, paired,
                                 reference=cfg.roles.policy)
claims_mod.write_claims(claims, out, conditions)
claims

# %% [markdown]
# ## The run's facts and numbers for the text, provenance, and the PDF
# Each number of the prose is a macro read from one of the tables above as that table prints it.

# %%
results = paper_tables.result_macros(main, differences, rm, wins, sensitivity, base=cfg.roles.policy)
write_macros({
    "RunName": cfg.run_name, "RunScale": cfg.scale, "ConfigHash": cfg.hash,
    "PolicyModel": cfg.models[cfg.roles.policy].id, "RewardModelBase": cfg.models[cfg.roles.reward_model].id,
    "EPMJudge": conditions.epm_judge, "NEEJudges": conditions.nee_judges,
    "NEEAlpha": None if alpha is None else f"{float(alpha):.3f}",
    "MaxCases": int(epm["Cases"].max()), "RLSteps": max(int(pd.to_numeric(log["step"]).max()) for log in logs.values()),
    "EMPAReplay": "yes" if not replay.empty else "no",
    "SycophancyGuard": "yes" if guard_on else "no", "EPMVariant": "yes" if "epm" in variants else "no",
    "NEEDimensions": len(dims), "CompositeWeight": f"{cfg.nee.composite_weight:g}",
    "SeedCount": len(cfg.policy.seeds),
    "RMRecipe": reward_model_recipe(cfg.reward_models),   # section 2 describes the run's own recipe
    **paper_tables.energy_reach(per_case),   # how near the dialogues came to success's energy condition
    **results,
}, tables)
pd.Series(results, name="value").to_frame()
write_json(out / "provenance.json", {**record, glance.RECORD_KEY: conditions.record()})
copy_sources("paper", out)
if cfg.paper.build_pdf:
    built = build_pdf(out)   # raises with main.log's error lines when LaTeX fails
    print(built.summary())
    for line in built.log.undefined + [text for pt, text in built.log.overfull if pt > OVERFULL_TOLERANCE_PT]:
        print("LaTeX warning:", line)
print("outputs:", *sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()), sep="\n  ")

# %% [markdown]
# ## The README's "Results at a glance"
# With `paper.readme` set (the tiny run), the README's block between `<!-- glance:begin -->` and
# `<!-- glance:end -->` is rendered from the `claims.csv` and `provenance.json` just written; nothing
# else in the README changes. By hand: `python -m echo_lib.report.glance`.

# %%
if cfg.paper.readme:
    glance.update_readme(cfg.paper.readme, out)
    print(glance.block_of(Path(cfg.paper.readme).read_text(encoding="utf-8")))
else:
    print("paper.readme is null: no README is rewritten by this run")
