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
# # 04 · Judge sensitivity: do the instruments see the reply?
#
# Every result of stages 04-06 is read through two instruments: the sandbox **Judge**, whose MDEP
# rubric turns each reply into a step of the empathy trajectory, and the **NEE panel**, whose ratings
# and A/B comparisons give the NEE score and the win rates. A difference between two models means
# something only if these instruments prefer a better reply when they see one. This stage checks that
# on a set written for the purpose (`data/judge_sensitivity.yaml`): short chats, each with one good
# empathic reply and one poor reply of a named kind (dismissive, advice dump, platitude, off-topic,
# blaming), spread over the three EPM axes. Every figure is on the held-out part of the set.
#
# * **Sandbox judge**: the share of items whose good reply gets the higher judged effect (expected
#   progress minus expected regress over the rubric's option probabilities, summed over the axes).
#   Target at tiny scale: at least 0.80.
# * **NEE panel**: the same preference from its ratings (target 0.80), Krippendorff's alpha between its
#   judges (target 0.40) and its position bias, the share of A/B comparisons whose winner changes when
#   the chats swap places (target at most 0.20).
#
# Beside them: chance (0.5), the *length rule*, a probe that always prefers the longer reply, and an
# *embedding probe*: a linear A/B model on sentence embeddings (all-MiniLM-L6-v2) fit on the dev items,
# with its label-shuffle twin (half the dev labels swapped at random), which should sit near chance.
# The probe says how much of the answer a shallow reader of the text can learn from the dev part: a
# judge far below it is not reading what the text gives away. A judge that beats neither chance nor the
# length rule is not measuring empathy, and the comparisons that rely on it say nothing.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require

cfg = start(config or config_path, stage="judges")
require(cfg, "judges")   # stage 00's model; a missing file names the snakemake command

# %%
import pandas as pd

from echo_lib.judges import stage

items = stage.items_for(cfg)
print(f"{len(items)} {cfg.judges.split} items of {stage.set_path(cfg)}; sandbox judge {cfg.roles.judge}, "
      f"NEE panel {cfg.roles.nee_judges} x {cfg.nee.prompt_variants} wordings")
pd.crosstab(pd.Series([it.axis for it in items], name="axis"), pd.Series([it.kind for it in items], name="poor reply"))

# %% [markdown]
# ## Training the tiny judge (when `judges.train.enabled`)
#
# A 135M model asked for a rubric digit prefers one digit whatever it reads, and calibration against a
# content-free reply removes only part of that. Fine-tuning the digit does not help either: a LoRA
# adapter trained on the answer token (`judges.train.method: sft`) learnt each rubric field's prior and
# ignored the reply, even on the items it was trained on (benchmarks/README.md). Yet the model *does*
# read the reply: a linear probe on its hidden state at the end of the rubric prompt tells the good
# reply from the poor one on held-out items. So the tiny judge keeps the model and the prompts and
# replaces only the read-out (`method: readout`, the default): for every question the instruments ask
# (the six MDEP fields, the NEE dimensions), a logistic head on the state after decoder layer
# `judges.train.layer` at the prompt's last token gives the option probabilities (`echo_lib.llm.readout`).
# The A/B comparison shows two chats in one prompt; there the last token's state mostly tells where the
# better chat sits, so a last-token head picked the same letter in both orders for a third of the pairs.
# Its head reads a *contrast* instead: the state at the end of chat A minus the state at the end of chat B
# (`benchmarks/judge_ab_readout.py` compares the two).
#
# The heads learn from the dev items and rule-built contrasts (another item's good reply as an off-topic
# answer, generic poor replies of data/contrasts.yaml), each in the exact prompt format the instruments
# use, with the answer a careful rater gives for that kind of reply. The held-out items are never
# trained on. The trained judge is the model `tiny_judge`, which `roles.judge` and `roles.nee_judges`
# name in the tiny config; questions it has no head for (six of the nine IEDR indicators, the win-rate
# judge) are answered by the model's own LM head, as before. Beside its held-out figure the record gives its
# accuracy on the dev items it learnt from: high on both means it learnt the distinction, high on dev
# only that it memorised.

# %%
training = stage.train(cfg)
training

# %%
record = stage.run_sensitivity(cfg, training=training)
print(stage.verdict_lines(record))

# %% [markdown]
# ## The starting point: does the IEDR read the case?
#
# The LM head of the 135M judge rates every IEDR indicator of every case level 1, so every case started
# from the same P0. The persona's stated priorities (C.3 / A.3 / P.3) are declared in each scenario file,
# so the trained judge has a read-out head for each, fit on the declared levels of the *dev* cases
# (`echo_lib.judges.iedr_heads`; the held-out cases include the ones the tiny sandbox plays). With
# `sandbox_run.judge.iedr_priorities: declared` (the tiny config) the sandbox takes those three levels from
# the scenario file instead, and the judge's own answer is shown beside (`judge P_0`): a declared input, not
# a measurement of the judge. On the held-out cases: the share whose P0 has the declared dominant axis
# (target 0.80), how many distinct P0 they get, beside a majority baseline, a bag-of-words probe and the
# heads' label-shuffle twin.

# %%
if "iedr" in record:
    display(pd.DataFrame([{"case": c["case"], "declared": c["declared_axis"], "P_0": c.get("P_0"),
                           "axis": c.get("axis"), "judge P_0": c.get("judge", {}).get("P_0")}
                          for c in record["iedr"]["cases"]]))

# %% [markdown]
# ## Where each instrument stands
#
# The bars are preference accuracies (a tie counts half an item) with their 95 % Wilson score intervals
# (continuity-corrected); the dotted line is chance, the dashed line the target.

# %%
fig = stage.sensitivity_figure(record)
fig.savefig(cfg.layout.judges.figure, dpi=150, bbox_inches="tight")

# %% [markdown]
# ## By failure kind and axis
#
# Which poor replies the sandbox judge tells apart, and on which axis the good reply's advantage shows.

# %%
if "sandbox_judge" in record:
    s = record["sandbox_judge"]
    display(pd.DataFrame({"accuracy": s["by_kind"]}).T, pd.DataFrame({"accuracy": s["by_axis"]}).T,
            pd.DataFrame(s["mean_expected_levels"]).T)
