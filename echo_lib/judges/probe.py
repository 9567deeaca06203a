"""What the sensitivity set allows a shallow reader: a pairwise linear probe on sentence embeddings.

Each reply becomes [e_reply, e_msg * e_reply, cos(msg, reply)], with e the all-MiniLM-L6-v2 embedding
(echo_lib.rewards.probe.load_embedder, offline) and msg the item's last user message. A logistic regression
without intercept is fit on the *differences* of the dev items' two replies (good - poor labelled 1,
poor - good labelled 0), so it is antisymmetric like a fair A/B judge, and scored on the held-out items:
an item counts 1 when the probe puts the good reply first. Its label-shuffle twin is fit on the same dev
pairs with half the items' good / poor labels swapped, the half drawn at random (seeded); it should sit at chance, which shows
the probe's figure is learnt from the labels, not from the features' geometry.

A judge below the probe is not reading what the text plainly gives away; a probe near chance says the
set is hard for any shallow reader.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from echo_lib.judges.sensitivity import preference, summarise
from echo_lib.judges.sensitivity_set import SensitivityItem

Embed = Callable[[list[str]], np.ndarray]


def reply_features(items: Sequence[SensitivityItem], which: str, embed: Embed) -> np.ndarray:
    """(n, 2d + 1) features of each item's `which` reply ("good" or "poor") against its user message."""
    msg = np.asarray(embed([it.user for it in items]), dtype=float)
    rep = np.asarray(embed([it.reply(which) for it in items]), dtype=float)
    norms = np.linalg.norm(msg, axis=1) * np.linalg.norm(rep, axis=1)
    cos = ((msg * rep).sum(axis=1) / np.where(norms > 0, norms, 1.0))[:, None]
    return np.hstack([rep, msg * rep, cos])


def pair_differences(items: Sequence[SensitivityItem], embed: Embed) -> np.ndarray:
    """f(good) - f(poor) per item."""
    return reply_features(items, "good", embed) - reply_features(items, "poor", embed)


def fit_pairwise(diffs: np.ndarray, good_first: np.ndarray, seed: int):
    """Logistic regression on +-differences (no intercept: swapping A and B flips the prediction)."""
    from sklearn.linear_model import LogisticRegression
    signs = np.where(good_first, 1.0, -1.0)[:, None]
    x = np.vstack([diffs * signs, -diffs * signs])
    y = np.concatenate([np.ones(len(diffs)), np.zeros(len(diffs))])
    return LogisticRegression(fit_intercept=False, C=1.0, max_iter=5000, random_state=seed).fit(x, y)


def score_heldout(model, diffs: np.ndarray) -> dict:
    """Share of held-out items whose good reply the probe puts first (0.5 on an exact tie)."""
    margin = diffs @ model.coef_.ravel()
    return summarise([preference(m, 0.0) for m in margin])


def embedding_probe(dev: Sequence[SensitivityItem], heldout: Sequence[SensitivityItem], embed: Embed,
                    seed: int) -> dict:
    """The probe and its label-shuffle twin: fit on dev, scored on held-out."""
    if not dev or not heldout:
        raise ValueError(f"the probe needs dev and held-out items, got {len(dev)} and {len(heldout)}")
    d_dev, d_test = pair_differences(dev, embed), pair_differences(heldout, embed)
    true = fit_pairwise(d_dev, np.ones(len(dev), dtype=bool), seed)
    swapped = np.zeros(len(dev), dtype=bool)   # exactly half the dev items swapped, chosen at random
    swapped[np.random.default_rng(seed).permutation(len(dev))[:len(dev) // 2]] = True
    twin = fit_pairwise(d_dev, ~swapped, seed)
    return {"embedder": "all-MiniLM-L6-v2", "n_dev": len(dev),
            **score_heldout(true, d_test),
            "shuffled": {**score_heldout(twin, d_test), "share_swapped": round(float(swapped.mean()), 4)}}
