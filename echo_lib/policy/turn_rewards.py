"""Per-turn rewards, returns and advantages of multi-turn RL in the sandbox (METHOD.md 4.5, after MICA /
MAPO, arXiv 2603.06194, which trains where EMPA evaluates).

  reward    r_t = (d_{t-1} - d_t) / max(|P0|, 1): how much the judge's EPM evaluation after turn t moved the
            user's state P toward the target zone (d: its distance to the zone), per unit of the case's
            initial deficit, so a case that starts far away does not outweigh one that starts close [DEFAULT];
            0 at a turn no evaluation followed (K > 1) or whose verdict failed (the EPM then moves nothing)
  return    G_t = sum_{k >= t} gamma^(k - t) r_k: a reply is credited with what the later turns gained too,
            so a turn that sets up the next one is not judged by its own window alone (Monte Carlo, no critic)
  advantage A = w * (G - mean_turn) / std_turn + (1 - w) * (G - mean_batch) / std_batch: turn-level
            normalisation compares the replies of one case's dialogues at the same turn index (the group of
            GRPO, one per turn); batch-level normalisation keeps the scale of every turn of the batch, so a
            turn whose group agrees still counts by how good it was against all others (MICA's mix)

A turn index that only one dialogue of its group reached has no group to compare with: its turn-level
term is 0. A spread below MIN_STD is not signal (two cases' equal moves differ by float rounding once divided
by their |P0|): the standard deviation is floored there, so such rounding never becomes a unit advantage. Pure functions on lists of floats; tests/test_policy_multiturn.py checks them by hand.
"""
from __future__ import annotations

import math
from typing import Sequence


def distance_rewards(points: Sequence, turns: int) -> list[float]:
    """r_1 .. r_turns from an EPM trajectory (`EPM.points`: point 0 is P0, then one per evaluated turn)."""
    if not points:
        raise ValueError("an EPM trajectory has at least its point 0 (P0)")
    scale = max(points[0].r, 1.0)
    rewards = [0.0] * turns
    for prev, point in zip(points, points[1:]):
        if 1 <= point.turn <= turns:
            rewards[point.turn - 1] += (prev.distance - point.distance) / scale
    return rewards


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, from the last turn back."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


MIN_STD = 0.01   # rewards are fractions of |P0|; one level of one axis is about 0.1 of a typical case


def _normalised(values: Sequence[float]) -> list[float]:
    if len(values) < 2:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / max(std, MIN_STD) for v in values]


def mixed_advantages(returns: Sequence[Sequence[float]], groups: Sequence, turn_weight: float) -> list[list[float]]:
    """Advantages shaped like `returns` (one list per dialogue, one value per policy turn); `groups[i]` names
    the group of dialogue i (its case): turn-level statistics are taken within a group at each turn index."""
    if len(returns) != len(groups):
        raise ValueError(f"{len(returns)} dialogues but {len(groups)} group labels")
    if not 0.0 <= turn_weight <= 1.0:
        raise ValueError(f"turn_weight={turn_weight!r} must lie in [0, 1]")
    flat = [(i, t) for i, r in enumerate(returns) for t in range(len(r))]
    batch = dict(zip(flat, _normalised([returns[i][t] for i, t in flat])))
    turn: dict[tuple[int, int], float] = {}
    cells: dict[tuple, list[int]] = {}
    for i, t in flat:
        cells.setdefault((groups[i], t), []).append(i)
    for (_, t), members in cells.items():
        for i, a in zip(members, _normalised([returns[i][t] for i in members])):
            turn[(i, t)] = a
    return [[turn_weight * turn[(i, t)] + (1 - turn_weight) * batch[(i, t)] for t in range(len(r))]
            for i, r in enumerate(returns)]
