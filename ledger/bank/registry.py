"""Where banks live: built-in bank folders, published banks in a ledger, and their stored files."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ledger.bank.leak import LeakContext, leak_context
from ledger.bank.model import Bank, load_bank
from ledger.errors import BankError
from ledger.events import ENGINES, LEDGER_STREAM, BankPublished, CaseSpec, tag_of
from ledger.store import Ledger
from ledger.stream_read import stream_events
from ledger.tree_index import check_log, open_index

__all__ = [
    "BUILTIN_DIR",
    "REPO_ROOT",
    "PublishedBank",
    "bank_paths",
    "builtin_banks",
    "find_published",
    "list_published",
    "load_any",
    "parse_ref",
    "resolve_source",
]

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "banks"
# The folder holding the ``ledger`` package: the repository (or site-packages) is a private path.
REPO_ROOT = Path(__file__).resolve().parents[2]


#: The file name suffix of a built bank database per engine (PostgreSQL: a file
#: naming the database on the server).
DB_SUFFIX = {"duckdb": ".duckdb", "sqlite": ".sqlite", "postgres": ".postgres.json"}


def bank_paths(home: Path, content_sha256: str, engine: str = "duckdb") -> tuple[Path, Path]:
    """``(<home>/banks/<hex>.duckdb, <home>/banks/<hex>/)`` for a content hash (the
    database's suffix is the engine's: ``.sqlite``, ``.postgres.json``)."""
    hexhash = content_sha256.removeprefix("sha256:")
    return home / "banks" / f"{hexhash}{DB_SUFFIX[engine]}", home / "banks" / hexhash


@dataclass(frozen=True)
class PublishedBank:
    """A BankPublished event with its place in the log and its files beside the ledger."""

    event: BankPublished
    seq: int
    db_path: Path
    files_dir: Path

    @property
    def ref(self) -> str:
        """``bank@version``."""
        return f"{self.event.bank_id}@{self.event.version}"

    def case(self, case_id: str) -> CaseSpec:
        """One published case by id."""
        for case in self.event.cases:
            if case.id == case_id:
                return case
        raise BankError(f"bank {self.ref} has no case {case_id!r}")

    def stored_bank(self) -> Bank:
        """Load the stored normalised files, checking they still hash to the published hash."""
        if not self.files_dir.is_dir():
            raise BankError(
                f"the files of bank {self.ref} are missing at {self.files_dir}",
                hint="publish the bank folder again to restore them",
            )
        bank = load_bank(self.files_dir, engine=self.event.build.engine)
        if bank.content_sha256 != self.event.content_sha256:
            raise BankError(
                f"the stored files of bank {self.ref} at {self.files_dir} hash to "
                f"{bank.content_sha256}, expected {self.event.content_sha256} (seq {self.seq})",
                hint="the stored copy was edited; publish the original folder again",
            )
        return bank

    def references(self) -> dict[str, str]:
        """Reference SQL by case id, read from the stored files (never from the event),
        in the dialect of the engine the bank was published for."""
        return self.stored_bank().references()

    def leak_context(
        self,
        *,
        ledger_path: Path | None,
        cwd: Path | None,
        extra: Iterable[Path] = (),
        references: dict[str, str] | None = None,
    ) -> LeakContext:
        """The leak context the runner checks each prompt against before sending it;
        ``references``: :meth:`references` when the caller has read them already (each
        read loads and hashes the stored files again)."""
        paths = [self.db_path, self.files_dir, REPO_ROOT, *extra]
        if ledger_path is not None:
            paths += [ledger_path, ledger_path.parent]
        return leak_context(
            self.references() if references is None else references,
            self.event.gold,
            gold_digest=self.event.gold_digest,
            paths=paths,
            cwd=cwd,
            waivers={
                c.id: c.leak_waiver for c in self.event.cases if isinstance(c.leak_waiver, str)
            },
        )


def list_published(ledger: Ledger, home: Path, *, whole_log: bool = False) -> list[PublishedBank]:
    """Every BankPublished event of a ledger, in log order.

    Banks are published on the ``ledger`` stream, which is read through the verified
    tree index (``ledger.stream_read.stream_events``: not the whole log, issue 34).
    With ``whole_log`` (what ``bank list`` shows), every row of the log is checked
    first (:func:`ledger.tree_index.check_log`, issue 33): a damaged row of any
    stream stops the listing, naming its seq.
    """
    if whole_log:
        check_log(ledger, open_index(ledger))
    out = []
    tag = tag_of(BankPublished).encode()
    for stored in stream_events(ledger, LEDGER_STREAM):
        if tag not in stored.body:
            continue
        event = stored.event()
        if not isinstance(event, BankPublished):
            continue
        db_path, files_dir = bank_paths(home, event.content_sha256, event.build.engine)
        out.append(PublishedBank(event, stored.seq, db_path, files_dir))
    return out


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``NAME[@VERSION]`` -> (name, version or None)."""
    name, sep, version = ref.partition("@")
    if not name or (sep and not version):
        raise BankError(f"bad bank reference {ref!r}", hint="write NAME or NAME@VERSION")
    return name, version or None


def _matching(banks: list[PublishedBank], ref: str) -> list[PublishedBank]:
    if ref.startswith("sha256:"):
        return [b for b in banks if b.event.content_sha256 == ref]
    engine = None
    head, sep, tail = ref.rpartition(":")
    if sep and tail in ENGINES:
        ref, engine = head, tail
    name, version = parse_ref(ref)
    return [
        b
        for b in banks
        if b.event.bank_id == name
        and (version is None or b.event.version == version)
        and (engine is None or b.event.build.engine == engine)
    ]


def label(bank: PublishedBank) -> str:
    """``NAME@VERSION``, with ``:ENGINE`` when the bank is not on DuckDB."""
    engine = bank.event.build.engine
    return bank.ref if engine == "duckdb" else f"{bank.ref}:{engine}"


def find_published(
    ledger: Ledger,
    home: Path,
    ref: str,
    *,
    engine: str | None = None,
    one_engine: bool = False,
) -> PublishedBank:
    """A published bank by ``NAME[@VERSION][:ENGINE]`` (latest published when no version or
    engine is given) or content hash; ``engine`` selects the engine as ``:ENGINE`` does.

    ``one_engine`` (``run --bank``, issue 31): a reference that matches publications on
    more than one engine, with no engine named, is an error listing them, never the one
    published last, so the same question bank cannot score on another engine unnoticed.
    """
    banks = list_published(ledger, home)
    found = _matching(banks, ref)
    if engine is not None:
        found = [b for b in found if b.event.build.engine == engine]
    if not found:
        known = ", ".join(sorted({label(b) for b in banks})) or "none"
        shown = ref if engine is None else f"{ref} --engine {engine}"
        raise BankError(
            f"no published bank {shown!r} in {ledger.path} (published: {known})",
            hint="publish it first: caseledger bank publish DIR|NAME",
        )
    engines = sorted({b.event.build.engine for b in found})
    if one_engine and len(engines) > 1:
        choices = sorted({f"{b.ref} --engine {b.event.build.engine}" for b in found})
        raise BankError(
            f"bank {ref!r} is published on more than one engine ({', '.join(engines)}): "
            f"{'; '.join(choices)}",
            hint="name the engine: --bank NAME@VERSION --engine E, or --engine E "
            "(the latest version on that engine)",
        )
    return found[-1]


def load_any(arg: str, ledger: Ledger | None, home: Path) -> tuple[Bank, PublishedBank | None]:
    """A bank from a folder, else a published ``NAME[@VERSION]``, else a built-in name."""
    if Path(arg).is_dir():
        return load_bank(Path(arg)), None
    if ledger is not None:
        found = _matching(list_published(ledger, home), arg)
        if found:
            return found[-1].stored_bank(), found[-1]
    if "@" in arg or arg.startswith("sha256:"):
        if ledger is None:
            raise BankError(f"{arg!r} names a published bank but there is no ledger")
        find_published(ledger, home, arg)  # raises with the list of published banks
    if ledger is not None and arg not in builtin_banks():
        raise BankError(
            f"{arg!r} is not a bank folder, a bank published in {ledger.path} "
            f"or a built-in bank (built-in: {', '.join(builtin_banks()) or 'none'})"
        )
    return load_bank(resolve_source(arg)), None


def builtin_banks() -> dict[str, Path]:
    """Built-in bank folders shipped in the package (``ledger/banks/<name>/``), by name."""
    if not BUILTIN_DIR.is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(BUILTIN_DIR.iterdir())
        if p.is_dir() and (p / "cases.yaml").is_file()
    }


def resolve_source(arg: str) -> Path:
    """A bank folder from a path or a built-in name."""
    path = Path(arg)
    if path.is_dir():
        return path
    builtins = builtin_banks()
    if arg in builtins:
        return builtins[arg]
    raise BankError(
        f"{arg!r} is neither a bank folder nor a built-in bank "
        f"(built-in: {', '.join(builtins) or 'none'})"
    )
