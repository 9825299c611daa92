"""A small Python API for driving caseledger from your own code (docs/python-api.md).

The same library calls as the CLI, without click: open (or create) a ledger,
publish or resolve a bank, build an adapter (a built-in kind, a plug-in, or any
object of your own that implements ``ledger.adapters.Adapter``), run an
evaluation plan and append it as signed events. Nothing here reads environment
variables or default paths: the ledger location and, for a ledger on a
PostgreSQL server, the local ``home`` folder (keys, built bank databases) are
given explicitly.

>>> sorted(__all__)[:3]
['Adapter', 'Failure', 'Identity']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledger.adapters.base import Adapter, Failure, Identity, Reply, Request
from ledger.adapters.base import build_adapter as _build_adapter
from ledger.app.evaluate import evaluate, now
from ledger.app.reporting import report_bytes
from ledger.bank.publish import publish
from ledger.bank.registry import PublishedBank, find_published, resolve_source
from ledger.closing import Closing
from ledger.errors import UsageError
from ledger.keys import Signer, load_default_signer
from ledger.run.runner import Progress, RunPlan, RunSummary
from ledger.store import Ledger
from ledger.stores import Location, is_url, parse_location

__all__ = [
    "Adapter",
    "Failure",
    "Identity",
    "Progress",
    "PublishedBank",
    "Reply",
    "Request",
    "RunPlan",
    "RunSummary",
    "Workspace",
    "open_ledger",
]


class Workspace(Closing):
    """An open ledger with its local home folder (keys, built banks).

    Use it as a context manager (``with open_ledger(...) as ws:``); ``close``
    closes the ledger. Appending needs the operator key ``<home>/keys/operator.key``
    (made by ``caseledger init`` or ``open_ledger(..., create=True)``).
    """

    def __init__(self, ledger: Ledger, location: Location, home: Path) -> None:
        self.ledger = ledger
        self.location = location
        self.home = home

    # The ledger file, or the home folder for a ledger on a server: kept out of
    # prompts (leak check) and out of a command adapter's environment.
    @property
    def _local_path(self) -> Path:
        return self.location if isinstance(self.location, Path) else self.home

    def signer(self) -> Signer:
        """The operator key of this ledger (StoreError/UsageError when it is missing)."""
        return load_default_signer(self.home)

    def publish_bank(self, source: str | Path) -> PublishedBank:
        """Publish a bank folder or a built-in bank name (a no-op when already published)."""
        result = publish(
            self.ledger, self.signer(), resolve_source(str(source)), self.home, cwd=Path.cwd()
        )
        return result.published

    def resolve_bank(self, ref: str) -> PublishedBank:
        """A bank already published in this ledger, by ``NAME`` or ``NAME@VERSION``."""
        return find_published(self.ledger, self.home, ref)

    def build_adapter(
        self,
        kind: str,
        options: Mapping[str, Any] | None = None,
        *,
        bank: PublishedBank | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Adapter:
        """Build a built-in or plug-in adapter by kind, as ``caseledger run --adapter`` does.

        ``options`` are the adapter's options by name (``{"model": "m"}``);
        ``bank`` is needed by the reference adapter (it answers with the bank's
        reference SQL) and by replays of a benchmark's prediction files.
        """
        if kind == "reference" and bank is None:
            raise UsageError("the reference adapter needs bank= (it answers with its references)")
        return _build_adapter(
            kind,
            dict(options or {}),
            cases=bank.references() if kind == "reference" and bank is not None else None,
            environ=environ,
            hidden_paths=(self._local_path, self.home),
            bank=bank.event if bank is not None else None,
        )

    def evaluate(
        self,
        bank: PublishedBank,
        adapter: Adapter,
        plan: RunPlan | None = None,
        *,
        variants: bool = True,
        clock: Callable[[], str] = now,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> RunSummary:
        """Run ``plan`` (default: a new run named after the adapter kind) and append it.

        Every attempt becomes signed events in the ledger, exactly as with
        ``caseledger run``: the same checks first, in the same order
        (``ledger.app.evaluate``). ``variants``: also run each answer on the bank's
        calibration variants (the CLI's default; ``--no-variants`` is False). The
        adapter is not closed: it is yours.
        """
        return evaluate(
            self.ledger,
            self.home,
            bank,
            adapter,
            plan,
            local_path=self._local_path,
            variants=variants,
            clock=clock,
            on_progress=on_progress,
        )

    def report(self, fmt: str = "json", *, runs: list[str] | None = None) -> bytes:
        """The report of this ledger (``json``, ``md`` or ``html``), as ``caseledger report``."""
        return report_bytes(self.location, fmt=fmt, runs=runs)[0]

    def close(self) -> None:
        """Close the ledger."""
        self.ledger.close()


def open_ledger(
    location: str | Path,
    *,
    home: str | Path | None = None,
    create: bool = False,
    operator: str = "operator",
) -> Workspace:
    """Open the ledger at ``location`` (a file, or a ``postgresql://`` URL).

    ``home`` holds the operator key and the built bank databases; it defaults to
    the ledger file's folder and must be given for a ledger on a server.
    ``create``: make the ledger and its operator key ``<home>/keys/operator.key``
    first when no ledger exists there (as ``caseledger init``); an existing one
    is opened as it is.
    """
    where = parse_location(location)
    if home is None:
        if is_url(where):
            raise UsageError(
                "a ledger on a server needs home= (the local folder for keys and built banks)"
            )
        home = Path(where).parent
    home = Path(home)
    if create and not Ledger.exists(where):
        if isinstance(where, Path):
            where.parent.mkdir(parents=True, exist_ok=True)
        signer = Signer.generate(operator, role="operator")
        signer.save(home / "keys" / "operator.key")
        Ledger.create(where, signer).close()
    elif not Ledger.exists(where):
        raise UsageError(
            f"no ledger at {location}", hint="pass create=True, or run `caseledger init`"
        )
    return Workspace(Ledger.open(where), where, home)
