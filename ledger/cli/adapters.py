"""``caseledger adapters``: the adapters ``run --adapter`` accepts, built-in and plug-in."""

from __future__ import annotations

import json

import click

from ledger.adapters.registry import AdapterEntry, find_adapters, load_entry
from ledger.cli.common import exit_with
from ledger.errors import LedgerError

__all__ = ["register"]

_COLUMNS = ("name", "module", "distribution", "version", "source")


def _row(entry: AdapterEntry) -> dict[str, str]:
    return {
        "name": entry.name,
        "module": entry.module,
        "distribution": entry.distribution or "-",
        "version": entry.version or "-",
        "source": "built-in" if entry.builtin else "plug-in",
    }


@click.command("adapters")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--check", is_flag=True, help="Also import every plug-in; exit 1 if one is broken or refused."
)
def adapters_cmd(as_json: bool, check: bool) -> None:
    """List the adapters: name, module, distribution and version.

    Plug-ins are packages that declare an entry point in the group
    caseledger.adapters (docs/adapters.md). A plug-in that reuses a built-in's
    name, or a name another package declares too, is listed as refused.
    """
    registry = find_adapters()
    entries = sorted(registry.adapters.values(), key=lambda e: (not e.builtin, e.name))
    problems = [
        f"refused: {e.name} ({e.value}) from {e.origin()}: {why}" for e, why in registry.refused
    ]
    if check:
        for entry in entries:
            if entry.builtin:
                continue
            try:
                load_entry(entry)
            except LedgerError as exc:
                problems.append(exc.message)
    rows = [_row(e) for e in entries]
    if as_json:
        doc = {
            "adapters": rows,
            "refused": [{**_row(e), "reason": why} for e, why in registry.refused],
        }
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in _COLUMNS}
        click.echo("  ".join(c.upper().ljust(widths[c]) for c in _COLUMNS).rstrip())
        for r in rows:
            click.echo("  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip())
    for line in problems:
        click.echo(line, err=True)
    if check and problems:
        exit_with(1)


def register(group: click.Group) -> None:
    """Add ``adapters`` to the CLI."""
    group.add_command(adapters_cmd)
