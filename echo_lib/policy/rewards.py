"""The policy's rewards, routed by data domain (METHOD.md 4.1-4.2), as TRL reward functions.

  variant echo    empathy prompts:  the Empathy GenRM's verdict on the reply against the prompt's
                                    reference reply (the score-3 anchor): better / tie / worse -> +1 / 0 / -1
                  chitchat prompts: the Humanlike GenRM's verdict on the reply: human / machine -> 1 / 0
  variant scalar  empathy prompts:  the scalar GenRM's 1-10 score, rescaled to [0, 1], no anchor (the ablation)
                  chitchat prompts: the same Humanlike GenRM as echo, so the arms differ only in the
                                    empathy reward the paper's ablation is about (like with like)
  both            a format penalty: -format_penalty when the reply carries a role prefix or a think tag

Each reward function returns None for the rows of the other domain, so TRL sums only the reward that
applies and logs each domain's mean under its own name (rewards/empathy/mean, rewards/chitchat/mean).
Every call is recorded in a `RolloutLog`, from which the trainer's callback computes the monitors.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from echo_lib.policy.monitors import format_violation
from echo_lib.rewards.rm_rewards import completion_text

# which reward-model kind judges which domain, per variant
ROUTES = {"echo": {"empathy": "empathy", "chitchat": "humanlike"},
          "scalar": {"empathy": "scalar", "chitchat": "humanlike"}}


@dataclass
class Judged:
    """One reply as a reward function saw it."""
    group: str                 # the prompt's id (the replies of one group share it)
    domain: str
    reply: str
    kind: str                  # the reward model that judged it
    verdict: str | None        # better/tie/worse, human/machine, "1".."10"; None: the RM's output did not parse
    reward: float


@dataclass
class RolloutLog:
    """What the reward functions judged since the last `take()` (one RL step)."""
    items: list[Judged] = field(default_factory=list)
    formats: list[bool] = field(default_factory=list)

    def take(self) -> tuple[list[Judged], list[bool]]:
        items, formats = self.items, self.formats
        self.items, self.formats = [], []
        return items, formats


def contexts(context: Sequence[Any]) -> list[list[dict]]:
    """The dataset's `context` column (JSON strings, so Arrow keeps them as they are) as message lists."""
    return [json.loads(c) if isinstance(c, str) else c for c in context]


class DomainReward:
    """The reward of one domain: a reward model (echo_lib.rewards.RewardModelFn) on that domain's rows."""

    def __init__(self, domain: str, rm, log: RolloutLog | None = None):
        self.domain, self.rm, self.log = domain, rm, log
        self.__name__ = domain        # TRL logs rewards/<domain>/mean

    def __call__(self, prompts, completions, domain, context, prompt_id, reference=None, **_) -> list[float | None]:
        rows = [i for i, d in enumerate(domain) if d == self.domain]
        out: list[float | None] = [None] * len(completions)
        if not rows:
            return out
        ctx = contexts(context)
        refs = None if reference is None else [reference[i] for i in rows]
        # the RM judges the dialogue itself (its own prompt format), not the policy's companion prompt
        rewards = self.rm([ctx[i] for i in rows], [completions[i] for i in rows], refs)
        for i, r, verdict in zip(rows, rewards, self.rm.last_answers):
            out[i] = r
            if self.log is not None:
                self.log.items.append(Judged(prompt_id[i], self.domain, completion_text(completions[i]),
                                             self.rm.kind, verdict, r))
        return out


class FormatPenalty:
    """-penalty for a reply with a role prefix or a think tag, else 0 (every row)."""
    __name__ = "format"

    def __init__(self, penalty: float, log: RolloutLog | None = None):
        self.penalty, self.log = penalty, log

    def __call__(self, completions, **_) -> list[float]:
        bad = [format_violation(completion_text(c)) for c in completions]
        if self.log is not None:
            self.log.formats += bad
        return [-self.penalty if b else 0.0 for b in bad]


def variant_rewards(variant: str, reward_models: dict[str, Any], format_penalty: float,
                    log: RolloutLog | None = None) -> list:
    """The TRL reward functions of a variant; `reward_models` maps an RM kind to its RewardModelFn."""
    if variant not in ROUTES:
        raise ValueError(f"unknown policy variant {variant!r}; use one of {', '.join(ROUTES)}")
    funcs = []
    for domain, kind in ROUTES[variant].items():
        if kind not in reward_models:
            raise ValueError(f"variant {variant!r} needs the {kind!r} reward model for its {domain} prompts")
        funcs.append(DomainReward(domain, reward_models[kind], log))
    if format_penalty > 0:
        funcs.append(FormatPenalty(format_penalty, log))
    return funcs


def needed_kinds(variant: str) -> list[str]:
    return sorted(set(ROUTES[variant].values()))


def step_stats(items: Sequence[Judged]) -> dict[str, float | None]:
    """Per-step reward statistics by domain: mean reward, win rate against the anchor, tie rate,
    humanlike pass rate, and the share of RM outputs that did not parse."""
    def mean(xs):
        return sum(xs) / len(xs) if xs else None
    emp = [j for j in items if j.domain == "empathy"]
    chat = [j for j in items if j.domain == "chitchat"]
    anchored = [j for j in emp if j.kind == "empathy"]
    human = [j for j in chat if j.kind == "humanlike"]
    return {"reward_empathy": mean([j.reward for j in emp]),
            "reward_chitchat": mean([j.reward for j in chat]),
            "win_rate": mean([j.verdict == "better" for j in anchored]) if anchored else None,
            "tie_rate": mean([j.verdict == "tie" for j in anchored]) if anchored else None,
            "humanlike_rate": mean([j.verdict == "human" for j in human]) if human else None,
            "unparsed_rate": mean([j.verdict is None for j in items])}
