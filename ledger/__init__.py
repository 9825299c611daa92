"""caseledger write side: everything that produces evidence.

The packages in layers, lowest first, in data-flow order; a layer imports only the
layers before it (tests/test_import_contracts.py, docs/architecture.md):

1. the core, which writes and reads evidence: ``errors``, ``bounds``: the exceptions
   every layer raises (each with its exit code and a hint) and the bounds on every
   number a user can pass; ``closing``: the one context-manager shape (closed on
   the way out); ``collector``: the garbage collector's thresholds in caseledger's
   own processes; ``events``: every event shape; ``codec``: their canonical
   bytes, leaf and chain hashes; ``secrets``: what must never be stored; ``keys``:
   Ed25519 signers; ``store``: the append-only log (chain, signatures, stored
   checkpoints; its parts ``store_rows``: one stored row, ``store_plan``: how an
   append's items become rows, ``store_watch``: what other writers added, checked
   before appending on top); ``stores/``: where its rows live (a SQLite file or a PostgreSQL
   database); ``merkle``, ``checkpoint``, ``proofs``: RFC 9162 tree heads and proofs,
   C2SP signed notes, issued over the stored log; ``tree_index``: verified leaf-hash
   blocks and stream heads beside a ledger file; ``stream_read``: one stream read
   through it, every byte checked; ``verify``: check a ledger from its bytes alone,
   naming the first bad seq; ``foreign``: the checks of runs signed on another ledger.
2. ``engines/``: where SQL runs (DuckDB, SQLite, PostgreSQL) behind one Engine and
   Executor contract: dialects, function catalogs as data, the SQL worker protocol,
   typed cells; a DuckDB bank transpiled for another engine.
3. ``adapters/``: the model behind one interface (openai, command, replay, reference).
4. ``harness/``: one attempt from prompt to score (its own docstring lists the order).
5. ``bank/``: read a bank folder, validate, build it, freeze gold, publish.
6. (the ``projections`` package: pure folds over the events, the read side)
7. ``run/``: a run of many attempts: plan, drive an adapter, append every step.
8. ``calibration/``: prove the oracle catches planted errors; variant diagnostics.
9. ``app/``: application services that wire the above for a command (evaluate,
   snapshot, reporting, rescore, baseline, gate inputs, audit export, demo).
10. ``api``: the Python API, the same library calls as the CLI without click;
    ``cli/``: the ``caseledger`` command line: thin click commands, one mapping of
    errors to exit codes.

``banks/``, ``demo/``: package data (built-in banks, the demo's recordings).

The read side lives in the ``projections`` package: pure folds over events.

``__version__`` is the one app version: pyproject.toml's ``[project] version``
as installed (package metadata). Every event that records an app version
(RunStarted, the calibration record) and every adapter client string reads it.
It is read from the metadata when first asked for: ``importlib.metadata`` costs
about 20 ms of CPU to import, which a SQL worker that only executes and a command that
records no version (``init``, ``verify``, ``checkpoint``) would otherwise pay at its
start (sqlglot and psycopg import it themselves).
"""

from __future__ import annotations

import functools


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("caseledger")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    """``ledger.__version__``, read on first use (module docstring)."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
