"""Read-out heads: `choose` answered from a hidden layer instead of the LM head.

A small model can carry a distinction in its hidden states that its next-token distribution does not show:
SmolLM2-135M's state at the last token of the sandbox judge's rubric prompt separates a good reply from a
poor one (a linear probe, held out, 0.97-1.0; benchmarks/judge_hidden_probe.py) while the digit it writes
there does not (0.75, and near chance after SFT of a LoRA adapter). A read-out head turns that state into
the answer: a multinomial logistic regression on the hidden state after decoder layer `layer` at the
prompt's last token, one head per *question*, where the question is the last line of the prompt's last
message (the judges end every prompt on theirs: "... C_Prog level:", "... Empathy score:", "... Better
chat:"). The options the head never saw in training get probability 0. A prompt whose question has no head
(or asks for options the head cannot give) is answered by the LM head as before.

A question that compares two texts of one prompt (the NEE panel's A/B: "Chat A: ... Chat B: ... Better
chat:") gets a *contrast* head instead: it reads the state at the end of the first text minus the state at
the end of the second (`marks`: the text that follows each of them in the last message). At the prompt's
last token the 135M model's state mostly says where the better text sits in the prompt's layout, not which
one is better: a last-token A/B head answered the same letter in both orders for a third of the held-out
pairs (position bias 0.35); the contrast of the two end states, swapped with the order, for 1 of 72
(benchmarks/README.md, "A/B read-out").

Stored as one folder: heads.json (layer, per question: classes, training counts) and heads.npz (per question:
mean, scale, coef, intercept). Fitting needs scikit-learn; applying needs numpy only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from echo_lib.llm.types import Chat, LLMError


def question(chat: Chat) -> str:
    """The question a prompt asks: the last non-empty line of its last message."""
    lines = [line.strip() for line in str(chat[-1]["content"]).splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class Head:
    """One question's head: standardise the state, then softmax(coef @ x + intercept) over `classes`."""
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray          # [classes x hidden] (one row for a two-class head, as scikit-learn fits it)
    intercept: np.ndarray
    n_train: int = 0
    marks: tuple[str, ...] = ()   # a contrast head: the texts that end the two compared parts (see above)

    def probs(self, states: np.ndarray) -> np.ndarray:
        """[n x classes] probabilities."""
        z = (states - self.mean) / self.scale @ self.coef.T + self.intercept
        if z.shape[1] == 1:                      # binary: the row scores the second class
            z = np.hstack([np.zeros_like(z), z])
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def answers(self, options: Sequence[str]) -> bool:
        return set(self.classes) <= set(options)


@dataclass(frozen=True)
class ReadoutHeads:
    layer: int
    heads: dict[str, Head] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)   # question -> why it has no head

    def head_for(self, chat: Chat, options: Sequence[str]) -> Head | None:
        head = self.heads.get(question(chat))
        return head if head is not None and head.answers(options) else None

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.heads)
        arrays = {f"{part}_{i}": getattr(self.heads[q], part) for i, q in enumerate(keys)
                  for part in ("mean", "scale", "coef", "intercept")}
        np.savez(folder / "heads.npz", **arrays)
        meta = {"layer": self.layer, "questions": [{"question": q, "classes": list(self.heads[q].classes),
                                                     "n_train": self.heads[q].n_train,
                                                     **({"marks": list(self.heads[q].marks)} if self.heads[q].marks else {})}
                                                    for q in keys],
                "skipped": self.skipped}
        (folder / "heads.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "ReadoutHeads":
        folder = Path(folder)
        meta_path, arrays_path = folder / "heads.json", folder / "heads.npz"
        if not (meta_path.is_file() and arrays_path.is_file()):
            raise LLMError(f"read-out folder {folder} lacks heads.json / heads.npz; run rule judges "
                           "(notebooks/04_judges) to fit the heads, or remove `readout` from the model")
        meta = json.loads(meta_path.read_text())
        with np.load(arrays_path) as arrays:
            heads = {q["question"]: Head(tuple(q["classes"]), *(arrays[f"{part}_{i}"] for part in
                                          ("mean", "scale", "coef", "intercept")), n_train=q["n_train"],
                                  marks=tuple(q.get("marks", ())))
                     for i, q in enumerate(meta["questions"])}
        return cls(int(meta["layer"]), heads, meta.get("skipped", {}))


def fit_heads(states: np.ndarray, questions: Sequence[str], targets: Sequence[str], layer: int,
              C: float = 0.1, seed: int = 0, marks: Mapping[str, tuple[str, str]] | None = None) -> ReadoutHeads:
    """One head per question, fit on the states of its prompts and the answers they should get. A question
    whose training answers are all the same has no head (it is recorded in `skipped`). The questions in
    `marks` get contrast heads: their rows of `states` must be contrasts (HFBackend.contrast_states), which
    are scaled but not centred, so that swapping the two texts, which negates the contrast, flips the answer
    unless the data say otherwise (the intercept)."""
    marks = marks or {}
    from sklearn.linear_model import LogisticRegression
    if not len(states) == len(questions) == len(targets):
        raise ValueError(f"{len(states)} states, {len(questions)} questions, {len(targets)} targets")
    heads, skipped = {}, {}
    for q in sorted(set(questions)):
        rows = [i for i, x in enumerate(questions) if x == q]
        y = np.array([targets[i] for i in rows])
        if len(set(y)) < 2:
            skipped[q] = f"all {len(rows)} training answers are {y[0]!r}"
            continue
        x = states[rows]
        mean = np.zeros(x.shape[1]) if q in marks else x.mean(axis=0)
        scale = x.std(axis=0) + 1e-6
        clf = LogisticRegression(C=C, max_iter=5000, random_state=seed).fit((x - mean) / scale, y)
        heads[q] = Head(tuple(str(c) for c in clf.classes_), mean.astype(np.float32), scale.astype(np.float32),
                        clf.coef_.astype(np.float64), clf.intercept_.astype(np.float64), n_train=len(rows),
                        marks=tuple(marks.get(q, ())))
    return ReadoutHeads(layer, heads, skipped)
