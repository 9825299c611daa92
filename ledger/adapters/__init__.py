"""Model adapters, one module each, behind the one interface of ``base``.

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
