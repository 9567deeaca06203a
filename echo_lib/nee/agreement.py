"""Krippendorff's alpha: agreement between judges, beyond chance, with missing ratings allowed.

alpha = 1 - D_o / D_e, from the coincidence matrix of Krippendorff, "Computing Krippendorff's
Alpha-Reliability" (2011): every unit rated by m_u >= 2 raters adds each ordered pair of its values
(c, k) with weight 1 / (m_u - 1); D_o is the weighted mean difference within units, D_e the mean
difference between all pairable values. The difference function sets the level of measurement:
nominal (c != k), ordinal (ranks by the values' frequencies), interval ((c - k)^2), ratio.
"""
from __future__ import annotations

import numpy as np

LEVELS = ("nominal", "ordinal", "interval", "ratio")


def coincidences(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, coincidence matrix) of a raters x units array with NaN for missing ratings."""
    data = np.asarray(data, dtype=float)
    if data.ndim != 2:
        raise ValueError(f"reliability data must be raters x units (2-D), got shape {data.shape}")
    values = np.unique(data[~np.isnan(data)])
    o = np.zeros((len(values), len(values)))
    for unit in data.T:
        present = unit[~np.isnan(unit)]
        m = len(present)
        if m < 2:
            continue  # a unit rated once has no pair: not pairable, left out
        counts = np.array([(present == v).sum() for v in values], dtype=float)
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    return values, o


def _delta2(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    c, k = np.meshgrid(values, values, indexing="ij")
    if level == "nominal":
        return (c != k).astype(float)
    if level == "interval":
        return (c - k) ** 2
    if level == "ratio":
        s = c + k
        return np.divide((c - k) ** 2, s ** 2, out=np.zeros_like(s), where=s != 0)
    if level == "ordinal":
        # sum of the frequencies from c to k, minus half of the two ends
        cum = np.cumsum(n_c)
        i, j = np.meshgrid(np.arange(len(values)), np.arange(len(values)), indexing="ij")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        between = cum[hi] - cum[lo] + n_c[lo]
        return (between - (n_c[i] + n_c[j]) / 2) ** 2
    raise ValueError(f"level of measurement {level!r}; allowed: {', '.join(LEVELS)}")


def krippendorff_alpha(data, level: str = "interval") -> float:
    """Alpha of a raters x units array (NaN = missing). NaN when it is undefined: fewer than two pairable
    values, or no variation at all (every pairable rating identical, D_e = 0)."""
    values, o = coincidences(data)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n < 2 or len(values) < 2:
        return float("nan")
    d2 = _delta2(values, n_c, level)
    d_o = (o * d2).sum() / n
    d_e = (np.outer(n_c, n_c) * d2).sum() / (n * (n - 1))
    return float(1 - d_o / d_e) if d_e > 0 else float("nan")
