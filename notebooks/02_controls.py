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
# # 02 · Positive controls: can the training code learn?
#
# Before reading a reward model's accuracy, or a policy's reward curve, we need to know that the
# code that trains them *can* learn when the data allows it. Otherwise a reward model at chance
# could be a hard task or a bug, and nobody could tell which. This stage trains two controls on
# tasks whose answer is in plain sight, through exactly the code of stages 02 and 03:
#
# * **GenRM control.** Short chat messages are "human" exactly when they contain a marker phrase;
#   otherwise they come from the same templates. A context-free Humanlike reward model is trained
#   and scored with stage 02's functions (same prompt, target, decision, evaluation). It must reach
#   at least 0.95 held-out accuracy. Its **label-shuffle twin** (the same messages, the labels
#   permuted) must stay at chance: that shows the evaluation cannot be passed by a constant verdict
#   or a leak between the splits.
# * **GRPO control.** The policy is trained with stage 03's GRPO code against a rule reward: 1 when
#   the reply ends with a question, else 0. The mean reward must rise by at least 0.3 from the first
#   to the last quarter of training.
#
# The tests assert both thresholds on the ci run, so a change that breaks learning fails CI.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require

cfg = start(config or config_path, stage="controls")
require(cfg, "controls")   # stage 00's model; a missing file names the snakemake command

# %%
import pandas as pd

from echo_lib.controls import stage

paths = stage.control_paths(cfg)
print(f"controls on {cfg.roles.reward_model} (reward model) and {cfg.roles.policy} (policy) -> {paths.dir}")

# %% [markdown]
# ## The GenRM control and its label-shuffle twin

# %%
genrm = stage.run_genrm(cfg)
pd.DataFrame({k: genrm[k] for k in ("genrm", "genrm_shuffled")}).T

# %% [markdown]
# ## The GRPO control: a reward the policy can reach

# %%
grpo = stage.run_grpo(cfg)
{k: grpo[k] for k in ("reward_first_quarter", "reward_last_quarter", "steps", "seconds")}

# %% [markdown]
# ## The multi-turn control: per-turn rewards inside the sandbox
# When the epm variant is trained (`policy.variants`), or `controls.multiturn.enabled` asks, its trainer
# (echo_lib.policy.multiturn: rollouts through the sandbox loop, the policy's own tokens, discounted returns,
# mixed advantages) learns a per-turn rule against the sandbox's Actor: 1 when the companion's turn names a
# feeling. Otherwise this step is skipped.

# %%
multiturn = stage.run_multiturn(cfg) if stage.multiturn_wanted(cfg) else None
if multiturn:
    print({k: multiturn[k] for k in ("reward_first_quarter", "reward_last_quarter", "steps", "seconds")})
else:
    print("multi-turn control not asked for (no epm variant, controls.multiturn.enabled false)")

# %%
record = stage.write_controls(cfg, genrm, grpo, multiturn)
fig = stage.controls_figure(record)
fig.savefig(paths.figure, dpi=150, bbox_inches="tight")
print(stage.verdict_lines(record))
