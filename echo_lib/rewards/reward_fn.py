"""Trained reward models as TRL reward functions, for the policy RL stage (METHOD.md 4.2).

    reward_fn = load_reward_fn(models, "base", "empathy", params, adapter)   # base + the trained adapter
                                                        # (stage 02's rewards.stage.reward_fn(cfg, kind) fills these in)
    GRPOTrainer(..., reward_funcs=[reward_fn], ...)     # dataset needs a `reference` column

A call judges each completion with the reward model (batched, cached through the model layer, so a
repeated completion costs nothing), in the decision order it was trained with (think_first: greedy
generation, strictly parsed; verdict_first: the most probable verdict by `choose`), and maps the
verdict to the reward:
  - empathy:   the reply against the row's reference reply (the score-3 anchor): better/tie/worse -> +1/0/-1;
  - humanlike: human/machine -> 1/0;
  - scalar:    score 1-10 -> (score - 1) / 9 in [0, 1] (the ablation: no anchor); with verdict_first the
               expected score under the model's probabilities, the fine-grained scalar the ablation is about.
The discrete kinds stay discrete in both orders (METHOD.md 3.3: a relative verdict, not a score).
An RM output that does not parse gives `unparsed_reward` (config; default the middle of the kind's
range: neither a win nor a loss) and is counted in `last_stats`, which the policy stage logs (the tie
rate too, a METHOD.md 3.5 monitor).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from echo_lib.rewards.evaluate import judge
from echo_lib.rewards.params import NEUTRAL_REWARD, RewardModelParams
from echo_lib.rewards.prompts import empathy_prompt, humanlike_prompt, scalar_prompt
from echo_lib.rewards.rm_rewards import completion_text
from echo_lib.rewards.verdict import SCORE_RANGE, verdict_value

if TYPE_CHECKING:
    from echo_lib.llm import LLM, ModelRegistry


def prompt_context(prompt: Any) -> list[dict]:
    """The dialogue of a policy prompt (conversational: a message list; standard: one user string),
    without its system message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": m["role"], "content": m["content"]} for m in prompt if m.get("role") != "system"]


class RewardModelFn:
    """A TRL reward function `f(prompts, completions, **columns) -> list[float]` over a reward-model LLM."""

    def __init__(self, llm, kind: str, max_new_tokens: int = 192, unparsed_reward: float | None = None,
                 context_free: bool = False, decision: str = "think_first", human_threshold: float | None = None):
        if kind not in NEUTRAL_REWARD:
            raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")
        self.llm, self.kind, self.decision, self.max_new_tokens = llm, kind, decision, max_new_tokens
        self.unparsed_reward = NEUTRAL_REWARD[kind] if unparsed_reward is None else unparsed_reward
        self.context_free = context_free  # humanlike: judge the reply alone (trained that way in stage 02)
        self.human_threshold = human_threshold  # humanlike verdict-first: stage 02's calibrated P(human) threshold
        self.__name__ = f"{kind}_rm"   # TRL logs rewards/<__name__>/mean
        self.last_stats: dict[str, Any] = {}
        self.last_answers: list[str | None] = []

    def chats(self, prompts: Sequence[Any], completions: Sequence[Any], reference: Sequence[str] | None
              ) -> list[list[dict]]:
        replies = [completion_text(c).strip() for c in completions]
        contexts = [prompt_context(p) for p in prompts]
        if self.kind == "empathy":
            if reference is None:
                raise ValueError("the empathy reward needs a `reference` column in the policy dataset (the "
                                 "reply scored 3 that each completion is compared against)")
            return [empathy_prompt(c, ref, r, self.decision) for c, ref, r in zip(contexts, reference, replies)]
        if self.kind == "scalar":
            return [scalar_prompt(c, r, self.decision) for c, r in zip(contexts, replies)]
        return [humanlike_prompt([m["content"] for m in c], r, self.context_free, self.decision)
                for c, r in zip(contexts, replies)]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], reference: Sequence[str] | None = None,
                 **_: Any) -> list[float]:
        judged = judge(self.llm, self.chats(prompts, completions, reference), self.kind, self.decision,
                       self.max_new_tokens, self.human_threshold)
        rewards = [self.reward(j) for j in judged]
        self.last_answers = [j.answer for j in judged]   # per completion (None: unparsed)
        self.last_stats = {"n": len(judged), "unparsed": sum(not j.ok for j in judged),
                           "verdicts": dict(Counter(j.answer for j in judged if j.ok))}
        return rewards

    def reward(self, j) -> float:
        if not j.ok:
            return self.unparsed_reward
        if self.kind == "scalar":
            lo, hi = SCORE_RANGE
            return (j.value("scalar") - lo) / (hi - lo)
        return verdict_value(self.kind, j.answer)


def adapted_llm(models: "ModelRegistry", base: str, adapter: str | Path | None = None) -> "LLM":
    """The model `base` of the registry, with a trained adapter on top if given (the adapter folder's
    fingerprint is part of the cache key, so retraining invalidates its calls)."""
    if adapter is None:
        return models.load(base)
    name = f"{base}+{Path(adapter).parent.name}-rm"
    return models.with_adapter(name, base, adapter).load(name)


def load_reward_fn(models: "ModelRegistry", base: str, kind: str, params: RewardModelParams,
                   adapter_dir: str | Path) -> RewardModelFn:
    """The reward model trained at `adapter_dir` (on the registry's model `base`) as a TRL reward function,
    judging as `params` (the `reward_models:` section) says."""
    from echo_lib.rewards.calibration import read_threshold
    adapter = str(adapter_dir)
    p = params
    return RewardModelFn(adapted_llm(models, base, adapter), kind, p.eval.max_new_tokens, p.unparsed(kind),
                         context_free=p.context_free(kind), decision=p.decision,
                         human_threshold=read_threshold(adapter) if kind == "humanlike" else None)
