"""Held-out splits by unit (a dialogue, a scenario), never by turn, so nothing leaks across them."""
from __future__ import annotations

import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def holdout_split(units: Sequence[T], test_fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """(train, test): a seeded shuffle of `units`, `test_fraction` of them (at least one) held out."""
    if len(units) < 2:
        raise ValueError(f"cannot split {len(units)} unit(s) into train and test; add data")
    order = list(units)
    random.Random(seed).shuffle(order)
    n_test = min(len(order) - 1, max(1, round(len(order) * test_fraction)))
    return order[n_test:], order[:n_test]
