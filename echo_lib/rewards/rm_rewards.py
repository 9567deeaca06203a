"""The rewards that train a reward model with GRPO (METHOD.md 3.4 [DEFAULT]):

    reward = correct + process_weight * process + format_weight * format + consistency_weight * consistency

  - correct:     1 if the verdict equals the label, else 0 (scalar: 1 - |score - target| / 9);
  - process:     the reasoning's profile (or humanlike checks) against the gold (echo_lib.rewards.process),
                 0 when the output does not parse strictly (no pay for reasoning without a verdict);
  - format:      1 if the output parses strictly (echo_lib.rewards.verdict), else 0;
  - consistency: 1 if the verdict is the one the reasoning argues for (process.implied_verdict: the
                 humanlike checks, the empathy Comparison line, the scalar Assessment line's rubric
                 level), else 0 (also 0 when the output does not parse or the reasoning states none).

Each is a TRL reward function, `f(completions, gold, **kwargs) -> list[float]`, where `gold` is the
dataset's JSON column (data.grpo_rows); TRL weighs them with `reward_weights` and logs each one's mean
under its __name__, so the training log shows the four parts separately.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from echo_lib.rewards.process import checks_reward, implied_verdict, profile_reward, score_level
from echo_lib.rewards.verdict import SCORE_RANGE, Parsed, parse


def completion_text(completion: Any) -> str:
    """TRL hands conversational completions as [{"role": "assistant", "content": ...}], plain ones as str."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion)


def correctness(kind: str, parsed: Parsed, gold: dict) -> float:
    if not parsed.ok:
        return 0.0
    if kind == "scalar":
        return 1.0 - abs(parsed.score - int(gold["label"])) / (SCORE_RANGE[1] - SCORE_RANGE[0])
    return float(parsed.answer == gold["label"])


def process(kind: str, text: str, gold: dict, judge=None) -> float:
    """The reasoning's profile (humanlike: its checks) against the gold; 0 unless the output parses strictly
    (verdict.parse): reasoning that never reaches a verdict, or one cut off by the length limit, earns
    nothing, so the policy cannot collect process reward while skipping the verdict."""
    parsed = parse(text, kind)
    if not parsed.ok:
        return 0.0
    if kind == "humanlike":
        return checks_reward(parsed.think, gold["item_kind"], gold.get("context_free", False))
    return profile_reward(parsed.think, gold["profile"], judge)


def consistency(kind: str, text: str) -> float:
    """1 if the strictly parsed verdict is the one the reasoning states (humanlike: the checks' verdict;
    empathy: the Comparison wording; scalar: the Assessment's rubric level = the score's level), else 0."""
    parsed = parse(text, kind)
    if not parsed.ok:
        return 0.0
    implied = implied_verdict(kind, parsed.think)
    if implied is None:
        return 0.0
    if kind == "scalar":
        return float(score_level(parsed.score) == int(implied))
    return float(parsed.answer == implied)


def rm_reward_funcs(kind: str, judge=None) -> list[Callable[..., list[float]]]:
    """[correct, process, format, consistency] as TRL reward functions for one reward-model kind."""
    def rows(completions, gold):
        return [(completion_text(c), json.loads(g)) for c, g in zip(completions, gold)]

    def correct(completions, gold, **_) -> list[float]:
        return [correctness(kind, parse(t, kind), g) for t, g in rows(completions, gold)]

    def process_(completions, gold, **_) -> list[float]:
        return [process(kind, t, g, judge) for t, g in rows(completions, gold)]

    def format_(completions, **_) -> list[float]:
        return [float(parse(completion_text(c), kind).ok) for c in completions]

    def consistency_(completions, **_) -> list[float]:
        return [consistency(kind, completion_text(c)) for c in completions]

    correct.__name__, process_.__name__, format_.__name__ = "correct", "process", "format"
    consistency_.__name__ = "consistency"
    return [correct, process_, format_, consistency_]
