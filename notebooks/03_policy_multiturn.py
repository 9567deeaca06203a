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
# # 03b · Beyond Echo-N1: multi-turn RL inside the sandbox
#
# Echo-N1 trains single replies and only *evaluates* in the multi-agent sandbox. The same team's follow-up
# (MAPO, renamed MICA, arXiv 2603.06194) trains where EMPA evaluates: the policy plays the companion against
# the sandbox's simulated user, and each of its turns is rewarded by how far the user's EPM state moved toward
# the target after it. This notebook trains that variant, `epm` (docs/METHOD.md 4.5); it is opt-in
# (`--configfile config/default.yaml config/multiturn.yaml`).
#
# One step of training:
#
# * **rollouts**: the policy (a LoRA adapter being trained) plays `dialogues_per_case` dialogues of each of
#   `cases_per_step` cases, through the sandbox loop of stage 04 itself (Actor, Judge, Director), each
#   dialogue with its own sampling seeds;
# * **the per-turn reward**: after each companion turn the judge rates the window and the EPM engine moves
#   the user's state $P_t$; the turn's reward is $r_t = (d_{t-1} - d_t)/\max(|P_0|, 1)$, the distance $d$ to
#   the target zone that the turn gained, per unit of the case's initial deficit;
# * **returns and advantages**: $G_t = \sum_{k \ge t} \gamma^{k-t} r_k$ (a turn is credited with what the later
#   turns gained), and an advantage that mixes normalisation within the case's group at the same turn index
#   with normalisation over the whole batch (MICA's mix; no critic);
# * **the update**: one policy-gradient step on the policy's own reply tokens only (the mask is tested token
#   by token: masks that trained the history made other multi-turn trainers collapse).
#
# MICA's settings beyond its abstract are unpublished: every value is a documented default
# (`policy.multiturn`, config/schema.yaml). It trains on the own cases of the persons in stage 01's empathy
# train split, whom the single-turn variants train on too: the held-out persons stay held out for every variant.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand (add config/multiturn.yaml's policy block)
config = {}                            # Snakemake passes the validated run config here
variant = "epm"                        # the epm variant, or another RL seed of it: epm-s1 (policy.seeds)

# %%
import time

from echo_lib.notebook import start
from echo_lib.upstream import require

started = time.perf_counter()
cfg = start(config or config_path, stage="policy_multiturn")
require(cfg, "policy_multiturn", variant=variant)   # the judge and the Empathy RM; a missing file names its command

# %%
import json

import pandas as pd
from IPython.display import display

from echo_lib.policy import epm_stage

paths = epm_stage.policy_paths(cfg, variant)
mt = cfg.policy.multiturn
cases = epm_stage.training_cases(cfg)
print(f"{variant}: policy {cfg.roles.policy} + LoRA -> {paths.dir}")
print(f"{mt.steps} steps x {mt.cases_per_step} cases x {mt.dialogues_per_case} dialogues of at most "
      f"{mt.max_turns} turns, on {len(cases)} own cases; judge {cfg.roles.judge}, Actor {cfg.roles.actor}")

# %% [markdown]
# ## Training
# Each step's row of `train_log.csv` is written as the step ends, with the adapter and the optimizer's
# state, so a killed run resumes at its next step. `rollouts/step_NNN.jsonl` keeps every policy turn with
# its reward and advantage.

# %%
record = epm_stage.run(cfg, variant)
r = record["reward"]
print(f"{record['steps']} steps, {record['seconds_per_step']:.0f} s a step; this run {record['seconds']:.0f} s, "
      f"peak RSS {record['peak_rss_mb']} MB" + (f"; resumed at step {record['resumed_at']}" if record["resumed_at"] else ""))
print(f"per-turn reward, first quarter of the steps {r['first_quarter']:.3f} -> last quarter {r['last_quarter']:.3f}: "
      f"difference {r['rise']:+.3f}, 95 % CI {r['rise_ci']} (Welch, over dialogues {r['dialogues']})")
pd.read_csv(paths.train_log).round(3)

# %% [markdown]
# ## Did the policy's turns earn more EPM progress?
# The per-turn reward per step (band: one standard deviation over the step's turns; black bars: the means of
# the first and the last quarter), the return, the loss, the KL to the base, the reply length, and how many
# dialogues the EPM ended before `max_turns`. An interval of the rise that spans 0 is no rise at this scale.

# %%
from IPython.display import Image

Image(filename=str(paths.figure))

# %% [markdown]
# ### What the policy said
# The last step's turns of one case, with the reward and advantage each was trained on.

# %%
last = paths.dir / "rollouts" / f"step_{record['steps']:03d}.jsonl"
turns = pd.DataFrame([json.loads(x) for x in last.read_text().splitlines() if x.strip()])
with pd.option_context("display.max_colwidth", 120):
    display(turns[turns.case == turns.case.iloc[0]][["dialogue", "turn", "user", "reply", "reward", "advantage"]])

# %% [markdown]
# ## Win rate against the base on held-out prompts
# The same comparison as the single-turn variants (notebook 03): the base and the trained policy answer the
# held-out prompts; the Empathy reward model and an independent judge compare the replies in both orders. The
# epm variant never saw the Empathy reward model, so here both judges are independent of its training.

# %%
print(f"greedy reply changed on {record['greedy']['changed']} of {record['greedy']['n']} held-out prompts")
pd.DataFrame(record["winrate"]).round(3)
