"""Model adapters, one module each, behind the one interface of ``base``."""

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

__all__ = [
    "ADAPTER_KINDS",
    "Adapter",
    "Failure",
    "Identity",
    "MissingRecording",
    "Reply",
    "Request",
    "build_adapter",
]
