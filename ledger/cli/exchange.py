"""``caseledger import run FILE`` and ``caseledger signers``: runs exported from another
machine, and the keys this ledger trusts to have signed them (docs/exchange.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.app.exchange import import_run
from ledger.app.trust import parse_trust_key, revoke_signer, trust_signer
from ledger.checkpoint import MAX_NOTE_BYTES
from ledger.cli.common import Context, pass_ctx, read_small_text
from ledger.errors import UsageError
from ledger.keys import load_default_signer
from ledger.store import Ledger

__all__ = ["register"]


@click.group("import")
def import_group() -> None:
    """Take in evidence written on another machine."""


def _key_text(value: str) -> tuple[str, str]:
    """(text, label) of a verifier key given as a file or as the string itself."""
    path = Path(value)
    if path.is_file():
        return read_small_text(path, "key file", MAX_NOTE_BYTES), str(path)
    if "+" in value:
        return value, "the verifier key given"
    raise UsageError(
        f"no key file {value}", hint="pass a file holding name+keyid+base64, or that string"
    )


def _open_ledger(ctx: Context) -> Ledger:
    if not Ledger.exists(ctx.ledger):
        raise UsageError(
            f"no ledger at {ctx.ledger_name}", hint="run `caseledger init` first (or --ledger)"
        )
    return Ledger.open(ctx.ledger)


@import_group.command("run")
@click.argument(
    "bundle", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--trust",
    "trust_key",
    metavar="KEY.pub",
    help="Trust this verifier key (a file or the string) in the same append, then import.",
)
@pass_ctx
def import_run_cmd(ctx: Context, bundle: Path, trust_key: str | None) -> None:
    """Append a run bundle (from `caseledger export run`) with its original signatures.

    Every signature, the bank, the run's completeness, that every key that signed the
    run is trusted here (`caseledger signers trust`, or --trust), the origin the key
    attested and this ledger's copy of the run (if any) are checked first; nothing is
    appended when a check fails. Importing the same bundle again does nothing.
    """
    trust = None
    if trust_key is not None:
        text, label = _key_text(trust_key)
        trust = parse_trust_key(text, label, None)
    signer = load_default_signer(ctx.home)
    with _open_ledger(ctx) as ledger:
        done = import_run(ledger, signer, _read_bundle(bundle), str(bundle), trust=trust)
    if done.already:
        click.echo(
            f"run {done.run_id} from {done.origin} is already imported ({done.events} events): "
            "nothing to do"
        )
        return
    for name in done.trusted:
        click.echo(f"trusted {name} for runs made elsewhere, by {signer.name} ({signer.key_id})")
    for name in done.registered:
        click.echo(
            f"accepted foreign signer {name} of {done.origin}, by {signer.name} ({signer.key_id})"
        )
    for name, seq in done.trusted_since:
        click.echo(f"signed by {name}, trusted since seq {seq}")
    click.echo(
        f"imported run {done.run_id} from {done.origin}: {done.events} events, original "
        f"signatures checked, appended at seq {done.seqs[0]}-{done.seqs[-1]} of {ctx.ledger_name}"
    )


def _read_bundle(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read bundle {path}: {exc.strerror or exc}") from None


@click.group("signers")
def signers() -> None:
    """Keys this ledger trusts to have signed runs made elsewhere."""


@signers.command("trust")
@click.argument("key_file", metavar="KEY.pub")
@click.option("--name", required=True, help="The key's name (its key id commits to it).")
@click.option(
    "--origin",
    help="Trust the key only for runs of this ledger (caseledger/<16 hex>, as verify prints).",
)
@pass_ctx
def signers_trust(ctx: Context, key_file: str, name: str, origin: str | None) -> None:
    """Trust a verifier key to sign runs imported with `caseledger import run`.

    Get the key from its owner over a channel you trust (never from a bundle). The
    operator key signs a signer.trusted.v1 event; a name names one key per ledger.
    """
    text, label = _key_text(key_file)
    key = parse_trust_key(text, label, name)
    signer = load_default_signer(ctx.home)
    with _open_ledger(ctx) as ledger:
        entry = trust_signer(ledger, key, signer, origin)
    scope = f" for runs of {entry.origin}" if entry.origin else ""
    click.echo(
        f"trusted {entry.name} ({entry.key_id}){scope} at seq {entry.trusted_seq}, by "
        f"{signer.name} ({signer.key_id})"
    )


@signers.command("revoke")
@click.argument("name")
@pass_ctx
def signers_revoke(ctx: Context, name: str) -> None:
    """Revoke the trust in a key (by name or key id): no run it signed is imported after.

    Runs imported before stay readable; reports say the trust was revoked and when.
    """
    signer = load_default_signer(ctx.home)
    with _open_ledger(ctx) as ledger:
        entry = revoke_signer(ledger, name, signer)
    click.echo(
        f"revoked trust in {entry.name} ({entry.key_id}) at seq {entry.revoked_seq}; runs "
        "imported before stay readable"
    )


@signers.command("list")
@pass_ctx
def signers_list(ctx: Context) -> None:
    """The keys trusted for runs made elsewhere, with when they were trusted or revoked."""
    if not Ledger.exists(ctx.ledger):
        raise UsageError(f"no ledger at {ctx.ledger_name}", hint="run `caseledger init` first")
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        entries = ledger.keyring().trust_entries()
    if not entries:
        click.echo("no trusted keys (caseledger signers trust KEY.pub --name NAME adds one)")
    for e in entries:
        scope = f"  only runs of {e.origin}" if e.origin else ""
        state = "active" if e.revoked_seq is None else f"revoked at seq {e.revoked_seq}"
        click.echo(f"{e.name}  {e.key_id}  trusted since seq {e.trusted_seq}  {state}{scope}")
        click.echo(f"  {e.verifier_key}")


def register(group: click.Group) -> None:
    """Add the ``import`` and ``signers`` groups to the ``caseledger`` group."""
    group.add_command(import_group)
    group.add_command(signers)
