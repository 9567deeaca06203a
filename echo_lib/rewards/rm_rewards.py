"""The rewards that train a reward model with GRPO (METHOD.md 3.4 [DEFAULT]):

    reward = correct + process_weight * process + format_weight * format

  - correct: 1 if the verdict equals the label, else 0 (scalar: 1 - |score - target| / 9);
  - process: the reasoning's profile (or humanlike checks) against the gold (echo_lib.rewards.process);
  - format:  1 if the output parses strictly (echo_lib.rewards.verdict), else 0.

Each is a TRL reward function, `f(completions, gold, **kwargs) -> list[float]`, where `gold` is the
dataset's JSON column (data.grpo_rows); TRL weighs them with `reward_weights` and logs each one's mean
under its __name__, so the training log shows the three parts separately.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from echo_lib.rewards.process import checks_reward, profile_reward
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
    """Scored on the reasoning even when the verdict is malformed or cut off (partial credit for the path,
    which gives GRPO a signal before the model has learned to finish the format)."""
    think = _think_block(text)
    if kind == "humanlike":
        return checks_reward(think, gold["item_kind"], gold.get("context_free", False))
    return profile_reward(think, gold["profile"], judge)


def _think_block(text: str) -> str | None:
    """The reasoning after <think>, up to </think> or, for an output cut off by the length limit, to its end."""
    start = text.find("<think>")
    if start < 0:
        return None
    end = text.find("</think>", start)
    return text[start + len("<think>"):end if end >= 0 else None]


def rm_reward_funcs(kind: str, judge=None) -> list[Callable[..., list[float]]]:
    """[correct, process, format] as TRL reward functions for one reward-model kind."""
    def rows(completions, gold):
        return [(completion_text(c), json.loads(g)) for c, g in zip(completions, gold)]

    def correct(completions, gold, **_) -> list[float]:
        return [correctness(kind, parse(t, kind), g) for t, g in rows(completions, gold)]

    def process_(completions, gold, **_) -> list[float]:
        return [process(kind, t, g, judge) for t, g in rows(completions, gold)]

    def format_(completions, **_) -> list[float]:
        return [float(parse(completion_text(c), kind).ok) for c in completions]

    correct.__name__, process_.__name__, format_.__name__ = "correct", "process", "format"
    return [correct, process_, format_]
