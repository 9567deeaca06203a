"""One batched model call for all active cases, with a fallback that finds the case that broke it.

Lockstep: each role's calls for every active case go out as one batch. If that batch raises (a model
error, a prompt too long for the context), the cases are tried one by one so only the case that fails
is recorded as failed and the others go on.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class CaseFailure(Exception):
    """A per-case result that is a failure (a model error, or an answer that cannot be used)."""


def isolate(call: Callable[[list[T]], list[R]], items: Sequence[T], what: str) -> list[R | CaseFailure]:
    """`call(items)` -> one result per item; on an exception, each item alone. Failed items give a CaseFailure."""
    items = list(items)
    if not items:
        return []
    try:
        out = call(items)
    except Exception as err:  # noqa: BLE001  reported per case below
        if len(items) == 1:
            log.warning("%s failed: %s: %s", what, type(err).__name__, err)
            return [CaseFailure(f"{what}: {type(err).__name__}: {err}")]
        log.warning("%s: the batch of %d failed (%s: %s); trying each case alone", what, len(items),
                    type(err).__name__, err)
        return [r for item in items for r in isolate(call, [item], what)]
    if len(out) != len(items):
        raise RuntimeError(f"{what}: {len(out)} results for {len(items)} cases")
    return out
