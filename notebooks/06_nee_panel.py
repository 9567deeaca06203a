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
# # 06 · NEE panel: how do the conversations read to blinded judges?
#
# Echo-N1 (arXiv 2512.00344) evaluates with **quantitative EPM metrics** (stage 05) **plus qualitative NEE
# judgments** across "empathy, emotional coherence and humanlikeness". That is nearly all that is known
# (METHOD.md 7.1): the acronym, the judges, the rubric, the blinding, the sample sizes and the aggregation
# were never published. A press article adds that a panel of frontier LLMs gave a blind review and that
# "physics metrics and experience ratings" were fused into one score (Echo-N1 73.54, Doubao 42.95,
# Qwen3-32B 29.66) by an unknown formula. Those three numbers are *reported* values: they belong to the
# claims table of stage 07 and are never produced here.
#
# What this notebook runs is therefore **this package's protocol** (METHOD.md 7.2 [DEFAULT]):
#
# * **Material:** every sandbox transcript of every model under test (the same dialogues as EPM).
# * **Panel:** the models of `roles.nee_judges`, each under `nee.prompt_variants` differently worded
#   prompts with its own seed. At paper scale: LLMs of different vendors; at the tiny scale one small
#   model, so the "judges" differ only in wording: their agreement says little about validity.
# * **Blinding:** model names, ids (and their parts), vendor names and the companion's persona name are
#   masked; markdown and emoji are stripped and whitespace collapsed; each judge sees the transcripts in
#   its own seeded order, under neutral labels ("Conversation 7"); `order.json` maps positions back.
# * **Six dimensions on anchored 1-5 scales** (wording ours): empathy accuracy, emotional coherence,
#   humanlikeness, persona and context consistency, non-performativity, safety.
# * **Score:** local judges answer through the model's option probabilities (no parsing): a rating is the
#   *expected* level $\sum_k k\,p_k$ (the most probable level is kept too). NEE = (mean − 1) / 4 × 100,
#   with a t-interval over transcripts (`echo_lib.stats`; none is shown below 10 transcripts).
# * **Reliability:** Krippendorff's α between judges; a pairwise A/B comparison with the reference model,
#   judged in both orders, gives a win rate and the judges' **position bias**.
# * **Composite** = w · min(EPM-Q, 100) + (1 − w) · NEE: **this package's choice**, not the paper's formula.
#
# Human raters (the protocol's calibration subset) are not part of this run.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
out_dir = ""                           # empty: <run_dir>/nee

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require
cfg = start(config or config_path, stage="nee")     # chdir to project root, validate config, seed
require(cfg, "nee")   # stages 04-05 and the judge check; a missing file names the snakemake command

# %%
import matplotlib.pyplot as plt
import pandas as pd

from echo_lib.nee import figures
from echo_lib.nee.dimensions import DIMENSIONS
from echo_lib.nee.panel import make_panel
from echo_lib.nee.stage import run_nee
from echo_lib.report.epm_figures import save_figure

print("models rated:", ", ".join(cfg.sandbox.models))
print("judges:", ", ".join(j.label for j in make_panel(cfg.roles.nee_judges, cfg.nee.prompt_variants, cfg.seed)))
print("NEE settings:", cfg.nee)

# %% [markdown]
# ## The rubric
# Each dimension is asked in its own prompt, with all five anchors shown.

# %%
pd.DataFrame([{"dimension": d.title, "question": d.question, **{str(i): a for i, a in enumerate(d.anchors, 1)}}
              for d in DIMENSIONS]).set_index("dimension")

# %% [markdown]
# ## Can the judges see the reply?
# The judge sensitivity stage (notebook 04_judges) measured the instruments on items with a known better
# reply. Its figures come first: every comparison below is only as good as the judge that made it.

# %%
from echo_lib.judges.stage import trust_note

print(trust_note(cfg.run_dir))

# %% [markdown]
# ## Rate every transcript
# Every call goes through the model layer's cache: a rerun makes no new model calls.

# %%
res = run_nee(cfg, out_dir=out_dir or None)
print(f"{len(res.ratings)} ratings, {len(res.pairwise)} pairwise verdicts, {res.model_calls} new model calls")
for note in res.notes:
    print("note:", note)
res.ratings.head(12)

# %% [markdown]
# Which model answered as each judge: the served ids and system fingerprints of this stage's calls.

# %%
from echo_lib.llm.served import served_rows
pd.DataFrame(served_rows(res.served))

# %% [markdown]
# ## Scores
# `nee` is on 0-100 with its 95% t-interval over the model's transcripts (`nee_ci_shown` is false below
# 10 transcripts: the tables then print "n too small"); the dimension columns are on the same scale. `epmq`
# is stage 05's EPM-Q; `composite` is this package's fusion (w = `nee.composite_weight`). At the tiny scale
# the judge is a 135M model: the numbers show the machinery, not a measurement of empathy.

# %%
res.summary.set_index("model").round(2)

# %% [markdown]
# ## The models compared on the same cases
# Per case, each model's NEE score and its composite (with the case's own EPM-Q from stage 05), then the
# paired difference of every RL variant and the base (and of the variants): n, the difference, its paired
# t-interval, and the verdict at that n. A difference whose interval spans 0 is "no difference at this
# scale"; below 10 cases there is no interval and no verdict ("n too small").

# %%
pd.read_csv(res.out_dir / "paired.csv")

# %%
fig = figures.nee_panel(res.summary, res.dimensions)
save_figure(fig, res.out_dir, "fig_nee", close=False)
plt.show()

# %% [markdown]
# ## Do the judges agree?
# Krippendorff's α over (transcript × dimension) units: 1 is perfect agreement, 0 is chance. *Interval* uses
# the expected levels, *ordinal* the most probable level. With a single judge it is undefined.

# %%
print("Krippendorff's alpha:", {k: v for k, v in res.agreement.items() if "alpha" in k or k == "note"})

# %% [markdown]
# ## Pairwise A/B against the reference, in both orders
# Each model's transcript and the reference model's transcript of the same case are shown as A and B, then
# swapped. A judge whose verdict follows the position rather than the content has a high position bias.
# With a single model under test there is nothing to compare: `pairwise.csv` then holds only its header.

# %%
print("position bias (all pairs):", res.agreement["position_bias"], "-", res.agreement["position_bias_note"])
fig = figures.pairwise_panel(res.summary, cfg.nee.reference_model)
if fig is not None:
    save_figure(fig, res.out_dir, "fig_pairwise", close=False)
    plt.show()
else:
    print("no pairwise comparison in this run")
res.pairwise.head(12)

# %%
print("outputs:", *sorted(p.name for p in res.out_dir.iterdir()), sep="\n  ")
