"""The one loop of the read side: fold replay items into a projection state."""

from __future__ import annotations

from collections.abc import Iterable

from projections import caseruns
from projections.caseruns import Item, State

__all__ = ["replay"]


def replay(items: Iterable[Item], state: State | None = None) -> State:
    """Fold every (seq, leaf hash, event) into ``state`` (a fresh one by default).

    Items must come in sequence order; folding ``a`` then ``b`` equals folding ``a + b``.
    """
    apply = caseruns.apply
    current = caseruns.initial() if state is None else state
    for item in items:
        current = apply(current, item)
    return current
