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
# instantiated for one user's profile into *theorems*: what this person needs from a reply. Each item
# is a candidate reply to a persona's opening message, labelled *better / tie / worse* against a
# **reference** reply that anchors the reward later. Every item keeps the gold profile for the
# process reward. `data.empathy.method` says how the candidates are made and labelled:
#
# - `critique_rewrite` (the paper's method, `config/paper.yaml`): the base model writes several
#   replies; a rubric judge scores them 1-5 against the profile and theorems (from its probabilities
#   over the digits, no text parsing); the reply scored closest to 3 becomes the reference; replies at
#   3 or below are critiqued and rewritten, and the labels come from the score differences.
# - `contrast` (the tiny scale's default): the order is **known by construction**. At this scale the
#   rubric judge is the 135M base model, and its scores are so compressed that the labels they give are
#   noise: no rule on the reply text predicts them, so a reward model could learn nothing from them
#   and stage 02 could not tell whether it learns. Instead the reference is the base model's reply
#   with the plain companion prompt (score 3); *good* candidates are the base model prompted with the
#   persona's theorems (name the feeling and situation, validate before advice, no slogans, one gentle
#   question: better, 4); *poor* candidates are of named failure kinds (worse): `dismissive` (1),
#   `platitude` (2), `blaming` (1), `advice_dump` (2) from the phrase bank `data/contrasts.yaml`,
#   whose entries are split between train and test so the held-out poor replies are phrasings never
#   seen in training, and `off_topic` (1), a good reply written for another persona of the same split
#   (fluent and kind, but about something else). Good and poor are equally many, with no ties.
#
# **Human in the loop.** Annotators check that the derived profiles and strategies match the
# personas as intended; items of rejected personas are dropped. The shipped verdicts are an example
# of the format (see `data/hitl/README.md` for a real round).
#
# At the tiny scale the base model *and* the judge are SmolLM2-135M, so expect weak replies and a
# compressed, noisy judge (hence the contrast construction): the pipeline is the method, the numbers
# are the tiny scale's.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when the notebook runs by hand
config = {}                            # Snakemake passes the validated run config here

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require

cfg = start(config or config_path, stage="data")
require(cfg, "data")   # stage 00's model; a missing file names the snakemake command
print(f"run {cfg.run_name!r}: generator {cfg.roles.policy!r}, rubric judge {cfg.roles.judge!r}")

# %% [markdown]
# ## Humanlike items

# %%
import pandas as pd

from echo_lib.models import load_llm
from echo_lib.synthesis import stage

generator = load_llm(cfg, cfg.roles.policy)
humanlike = stage.humanlike_data(cfg, generator)
pd.DataFrame(stage.summary(humanlike, ("label", "kind"))).pivot_table(
    index=["field", "value"], columns="split", values="items", fill_value=0)

# %%
pd.DataFrame([i.to_json() for i in humanlike["train"][:8]])[["kind", "label", "context", "reply"]]

# %% [markdown]
# ## Empathy preference items
# Personas are split into train and test, so no user's profile appears in both. The table counts the
# items by label and by origin (the candidate's kind: `good` and the poor kinds under `contrast`,
# `sample` and `rewrite` under `critique_rewrite`).

# %%
method = cfg.data.empathy.method
judge = None if method == "contrast" else (
    generator if cfg.roles.judge == cfg.roles.policy else load_llm(cfg, cfg.roles.judge))
scenarios = stage.empathy_scenarios(cfg)
empathy = stage.empathy_data(cfg, generator, judge, scenarios)
print(f"method {method!r}: {len(scenarios)} personas")
pd.DataFrame(stage.summary(empathy, ("label", "origin"))).pivot_table(
    index=["field", "value"], columns="split", values="items", fill_value=0)

# %%
pd.DataFrame([i.to_json() for i in empathy["train"][:10]])[["origin", "label", "candidate_score", "candidate"]]

# %% [markdown]
# The candidates' scores and where the references sit. Under `critique_rewrite` these are the rubric
# judge's scores (a compressed spread is what a small judge gives; the labels are relative to each
# reference); under `contrast` they are the construction scores (good 4, reference 3, platitude and
# advice_dump 2, dismissive, blaming and off_topic 1).

# %%
import matplotlib.pyplot as plt

scores = pd.DataFrame([{"origin": i.origin, "score": i.score, "reference": i.reference_score}
                       for items in empathy.values() for i in items])
fig, ax = plt.subplots(figsize=(6, 3))
for origin, group in scores.groupby("origin"):
    ax.hist(group["score"], bins=20, alpha=0.6, label=origin)
ax.hist(scores["reference"].drop_duplicates(), bins=20, alpha=0.8, label="reference", histtype="step", lw=2)
ax.set_xlabel("construction score (1-5)" if method == "contrast" else "rubric score (expected, 1-5)")
ax.set_ylabel("replies"), ax.legend()
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
