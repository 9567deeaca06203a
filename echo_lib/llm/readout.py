"""Read-out heads: `choose` answered from a hidden layer instead of the LM head.

A small model can carry a distinction in its hidden states that its next-token distribution does not show:
SmolLM2-135M's state at the last token of the sandbox judge's rubric prompt separates a good reply from a
poor one (a linear probe, held out, 0.97-1.0; benchmarks/judge_hidden_probe.py) while the digit it writes
there does not (0.75, and near chance after SFT of a LoRA adapter). A read-out head turns that state into
the answer: a multinomial logistic regression on the hidden state after decoder layer `layer` at the
prompt's last token, one head per *question*, where the question is the last line of the prompt's last
message (the judges end every prompt on theirs: "... C_Prog level:", "... Empathy score:", "... Better
chat:"). The options the head never saw in training get probability 0. A prompt whose question has no head
is answered by the LM head as before.

A question that compares two texts of one prompt (the NEE panel's A/B: "Chat A: ... Chat B: ... Better
chat:") gets a *contrast* head instead: it reads the state at the end of the first text minus the state at
the end of the second (`marks`: the text that follows each of them in the last message). At the prompt's
last token the 135M model's state mostly says where the better text sits in the prompt's layout, not which
one is better: a last-token A/B head answered the same letter in both orders for a third of the held-out
pairs (position bias 0.35); the contrast of the two end states, swapped with the order, for 1 of 72
(benchmarks/README.md, "A/B read-out").

Stored as one folder: heads.npz (per question: mean, scale, coef, intercept) and heads.json (layer, hidden
size, per question: classes, training counts, and the sha256 of the heads.npz it belongs to). Each is written
to a temporary file and renamed into place, heads.npz first: a save killed half-way leaves the previous heads,
or a heads.json whose sha256 does not match heads.npz, which the load refuses. The load also refuses heads
that do not fit the model they are to answer for (hidden size, layer), arrays of the wrong shape or with
values that are not finite, and class lists not in the order the fit made them (sorted, as scikit-learn
orders its classes; the coefficient rows follow it); each error names the folder and the fix (rerun rule
judges). A question with a head that choose asks for options the head does not give (a head fit for other
options) is an error as well, not the LM head's answer in the trained judge's name.
Fitting needs scikit-learn; applying needs numpy only.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from echo_lib.llm.types import Chat, LLMError

log = logging.getLogger(__name__)
META, ARRAYS = "heads.json", "heads.npz"
PARTS = ("mean", "scale", "coef", "intercept")
REFIT = "rerun rule judges (notebooks/04_judges) to fit the heads again, or remove `readout` from the model"


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

    def head_for(self, chat: Chat, options: Sequence[str], folder: str | Path | None = None) -> Head | None:
        """The head of the chat's question; None when it has none. A head whose classes are not all among
        `options` was fit for another set of options: an error (naming `folder`), not a silent LM head."""
        q = question(chat)
        head = self.heads.get(q)
        if head is not None and not head.answers(options):
            raise LLMError(f"read-out heads in {folder or 'their folder'}: the head of question {q!r} answers "
                           f"{list(head.classes)}, but choose asks for {list(options)}; the heads were fit for "
                           f"other options: {REFIT}")
        return head

    @property
    def hidden_size(self) -> int | None:
        return next((int(h.mean.shape[0]) for h in self.heads.values()), None)

    def save(self, folder: str | Path) -> Path:
        """heads.npz, then heads.json with heads.npz's sha256, each written whole and renamed into place."""
        from echo_lib.provenance import write_bytes, write_text
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.heads)
        arrays = {f"{part}_{i}": getattr(self.heads[q], part) for i, q in enumerate(keys) for part in PARTS}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        data = buf.getvalue()
        write_bytes(folder / ARRAYS, data)
        meta = {"layer": self.layer, "hidden_size": self.hidden_size,
                "arrays_sha256": hashlib.sha256(data).hexdigest(),
                "questions": [{"question": q, "classes": list(self.heads[q].classes),
                               "n_train": self.heads[q].n_train,
                               **({"marks": list(self.heads[q].marks)} if self.heads[q].marks else {})}
                              for q in keys],
                "skipped": self.skipped}
        write_text(folder / META, json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path, hidden_size: int | None = None, n_layers: int | None = None) -> "ReadoutHeads":
        """The heads saved in `folder`, checked: the two files belong together, every array has its shape and
        finite values, the classes are in the fit's order, and (given the model's) the hidden size and the
        layer fit the model. Anything else is an LLMError naming the folder and the fix."""
        folder = Path(folder)
        meta_path, arrays_path = folder / META, folder / ARRAYS
        if not (meta_path.is_file() and arrays_path.is_file()):
            raise LLMError(f"read-out folder {folder} lacks {META} / {ARRAYS}; run rule judges "
                           "(notebooks/04_judges) to fit the heads, or remove `readout` from the model")

        def bad(problem: str) -> LLMError:
            return LLMError(f"read-out heads in {folder}: {problem}; {REFIT}")

        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            data = arrays_path.read_bytes()
        except (OSError, ValueError, RecursionError) as err:
            raise bad(f"{META} or {ARRAYS} is unreadable ({type(err).__name__}: {err})") from err
        if not (isinstance(meta, dict) and isinstance(meta.get("layer"), int) and isinstance(meta.get("questions"), list)
                and all(isinstance(q, dict) for q in meta["questions"])):
            raise bad(f"{META} is not a heads record (layer, questions)")
        sha = meta.get("arrays_sha256")
        if sha is None:
            log.warning("read-out heads in %s were saved before %s recorded the sha256 of %s, so nothing shows "
                        "that the two files are of one fit; %s", folder, META, ARRAYS, REFIT)
        elif sha != hashlib.sha256(data).hexdigest():
            raise bad(f"{ARRAYS} and {META} do not belong together (the sha256 {META} records is not that of "
                      f"{ARRAYS}: a save killed between the two files, or one of them copied from elsewhere)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                stored = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise bad(f"{ARRAYS} is not a readable archive ({type(err).__name__}: {err})") from err
        heads, widths = {}, set()
        for i, q in enumerate(meta["questions"]):
            name = q.get("question")
            classes = q.get("classes")
            if not (isinstance(name, str) and isinstance(classes, list) and len(classes) >= 2
                    and all(isinstance(c, str) for c in classes) and isinstance(q.get("n_train", 0), int)):
                raise bad(f"entry {i} of {META} has no question, fewer than two classes or no training count")
            if classes != sorted(set(classes)):
                raise bad(f"the head of question {name!r} lists classes {classes}, not in the order the fit made "
                          f"them ({sorted(set(classes))}), so its rows would score other classes")
            missing = [f"{part}_{i}" for part in PARTS if f"{part}_{i}" not in stored]
            if missing:
                raise bad(f"{ARRAYS} lacks {', '.join(missing)} (question {name!r})")
            mean, scale, coef, intercept = (stored[f"{part}_{i}"] for part in PARTS)
            rows = 1 if len(classes) == 2 else len(classes)
            width = mean.shape[0] if mean.ndim == 1 else -1
            shapes = {"mean": (mean.shape, (width,)), "scale": (scale.shape, (width,)),
                      "coef": (coef.shape, (rows, width)), "intercept": (intercept.shape, (rows,))}
            wrong = [f"{part} {tuple(got)} (should be {want})" for part, (got, want) in shapes.items() if got != want]
            if width < 1 or wrong:
                raise bad(f"the head of question {name!r} ({len(classes)} classes) has arrays of the wrong shape: "
                          f"{'; '.join(wrong) or 'mean is not a vector'}")
            for part, arr in zip(PARTS, (mean, scale, coef, intercept)):
                if not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
                    raise bad(f"the head of question {name!r} has values of {part} that are not finite (NaN or inf)")
            if (scale <= 0).any():
                raise bad(f"the head of question {name!r} has a scale that is not positive")
            marks = q.get("marks", [])
            if not (isinstance(marks, list) and len(marks) in (0, 2) and all(isinstance(m, str) for m in marks)):
                raise bad(f"the head of question {name!r} has marks {marks!r} (a contrast head has two)")
            widths.add(width)
            heads[name] = Head(tuple(classes), mean, scale, coef, intercept, n_train=q.get("n_train", 0),
                               marks=tuple(marks))
        if len(widths) > 1:
            raise bad(f"its heads read states of different sizes {sorted(widths)}")
        width = next(iter(widths), None)
        recorded = meta.get("hidden_size")
        if recorded is not None and width is not None and recorded != width:
            raise bad(f"{META} records hidden size {recorded} but the arrays are {width} wide")
        if hidden_size is not None and width is not None and width != hidden_size:
            raise bad(f"the heads read states of hidden size {width}, the model's is {hidden_size} (heads of "
                      f"another model)")
        layer = meta["layer"]
        if layer < 1 or (n_layers is not None and layer > n_layers):
            raise bad(f"the heads read layer {layer}, the model has {n_layers if n_layers is not None else '?'} "
                      "decoder layers")
        skipped = meta.get("skipped", {})
        return cls(layer, heads, skipped if isinstance(skipped, dict) else {})


def heads_of(llm) -> ReadoutHeads | None:
    """The read-out heads that answer `llm`'s choose (an LLM or a backend), loaded and checked against its
    model; None for a model without heads (a prompted or API judge, a test's fake)."""
    backend = getattr(llm, "backend", llm)
    if getattr(backend, "readout", None) is None or not hasattr(backend, "_heads"):
        return None
    return backend._heads()


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
