"""caseledger write side: everything that produces evidence.

The modules in data-flow order (bank -> prompt -> adapter -> protocol -> guard
-> worker -> compare -> score -> events -> projections -> reports -> gate):

- ``errors``, ``bounds``: the exceptions every layer raises (each with its exit
  code and a hint) and the bounds on every number a user can pass.
- ``bank/``: read a bank folder, validate, build it in DuckDB, freeze gold, publish.
- ``harness/``: one attempt from prompt to score (its own docstring lists the order).
- ``engines/``: where SQL runs (DuckDB, SQLite, PostgreSQL) behind one Engine and
  Executor contract; a DuckDB bank transpiled for another engine.
- ``adapters/``: the model behind one interface (openai, command, replay, reference).
- ``calibration/``: prove the oracle catches planted errors; variant diagnostics.
- ``events``: every event shape; ``codec``: their canonical bytes, leaf and chain
  hashes; ``secrets``: what must never be stored; ``keys``: Ed25519 signers.
- ``store``: the append-only log (chain, signatures, stored checkpoints);
  ``stores/``: where its rows live (a SQLite file or a PostgreSQL database).
- ``merkle``, ``checkpoint``, ``proofs``: RFC 9162 tree heads and proofs, C2SP
  signed notes, issued over the stored log.
- ``verify``: check a ledger from its bytes alone, naming the first bad seq;
  ``foreign``: the checks of runs signed on another ledger (verify, import run).
- ``app/``: application services that wire the above for a command (evaluate,
  snapshot, reporting, rescore, baseline, gate inputs, audit export, demo).
- ``api``: the Python API, the same library calls as the CLI without click.
- ``cli/``: the ``caseledger`` command line: thin click commands, one mapping of
  errors to exit codes.
- ``banks/``, ``demo/``: package data (built-in banks, the demo's recordings).

The read side lives in the ``projections`` package: pure folds over events.

``__version__`` is the one app version: pyproject.toml's ``[project] version``
as installed (package metadata). Every event that records an app version
(RunStarted, the calibration record) and every adapter client string reads it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("caseledger")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
