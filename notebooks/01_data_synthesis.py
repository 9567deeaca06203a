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
# # 01 · Data synthesis for the two reward models
#
# Echo-N1 rewards its policy with two *generative* reward models, and each needs its own data
# (METHOD.md 2.2-2.5).
#
# **Humanlike.** Frontier models could not tell human from AI-written chat, so Echo-N1 trains a
# judge on real human conversations. Ours come from the Chit Chat Challenge corpus (7,168 human
# dialogues, MIT, read from its pinned PyPI wheel). The question the judge answers is *was this reply
# written by the human in this conversation?* Positives are the real next turns. Each is paired with
# one negative, in turn: the base model's reply to the same context ("assistant flavour"), its reply
# to the last turn only (context removed), a human turn from another dialogue (last turn swapped), or
# the real reply after shuffled context turns. The last two are written by humans: a judge that only
# learned "casual style means human" fails them, which is why they are there.
#
# **Empathy, by axioms -> theorems.** People need different things, so universal principles
# (`data/axioms.yaml`: validate before advising, don't moralise, no performed empathy, ...) are
# instantiated for one user's profile into *theorems*: what this person needs from a reply. The
# base model writes several replies to each persona's opening message; a rubric judge scores them
# 1-5 against the profile and theorems (from its probabilities over the digits, no text parsing);
# the reply scored closest to 3 becomes the **reference** that anchors the reward later; replies at 3
# or below are critiqued and rewritten, and everything is labelled *better / tie / worse* against the
# reference. Every item keeps the gold profile for the process reward.
#
# **Human in the loop.** Annotators check that the derived profiles and strategies match the
# personas as intended; items of rejected personas are dropped. The shipped verdicts are an example
# of the format (see `data/hitl/README.md` for a real round).
#
# At the tiny scale the base model *and* the judge are SmolLM2-135M, so expect weak replies and a
# compressed, noisy judge: the pipeline is the method, the numbers are the tiny scale's.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when the notebook runs by hand
config = {}                            # Snakemake passes the validated run config here

# %%
from echo_lib.notebook import start

cfg = start(config or config_path)
print(f"run {cfg.run_name!r}: generator {cfg.roles.policy!r}, rubric judge {cfg.roles.judge!r}")

# %% [markdown]
# ## Humanlike items

# %%
import pandas as pd

from echo_lib.llm import load_llm
from echo_lib.synthesis import stage

generator = load_llm(cfg, cfg.roles.policy)
humanlike = stage.humanlike_data(cfg, generator)
pd.DataFrame(stage.summary(humanlike, ("label", "kind"))).pivot_table(
    index=["field", "value"], columns="split", values="items", fill_value=0)

# %%
pd.DataFrame([i.to_json() for i in humanlike["train"][:8]])[["kind", "label", "context", "reply"]]

# %% [markdown]
# ## Empathy preference items
# Personas are split into train and test, so no user's profile appears in both.

# %%
judge = generator if cfg.roles.judge == cfg.roles.policy else load_llm(cfg, cfg.roles.judge)
scenarios = stage.empathy_scenarios(cfg)
empathy = stage.empathy_data(cfg, generator, judge, scenarios)
pd.DataFrame(stage.summary(empathy, ("label", "origin"))).pivot_table(
    index=["field", "value"], columns="split", values="items", fill_value=0)

# %% [markdown]
# The judge's scores of the sampled replies and of the rewrites, and where the references sit.
# A compressed spread is what a small judge gives; the labels are relative to each reference.

# %%
import matplotlib.pyplot as plt

scores = pd.DataFrame([{"origin": i.origin, "score": i.score, "reference": i.reference_score}
                       for items in empathy.values() for i in items])
fig, ax = plt.subplots(figsize=(6, 3))
for origin, group in scores.groupby("origin"):
    ax.hist(group["score"], bins=20, alpha=0.6, label=origin)
ax.hist(scores["reference"].drop_duplicates(), bins=20, alpha=0.8, label="reference", histtype="step", lw=2)
ax.set_xlabel("rubric score (expected, 1-5)"), ax.set_ylabel("replies"), ax.legend()
fig.tight_layout()
fig.savefig(stage.data_dir(cfg, "empathy") / "scores.png", dpi=120)

# %% [markdown]
# ## Human-in-the-loop check

# %%
empathy, hitl_report = stage.human_check(cfg, scenarios, empathy)
pd.Series(hitl_report, dtype=object).to_frame("value")

# %%
print({split: len(items) for split, items in {**{f"humanlike/{k}": v for k, v in humanlike.items()},
                                              **{f"empathy/{k}": v for k, v in empathy.items()}}.items()})
