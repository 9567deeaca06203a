"""Small statistics shared by the learned instruments and the comparisons (pure Python and numpy).

Every accuracy (reward models, judges) and every model-vs-model difference (the sandbox comparisons) is
reported with a percentile bootstrap 95 % interval, and a classifier's accuracy beside the two measures
that a skewed test set or a biased verdict cannot flatter:

  balanced_accuracy    mean over the gold classes of that class's recall (an unparsed verdict is wrong), so
                       always answering the commonest label scores 1 / n_classes, not its share
  auroc                how well a score (the verdict probabilities: P(human); P(better) - P(worse)) ranks
                       the positive items above the others: the Mann-Whitney statistic, ties count 0.5
  bootstrap_ci         percentile bootstrap interval of the mean of per-item values (0/1 correctness)
  paired_bootstrap_ci  the same for mean(a - b), items resampled jointly: for comparing two models (or a
                       model and a probe) on the same items
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np


def balanced_accuracy(labels: Sequence[str], predictions: Sequence[str | None]) -> float | None:
    """Mean over the classes present in `labels` of that class's recall; a None prediction is wrong."""
    if len(labels) != len(predictions):
        raise ValueError(f"{len(labels)} labels but {len(predictions)} predictions")
    if not labels:
        return None
    hits: dict[str, list[bool]] = defaultdict(list)
    for label, pred in zip(labels, predictions):
        hits[label].append(pred is not None and pred == label)
    return float(sum(sum(v) / len(v) for v in hits.values()) / len(hits))


def accuracy_by_kind(kinds: Sequence[str | None], correct: Sequence[bool | float]) -> dict[str, float]:
    """Accuracy per kind of item (humanlike negative kind, empathy candidate origin); None kinds are left out."""
    groups: dict[str, list[float]] = defaultdict(list)
    for k, ok in zip(kinds, correct):
        if k is not None:
            groups[k].append(float(ok))
    return {k: sum(v) / len(v) for k, v in sorted(groups.items())}


def auroc(positives: Sequence[bool], scores: Sequence[float]) -> float | None:
    """P(score of a random positive > score of a random negative), ties 0.5; None with only one class."""
    if len(positives) != len(scores):
        raise ValueError(f"{len(positives)} labels but {len(scores)} scores")
    pos = np.asarray([s for p, s in zip(positives, scores) if p], dtype=float)
    neg = np.asarray([s for p, s in zip(positives, scores) if not p], dtype=float)
    if not len(pos) or not len(neg):
        return None
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def _percentile_interval(means: np.ndarray, level: float) -> list[float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return [round(float(lo), 4), round(float(hi), 4)]


def bootstrap_ci(values: Sequence[float], n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval [lo, hi] (4 decimals) of the mean of `values`; None when empty."""
    x = np.asarray(values, dtype=float)
    if not x.size:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    return _percentile_interval(x[idx].mean(axis=1), level)


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], n_boot: int = 1000, seed: int = 0,
                        level: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of mean(a - b), the items resampled jointly; None when empty."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired values need the same length, got {xa.size} and {xb.size}")
    return bootstrap_ci(xa - xb, n_boot=n_boot, seed=seed, level=level)
