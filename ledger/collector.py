"""The cyclic garbage collector's thresholds in caseledger's own processes (issue 34).

Reading a SQL text builds sqlglot trees, and every node points to its parent, so
each tree (the parse, the copies the guard and the structural match change) is a
cycle that only the cyclic collector frees. With CPython's default thresholds
(700, 10, 10) a SQL worker reading 500 new texts ran about 570 young collections
and four or five full ones; a full collection walks every object the process holds
(DuckDB's and sqlglot's modules included), and those took 0.13-0.21 CPU s of a
worker's 3.9-5.2 s on the throughput bench's all-distinct workload.

:func:`tune` raises the thresholds to :data:`THRESHOLDS`: young collections about
three times rarer, middle ones about six times, and full ones far rarer (none in a
1,000-prediction run). Garbage is still collected, by the same collector; what changes
is how much of it waits for a pass. Measured on that workload (docs/benchmarks.md): a
worker's collections took 0.13 CPU s instead of 0.26-0.38, and none was a full one; the
garbage that waits longer raised a worker's peak resident memory by 3 to 5 MB (of
about 120). Only processes that caseledger starts itself call it: the ``caseledger``
command and its SQL workers. A program that imports caseledger as a library
(``ledger.api``) keeps its own settings.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "tune"]

#: (young, middle, old) collection thresholds: see the module doc.
THRESHOLDS = (2000, 20, 100)


def tune() -> None:
    """Set this process's collector thresholds to :data:`THRESHOLDS` (idempotent).

    >>> tune(); gc.get_threshold() == THRESHOLDS
    True
    """
    gc.set_threshold(*THRESHOLDS)
