"""The calibration oracle's answers other than a score (issue 14 item 6): a guard refusal,
a SQL error, the scorer refusing evidence that does not fit, a bug kept apart from any
verdict, and a pool that fails to start stopping the ones already started. Real bank
database, real sandboxed workers."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from calkit import FIXTURE

from ledger.bank.build import build_database
from ledger.bank.model import Bank, CaseDef, load_bank
from ledger.calibration.calibrate import read_gold
from ledger.calibration.oracle import Judged, Oracle
from ledger.engines.duckdb_worker import WorkerPool
from ledger.errors import InternalError, SandboxError, UsageError
from ledger.events import GoldResult

TABLES = frozenset({"sales", "stores", "sale_tags"})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Bank, Path, dict[str, GoldResult]]:
    bank = load_bank(FIXTURE)
    db = tmp_path_factory.mktemp("oracle") / "base.duckdb"
    build_database(bank, db)
    return bank, db, read_gold(bank, db)


@pytest.fixture(scope="module")
def oracle(built: tuple[Bank, Path, dict[str, GoldResult]]) -> Iterator[Oracle]:
    with Oracle({"base": built[1]}, TABLES) as o:
        yield o


def case_of(bank: Bank, case_id: str) -> CaseDef:
    return next(c for c in bank.cases if c.id == case_id)


def test_the_reference_is_result_correct_with_a_digest(
    built: tuple[Bank, Path, dict[str, GoldResult]], oracle: Oracle
) -> None:
    bank, _, gold = built
    case = case_of(bank, "sf-01")
    judged = oracle.judge(case, case.reference_sql, "base", gold["sf-01"])
    assert (judged.database, judged.result_correct, judged.error_kind) == ("base", True, None)
    assert judged.total == Decimal("100.00")
    assert judged.result_digest is not None
    assert judged.result_digest.startswith("sha256:")
    # the same result judged again has the same digest; another result another one
    again = oracle.judge(case, case.reference_sql, "base", gold["sf-01"])
    assert again.result_digest == judged.result_digest
    other = oracle.judge(case, "SELECT 1 AS order_count, 2 AS amount", "base", gold["sf-01"])
    assert other.result_correct is False
    assert other.result_digest not in (None, judged.result_digest)


def test_a_guard_refusal_is_no_verdict_and_names_the_check(
    built: tuple[Bank, Path, dict[str, GoldResult]], oracle: Oracle
) -> None:
    bank, _, gold = built
    judged = oracle.judge(case_of(bank, "sf-01"), "SELECT 1; SELECT 2", "base", gold["sf-01"])
    assert judged == Judged(
        "base", None, "guard", "single_statement: found 2 statements, expected exactly one", None
    )


def test_a_sql_error_is_no_verdict_and_keeps_the_result(
    built: tuple[Bank, Path, dict[str, GoldResult]], oracle: Oracle
) -> None:
    bank, _, gold = built
    judged = oracle.judge(
        case_of(bank, "sf-01"), "SELECT no_such_column FROM sales", "base", gold["sf-01"]
    )
    assert (judged.result_correct, judged.error_kind, judged.result_digest) == (
        None,
        "sql_runtime",
        None,
    )
    assert judged.message is not None
    assert "no_such_column" in judged.message
    assert judged.result is not None
    assert judged.result.ok is False
    assert judged.total is None


def test_gold_of_another_case_is_a_scoring_refusal_not_a_verdict(
    built: tuple[Bank, Path, dict[str, GoldResult]], oracle: Oracle
) -> None:
    bank, _, gold = built
    case = case_of(bank, "sf-01")
    judged = oracle.judge(case, case.reference_sql, "base", gold["sf-02"])
    assert (judged.result_correct, judged.error_kind, judged.result_digest) == (
        None,
        "scoring",
        None,
    )
    assert judged.message == "case sf-01: cannot score: gold is for case sf-02"
    assert judged.result is not None
    assert judged.result.ok is True  # it ran; the evidence did not fit together


def test_an_unexpected_exception_is_an_internal_error_naming_case_and_database(
    built: tuple[Bank, Path, dict[str, GoldResult]], oracle: Oracle
) -> None:
    bank, _, gold = built
    case = case_of(bank, "sf-01")
    with pytest.raises(InternalError) as info:
        oracle.judge(case, case.reference_sql, "no-such-database", gold["sf-01"])
    assert info.value.message == (
        "internal error: KeyError: 'no-such-database' (this is a caseledger bug; nothing "
        "was recorded for case sf-01 on database no-such-database)"
    )
    assert info.value.exit_code == 1


def test_a_database_that_cannot_start_stops_the_pools_already_started(
    built: tuple[Bank, Path, dict[str, GoldResult]], tmp_path: Path
) -> None:
    before = {p.pid for p in multiprocessing.active_children()}
    missing = tmp_path / "gone.duckdb"
    with pytest.raises(SandboxError) as info:
        Oracle({"base": built[1], "variant": missing}, TABLES)
    assert info.value.message == f"{missing}: bank database not found"
    # the worker started for "base" was stopped: no new child process is left
    assert {p.pid for p in multiprocessing.active_children()} <= before


def test_a_caseledger_error_passes_through_unchanged(
    built: tuple[Bank, Path, dict[str, GoldResult]],
) -> None:
    bank, db, gold = built
    case = case_of(bank, "sf-01")
    with Oracle({"base": db}, TABLES) as oracle:
        oracle.scorer_version = "0"  # no scorer has this version
        with pytest.raises(UsageError) as info:
            oracle.judge(case, case.reference_sql, "base", gold["sf-01"])
    assert info.value.message == "unknown scorer version '0'"


def test_the_databases_workers_start_side_by_side(
    built: tuple[Bank, Path, dict[str, GoldResult]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: a run with variant diagnostics opens an oracle before its first model
    call, and its pools started one after another. Each start here waits until every
    database's start has begun: started one by one, each would wait out its 30 s and
    find the others not begun."""
    names = ("base", "v1", "v2")
    begun: list[str] = []
    met: list[bool] = []
    all_begun = threading.Condition()
    real_init = WorkerPool.__init__

    def gated(self: WorkerPool, db_path: Path, **kwargs: object) -> None:
        with all_begun:
            begun.append(threading.current_thread().name)
            all_begun.notify_all()
            met.append(all_begun.wait_for(lambda: len(begun) == len(names), 30.0))
        real_init(self, db_path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(WorkerPool, "__init__", gated)
    with Oracle(dict.fromkeys(names, built[1]), TABLES) as oracle:
        assert met == [True, True, True]
        assert len(set(begun)) == 3  # three threads, each starting one database
        assert sorted(oracle._pools) == sorted(names)
        bank, _, gold = built
        case = case_of(bank, "sf-01")
        for name in names:  # each database's own worker answers
            assert oracle.judge(case, case.reference_sql, name, gold["sf-01"]).result_correct
