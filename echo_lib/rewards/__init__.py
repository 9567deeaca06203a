"""Generative reward models (METHOD.md 3): they reason about the user first, then judge.

    prompts      empathy_prompt / humanlike_prompt / scalar_prompt: reasoning first, verdict last
    verdict      parse (strict), verdict_value: better/tie/worse -> +1/0/-1, human/machine -> 1/0
    profile      the Profile / Checks lines the reasoning states, rendered and parsed
    process      process reward: stated profile vs gold profile, per field, mean in [0, 1]
    targets      templated reasoning-plus-verdict SFT targets (tiny scale)
    rm_rewards   GRPO rewards for training a reward model: correct, process, format, consistency
    train        TRL SFT warm start then GRPO, one LoRA adapter
    evaluate     accuracy, position bias, length bias, parse failures (base vs trained)
    reward_fn    a trained reward model as a TRL reward function for the policy stage
    stage        stage 02 for one kind: data -> adapter, train_log.csv, metrics.json/.csv
    params       RewardModelParams, the `reward_models:` block of the run config

Nothing here imports torch or TRL until a model is trained or loaded.
"""
from echo_lib.rewards.params import KINDS, RewardModelParams
from echo_lib.rewards.process import checks_reward, profile_reward
from echo_lib.rewards.prompts import empathy_prompt, humanlike_prompt, scalar_prompt
from echo_lib.rewards.reward_fn import RewardModelFn, load_reward_fn
from echo_lib.rewards.rm_rewards import rm_reward_funcs
from echo_lib.rewards.verdict import Parsed, flip, format_verdict, parse, verdict_value

__all__ = ["KINDS", "Parsed", "RewardModelFn", "RewardModelParams", "checks_reward", "empathy_prompt", "flip",
           "format_verdict", "humanlike_prompt", "load_reward_fn", "parse", "profile_reward", "rm_reward_funcs",
           "scalar_prompt", "verdict_value"]
