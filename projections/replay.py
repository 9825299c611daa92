"""The one loop of the read side: fold replay items into a projection state."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator

from projections import caseruns
from projections.caseruns import Item, State

__all__ = ["paused_gc", "replay"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a fold builds a large, acyclic state.

    The state only grows (CaseRuns hold their events, which reference nothing back),
    so collections would find nothing to free; with the collector on, each pass walks
    the whole growing state and a replay slows down with the ledger's length.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def replay(items: Iterable[Item], state: State | None = None) -> State:
    """Fold every (seq, leaf hash, event) into ``state`` (a fresh one by default).

    Items must come in sequence order; folding ``a`` then ``b`` equals folding ``a + b``.
    """
    apply = caseruns.apply
    current = caseruns.initial() if state is None else state
    with paused_gc():
        for item in items:
            current = apply(current, item)
    return current
