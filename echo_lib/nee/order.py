"""Presentation order: each judge sees the transcripts in its own seeded random order, recorded so it
can be reversed (position -> model and case) from order.json alone.

The order matters for human raters (fatigue, anchoring on the first items) and, for LLM judges, it sets
the neutral label a transcript carries in the prompt ("Conversation 7"), which replaces the case id.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Order:
    judge: str
    seed: list[int]                  # the generator's seed: [run seed, judge index]
    permutation: list[int]           # permutation[position] = index into the canonical item list

    def position_of(self) -> dict[int, int]:
        """item index -> position (the inverse permutation)."""
        return {item: pos for pos, item in enumerate(self.permutation)}


def shuffled(judge: str, n: int, seed: int, judge_index: int) -> Order:
    rng = np.random.default_rng([seed, judge_index])
    return Order(judge, [seed, judge_index], [int(i) for i in rng.permutation(n)])


def record(items: list[tuple[str, str]], orders: list[Order], pairs: list[tuple[str, str]] | None = None) -> dict:
    """The content of order.json: the canonical item list and every judge's permutation."""
    return {"items": [{"model": m, "case_id": c} for m, c in items],
            "how_to_read": "judges[j].permutation[position] is the index in items of what judge j saw at that "
                           "position (ratings.csv column 'position')",
            "judges": {o.judge: {"seed": o.seed, "permutation": o.permutation} for o in orders},
            **({"pairs": [{"model": m, "case_id": c} for m, c in pairs]} if pairs is not None else {})}


def unshuffle(order_json: dict, judge: str, position: int) -> tuple[str, str]:
    """(model, case_id) of what `judge` saw at `position`, from order.json's content."""
    item = order_json["items"][order_json["judges"][judge]["permutation"][position]]
    return item["model"], item["case_id"]
