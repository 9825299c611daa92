"""Ledger commands: init, log, verify, checkpoint, prove, keys (thin: parse, call, print)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import click
import msgspec

from ledger.app.output import is_stdout, write_output
from ledger.bounds import MAX_WORKERS
from ledger.checkpoint import MAX_NOTE_BYTES, check_note_format
from ledger.cli.common import Context, exit_with, pass_ctx, read_small_text
from ledger.errors import UsageError, VerificationError
from ledger.events import EVENT_TYPES, EventBase, tag_of
from ledger.keys import KeyEntry, Signer, load_default_signer
from ledger.proofs import issue_checkpoint, prove_consistency, prove_inclusion
from ledger.store import Ledger, StoredEvent, link_of
from ledger.verify import verify_ledger

__all__ = ["register"]

DEFAULT_OPERATOR = "caseledger-operator"


# ----------------------------------------------------------------- small helpers


def _read_text(path: Path, what: str) -> str:
    """A checkpoint note or key file, read no further than MAX_NOTE_BYTES (``/dev/zero``)."""
    return read_small_text(path, what, MAX_NOTE_BYTES)


def _read_note(path: Path) -> str:
    """A checkpoint file that is a well-formed signed note (else exit 2: could not check)."""
    note = _read_text(path, "checkpoint")
    check_note_format(note, label=str(path), origin_pattern=r"caseledger/[0-9a-f]{16}")
    return note


def _event_of(row: StoredEvent) -> EventBase:
    # A stored body that is not an event is bad ledger content: exit 1 naming the seq.
    try:
        if not isinstance(row.body, bytes):
            raise TypeError("the body is not a blob")
        row.body.decode("utf-8")
        return row.event()
    except (
        msgspec.DecodeError,
        msgspec.ValidationError,
        TypeError,
        UnicodeDecodeError,
        RecursionError,
    ) as exc:
        raise VerificationError(
            f"seq {row.seq}: the stored body is not a caseledger event ({exc})",
            seq=row.seq,
            hint="run `caseledger verify` on this ledger",
        ) from None


def _keys_arg(values: Iterable[str]) -> list[str]:
    """``--key`` takes a verifier-key string or a file holding one."""
    return [_read_text(Path(v), "key file").strip() if Path(v).is_file() else v for v in values]


def _event_class(name: str) -> type[EventBase]:
    for cls in EVENT_TYPES:
        tag = tag_of(cls)
        if name in (tag, tag.rsplit(".", 1)[0], cls.__name__):
            return cls
    known = ", ".join(tag_of(c).rsplit(".", 1)[0] for c in EVENT_TYPES)
    raise UsageError(f"unknown event type {name!r}; known types: {known}")


def _select(ledger: Ledger, run: str | None, type_name: str | None) -> Iterator[StoredEvent]:
    if type_name is not None:
        rows: Iterable[StoredEvent] = ledger.events_of_type(_event_class(type_name))
    elif run is not None:
        rows = ledger.stream_events(run)
    else:
        rows = ledger.iter_events()
    for row in rows:
        if run is None or _event_of(row).stream == run:
            yield row


def _log_line(row: StoredEvent, as_json: bool) -> str:
    event = _event_of(row)
    if as_json:
        head = f'{{"seq":{row.seq},"leaf_hash":"{link_of(row.leaf_hash)}","key_id":"{row.key_id}"'
        return head + ',"event":' + row.body.decode("utf-8") + "}"
    where = f"{event.stream}#{event.stream_seq}"
    return f"{row.seq:>8}  {event.at}  {tag_of(type(event)):<22}  {where:<24}  {row.key_id}"


def _key_line(entry: KeyEntry) -> str:
    retired = (
        f"retired {entry.retired_at} (seq {entry.retired_seq})" if entry.retired_at else "active"
    )
    return (
        f"{entry.name}  {entry.role}  {entry.key_id}  registered seq {entry.registered_seq} "
        f"({entry.valid_from})  {retired}\n  {entry.verifier_key}"
    )


def _proof_text(what: str, proof: dict[str, object]) -> str:
    lines = [what]
    for key, value in proof.items():
        if isinstance(value, list):
            lines.append(f"{key}:" + "".join(f"\n  {v}" for v in value))
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


# ----------------------------------------------------------------- commands


@click.command()
@click.option("--name", default=DEFAULT_OPERATOR, show_default=True, help="Operator key name.")
@click.option(
    "--grant-writer",
    "writers",
    multiple=True,
    metavar="ROLE",
    help="PostgreSQL: let ROLE append (USAGE, INSERT and SELECT, the append lock; repeatable).",
)
@click.option(
    "--grant-reader",
    "readers",
    multiple=True,
    metavar="ROLE",
    help="PostgreSQL: let ROLE read (USAGE and SELECT only; repeatable).",
)
@pass_ctx
def init(ctx: Context, name: str, writers: tuple[str, ...], readers: tuple[str, ...]) -> None:
    """Create the ledger and its operator key (keys/operator.key, mode 0600)."""
    if (writers or readers) and isinstance(ctx.ledger, Path):
        raise UsageError(
            "--grant-writer and --grant-reader are for a ledger database (postgresql://...)",
            hint="a ledger file is protected by the file's permissions",
        )
    if Ledger.exists(ctx.ledger):
        raise UsageError(
            f"a ledger already exists at {ctx.ledger_name}", hint="nothing was changed"
        )
    signer = Signer.generate(name, role="operator")
    key_path = ctx.home / "keys" / "operator.key"
    signer.save(key_path)
    Ledger.create(ctx.ledger, signer).close()
    click.echo(f"created ledger {ctx.ledger_name}")
    if writers or readers:
        from ledger.stores.postgres import grant

        grant(str(ctx.ledger), writers=writers, readers=readers)
        for role in writers:
            click.echo(f"granted {role}: append (INSERT, SELECT; UPDATE of the append lock)")
        for role in readers:
            click.echo(f"granted {role}: read (SELECT)")
    click.echo(f"operator key {key_path} (mode 0600, keep it secret)")
    click.echo(
        f"verifier key (publish it; auditors pass it to `verify --key`):\n{signer.verifier_key}"
    )


@click.command("log")
@click.option("--run", "run", help="Only this run (stream).")
@click.option("--type", "type_name", help="Only this event type (e.g. prompt.sent).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@pass_ctx
def log_cmd(ctx: Context, run: str | None, type_name: str | None, as_json: bool) -> None:
    """List events in sequence order."""
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        shown = 0
        for row in _select(ledger, run, type_name):
            click.echo(_log_line(row, as_json))
            shown += 1
        # Nothing listed for a run the ledger has never seen is a mistyped name, not an
        # empty run (a run's stream always holds its RunStarted).
        if run is not None and not shown and run not in ledger.streams():
            raise UsageError(
                f"no run {run!r} in {ctx.ledger_name}",
                hint="`caseledger runs` lists the runs; --run also takes the stream 'ledger'",
            )


@click.command()
@click.option(
    "--checkpoint",
    "checkpoint_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A signed checkpoint the ledger must match (repeatable).",
)
@click.option("--key", "keys", multiple=True, help="Trusted operator verifier key, or a file.")
@click.option("--workers", type=click.IntRange(1, MAX_WORKERS), help="Processes for signatures.")
# --recompute (added by the report/rescore area; the check lives in ledger/app/rescore.py)
@click.option(
    "--recompute",
    is_flag=True,
    help="Also re-execute every scored SQL and re-derive every score from its evidence.",
)
@click.option(
    "--banks",
    "banks_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --recompute: the published bank files (default: banks/ beside the ledger).",
)
@pass_ctx
def verify(
    ctx: Context,
    checkpoint_files: tuple[Path, ...],
    keys: tuple[str, ...],
    workers: int | None,
    recompute: bool,
    banks_dir: Path | None,
) -> None:
    """Verify every event, signature and stream chain, and the given checkpoints."""
    notes = [_read_note(p) for p in checkpoint_files]
    if banks_dir is not None and not recompute:
        raise UsageError("--banks is only read with --recompute", hint="add --recompute")
    hook = None
    if recompute:
        from ledger.app.rescore import recompute_hook

        hook = recompute_hook(ctx.home / "banks" if banks_dir is None else banks_dir)
    try:
        result = verify_ledger(
            ctx.ledger,
            checkpoints=notes,
            checkpoint_labels=[str(p) for p in checkpoint_files],
            trusted_keys=_keys_arg(keys),
            workers=workers,
            recompute=hook,
        )
    except VerificationError as exc:
        click.echo(f"verification FAILED: {exc.diagnostics()}", err=True)
        exit_with(1)
    click.echo(result.summary())
    if hook is not None:
        click.echo(hook.summary())


@click.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write here (- for stdout, the default).",
)
@pass_ctx
def checkpoint(ctx: Context, output: Path | None) -> None:
    """Sign a checkpoint (C2SP signed note) over the committed log and record it."""
    signer = load_default_signer(ctx.home)
    with Ledger.open(ctx.ledger) as ledger:
        note = issue_checkpoint(ledger, signer)
    if output is None:
        click.echo(note, nl=False)
    else:
        write_output(output, [note.encode("utf-8")])
        click.echo(f"wrote {output}", err=is_stdout(output))


@click.group()
def prove() -> None:
    """Merkle proofs against signed checkpoints."""


_KEY_OPTION = click.option("--key", "keys", multiple=True, help="Trusted verifier key, or a file.")
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the proof as JSON.")
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@prove.command("inclusion")
@click.option("--seq", required=True, type=click.IntRange(min=0), help="The event's seq.")
@click.option(
    "--checkpoint", "checkpoint_file", required=True, type=_FILE, help="The signed checkpoint."
)
@_KEY_OPTION
@_JSON_OPTION
@pass_ctx
def prove_inclusion_cmd(
    ctx: Context, seq: int, checkpoint_file: Path, keys: tuple[str, ...], as_json: bool
) -> None:
    """Prove (and check) that event SEQ is in the checkpoint's tree."""
    note = _read_note(checkpoint_file)
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        proof = prove_inclusion(
            ledger, seq, note, trusted_keys=_keys_arg(keys), label=str(checkpoint_file)
        )
    what = f"verified: seq {seq} is in the tree of size {proof.size} signed in {checkpoint_file}"
    click.echo(
        json.dumps(proof.to_dict(), indent=2) if as_json else _proof_text(what, proof.to_dict())
    )


@prove.command("consistency")
@click.option("--old", "old_file", required=True, type=_FILE, help="The older checkpoint.")
@click.option("--new", "new_file", required=True, type=_FILE, help="The newer checkpoint.")
@_KEY_OPTION
@_JSON_OPTION
@pass_ctx
def prove_consistency_cmd(
    ctx: Context, old_file: Path, new_file: Path, keys: tuple[str, ...], as_json: bool
) -> None:
    """Prove (and check) that the newer checkpoint extends the older one."""
    old, new = _read_note(old_file), _read_note(new_file)
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        proof = prove_consistency(
            ledger, old, new, trusted_keys=_keys_arg(keys), labels=(str(old_file), str(new_file))
        )
    what = (
        f"verified: {new_file} (size {proof.new_size}) extends {old_file} (size {proof.old_size})"
    )
    click.echo(
        json.dumps(proof.to_dict(), indent=2) if as_json else _proof_text(what, proof.to_dict())
    )


@click.group()
def keys() -> None:
    """The signers registered in the ledger."""


@keys.command("list")
@pass_ctx
def keys_list(ctx: Context) -> None:
    """Every signer ever registered (retired ones too) with its verifier key."""
    with Ledger.open(ctx.ledger, readonly=True) as ledger:
        for entry in ledger.keyring().entries():
            click.echo(_key_line(entry))


@keys.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(["operator", "adapter", "auditor"]),
    required=True,
    help="The key's role, recorded in its SignerRegistered.",
)
@pass_ctx
def keys_add(ctx: Context, name: str, role: str) -> None:
    """Make a new key (keys/NAME.key, mode 0600) and register it, signed by the operator."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise UsageError(f"bad key name {name!r}: use letters, digits, '.', '_' and '-'")
    key_path = ctx.home / "keys" / f"{name}.key"
    if key_path.exists():
        raise UsageError(f"key file {key_path} already exists", hint="pick another name")
    operator, new = load_default_signer(ctx.home), Signer.generate(name, role=role)
    with Ledger.open(ctx.ledger) as ledger:
        seq = ledger.register(new, by=operator)
    new.save(key_path)
    click.echo(f"registered {name} ({role}, key id {new.key_id}) at seq {seq}; key {key_path}")


@keys.command("retire")
@click.argument("name")
@click.option("--reason", default="", help="Why (recorded in the event).")
@pass_ctx
def keys_retire(ctx: Context, name: str, reason: str) -> None:
    """Retire a signer: it signs nothing from now on; its older events keep verifying."""
    with Ledger.open(ctx.ledger) as ledger:
        seq = ledger.retire(name, by=load_default_signer(ctx.home), reason=reason)
    click.echo(f"retired {name} at seq {seq}")


def register(group: click.Group) -> None:
    """Add the ledger commands to the ``caseledger`` group."""
    for command in (init, log_cmd, verify, checkpoint, prove, keys):
        group.add_command(command)
