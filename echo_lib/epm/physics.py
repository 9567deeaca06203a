"""EPM physics: direction, work, energy and the target zone (METHOD.md 6.4, 6.9.2, 6.9.5).

The user's state P_t is a point in C-A-P space; the origin is the equilibrium (all needs met).
A reply moves it by v_t. Its effective work is the part of v_t along the ideal direction v*:
delta-E_t = v_t . v*, cos theta_t = delta-E_t / |v_t|, and E_total sums the work.

Stored precision: the engine that made the published runs rounded v*_0 to 4 decimals and used the
rounded vector in every dot product; we do the same so replays match the stored numbers digit for digit.
The *sign* of the work is taken from the exact integer product v . (-P), never from float noise:
14 published turns are exactly orthogonal to P0 and count as zero work, not positive work.
"""
from __future__ import annotations

import numpy as np

DIRECTION_DECIMALS = 4   # v*_0 as stored in the published runs
STORE_DECIMALS = 2       # delta-E, E_total, |v|, |P|, projection, thresholds as stored
COS_DECIMALS = 4


def norm(x) -> float:
    return float(np.linalg.norm(np.asarray(x, dtype=float)))


def ideal_direction(P) -> np.ndarray:
    """v* = -P / |P|, rounded as the published engine stored it; the zero vector at the origin."""
    P = np.asarray(P, dtype=float)
    r = norm(P)
    if r == 0:
        return np.zeros(3)
    return np.round(-P / r, DIRECTION_DECIMALS)


def dot(a, b) -> float:
    """Left-to-right float dot product. np.dot sums in another order and lands on the other side of
    a rounding tie (e.g. -4.865) in a handful of published turns; this order reproduces them all."""
    acc = 0.0
    for x, y in zip(a, b):
        acc += float(x) * float(y)
    return acc


def work(v, direction) -> float:
    """delta-E = v . v* (= |v| cos theta)."""
    return dot(v, direction)


def work_sign(v, P_from) -> int:
    """Exact sign of the work of v against the direction -P_from: sign of the integer v . (-P_from)."""
    return int(np.sign(int(np.dot(np.asarray(v, dtype=np.int64), -np.asarray(P_from, dtype=np.int64)))))


def cos_theta(v, direction) -> float:
    """Alignment of v with the ideal direction; 0 for a zero move (no reply effect, or a judge failure)."""
    nv = norm(v)
    return 0.0 if nv == 0 else work(v, direction) / nv


def projection(P, direction) -> float:
    """P . v*_0: negative while the user is on the deficit side, >= 0 once the target half-space is crossed."""
    return dot(P, direction)


def distance_to_zone(P, epsilon_zone: float = 1.0) -> float:
    """Euclidean distance from P to the target zone {every component >= -epsilon_zone}."""
    gap = np.maximum(0.0, -epsilon_zone - np.asarray(P, dtype=float))
    return float(np.sqrt(np.sum(gap ** 2)))


def in_zone(P, epsilon_zone: float = 1.0) -> bool:
    return bool(np.all(np.asarray(P, dtype=float) >= -epsilon_zone))


def thresholds(P0, alpha: float) -> tuple[float, float, float]:
    """(eps_dist, eps_dir, eps_energy): alpha*|P0| twice and |P0|, each rounded to 2 dp as stored."""
    r0 = round(norm(P0), STORE_DECIMALS)
    eps = round(alpha * r0, STORE_DECIMALS)
    return eps, eps, r0
