"""Bank commands: list, validate, publish, show, diff (thin: parse, call, print)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.app.importing import import_benchmark
from ledger.app.output import output_folder
from ledger.bank.describe import (
    describe_bank,
    describe_published,
    diff_banks,
    format_diff,
    format_show,
    to_json,
)
from ledger.bank.model import load_bank
from ledger.bank.publish import publish, validate_bank
from ledger.bank.registry import builtin_banks, label, list_published, load_any, resolve_source
from ledger.calibration.relations import check_folder_relations
from ledger.cli.common import Context, exit_with, pass_ctx
from ledger.engines.sqlite_integrity import format_violations
from ledger.errors import LedgerError
from ledger.events import ENGINES, BuildSettings
from ledger.keys import load_default_signer
from ledger.store import Ledger

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

__all__ = ["register"]


def _open_readonly(ctx: Context) -> Ledger | None:
    """The ledger when it exists (bank commands that only read work without one)."""
    if not Ledger.exists(ctx.ledger):
        return None
    return Ledger.open(ctx.ledger, readonly=True)


_COUNTER = re.compile(r"^(?P<what>.+) (?P<k>\d+)/(?P<n>\d+)$")


class _Steps:
    """The steps of building a bank, on stderr (stdout keeps only the result).

    A counted step (``freezing gold k/N``) is click's progress bar on a terminal,
    redrawn in place; in a log (stderr not a terminal) it is written at most about ten
    times: its first, at each further tenth of N, and its last (issue 35: a 500-case
    import wrote 500 lines). Every other step is one line.
    """

    def __init__(self) -> None:
        self.bar: ProgressBar[int] | None = None  # a counted step drawn on the terminal
        self.what = ""

    def __call__(self, line: str) -> None:
        found = _COUNTER.match(line)
        if found is None:
            self._end()
            click.echo(line, err=True)
            return
        what, k, n = found["what"], int(found["k"]), int(found["n"])
        if sys.stderr.isatty():
            if self.bar is None or (self.what, self.bar.length) != (what, n):
                self._end()
                self.what = what
                self.bar = click.progressbar(
                    length=n,
                    label=what,
                    show_eta=False,
                    show_percent=False,
                    show_pos=True,
                    fill_char="#",
                    empty_char=".",
                    file=sys.stderr,
                )
            self.bar.update(k - self.bar.pos)
            if k >= n:
                self._end()
        elif k in (1, n) or k * 10 // max(n, 1) != (k - 1) * 10 // max(n, 1):
            click.echo(line, err=True)

    def _end(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()
            self.bar = None


_STEPS = _Steps()


def _progress(line: str) -> None:
    """A step of bank validation, on stderr (see :class:`_Steps`)."""
    _STEPS(line)


def _echo_differences(build: BuildSettings) -> None:
    """The accepted differences of gold between the engines (``--accept-engine-differences``)."""
    for d in build.engine_differences:
        click.echo(f"  gold differs from {build.transpiled_from}: {d.case_id}: {d.detail}")


@click.group("bank")
def bank_group() -> None:
    """Question banks: list, validate, publish, show, diff."""


@bank_group.command("list")
@pass_ctx
def list_cmd(ctx: Context) -> None:
    """List built-in banks and the banks published in the ledger."""
    click.echo("built-in:")
    for name, folder in builtin_banks().items():
        try:
            bank = load_bank(folder)
            click.echo(f"  {name:<16} {bank.ref:<24} {bank.content_sha256}")
        except LedgerError as exc:
            click.echo(f"  {name:<16} invalid: {exc.message.splitlines()[0]}")
    ledger = _open_readonly(ctx)
    click.echo("published:" if ledger is not None else "published: (no ledger)")
    if ledger is not None:
        with ledger:
            for pb in list_published(ledger, ctx.home, whole_log=True):
                cases = len(pb.event.cases)
                ref = label(pb)
                click.echo(f"  {ref:<24} {pb.event.content_sha256}  seq {pb.seq}  {cases} cases")


@bank_group.command("validate")
@click.argument("source")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="Run the bank on this engine instead of the one cases.yaml names (SQL transpiled).",
)
@click.option(
    "--accept-engine-differences",
    is_flag=True,
    help="With --engine: valid even where gold differs between the engines (listed).",
)
@pass_ctx
def validate_cmd(
    ctx: Context, source: str, engine: str | None, accept_engine_differences: bool
) -> None:
    """Check a bank folder or built-in NAME: build it, freeze gold, run the leak check."""
    checked = validate_bank(
        resolve_source(source),
        paths=[ctx.local_path, ctx.home],
        cwd=Path.cwd(),
        engine=engine,
        accept_engine_differences=accept_engine_differences,
        progress=_progress,
    )
    gold_rows = sum(len(g.rows) for g in checked.fields["gold"])
    click.echo(
        f"ok: {checked.bank.ref} {checked.bank.content_sha256} "
        f"({len(checked.bank.cases)} cases, {gold_rows} gold rows)"
    )
    _echo_differences(checked.fields["build"])


@bank_group.command("publish")
@click.argument("source")
@click.option(
    "--check-relations",
    is_flag=True,
    help="First check calibration.yaml's metamorphic relations of the gold (exit 1 if broken).",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="Run the bank on this engine instead of the one cases.yaml names (SQL transpiled).",
)
@click.option(
    "--accept-engine-differences",
    is_flag=True,
    help="With --engine: publish even where gold differs between the engines (listed).",
)
@pass_ctx
def publish_cmd(
    ctx: Context,
    source: str,
    check_relations: bool,
    engine: str | None,
    accept_engine_differences: bool,
) -> None:
    """Publish a bank folder or built-in NAME into the ledger (no-op when already published)."""
    signer = load_default_signer(ctx.home)
    if check_relations:
        problems = check_folder_relations(resolve_source(source))
        for problem in problems:
            click.echo(f"relation broken: {problem}", err=True)
        if problems:
            click.echo("nothing was published", err=True)
            exit_with(1)
        click.echo("relations hold", err=True)
    with Ledger.open(ctx.ledger) as ledger:
        result = publish(
            ledger,
            signer,
            resolve_source(source),
            ctx.home,
            cwd=Path.cwd(),
            engine=engine,
            accept_engine_differences=accept_engine_differences,
            progress=_progress,
        )
    pb = result.published
    verb = "published" if result.created else "already published"
    on = "" if pb.event.build.engine == "duckdb" else f" on {pb.event.build.engine}"
    click.echo(f"{verb}: {pb.ref}{on} {pb.event.content_sha256} at seq {pb.seq}")
    _echo_differences(pb.event.build)


@bank_group.command("show")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--with-reference", is_flag=True, help="Include each case's reference SQL.")
@pass_ctx
def show_cmd(ctx: Context, ref: str, as_json: bool, with_reference: bool) -> None:
    """Show a published bank NAME[@VERSION] (or a folder / built-in not yet published)."""
    ledger = _open_readonly(ctx)
    if ledger is not None:
        with ledger:
            bank, published = load_any(ref, ledger, ctx.home)
            if published is not None:
                data = describe_published(published, with_reference=with_reference)
            else:
                data = describe_bank(bank, with_reference=with_reference)
    else:
        bank, _ = load_any(ref, None, ctx.home)
        data = describe_bank(bank, with_reference=with_reference)
    click.echo(to_json(data) if as_json else format_show(data))


@bank_group.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def diff_cmd(ctx: Context, a: str, b: str, as_json: bool) -> None:
    """Files and cases that differ between two banks (folders, built-ins or NAME@VERSION)."""
    ledger = _open_readonly(ctx)
    try:
        bank_a, _ = load_any(a, ledger, ctx.home)
        bank_b, _ = load_any(b, ledger, ctx.home)
    finally:
        if ledger is not None:
            ledger.close()
    data = diff_banks(bank_a, bank_b)
    click.echo(to_json(data) if as_json else format_diff(data))


@bank_group.group("import")
def import_group() -> None:
    """Import a public benchmark (BIRD, Spider): one bank per database."""


def _import_options(f: Any) -> Any:
    for option in reversed(
        (
            click.option(
                "--databases",
                "databases",
                required=True,
                type=click.Path(file_okay=False, path_type=Path),
                help="Folder holding <db_id>/<db_id>.sqlite (BIRD's dev_databases/, "
                "Spider's database/).",
            ),
            click.option(
                "--db-id", "db_ids", multiple=True, help="Import only this database (repeatable)."
            ),
            click.option(
                "-o",
                "--out",
                required=True,
                type=click.Path(path_type=Path),
                help="Folder to write the banks into (one <db_id>/ folder each).",
            ),
            click.option(
                "--engine",
                type=click.Choice(("sqlite", "duckdb")),
                default="sqlite",
                show_default=True,
                help="sqlite: judge on the engine the benchmark is written for; duckdb: "
                "convert, and list every case whose gold differs.",
            ),
            click.option("--version", default="v1", show_default=True, help="Bank version."),
        )
    ):
        f = option(f)
    return f


def _report_import(results: list[Any]) -> None:
    for r in results:
        click.echo(
            f"imported: {r.ref} -> {r.bank.folder} "
            f"({r.bank.cases} cases, {r.gold_rows} gold rows) {r.content_sha256}"
        )
        for line in format_violations(r.violations) if r.violations else ():
            click.echo(f"  {line}")
        for d in r.differences:
            click.echo(f"  gold differs between sqlite and duckdb: {d.case_id}: {d.detail}")


@import_group.command("bird")
@click.argument("questions", type=click.Path(dir_okay=False, path_type=Path))
@_import_options
def import_bird_cmd(
    questions: Path,
    databases: Path,
    db_ids: tuple[str, ...],
    out: Path,
    engine: str,
    version: str,
) -> None:
    """Import BIRD's QUESTIONS.json (question_id, db_id, question, evidence, SQL, difficulty)."""
    output_folder(out)
    results = import_benchmark(
        "bird", questions, databases, out, db_ids=db_ids, engine=engine, version=version,
        progress=_progress,
    )  # fmt: skip
    _report_import(results)


@import_group.command("spider")
@click.argument("questions", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--tables",
    "tables_json",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Spider's tables.json (its natural column names go to the semantic layer).",
)
@click.option(
    "--gold",
    "gold",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Spider's gold file (SQL<TAB>db_id per question, as gold_example.txt): the "
    "reference SQL, as Spider's evaluator reads it (default: dev.json's query).",
)
@_import_options
def import_spider_cmd(
    questions: Path,
    tables_json: Path,
    gold: Path | None,
    databases: Path,
    db_ids: tuple[str, ...],
    out: Path,
    engine: str,
    version: str,
) -> None:
    """Import Spider's dev.json (db_id, question, query) with its tables.json."""
    output_folder(out)
    results = import_benchmark(
        "spider", questions, databases, out, db_ids=db_ids, tables_json=tables_json,
        gold=gold, engine=engine, version=version, progress=_progress,
    )  # fmt: skip
    _report_import(results)


def register(group: click.Group) -> None:
    """Add the ``bank`` command group to the main CLI."""
    group.add_command(bank_group)
