"""``caseledger run``: evaluate one adapter on a published bank."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, cast

import click
import msgspec

from ledger.app.evaluate import default_profile, default_run_id, evaluate, summary_text
from ledger.bank.registry import PublishedBank
from ledger.bounds import MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_RETRIES
from ledger.cli.common import exit_with
from ledger.errors import DiskFullError, LedgerError, StoreConflictError, UsageError
from ledger.events import ENGINES
from ledger.harness.limits import BOUNDS, DEFAULT_LIMITS, validate
from ledger.run.runner import DEFAULT_MAX_CONSECUTIVE_FAILURES, Progress, RunPlan, RunSummary
from ledger.store import Ledger

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

__all__ = ["Reporter", "duration_text", "fit", "progress_text", "register"]


def duration_text(seconds: float) -> str:
    """A duration for the progress line: ``9s``, ``1m05s``, ``2h03m``.

    >>> [duration_text(s) for s in (0, 9.6, 65, 7380)]
    ['0s', '9s', '1m05s', '2h03m']
    """
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def progress_text(
    p: Progress | None, elapsed: float, eta: float | None, level: int = 0, engine: str = ""
) -> str:
    """What the progress shows, without the bar: the phase or the counts, the time
    since the command started and the estimated time left (``--`` until an attempt
    of this session is done). ``level`` 0 to 3: ever shorter forms for narrow screens.
    ``engine`` (once the bank is known): the engine the SQL runs on, in the two
    longest forms (issue 31).

    Correct, wrong (the SQL ran, the result differs from gold) and failed (stopped
    before a result: protocol, guard, execution, provider) are counted apart.

    >>> p = Progress(planned=54, done=12, correct=7, wrong=3, failures={"guard": 2})
    >>> for level in range(4):
    ...     print(progress_text(p, 75, 290, level))
    12/54 attempts, 7 correct, 3 wrong, 2 failed, elapsed 1m15s, eta 4m50s
    12/54, 7 correct, 3 wrong, 2 failed, 1m15s, eta 4m50s
    12/54, 7 ok, eta 4m50s
    12/54 eta 4m50s
    >>> progress_text(p, 75, 290, 0, "sqlite")
    '12/54 attempts on sqlite, 7 correct, 3 wrong, 2 failed, elapsed 1m15s, eta 4m50s'
    """
    spent = duration_text(elapsed)
    on = f" on {engine}" if engine else ""
    if p is None:
        return f"preparing the run, elapsed {spent}" if level < 2 else f"preparing {spent}"
    if p.phase == "starting":
        if level < 2:
            return f"starting the SQL workers{on}, {p.done}/{p.planned} attempts, elapsed {spent}"
        return f"starting {p.done}/{p.planned}"
    failed = sum(p.failures.values())
    left = "--" if eta is None else duration_text(eta)
    count = f"{p.done}/{p.planned}"
    tally = f"{p.correct} correct, {p.wrong} wrong, {failed} failed"
    return [
        f"{count} attempts{on}, {tally}, elapsed {spent}, eta {left}",
        f"{count}{on}, {tally}, {spent}, eta {left}",
        f"{count}, {p.correct} ok, eta {left}",
        f"{count} eta {left}",
    ][min(level, 3)]


def fit(
    p: Progress | None, elapsed: float, eta: float | None, columns: int, engine: str = ""
) -> tuple[int, str]:
    """(bar width, text) for a terminal of ``columns``: the line ``[bar] text`` is never
    longer than ``columns - 1`` (a line as wide as the terminal wraps on some). A bar of
    10 to 30 characters and the longest form of ``progress_text`` that fits beside it,
    else no bar (width 0) and the longest form alone, else the shortest form cut.

    >>> p = Progress(planned=10, done=5)
    >>> fit(p, 65, 65, 40)
    (15, '5/10, 0 ok, eta 1m05s')
    >>> fit(p, 65, 65, 20)
    (0, '5/10 eta 1m05s')
    """
    for level in range(4):
        text = progress_text(p, elapsed, eta, level, engine)
        room = columns - 1 - len(text) - 3
        if room >= 10:
            return min(30, room), text
    for level in range(4):
        text = progress_text(p, elapsed, eta, level, engine)
        if len(text) <= columns - 1:
            return 0, text
    return 0, text[: max(0, columns - 1)]


#: click's bar hides the cursor while it draws on a POSIX terminal and shows it again
#: when it ends the line; a line erased instead of ended shows it again the same way.
_SHOW_CURSOR = "" if os.name == "nt" else "\033[?25h"


class _Stream:
    """The file click's progress bar writes to: the reporter's ``write``, and whether
    it is a terminal (click draws nothing on a stream that is not one)."""

    def __init__(self, write: Callable[[str], None], tty: bool) -> None:
        self._write, self._tty = write, tty

    def write(self, text: str) -> int:
        self._write(text)
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered here."""

    def isatty(self) -> bool:
        return self._tty


class Reporter:
    """Progress of a run on stderr, from the start of the command.

    On a terminal: click's progress bar, one line redrawn in place every second
    (``\\r``, padded so nothing of a longer previous line stays), never wider than the
    terminal minus one column (:func:`fit`); a command that stops before the run
    starts (a usage error) leaves no line behind. Otherwise: a plain line when the SQL
    workers start and when the calls start, then every ``interval`` seconds, and when
    every attempt is done. The ETA is the time per attempt done in this session times
    the attempts left.
    """

    def __init__(
        self,
        *,
        tty: bool,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        columns: Callable[[], int] = lambda: shutil.get_terminal_size((80, 24)).columns,
        interval: float = 10.0,
    ) -> None:
        self.tty, self.write, self.clock, self.columns = tty, write, clock, columns
        self.interval = interval
        self.start = clock()
        self.progress: Progress | None = None
        #: The engine of the bank, once resolved: named on the line (issue 31), and
        #: ``NAME@VERSION on ENGINE`` for the summary.
        self.engine = ""
        self.bank = ""
        self._run_start: float | None = None
        self._base_done = 0
        self._last_plain: float | None = None
        self._bar: ProgressBar[str] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def eta(self, now: float) -> float | None:
        """Seconds left, from this session's pace; None before its first attempt is done."""
        p = self.progress
        if p is None or self._run_start is None:
            return None
        if p.done >= p.planned:
            return 0.0
        done = p.done - self._base_done
        if done <= 0:
            return None
        return (now - self._run_start) / done * (p.planned - p.done)

    def __call__(self, p: Progress) -> None:
        """The runner's ``on_progress``."""
        with self._lock:
            first_running = p.phase == "running" and self._run_start is None
            if first_running:
                self._run_start, self._base_done = self.clock(), p.done
            self.progress = p
            if self.tty:
                self._draw()
            elif first_running or p.done >= p.planned or self._due():
                self._plain()

    def tick(self) -> None:
        """Redraw (terminal) or print a line when one is due (otherwise)."""
        with self._lock:
            if self.tty:
                self._draw()
            elif self.progress is not None and self._due():
                self._plain()

    def _due(self) -> bool:
        return self._last_plain is None or self.clock() - self._last_plain >= self.interval

    def _draw(self) -> None:
        now = self.clock()
        p = self.progress
        width, text = fit(p, now - self.start, self.eta(now), self.columns(), self.engine)
        if self._bar is None:
            self._bar = click.progressbar(
                length=1,
                show_eta=False,
                show_percent=False,
                fill_char="#",
                empty_char=".",
                item_show_func=lambda item: item,
                file=cast(TextIO, _Stream(self.write, tty=True)),
            )
        bar = self._bar
        bar.bar_template = "[%(bar)s] %(info)s" if width else "%(info)s"
        bar.width = width
        bar.length = p.planned if p is not None and p.planned else 1
        bar.pos = p.done if p is not None else 0
        bar.current_item = text
        bar.render_progress()

    def _plain(self) -> None:
        now = self.clock()
        self._last_plain = now
        text = progress_text(self.progress, now - self.start, self.eta(now), 0, self.engine)
        self.write(text + "\n")

    def begin(self) -> None:
        """Draw now and keep redrawing once a second on a thread until ``end``."""
        if self.tty:
            self.tick()
        self._thread = threading.Thread(target=self._loop, name="caseledger-progress", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def end(self) -> None:
        """Stop redrawing; end the terminal line so what follows starts on its own."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            bar = self._bar
            if bar is None:
                return
            if self.progress is None:  # nothing ran: erase the line
                self.write("\r" + " " * (bar.max_width or 0) + "\r" + _SHOW_CURSOR)
            else:
                self._draw()
                bar.render_finish()
            self._bar = None


@click.command("run")
@click.option("--bank", "bank_ref", required=True, help="Published bank NAME[@VERSION].")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="The engine of the bank's publication (needed when it is published on several).",
)
@click.option("--adapter", "kind", required=True, help="openai, pi, command, replay or reference.")
@click.option(
    "--attempts", type=click.IntRange(1, MAX_ATTEMPTS), default=None, help="Attempts per case."
)
@click.option("--profile", default=None, help="Display name of this model profile.")
@click.option("--run-id", default=None, help="Run id (default: <profile>-<n>).")
@click.option("--resume", "resume", default=None, metavar="RUN", help="Finish run RUN.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=1,
    help="Model calls at once (default 1; the ledger keeps one writer).",
)
@click.option(
    "--retries",
    type=click.IntRange(0, MAX_RETRIES),
    default=0,
    help="Tries again after a failed call, with backoff (not 4xx but 408/429).",
)
@click.option(
    "--max-consecutive-failures",
    type=click.IntRange(0, 1_000_000),
    default=DEFAULT_MAX_CONSECUTIVE_FAILURES,
    show_default=True,
    help="Stop the run (failed, exit 1) after N attempts in a row fail the same provider "
    "or infrastructure way; 0 never stops.",
)
@click.option(
    "--base-url", default=None, help="openai: the endpoint, e.g. http://127.0.0.1:8080/v1."
)
@click.option("--model", default=None, help="The requested model id (recorded).")
@click.option(
    "--api-key-env", default=None, help="Name of the environment variable holding the key."
)
@click.option("--auth", default=None, help="api_key, oauth (a subscription; cost null) or none.")
@click.option("--temperature", default=None, help="Sampling temperature (default: not sent).")
@click.option(
    "--reasoning-effort", default=None, help="e.g. low, medium, high (default: not sent)."
)
@click.option("--max-tokens", default=None, help="Output token limit (default: not sent).")
@click.option(
    "--timeout", "timeout_s", default=None, help="Seconds for one whole call (default 120)."
)
@click.option(
    "--price-snapshot", default=None, help="Prices JSON file to estimate cost from tokens."
)
@click.option("--provider", default=None, help="Provider display name (openai, command).")
@click.option("--system-prompt", default=None, help="System message text (openai, pi).")
@click.option(
    "--command", default=None, help="command: the program (prompt on stdin, answer on stdout)."
)
@click.option("--replay-file", default=None, help="replay: the file of recorded answers.")
@click.option(
    "--replay-format",
    type=click.Choice(["jsonl", "bird", "spider"]),
    default=None,
    help="replay: jsonl (default), or a benchmark's own prediction file (bird, spider).",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    default=None,
    help="replay bird|spider: a question without a prediction is a wrong, empty answer.",
)
@click.option("--tools", default=None, help="Declared tool state: off, on or unknown.")
@click.option("--pi", default=None, help="The pi executable (pi; default $CASELEDGER_PI or PATH).")
@click.option("--pi-models", default=None, help="pi's models.json with custom providers (pi).")
@click.option("--pi-auth-file", default=None, help="pi's auth.json for --auth oauth (pi).")
@click.option(
    "--no-variants",
    is_flag=True,
    help="Skip the variant diagnostics (running each SQL on the bank's calibration variants).",
)
@click.option(
    "--max-output-bytes",
    type=click.IntRange(*BOUNDS["max_output_bytes"]),
    help=f"Cap on an answer as stored (default {DEFAULT_LIMITS.max_output_bytes}).",
)
@click.option(
    "--max-sql-bytes",
    type=click.IntRange(*BOUNDS["max_sql_bytes"]),
    help=f"Cap on the SQL text (default {DEFAULT_LIMITS.max_sql_bytes}).",
)
@click.option(
    "--max-nesting",
    type=click.IntRange(*BOUNDS["max_nesting"]),
    help=f"Cap on SQL nesting depth (default {DEFAULT_LIMITS.max_nesting}).",
)
@click.option(
    "--max-result-bytes",
    type=click.IntRange(*BOUNDS["max_result_bytes"]),
    help=f"Cap on one result as stored (default {DEFAULT_LIMITS.max_result_bytes}).",
)
@click.option(
    "--max-cell-bytes",
    type=click.IntRange(*BOUNDS["max_cell_bytes"]),
    help=f"Cells over this are cut (default {DEFAULT_LIMITS.max_cell_bytes}).",
)
@click.option(
    "--judge-budget-ms",
    type=click.IntRange(*BOUNDS["judge_budget_ms"]),
    help=f"CPU ms to judge one answer (default {DEFAULT_LIMITS.judge_budget_ms}).",
)
@click.option(
    "--max-text-bytes",
    type=click.IntRange(*BOUNDS["max_text_bytes"]),
    help=f"Cap on every other stored text, e.g. an error message "
    f"(default {DEFAULT_LIMITS.max_text_bytes}).",
)
@click.pass_obj
def run_cmd(obj: Any, /, bank_ref: str, kind: str, **options: Any) -> None:
    """Run KIND on a published bank; every step becomes a signed event."""
    reporter = Reporter(tty=sys.stderr.isatty(), write=_to_stderr)
    reporter.begin()
    try:
        with _sigterm_as_interrupt():
            summary = _run(obj, bank_ref, kind, reporter, options)
    finally:
        reporter.end()
    click.echo(summary_text(summary, obj.ledger_name, bank=reporter.bank))
    if summary.status == "failed":
        raise _RunFailed(
            f"run {summary.run_id} stopped as failed: {summary.message}",
            hint="fix the setup the error names (--base-url, --command, the key, the model) "
            "and start a new run; leave this one out of reports with `caseledger runs "
            f"withdraw {summary.run_id} --reason TEXT`",
        )


class _RunFailed(LedgerError):
    """An early stop: the run failed (exit 1, docs/running.md "Exit codes")."""

    exit_code = 1


def _to_stderr(text: str) -> None:
    click.echo(text, err=True, nl=False)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run as Ctrl-C does: what was received is recorded first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _run_errors(run_id: str, reporter: Reporter) -> Iterator[None]:
    """What an interrupt, a full disk or a second writer of the same run says while
    the run goes (``evaluate``'s ``around_run``)."""
    try:
        yield
    except KeyboardInterrupt:
        reporter.end()
        click.echo(
            f"\ninterrupted: run {run_id} cancelled, its unfinished attempts "
            f"recorded as interrupted; finish it with the same command plus "
            f"--resume {run_id}",
            err=True,
        )
        exit_with(2)
    except DiskFullError as exc:
        # What was appended stays (each batch is one transaction): the run is
        # finished later, once there is space, like an interrupted one.
        raise DiskFullError(
            exc.folder,
            exc.doing,
            hint="free space on that disk, then finish the run with the same command "
            f"plus --resume {run_id} (`caseledger runs` lists it)",
        ) from None
    except StoreConflictError:
        # Two processes appended to one run at once (the same --run-id started
        # twice, or two --resume): the store's own words name stream heads.
        raise UsageError(
            f"run {run_id}: another process appended to this run at the same "
            "time; this process stopped and its last batch was not appended",
            hint="one process per run id: pick another --run-id, or wait for the "
            f"other one and check `caseledger runs`; --resume {run_id} "
            "finishes a run that is not completed",
        ) from None


def _run(
    obj: Any, bank_ref: str, kind: str, reporter: Reporter, options: dict[str, Any]
) -> RunSummary:
    if not Ledger.exists(obj.ledger):
        raise UsageError(
            f"no ledger at {obj.ledger_name}", hint="run `caseledger init` first (or pass --ledger)"
        )
    resume = options.pop("resume")
    max_failures = options.pop("max_consecutive_failures")
    no_variants = options.pop("no_variants")
    engine = options.pop("engine")
    attempts, profile = options.pop("attempts"), options.pop("profile")
    run_id, concurrency, retries = (
        options.pop("run_id"),
        options.pop("concurrency"),
        options.pop("retries"),
    )
    for flag, given in (("--run-id", run_id), ("--resume", resume)):
        if given is not None and not given:  # '' is not "no run id": refuse, never default
            raise UsageError(
                f"{flag} '' names no run",
                hint="give a run id (letters, digits and . _ : -), or leave the option out "
                "for the default <profile>-<n>",
            )
    if resume and run_id and resume != run_id:
        raise UsageError(f"--resume {resume} and --run-id {run_id} name different runs")
    if options["replay_format"] in ("bird", "spider") and (attempts or 1) > 1:
        raise UsageError(
            f"--attempts {attempts} with --replay-format {options['replay_format']}: the "
            "benchmark's prediction file holds one prediction per question",
            hint="leave out --attempts (one attempt per case)",
        )
    options["allow_missing"] = options["allow_missing"] or None  # not given: None
    # A benchmark's prediction file names its run (issue 35), unless --profile does.
    profile = profile or default_profile(kind, options["replay_format"], options["replay_file"])
    caps = {name: options.pop(name) for name in BOUNDS}
    given = {name: value for name, value in caps.items() if value is not None}
    # None: the defaults, or on --resume the original run's caps.
    limits = validate(msgspec.structs.replace(DEFAULT_LIMITS, **given)) if given else None
    with Ledger.open(obj.ledger) as ledger:
        plan = RunPlan(
            run_id=resume or run_id or default_run_id(ledger, profile),
            profile=profile,
            attempts=attempts,
            concurrency=concurrency,
            retries=retries,
            resume=resume is not None,
            limits=limits,
            max_consecutive_failures=max_failures,
        )

        def on_bank(published: PublishedBank) -> None:
            reporter.engine = published.event.build.engine
            reporter.bank = f"{published.ref} on {reporter.engine}"

        summary = evaluate(
            ledger,
            obj.home,
            bank_ref,
            kind,
            plan,
            local_path=obj.local_path,
            options=options,
            engine=engine,
            variants=not no_variants,
            environ=os.environ,
            on_bank=on_bank,
            on_progress=reporter,
            around_run=lambda: _run_errors(plan.run_id, reporter),
        )
    return summary


def register(group: click.Group) -> None:
    """Add ``run`` to the CLI."""
    group.add_command(run_cmd)
