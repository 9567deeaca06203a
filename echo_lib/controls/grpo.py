"""The policy GRPO positive control: stage 03's trainer on a reward the base can learn quickly.

Stage 03 (echo_lib.policy) trains the policy with rewards from trained reward models; when its reward
does not rise, either the reward models give no usable signal or the training code cannot learn. This
control takes the second out of the question: the same `train_policy` (TRL GRPO, LoRA, the same chat
format, the same RolloutLog and monitors) on a rule reward,

    ends_with_question = 1 if the reply, stripped, ends with "?", else 0,

which the base model already meets now and then (companions often ask back), so the group-relative
advantage has a spread from the first step. The control passes when the mean reward of the last quarter
of the steps exceeds that of the first quarter by at least 0.3 (tests/test_controls.py).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Sequence

from echo_lib.controls.params import GRPOControlParams
from echo_lib.policy.data import RLPrompt, policy_chat
from echo_lib.policy.params import PolicyGRPO, PolicyParams
from echo_lib.policy.rewards import Judged, RolloutLog
from echo_lib.rewards.params import LoraParams
from echo_lib.rewards.rm_rewards import completion_text

# short messages of a user who is having a hard time; the policy replies as the companion
CONTROL_PROMPTS = [
    "I failed my driving test again today and I feel so stupid.",
    "My best friend hasn't answered my messages in a week.",
    "I got passed over for the promotion I worked all year for.",
    "My dog died yesterday and the house feels empty.",
    "I can't sleep because I keep worrying about money.",
    "My parents keep comparing me to my older sister.",
    "I moved to a new city and I don't know anyone here.",
    "I think my partner is losing interest in me.",
    "I messed up my presentation in front of the whole team.",
    "Everyone at the party ignored me and I went home early.",
    "My exam results came back and they are worse than I expected.",
    "I feel tired all the time and nothing seems fun anymore.",
]


class EndsWithQuestion:
    """The control's TRL reward function: 1.0 if the reply ends with a question mark, else 0.0. Each reply
    is recorded in the RolloutLog (verdict "question" or "statement") so the monitors see it."""
    __name__ = "ends_with_question"

    def __init__(self, log: RolloutLog | None = None):
        self.log = log

    def __call__(self, completions, prompt_id=None, domain=None, **_) -> list[float]:
        out = []
        for i, c in enumerate(completions):
            reply = completion_text(c)
            r = float(reply.strip().endswith("?"))
            out.append(r)
            if self.log is not None:
                self.log.items.append(Judged(prompt_id[i] if prompt_id is not None else str(i),
                                             domain[i] if domain is not None else "empathy", reply, "rule",
                                             "question" if r else "statement", r))
        return out


def control_prompts(n: int) -> list[RLPrompt]:
    if not 1 <= n <= len(CONTROL_PROMPTS):
        raise ValueError(f"the control has {len(CONTROL_PROMPTS)} prompts; prompts={n} is out of range")
    # domain "empathy": the monitors file the rows under reward_empathy; no reference (no RM reads it)
    return [RLPrompt(f"ctl-{i:02d}", "empathy", [{"role": "user", "content": m}])
            for i, m in enumerate(CONTROL_PROMPTS[:n])]


def policy_params(params: GRPOControlParams) -> PolicyParams:
    """Stage 03's PolicyParams with the control's GRPO and LoRA settings (everything else the defaults)."""
    g = dataclasses.replace(PolicyGRPO(), steps=params.steps, learning_rate=params.learning_rate,
                            num_generations=params.num_generations, prompts_per_step=params.prompts_per_step,
                            gradient_accumulation_steps=1, max_completion_length=params.max_completion_length,
                            temperature=params.temperature, top_p=params.top_p, beta=params.beta,
                            format_penalty=0.0, use_vllm=False)
    lora = dataclasses.replace(LoraParams(), r=params.lora_r, alpha=params.lora_alpha)
    return dataclasses.replace(PolicyParams(), grpo=g, lora=lora, system_prompt=params.system_prompt,
                               max_prompts=params.prompts)


def quarter_means(rewards: Sequence[float]) -> tuple[float, float]:
    """(mean of the first quarter, mean of the last quarter) of the per-step rewards (a quarter is at least
    one step; with fewer than four steps the quarters overlap)."""
    if not rewards:
        raise ValueError("no steps were logged")
    q = max(1, len(rewards) // 4)
    return sum(rewards[:q]) / q, sum(rewards[-q:]) / q


def grpo_control(base_dir: str | Path, params: GRPOControlParams = GRPOControlParams(),
                 out_dir: str | Path = "grpo_control", seed: int = 0) -> dict:
    """Run the control: GRPO of the policy at `base_dir` on ends_with_question; writes out_dir/adapter/ and
    out_dir/train_log.csv (train_policy's outputs). Returns the per-step rewards, the mean rewards of the
    first and the last quarter of the steps, their difference (rise), steps, seconds and peak RSS."""
    import torch

    from echo_lib.policy.train import grpo_rows, train_policy
    t0 = time.perf_counter()
    pp = policy_params(params)
    prompts = control_prompts(params.prompts)
    chats = [policy_chat(p.context, params.system_prompt, params.history_format) for p in prompts]
    rollouts = RolloutLog()
    threads = torch.get_num_threads()
    if params.torch_threads:   # on a shared CPU, 2 threads competing with another job ran 2-3x slower than 1
        torch.set_num_threads(params.torch_threads)
    try:
        result = train_policy(base_dir, grpo_rows(prompts, chats), [EndsWithQuestion(rollouts)], rollouts, pp,
                              out_dir, seed=seed)
    finally:
        torch.set_num_threads(threads)
    rewards = [float(r["reward"]) for r in result.rows if r.get("reward") is not None]
    first, last = quarter_means(rewards)
    return {"reward_first_quarter": first, "reward_last_quarter": last, "rise": last - first,
            "steps": result.steps, "seconds": time.perf_counter() - t0, "rewards": rewards,
            "peak_rss_mb": result.peak_rss_mb}
