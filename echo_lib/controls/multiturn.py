"""The multi-turn RL positive control: the epm variant's trainer on a per-turn rule the judge can see.

The epm variant (echo_lib.policy.multiturn) rewards each companion turn by the EPM progress the judge saw
after it. When that reward stays flat, either the judge gives no usable signal or the multi-turn code (the
rollouts through the sandbox, the token mask, returns, advantages, the update) cannot learn. This control
takes the second out of the question: the same `train_in_sandbox`, the same sandbox loop with the same
Actor, on a rule that names the user's feeling,

    names_feeling = 1 if the companion's turn names a feeling (sad, hurt, lonely, ...), else 0,

which the base meets in about a quarter of its turns, so the groups have a spread from the first step. The
rule counts any feeling word: the control shows the trainer meets a per-turn rule, not that the rule is
empathy (the policy learned to open with "I'm glad"; params.MultiTurnControlParams has the run). It passes when the mean
per-turn reward of the last quarter of the steps exceeds that of the first quarter by at least 0.3 (the
stage-02 GRPO control's bar; echo_lib.controls.stage.THRESHOLDS).
"""
from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

from echo_lib.controls.grpo import quarter_means
from echo_lib.controls.params import MultiTurnControlParams
from echo_lib.epm.params import EPMParams
from echo_lib.policy.params import MultiTurnRL, PolicyParams
from echo_lib.rewards.params import LoraParams
from echo_lib.sandbox.loop import CaseState
from echo_lib.sandbox.params import SandboxRunParams

FEELINGS = ("sad", "sadness", "hurt", "hurts", "hurting", "angry", "anger", "mad", "frustrated", "frustrating",
            "frustration", "lonely", "alone", "scared", "afraid", "fear", "anxious", "anxiety", "worried", "worry",
            "stressed", "stress", "upset", "disappointed", "disappointing", "overwhelmed", "overwhelming", "tired",
            "exhausted", "ashamed", "shame", "embarrassed", "guilty", "jealous", "hopeless", "heartbroken",
            "nervous", "confused", "down", "low", "painful", "pain", "grief", "lost", "stuck", "helpless",
            "happy", "glad", "proud", "excited", "relieved", "grateful", "hopeful", "calm", "joy", "love")
_WORD = re.compile(r"[a-z']+")


def names_feeling(reply: str) -> float:
    """1.0 if the reply names a feeling (a word of FEELINGS), else 0.0."""
    return float(any(w in FEELINGS for w in _WORD.findall(reply.lower())))


def feeling_rewards(case: CaseState) -> list[float]:
    """The control's reward of each companion turn of a case (a TurnReward)."""
    return [names_feeling(ex.reply) for ex in case.history if ex.reply]


def policy_params(params: MultiTurnControlParams) -> PolicyParams:
    """PolicyParams with the control's multi-turn and LoRA settings (everything else the defaults)."""
    mt = MultiTurnRL(steps=params.steps, cases_per_step=params.cases_per_step,
                     dialogues_per_case=params.dialogues_per_case, max_turns=params.max_turns, gamma=params.gamma,
                     turn_weight=params.turn_weight, learning_rate=params.learning_rate, beta=0.0,
                     micro_batch=params.micro_batch, temperature=params.temperature, top_p=params.top_p,
                     max_new_tokens=params.max_new_tokens)
    lora = dataclasses.replace(LoraParams(), r=params.lora_r, alpha=params.lora_alpha, top_layers=params.lora_top_layers)
    return dataclasses.replace(PolicyParams(), multiturn=mt, lora=lora)


def control_run(run: SandboxRunParams, params: MultiTurnControlParams) -> SandboxRunParams:
    """The sandbox settings the control plays with: the run's, with the control's history format and Actor length."""
    actor = dataclasses.replace(run.actor, max_new_tokens=params.actor_max_new_tokens)
    return dataclasses.replace(run, test_history=params.history_format, actor=actor)


def multiturn_control(base_dir: str | Path, roles, cases, run: SandboxRunParams, epm_params: EPMParams,
                      params: MultiTurnControlParams = MultiTurnControlParams(), out_dir: str | Path = "multiturn",
                      seed: int = 0) -> dict:
    """Run the control on `cases` (Scenarios) with the sandbox `roles` (policy.multiturn.SandboxRoles; their
    companion prompt is replaced by the control's); writes out_dir/adapter/ and out_dir/train_log.csv.
    Returns the per-step rewards, the first and last quarter's means, the rise, steps, seconds, peak RSS."""
    import torch

    from echo_lib.policy.multiturn import train_in_sandbox
    t0 = time.perf_counter()
    roles = dataclasses.replace(roles, companion_prompt=params.system_prompt)
    # the rule needs no rubric: the Judge rates after the last turn only (K beyond it), P0 still sets up the EPM
    epm_params = dataclasses.replace(epm_params, K=params.max_turns + 1)
    threads = torch.get_num_threads()
    if params.torch_threads:
        torch.set_num_threads(params.torch_threads)
    try:
        result = train_in_sandbox(base_dir, list(cases)[:params.cases] if params.cases else list(cases), roles,
                                  feeling_rewards, policy_params(params), control_run(run, params), epm_params,
                                  out_dir, seed=seed)
    finally:
        torch.set_num_threads(threads)
    rewards = [float(r["reward"]) for r in result.rows]
    first, last = quarter_means(rewards)
    return {"reward_first_quarter": first, "reward_last_quarter": last, "rise": last - first, "steps": result.steps,
            "seconds": time.perf_counter() - t0, "rewards": rewards, "peak_rss_mb": result.peak_rss_mb}
