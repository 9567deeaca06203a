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
# **At the tiny scale** the policy and the reward models are SmolLM2-135M with LoRA, a dozen GRPO
# steps on a CPU. The reward models of stage 02 are weak judges at this size, so read the curves for
# what the pipeline does (rewards by domain, the filter, the monitors), and the win rates and the
# sandbox comparison of stage 05 as measured, including where the trained policy is not better.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when run by hand
config = {}                            # Snakemake passes the validated run config here
variant = "echo"                       # echo | scalar

# %%
from echo_lib.notebook import start
from echo_lib.upstream import require

cfg = start(config or config_path)
require(cfg, "policy", variant=variant)   # stage 02's reward models; a missing file names the snakemake command

# %%
import pandas as pd

from echo_lib.policy import stage
from echo_lib.policy.rewards import ROUTES

paths = stage.policy_paths(cfg, variant)
print(f"variant {variant}: policy {cfg.roles.policy} ({cfg.models[cfg.roles.policy].id}) + LoRA -> {paths.dir}")
print("reward model per domain:", ROUTES[variant])

# %% [markdown]
# ## The RL data, and the hard-prompt filter
# Prompts are drawn from the train splits of stage 01 with the configured domain mix. The best-of-N
# filter then samples a few replies per prompt from the initial policy and asks this variant's own
# reward models about each (`hard_filter.per_variant`; off, both variants use the echo rewards' choice);
# a prompt whose replies all win or all lose gives GRPO nothing to compare, so it is dropped
# (filter.json lists every group's rewards). The scalar reward is a continuous score, so it seldom
# drops an empathy prompt. A reward-model output that does not parse (think_first only; verdict-first
# reward models choose, and always answer) earns the middle of the kind's range, neither a win nor a loss.

# %%
prompts, heldout, data_report = stage.rl_data(cfg, variant)
print("available:", data_report["available"], " drawn:", data_report["drawn"], " kept:", data_report["kept"])
if "hard_filter" in data_report:
    hf = data_report["hard_filter"]
    print(f"hard filter: kept {hf['kept']}, dropped {hf['dropped_all_win']} all-win and "
          f"{hf['dropped_all_lose']} all-lose prompts")
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
# training) and an independent judge (not used in training) compare the two replies in both orders.
# A win counts 1, a tie 0.5.

# %%
summary, rows = stage.winrate(cfg, variant, heldout)
record = stage.write_outputs(cfg, variant, trained, data_report, summary, rows)
if not signal["has_signal"]:
    print(signal["verdict"])
pd.DataFrame(summary).round(3)

# %%
pd.DataFrame(rows)[["prompt_id", "judge", "order", "score", "variant_reply", "base_reply"]].head(6)

# %% [markdown]
# ### Reward hacking?
# A hacked reward rises while what it was meant to measure does not: here, the training reward's
# second half of the steps against its first, beside the held-out win rate of the independent judge
# (which never trained the policy), and the reply length and repetition that a hacked reward drags
# along (each flagged when it grows by more than a fifth). The scalar ablation is where the paper
# expects this; the panels show each variant trained so far.

# %%
from echo_lib.report.rl_figures import HACKING_CURVES, rl_curves

print(record["reward_hacking"]["verdict"])
logs = {v: pd.read_csv(stage.policy_paths(cfg, v).train_log) for v in cfg.policy.variants
        if stage.policy_paths(cfg, v).train_log.exists()}
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
