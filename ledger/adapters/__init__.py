"""Model adapters, one module each, behind the one interface of ``base``.

- ``base``: the interface (Request, Reply, Failure) and ``build_adapter()``.
- ``process``: a model program run once in its own supervised process group
  (used by ``command`` and ``pi``).
- ``openai``: any OpenAI-compatible Chat Completions endpoint.
- ``command``: any executable, prompt on stdin and answer on stdout.
- ``pi``: the ``pi`` coding-agent CLI as a single-turn, tool-free model.
- ``replay``: recorded outputs from a JSON Lines file, no model calls;
  ``benchmark_files``: BIRD's and Spider's own prediction files (and the bank id a
  benchmark's database id becomes).
- ``reference``: answers with the reference SQL (a self-test of the harness).
- ``pricing``: price snapshots and the one cost rule.

Which adapters exist (the built-ins and plug-ins of the entry-point group
``caseledger.adapters``) is ``registry``'s business: ``find_adapters()``.
"""

from ledger.adapters.base import (
    ADAPTER_KINDS,
    Adapter,
    Failure,
    Identity,
    MissingRecording,
    Reply,
    Request,
    build_adapter,
)
from ledger.adapters.registry import (
    ENTRY_POINT_GROUP,
    AdapterEntry,
    Registry,
    find_adapters,
)

__all__ = [
    "ADAPTER_KINDS",
    "ENTRY_POINT_GROUP",
    "Adapter",
    "AdapterEntry",
    "Failure",
    "Identity",
    "MissingRecording",
    "Registry",
    "Reply",
    "Request",
    "build_adapter",
    "find_adapters",
]
