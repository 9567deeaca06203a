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
# # 03 · Affective RL of the policy
#
# Echo-N1 is its base model after RL against the two generative reward models of stage 02
# (METHOD.md 4). The rewards are **routed by the domain of the data**:
#
# * **empathy** prompts (a dialogue with a distressed user, and the reference reply the rubric
#   scored 3): the Empathy reward model compares the policy's reply with that reference,
#   better / tie / worse → **+1 / 0 / −1**. The anchor turns a noisy absolute judgement into a
#   relative one;
# * **chit-chat** prompts (a real human chat): the Humanlike reward model asks whether the reply
#   reads as the person's own, human / machine → **1 / 0**.
#
# The paper's central stability claim is that these **discrete, reference-anchored** rewards keep RL
# from collapsing where a **scalar** reward is hacked ("beautiful nonsense": ornate wording that does
# nothing for the user, METHOD.md 3.5). This notebook trains one variant per run:
# `variant = "echo"` (the method) or `variant = "scalar"` (the ablation: the 1-10 scalar reward
# model on every prompt, no anchor), with the same prompts, seeds and budget.
#
# What is not known about the paper's RL (algorithm, KL, group size, learning rate, steps) is filled
# with the defaults of METHOD.md 4.2: GRPO with group-normalised advantages, PPO-clip 0.2 / 0.28, a
# small KL to the initial policy, a format penalty for role prefixes and think tags, and single-turn
# optimisation: the prompt is a multi-turn history shown exactly as the sandbox shows it to a tested
# model, and only the next reply is sampled and trained.
#
# **At the tiny scale** the policy and the reward models are SmolLM2-135M with LoRA, 16 GRPO steps on
# a CPU, on empathy prompts only (the Humanlike reward model judged every sampled chit-chat reply
# "machine", so that domain gave no signal). The reward models of stage 02 are weak judges at this
# size: the anchor is the policy's own middle-ranked reply and the verdict is read in both orders
# (METHOD.md 4.4). Read the win rates and the sandbox comparison of stage 05 as measured, including
# where the trained policy is not better.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
variant = "echo"                       # echo | scalar, or another RL seed of one: echo-s1 (policy.seeds)

# %%
import time

from echo_lib.notebook import start
from echo_lib.upstream import require

started = time.perf_counter()   # the stage's own time, a target of the tiny scale (<= 10 min per variant)
cfg = start(config or config_path, stage="policy")
require(cfg, "policy", variant=variant)   # stage 02's reward models; a missing file names the snakemake command

# %%
import pandas as pd

from echo_lib.policy import stage
from echo_lib.policy.rewards import ROUTES

paths = stage.policy_paths(cfg, variant)
arm, rl_seed = stage.trained_model(cfg, variant)   # the variant's rewards, and its RL seed (run seed + offset)
print(f"{variant}: variant {arm}, RL seed {cfg.seed + rl_seed}: policy {cfg.roles.policy} "
      f"({cfg.models[cfg.roles.policy].id}) + LoRA -> {paths.dir}")
print("reward model per domain:", ROUTES[arm])

# %% [markdown]
# ## The RL data, the anchor, and the hard-prompt filter
# Prompts are drawn from the train splits of stage 01 with the configured domain mix. Stage 01 has one
# dialogue per persona; with `policy.openings` > 1 each persona also opens the chat with the first
# messages its scenario file holds (`openings:`, authored in the person's words from other parts of the
# story), so RL has more to train on and the win rate more held-out prompts: a held-out persona is never
# trained on.
#
# **The anchor.** The paper judges a reply against a reference scored 3 of 5, a middling reply for the
# policy. Stage 01's references are beyond what the 135M policy writes when prompted as the sandbox
# prompts it, so every sample lost and GRPO had nothing to compare. With `policy.anchor: policy_median`
# (the tiny default; the paper config keeps `reference`) each empathy prompt's anchor is the initial
# policy's sample that the Empathy reward model ranks in the middle of its samples (a round robin in both
# orders): the reward is still the discrete better / tie / worse against it.
#
# The best-of-N filter then drops a prompt whose sampled replies all win or all lose against the anchor
# (chit-chat: all judged human, or all machine), since GRPO learns nothing from a group that ties
# (filter.json lists every group's rewards and every anchor's choice). The scalar variant filters with its
# own 1-10 reward, a continuous score that seldom drops a prompt.

# %%
prompts, heldout, data_report = stage.rl_data(cfg, arm)   # the same prompts for every RL seed of the variant
if "openings" in data_report:
    print("authored openings:", data_report["openings"])
print("available:", data_report["available"], " drawn:", data_report["drawn"], " kept:", data_report["kept"])
if "hard_filter" in data_report:
    hf = data_report["hard_filter"]
    print(f"hard filter: kept {hf['kept']}, dropped {hf['dropped_all_win']} all-win and "
          f"{hf['dropped_all_lose']} all-lose prompts; policy-level anchors chosen for {len(hf['anchors'])}")
print(f"{len(heldout)} held-out empathy prompts for the win rate")
chat = stage.chats_for(cfg, prompts[:1])[0]
print("\n--- one policy prompt ---\n" + chat[-1]["content"][:1000])

# %% [markdown]
# ## GRPO
# Each step samples `num_generations` replies for each of `prompts_per_step` prompts, scores them with
# the routed rewards, normalises the rewards within each prompt's group and takes one clipped
# policy-gradient step on the LoRA adapter. The monitors beside the reward are the reward-hacking
# signals of METHOD.md 3.5: length, repetition across the group's replies, ornate or bracketed
# actions, advice lists, format violations, and the verdict mix (win, tie, unparsed). The share of
# groups whose replies all got the same reward (`frac_reward_zero_std`) is the share of the batch
# GRPO learns nothing from: a discrete verdict with a weak judge ties often.

# %%
trained = stage.train(cfg, variant, prompts)
log = pd.read_csv(paths.train_log)
print(f"{trained.steps} steps in {trained.seconds:.0f} s ({trained.seconds / max(trained.steps, 1):.1f} s/step), "
      f"peak RSS {trained.peak_rss_mb:.0f} MB; groups with tied rewards: "
      f"{log.frac_reward_zero_std.mean():.2f} of each step's groups on average")
log.round(3)

# %% [markdown]
# ### Did RL have a learning signal?
# Per domain, the share of each step's groups whose *parsed* verdicts differ (`signal_<domain>`; a
# spread that only a parse failure's reward makes is not signal). Below 50 % in every domain, GRPO had
# too little to learn from, and no win-rate claim is made for this variant.

# %%
signal = stage.learning_signal(trained.rows)
print(f"{signal['verdict']} (share of groups with a parsed reward spread: {signal['signal_by_domain']}, "
      f"gate {signal['gate']})")

# %% [markdown]
# ## Win rate against the base on held-out prompts
# The base and the trained policy answer the same held-out prompts; the Empathy reward model (used in
# training) and an independent judge (not used in training) compare the two replies, each in both orders.

# %%
summary, rows, greedy = stage.winrate(cfg, variant, heldout)
record = stage.write_outputs(cfg, variant, trained, data_report, summary, rows, greedy,
                             time.perf_counter() - started)
if not signal["has_signal"]:
    print(signal["verdict"])
pd.DataFrame(summary).round(3)

# %%
pd.DataFrame(rows)[["prompt_id", "judge", "score", "first", "second", "consistent", "variant_reply",
                   "base_reply"]].head(6)

# %% [markdown]
# **How a pair is scored.** Each judge sees the two replies twice, once with the trained policy's reply
# first and once with the base's. A prompt counts as a win only when both orders say the trained policy is
# better, as a loss only when both say it is worse, and as a tie otherwise; the win rate is
# (wins + ½ ties) / n with a 95 % Wilson score interval (continuity-corrected) over prompts. A judge that
# simply prefers one position says "win" in one order and "loss" in the other, so its preference becomes a
# tie, not a result. The **position consistency** is the share of prompts whose two orders agree: low, and
# most of what the judge said was about the position, not the replies. Below 10 scored prompts
# (stats.MIN_N) the interval is not shown (`ci_degenerate`, `interval_note`: n too small) and no verdict is
# read from it; every prompt a tie is half a win each, an interval around 0.5, not a point. The Empathy
# RM's win rate carries the target; the **independent judge** has none. It never trained the policy, so it
# is the check on the RM: an RM win the independent judge does not share is a sign that the policy learned
# the RM, not the task.
#
# ## Targets
# The tiny scale's targets (issue 33) for every variant trained so far in this run.

# %%
import json

from IPython.display import display

from echo_lib.report.rl_figures import HACKING_CURVES, rl_curves, rl_progress_figure, sample_replies, targets_table

single_turn = stage.single_turn_models(cfg)   # the epm variant's own notebook shows it (03_policy_multiturn)
metrics = {v: json.loads(stage.policy_paths(cfg, v).metrics.read_text()) for v in single_turn
           if stage.policy_paths(cfg, v).metrics.exists()}
targets_table(metrics).round(3)

# %% [markdown]
# ## Did RL move the policy?
# Per variant: the training reward per step with its rolling mean, and (dashed, right axis) the share of
# groups whose rewards all tie, from which GRPO learns nothing; the KL to the base; and the held-out win
# rates against the base with their 95 % intervals, n and position consistency (a hollow marker: a
# degenerate interval).

# %%
logs = {v: pd.read_csv(stage.policy_paths(cfg, v).train_log) for v in single_turn
        if stage.policy_paths(cfg, v).train_log.exists()}
fig = rl_progress_figure(logs, metrics)
fig.savefig(paths.dir / "progress.png", dpi=120, bbox_inches="tight")

# %% [markdown]
# ### Replies before and after RL
# Three held-out prompts, the base's greedy reply and the trained policy's (prompts where the two differ).

# %%
print(f"greedy reply changed on {record['greedy']['changed']} of {record['greedy']['n']} held-out prompts")
with pd.option_context("display.max_colwidth", None):
    display(sample_replies(record))

# %% [markdown]
# ### Reward hacking?
# A hacked reward rises while what it was meant to measure does not: here, the training reward's
# second half of the steps against its first, beside the held-out win rate of the independent judge
# (which never trained the policy), and the reply length and repetition that a hacked reward drags
# along (each flagged when it grows by more than a fifth). The scalar ablation is where the paper
# expects this; the panels show each variant trained so far.

# %%
print(record["reward_hacking"]["verdict"])
fig = rl_curves(logs, HACKING_CURVES)
fig.savefig(paths.dir / "hacking.png", dpi=120, bbox_inches="tight")

# %% [markdown]
# ## Training curves
# This variant's curves beside those of any other variant already trained in this run (stage 07 draws
# the same figure for the paper once both are done). The two variants' rewards come from different
# reward models, so compare the shapes of their reward curves, and the monitors directly.

# %%
fig = rl_curves(logs)
fig.savefig(paths.dir / "training.png", dpi=120, bbox_inches="tight")
