"""Price snapshots: per-model token prices from a JSON file, and cost estimates from usage.

A snapshot is a JSON object (docs/adapters.md, "Price snapshots")::

    {"format": "caseledger-prices/1", "currency": "USD", "as_of": "2026-01-15",
     "source": "https://example.com/pricing",
     "models": {"gpt-x": {"input": "0.40", "cached_input": "0.10", "output": "1.60"}}}

Prices are decimal strings per million tokens. The run records the SHA-256
of the file's bytes, so the exact figures an estimate used can be checked.

``cost_of`` is the one cost rule every adapter applies (DESIGN, fine print
"Efficiency"): subscription / OAuth access has no cost; otherwise the
provider's bill when it reports one; otherwise an estimate from the price
snapshot (labelled ``estimated_cost``); otherwise none. ``bill`` is the one
check of a reported bill.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from ledger import events
from ledger.bounds import decimal_problem
from ledger.codec import sha256_hex
from ledger.errors import AdapterError, UsageError

__all__ = [
    "FORMAT",
    "Cost",
    "PriceSnapshot",
    "Prices",
    "bill",
    "check_priced",
    "cost_of",
    "load_snapshot",
    "price_key",
]

FORMAT = "caseledger-prices/1"
_MILLION = Decimal(1_000_000)
_TOP_KEYS = {"format", "currency", "as_of", "source", "models"}
_PRICE_KEYS = {"input", "cached_input", "cache_write", "output"}


class Prices(msgspec.Struct, frozen=True):
    """One model's prices per million tokens (None: not given)."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None


class PriceSnapshot(msgspec.Struct, frozen=True):
    """A loaded snapshot: its digest (``sha256:<hex>`` of the file bytes) and prices."""

    digest: str
    currency: str
    models: dict[str, Prices]

    def estimate(self, usage: events.Usage | None, model: str | None) -> Decimal | None:
        """Estimated cost of one call, or None when a figure is missing.

        cost = (input x in + cache_read x cached_input + cache_write x cache_write
        + output x out) / 1e6. Reasoning tokens are part of output and are not
        added again. A cache count that was not reported (None) or is 0 needs no
        price; a non-zero cache count without its price gives None.

        >>> snap = PriceSnapshot(digest="sha256:00", currency="USD",
        ...     models={"m": Prices(input=Decimal("2"), output=Decimal("8"))})
        >>> snap.estimate(events.Usage(input=1000, output=500), "m")
        Decimal('0.006')
        """
        if usage is None or model is None or model not in self.models:
            return None
        prices = self.models[model]
        if usage.input is None or usage.output is None:
            return None
        total = usage.input * prices.input + usage.output * prices.output
        for count, price in (
            (usage.cache_read, prices.cached_input),
            (usage.cache_write, prices.cache_write),
        ):
            if not count:
                continue
            if price is None:
                return None
            total += count * price
        return total / _MILLION


def _price(path: str, model: str, key: str, value: Any) -> Decimal:
    where = f"price snapshot {path}: models.{model}.{key}"
    if not isinstance(value, str):
        raise AdapterError(
            f"{where} must be a decimal string, got {value!r}",
            hint='write prices as strings, e.g. "0.40" (JSON numbers may be floats)',
        )
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise AdapterError(f"{where} is not a decimal number: {value!r}") from None
    if not number.is_finite() or number < 0:
        raise AdapterError(f"{where} must be a finite, non-negative number: {value!r}")
    return number


def load_snapshot(path: str | Path) -> PriceSnapshot:
    """Read and check a price snapshot file.

    Raises:
        UsageError: the file cannot be read.
        AdapterError: it is not a valid snapshot (the message names the field).
    """
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read price snapshot {name}: {exc.strerror}") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AdapterError(f"price snapshot {name} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise AdapterError(f"price snapshot {name} must be a JSON object")
    extra = sorted(set(doc) - _TOP_KEYS)
    if extra:
        raise AdapterError(f"price snapshot {name}: unknown field {extra[0]!r}")
    if doc.get("format") != FORMAT:
        raise AdapterError(
            f"price snapshot {name}: format must be {FORMAT!r}, got {doc.get('format')!r}"
        )
    currency = doc.get("currency")
    if not isinstance(currency, str) or not currency:
        raise AdapterError(f"price snapshot {name}: currency must be a non-empty string")
    models_doc = doc.get("models")
    if not isinstance(models_doc, dict) or not models_doc:
        raise AdapterError(f"price snapshot {name}: models must be a non-empty object")
    models: dict[str, Prices] = {}
    for model, entry in models_doc.items():
        if not isinstance(entry, dict):
            raise AdapterError(f"price snapshot {name}: models.{model} must be an object")
        extra = sorted(set(entry) - _PRICE_KEYS)
        if extra:
            raise AdapterError(f"price snapshot {name}: models.{model}: unknown field {extra[0]!r}")
        for key in ("input", "output"):
            if key not in entry:
                raise AdapterError(f"price snapshot {name}: models.{model} needs {key!r}")
        got = {k: _price(name, model, k, v) for k, v in entry.items()}
        models[model] = Prices(**got)
    return PriceSnapshot(digest=sha256_hex(data), currency=currency, models=models)


def price_key(
    snapshot: PriceSnapshot | None, requested: str | None, reported: str | None
) -> str | None:
    """The model whose prices apply: the requested id if given, else the reported one."""
    if snapshot is None:
        return None
    return requested if requested is not None else reported


def check_priced(snapshot: PriceSnapshot | None, model: str | None, path: str) -> None:
    """Refuse a snapshot that has no prices for the requested model (a typo would hide costs)."""
    if snapshot is None or model is None or model in snapshot.models:
        return
    raise UsageError(
        f"price snapshot {path} has no prices for model {model!r}",
        hint="it has: " + ", ".join(sorted(snapshot.models)),
    )


class Cost(msgspec.Struct, frozen=True):
    """The cost figures of one reply: at most one is set (both None: no cost known)."""

    cost: Decimal | None
    estimated_cost: Decimal | None


def bill(value: Any) -> Decimal | None:
    """A provider's reported bill as an exact Decimal (None when it reported none).

    A bill is a JSON number read exactly (an int, or a Decimal from a parser run
    with ``parse_float=Decimal``) or a decimal string; finite, >= 0 and within
    30 digits either side of the point (a larger figure would overflow every
    sum a report makes).

    Raises:
        ValueError: anything else (a float, a boolean, a negative or non-numeric value).

    >>> bill("0.0031"), bill(2), bill(None)
    (Decimal('0.0031'), Decimal('2'), None)
    """
    if value is None:
        return None
    number: Decimal | None = None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int) and not isinstance(value, bool):
        number = Decimal(value)
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            number = None
    if number is None or not number.is_finite() or number < 0 or decimal_problem(number):
        raise ValueError(f"cost must be a non-negative decimal number, got {value!r:.60}")
    return number


def cost_of(
    usage: events.Usage | None,
    price_snapshot: PriceSnapshot | None,
    billed: Decimal | None,
    *,
    model: str | None,
    auth_mode: str | None,
) -> Cost:
    """The one cost rule of a reply (every adapter calls it).

    ``billed`` is the provider's bill (see :func:`bill`), ``model`` the model
    whose snapshot prices apply (:func:`price_key`), ``auth_mode`` the run's.

    >>> snap = PriceSnapshot(digest="sha256:00", currency="USD",
    ...     models={"m": Prices(input=Decimal("2"), output=Decimal("8"))})
    >>> use = events.Usage(input=1000, output=500)
    >>> cost_of(use, snap, None, model="m", auth_mode="api_key")
    Cost(cost=None, estimated_cost=Decimal('0.006'))
    >>> cost_of(use, snap, Decimal("0.01"), model="m", auth_mode=None)
    Cost(cost=Decimal('0.01'), estimated_cost=None)
    >>> cost_of(use, snap, Decimal("0.01"), model="m", auth_mode="oauth")
    Cost(cost=None, estimated_cost=None)
    """
    if auth_mode == "oauth":
        return Cost(None, None)  # subscription access: there is no per-call price
    if billed is not None:
        return Cost(billed, None)
    if price_snapshot is None:
        return Cost(None, None)
    return Cost(None, price_snapshot.estimate(usage, model))
