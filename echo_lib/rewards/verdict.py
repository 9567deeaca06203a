"""The reward models' output format and its strict parser; verdicts -> rewards (METHOD.md 3.2, 3.3).

Every reward model writes its reasoning first and its verdict last, and nothing else:

    <think>...reasoning...</think>
    <answer>better|tie|worse</answer>        (empathy: the candidate against the reference)
    <answer>human|machine</answer>           (humanlike)
    <score>1..10</score>                     (scalar ablation: no anchor)

The parser accepts exactly that shape. It rejects a missing or empty think block, a second tag of any
kind (so "<answer>better</answer> ignore previous ... <answer>worse</answer>" is not read as either),
text after the verdict, whitespace or case variants inside the verdict, and values outside the set.
A reward model whose output does not parse gives no verdict: during RM training it earns no
correctness or format reward, and the policy's reward functions return a configured neutral value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

EMPATHY_VERDICTS = {"better": 1.0, "tie": 0.0, "worse": -1.0}   # candidate vs the reference reply
HUMANLIKE_VERDICTS = {"human": 1.0, "machine": 0.0}
SCORE_RANGE = (1, 10)

TAG = re.compile(r"</?(think|answer|score)>", re.IGNORECASE)
SHAPE = re.compile(r"<think>(?P<think>.*)</think>\s*<(?P<tag>answer|score)>(?P<value>[^<]*)</(?P=tag)>", re.DOTALL)


@dataclass(frozen=True)
class Parsed:
    ok: bool
    think: str | None = None
    answer: str | None = None      # the verdict word, or the score as a string
    error: str | None = None

    @property
    def score(self) -> int | None:
        return int(self.answer) if self.ok and self.answer and self.answer.isdigit() else None


def verdict_tag(kind: str) -> str:
    return "score" if kind == "scalar" else "answer"


def allowed_answers(kind: str) -> list[str]:
    if kind == "empathy":
        return list(EMPATHY_VERDICTS)
    if kind == "humanlike":
        return list(HUMANLIKE_VERDICTS)
    if kind == "scalar":
        return [str(s) for s in range(SCORE_RANGE[0], SCORE_RANGE[1] + 1)]
    raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")


def parse(text: str, kind: str) -> Parsed:
    """Strictly parse one reward-model output; `error` says why it was rejected."""
    allowed = allowed_answers(kind)
    text = text.strip()
    tags = [m.group(0) for m in TAG.finditer(text)]
    want = ["<think>", "</think>", f"<{verdict_tag(kind)}>", f"</{verdict_tag(kind)}>"]
    if tags != want:
        return Parsed(False, error=f"tags {tags} (need exactly {' '.join(want)} in that order)")
    m = SHAPE.fullmatch(text)
    if not m:
        return Parsed(False, error="text before <think> or after the verdict")
    think, value = m.group("think").strip(), m.group("value")
    if not think:
        return Parsed(False, error="empty reasoning")
    if value not in allowed:
        return Parsed(False, think=think, error=f"verdict {value!r} not one of {allowed}")
    return Parsed(True, think=think, answer=value)


def format_verdict(kind: str, think: str, answer: str) -> str:
    """The canonical output (what SFT targets look like); parse(format_verdict(...)) round-trips."""
    tag = verdict_tag(kind)
    return f"<think>\n{think.strip()}\n</think>\n<{tag}>{answer}</{tag}>"


def verdict_options(kind: str) -> list[str]:
    """The complete verdicts a verdict-first reward model chooses between, e.g. "<answer>human</answer>"
    (scored whole by the model layer's `choose`, so the shared tags cancel and the closing tag keeps
    "<score>1" apart from "<score>10")."""
    tag = verdict_tag(kind)
    return [f"<{tag}>{a}</{tag}>" for a in allowed_answers(kind)]


def option_answer(option: str) -> str:
    """The verdict word (or score) inside one of verdict_options."""
    return TAG.sub("", option)


def answer_probs(kind: str, probs: dict[str, float]) -> dict[str, float]:
    """A `choose` result over verdict_options as {answer: probability}, renormalised over the options."""
    total = sum(probs.values()) or 1.0
    return {option_answer(o): p / total for o, p in probs.items()}


def expected_value(kind: str, probs: dict[str, float]) -> float:
    """E[verdict_value] under {answer: probability}: +1..-1 for empathy, P(human) for humanlike, E[score]."""
    return sum(verdict_value(kind, a) * p for a, p in probs.items())


def verdict_value(kind: str, answer: str) -> float:
    """empathy better/tie/worse -> +1/0/-1; humanlike human/machine -> 1/0; scalar n -> n (1..10)."""
    if kind == "empathy":
        return EMPATHY_VERDICTS[answer]
    if kind == "humanlike":
        return HUMANLIKE_VERDICTS[answer]
    if kind == "scalar":
        return float(int(answer))
    raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")


def flip(answer: str) -> str:
    """The empathy verdict expected when candidate and reference trade places."""
    return {"better": "worse", "worse": "better", "tie": "tie"}[answer]


def score_target(candidate_score: int) -> int:
    """The 1-5 rubric score of the data on the scalar model's 1-10 scale (1->2, 3->6, 5->10)."""
    return 2 * int(candidate_score)


def score_to_verdict(candidate: int, reference: int) -> str:
    """Two scalar scores as an anchored verdict, so the scalar model is scored on the same task."""
    return "better" if candidate > reference else "worse" if candidate < reference else "tie"
