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
# # 02 · Generative reward models
#
# Echo-N1 replaces scalar reward models, which it found too information-poor for fine shifts of
# feeling, with **generative** reward models that reason before they judge (METHOD.md 3.1). The
# reward model first profiles the user (traits, current emotion, what they want to vent, what they
# hope for, their empathy threshold, the priority of their cognitive / affective / motivational
# needs, what they dislike), then says what kind of reply would resonate, then compares, and only
# then gives a verdict in a strict format:
#
# * **Empathy** (`kind = "empathy"`): a candidate reply against a *reference* reply that the rubric
#   scored exactly 3, `<answer>better|tie|worse</answer>` → reward +1 / 0 / −1. Anchoring on a
#   mediocre reference makes the reward a relative ranking (METHOD.md 3.3).
# * **Humanlike** (`kind = "humanlike"`): was the last reply written by the real person in this chat?
#   `<answer>human|machine</answer>` → 1 / 0. Its negatives include human-written hard negatives
#   (a turn from another chat, the real turn after shuffled context), so style alone does not win.
# * **Scalar** (`kind = "scalar"`): the ablation the paper argues against: a 1-10 score of one reply,
#   no anchor. It is trained on the same empathy data, and evaluated on the same better / tie / worse
#   task by scoring candidate and reference separately.
#
# Training (METHOD.md 3.4 [DEFAULT]) is a LoRA adapter on the base model: a short supervised warm
# start on reasoning-plus-verdict targets, then GRPO with
# reward = correct + 0.3 · process + format. The *process* reward checks the reasoning, not only the
# verdict: each field of the profile the model states is compared with the gold profile the item
# was built from (a transparent word-overlap rule at this scale; a judge model at paper scale).
#
# **At the tiny scale, be careful what you read into the numbers.** The base is SmolLM2-135M, the
# SFT reasoning is a template filled from the gold (there is no teacher model to distil), and a few
# GRPO steps on CPU cannot teach a 135M model to infer a user's needs. What this stage shows at
# this scale is that the pipeline works end to end and what the untrained model does with the
# format; the held-out accuracy of the trained model is reported as measured, whatever it is.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
kind = "empathy"                       # empathy | humanlike | scalar

# %%
from echo_lib.notebook import start

cfg = start(config or config_path)

# %%
import pandas as pd

from echo_lib.rewards import stage
from echo_lib.rewards.data import to_example

paths = stage.rm_paths(cfg, kind)
params = cfg.reward_models
train_items = stage.items(cfg, kind, "train", params.max_train_items)
print(f"{kind} reward model on {cfg.roles.reward_model} ({cfg.models[cfg.roles.reward_model].id}); "
      f"{len(train_items)} training items -> {paths.dir}")

# %% [markdown]
# ## What the reward model sees, and what it should write
# One training prompt and its templated target. The target's reasoning is filled from the gold
# (profile fields clipped to a few words each, the user's most important theorem, the label), so it
# teaches the format and where the evidence goes; the reward model has to learn to find that
# evidence in the conversation itself.

# %%
example = to_example(train_items[0], kind, params.target_field_words)
print(example.prompt[-1]["content"][:1200])
print("\n--- target ---\n" + example.target)

# %% [markdown]
# ## Training: SFT warm start, then GRPO
# TRL on CPU with the flags PLATFORM.md 4 measured (no bf16, no gradient checkpointing). GRPO
# samples `num_generations` judgments per prompt and rewards each for a correct verdict, a
# reasoning path that states the right profile (or, for humanlike, the right checks) and a
# well-formed output; TRL logs each part separately, so the curve shows what moved.

# %%
result = stage.train(cfg, kind)
log = pd.read_csv(paths.train_log)
print({"seconds": {k: round(v, 1) for k, v in result.seconds.items()}, "steps": result.steps,
       "peak_rss_mb": round(result.peak_rss_mb)})
log

# %% [markdown]
# ## Held-out evaluation: the base model against the trained one
# Both are prompted identically and decode greedily through the model layer (so a rerun is served
# from its cache). Parse failures count as wrong answers. Position bias: the share of items whose
# verdict does not flip when candidate and reference trade places. Length bias: the correlation of
# the verdict with the length difference; `label_length_corr` is the same correlation for the gold
# labels, i.e. how much of a length preference the data itself would reward.

# %%
results = stage.evaluate_models(cfg, kind, paths.adapter)
record = stage.write_outputs(cfg, kind, results, result)
pd.read_csv(paths.table).set_index("metric")

# %%
from echo_lib.rewards.figures import rm_figure

fig = rm_figure(log, record, kind)
fig.savefig(paths.dir / "training.png", dpi=150, bbox_inches="tight")

# %% [markdown]
# ## A few judgments of the trained model
# Raw outputs next to the gold label; `verdict` is empty where the output did not parse.

# %%
rows = pd.DataFrame(results["trained"][1])
rows[["id", "label", "verdict", "output"]].head(8)
