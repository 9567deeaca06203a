"""Statistics shared by the learned instruments and the comparisons (numpy and scipy; pandas for tables).

Classifier scores, beside the two measures a skewed test set or a biased verdict cannot flatter:

  balanced_accuracy    mean over the gold classes of that class's recall (an unparsed verdict is wrong), so
                       always answering the commonest label scores 1 / n_classes, not its share
  auroc                how well a score ranks the positive items above the others: the Mann-Whitney
                       statistic, ties count 0.5

Intervals: the one place for them. Each is an `Interval` that carries its estimate, n and method, chosen
for the kind of data, because their coverage was measured (tests/test_stats_coverage.py, 95 % nominal):

  mean_interval        t-interval of the mean of independent values (per-case EPM-Q, NEE, per-prompt scores)
  paired_difference    t-interval of mean(a - b) over the same items: two models, one case set
  proportion_interval  Wilson score interval with continuity correction (Newcombe 1998) for a share of
                       independent 0/1 items (accuracies, success rates)
  cluster_interval     t-interval over cluster means, for values that come several per unit (replies per
                       prompt, judges and orders per case): the units are what was sampled
  verdict              what a paired difference says at its n; paired_table: one row per (pair, metric)

The percentile bootstrap this module used before covers a normal mean 75 % of the time at n = 3 and 90 %
at n = 10, plain Wilson 86 % at n = 3 (p = 0.05): both undercover where this package's n live. Below MIN_N items no interval is shown and no verdict is given
(`Interval.shown`): at n = 3 a t-interval holds its coverage but is too wide to read.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Hashable, Sequence

import numpy as np
from scipy import stats as _scipy_stats

LEVEL = 0.95
MIN_N = 10          # fewer items: the estimate alone, "n too small", no verdict


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


# ---- intervals ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, n and method. low / high are None when there is nothing to bound
    (no items) and equal to the estimate when the items have no spread."""
    estimate: float | None
    low: float | None
    high: float | None
    n: int
    method: str
    level: float = LEVEL

    @property
    def shown(self) -> bool:
        """Whether a table prints the interval: enough items, and an interval wider than a point."""
        return self.n >= MIN_N and self.low is not None and self.high is not None and self.low < self.high

    @property
    def note(self) -> str:
        """Why the interval is not shown, or "" when it is."""
        if self.n == 0 or self.estimate is None:
            return "no items"
        if self.n < MIN_N:
            return f"n too small (n = {self.n})"
        if self.low is None or not self.low < self.high:
            return "no spread: every item scored the same"
        return ""

    @property
    def bounds(self) -> list[float] | None:
        """[low, high] rounded to 4 decimals, or None: the form of the result files' *_ci fields."""
        if self.low is None or self.high is None:
            return None
        return [round(self.low, 4), round(self.high, 4)]

    def cell(self, digits: int = 1, scale: float = 1.0) -> str:
        """What a table's interval column prints: "[40.1, 48.9]" when shown, else why not (`note`)."""
        if self.shown:
            return f"[{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"
        return self.note

    def text(self, digits: int = 1, scale: float = 1.0) -> str:
        """'44.5 [40.1, 48.9]' when shown, else the estimate and why: '44.5 (n too small, n = 3)'."""
        if self.estimate is None or (isinstance(self.estimate, float) and math.isnan(self.estimate)):
            return "-"
        est = f"{self.estimate * scale:.{digits}f}"
        if self.shown:
            return f"{est} [{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"
        why = "no spread" if self.n >= MIN_N else "n too small"
        return f"{est} ({why}, n = {self.n})"

    def to_dict(self) -> dict:
        return {**asdict(self), "shown": self.shown, "note": self.note}

    def clipped(self, lowest: float, highest: float) -> "Interval":
        """The interval cut to the range the quantity can take (a share: 0..1); the truth lies inside that
        range, so cutting keeps the coverage."""
        if self.low is None or self.high is None:
            return self
        return replace(self, low=min(max(self.low, lowest), highest), high=max(min(self.high, highest), lowest))


def _clean(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    return x[~np.isnan(x)]


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def _t(x: np.ndarray, level: float, method: str) -> Interval:
    n = int(x.size)
    if n == 0:
        return Interval(None, None, None, 0, method, level)
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, None, None, 1, method, level)
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return Interval(mean, mean - half, mean + half, n, method, level)


def mean_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """t-interval of the mean of independent values (NaN values are left out)."""
    _check_level(level)
    return _t(_clean(values), level, "t")


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Interval:
    """t-interval of mean(a - b) over paired items (pairs with a NaN on either side are left out)."""
    _check_level(level)
    xa, xb = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if xa.shape != xb.shape:
        raise ValueError(f"paired values need the same length, got {xa.size} and {xb.size}")
    return _t(_clean(xa - xb), level, "paired t")


def welch_difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Interval:
    """Welch t-interval of mean(a) - mean(b) for two independent samples (NaN values are left out)."""
    _check_level(level)
    xa, xb = _clean(a), _clean(b)
    n = int(min(xa.size, xb.size))
    if n == 0:
        return Interval(None, None, None, n, "welch t", level)
    diff = float(xa.mean() - xb.mean())
    if n == 1:
        return Interval(diff, None, None, n, "welch t", level)
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(diff, diff, diff, n, "welch t", level)
    df = (va + vb) ** 2 / (va ** 2 / (xa.size - 1) + vb ** 2 / (xb.size - 1))
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, df) * se)
    return Interval(diff, diff - half, diff + half, n, "welch t", level)


def proportion_interval(outcomes: Sequence[float | bool], level: float = LEVEL) -> Interval:
    """Wilson score interval with continuity correction (Newcombe 1998) of the share of 1s among 0/1
    outcomes; a fractional outcome (a tie as 0.5) counts as that share of a success."""
    _check_level(level)
    x = _clean([float(v) for v in outcomes])
    if x.size and ((x < 0) | (x > 1)).any():
        raise ValueError("proportion_interval takes outcomes in [0, 1]; use mean_interval for other values")
    return wilson(float(x.sum()), int(x.size), level)


def wilson(successes: float, n: int, level: float = LEVEL) -> Interval:
    """Wilson score interval with continuity correction for `successes` of `n`."""
    if n == 0:
        return Interval(None, None, None, 0, "wilson-cc", level)
    z = float(_scipy_stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    low = 0.0 if successes <= 0 else (2 * n * p + z * z - 1 - z * math.sqrt(
        max(z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1), 0.0))) / (2 * (n + z * z))
    high = 1.0 if successes >= n else (2 * n * p + z * z + 1 + z * math.sqrt(
        max(z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1), 0.0))) / (2 * (n + z * z))
    return Interval(p, max(low, 0.0), min(high, 1.0), n, "wilson-cc", level)


def cluster_interval(values: Sequence[float], clusters: Sequence[Hashable], level: float = LEVEL) -> Interval:
    """t-interval over cluster means: several values per unit (replies of one prompt, judges and orders of
    one case) are averaged within the unit first, and n is the number of units. The estimate is the mean
    of the unit means, so every unit weighs the same."""
    _check_level(level)
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for v, c in zip(values, clusters):
        if not (isinstance(v, float) and math.isnan(v)):
            groups[c].append(float(v))
    means = np.array([sum(g) / len(g) for g in groups.values()], dtype=float)
    return _t(means, level, "cluster t")


def verdict(diff: Interval, a: str, b: str) -> str:
    """What a paired difference a - b says at its n: "a above b", "a below b", "no difference at this
    scale", or "n too small" (below MIN_N pairs no verdict is given)."""
    if diff.estimate is None or diff.n < MIN_N:
        return "n too small"
    if diff.low is not None and diff.low > 0:
        return f"{a} above {b}"
    if diff.high is not None and diff.high < 0:
        return f"{a} below {b}"
    return "no difference at this scale"


# ---- paired comparisons of models on the same units ---------------------------------------------------

PAIRED_COLUMNS = ["A", "B", "Metric", "n", "Difference", "CI low", "CI high", "Method", "Verdict"]


def paired_table(values, pairs: Sequence[tuple[str, str]], metrics: dict[str, str], model: str = "Model",
                 unit: str = "Case_ID"):
    """One row per (pair, metric) of a long table of per-unit values (a pandas DataFrame with columns
    `model`, `unit` and the metrics' value columns): mean of A - B over the units both models have, its
    paired t-interval, n, the method and the verdict at that n. `metrics` maps a metric's printed name to
    its value column."""
    import pandas as pd

    rows = []
    for a, b in pairs:
        both = values[values[model] == a].merge(values[values[model] == b], on=unit, suffixes=("_a", "_b"))
        for name, column in metrics.items():
            d = paired_difference(both[f"{column}_a"], both[f"{column}_b"])
            rows.append({"A": a, "B": b, "Metric": name, "n": d.n,
                         "Difference": None if d.estimate is None else round(d.estimate, 4),
                         "CI low": None if d.low is None else round(d.low, 4),
                         "CI high": None if d.high is None else round(d.high, 4),
                         "Method": d.method, "Verdict": verdict(d, a, b) if d.n else "no shared units"})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)
