"""Finding published banks (issue 14 item 6): by case, by reference with and without an
engine, from a folder, a published name or a built-in one, and each refusal's message.
A real ledger with sales-fixture@v1 published (DuckDB) and its files beside it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.bank.leak import leak_findings
from ledger.bank.publish import publish
from ledger.bank.registry import BUILTIN_DIR, find_published, list_published, load_any, parse_ref
from ledger.errors import BankError
from ledger.keys import Signer
from ledger.store import Ledger

AT = "2026-12-02T10:00:00.000000Z"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("registry")
    signer = Signer.from_seed("test-operator", b"\x05" * 32)
    with Ledger.create(home / "ledger.db", signer, clock=lambda: AT) as ledger:
        publish(ledger, signer, BUILTIN_DIR / "sales-fixture", home, cwd=home)
    return home


@pytest.fixture
def ledger(home: Path) -> Iterator[Ledger]:
    with Ledger.open(home / "ledger.db", readonly=True) as opened:
        yield opened


def test_a_case_by_id(ledger: Ledger, home: Path) -> None:
    (bank,) = list_published(ledger, home)
    assert bank.case("sf-03").id == "sf-03"
    with pytest.raises(BankError) as info:
        bank.case("sf-99")
    assert info.value.message == "bank sales-fixture@v1 has no case 'sf-99'"


def test_stored_files_that_are_gone(ledger: Ledger, home: Path, tmp_path: Path) -> None:
    (bank,) = list_published(ledger, home)
    moved = tmp_path / "moved"
    shutil.move(bank.files_dir, moved)
    try:
        with pytest.raises(BankError) as info:
            bank.stored_bank()
    finally:
        shutil.move(moved, bank.files_dir)
    assert (
        info.value.message == f"the files of bank sales-fixture@v1 are missing at {bank.files_dir}"
    )
    assert info.value.hint == "publish the bank folder again to restore them"


def test_the_ledger_path_is_private_only_when_given(ledger: Ledger, home: Path) -> None:
    (bank,) = list_published(ledger, home)
    text = f"the evidence is in {home / 'ledger.db'}"
    without = bank.leak_context(ledger_path=None, cwd=None)
    assert leak_findings(text, without) == []
    with_ledger = bank.leak_context(ledger_path=home / "ledger.db", cwd=None)
    assert any("private path" in f for f in leak_findings(text, with_ledger))


@pytest.mark.parametrize("ref", ["", "@v1", "sales-fixture@"])
def test_a_bad_reference(ref: str) -> None:
    with pytest.raises(BankError) as info:
        parse_ref(ref)
    assert (info.value.message, info.value.hint) == (
        f"bad bank reference {ref!r}",
        "write NAME or NAME@VERSION",
    )


def test_a_reference_with_an_engine(ledger: Ledger, home: Path) -> None:
    assert find_published(ledger, home, "sales-fixture@v1:duckdb").seq == 1
    assert find_published(ledger, home, "sales-fixture:duckdb").seq == 1
    with pytest.raises(BankError) as info:
        find_published(ledger, home, "sales-fixture:sqlite")
    assert info.value.message == (
        f"no published bank 'sales-fixture:sqlite' in {ledger.path} (published: sales-fixture@v1)"
    )


def test_load_any_prefers_a_folder_then_a_published_bank(ledger: Ledger, home: Path) -> None:
    bank, published = load_any(str(BUILTIN_DIR / "retail"), ledger, home)
    assert (bank.ref, published) == ("retail@v4", None)
    bank, published = load_any("sales-fixture", ledger, home)
    assert published is not None
    assert (bank.ref, published.seq) == ("sales-fixture@v1", 1)
    assert bank.source.folder == published.files_dir  # the stored copy, not the built-in
    bank, published = load_any("retail", ledger, home)  # not published: the built-in one
    assert (bank.ref, published) == ("retail@v4", None)


def test_load_any_refusals(ledger: Ledger, home: Path) -> None:
    with pytest.raises(BankError) as info:
        load_any("sales-fixture@v9", None, home)
    assert info.value.message == "'sales-fixture@v9' names a published bank but there is no ledger"
    with pytest.raises(BankError) as info:
        load_any("sales-fixture@v9", ledger, home)
    assert info.value.message.startswith(f"no published bank 'sales-fixture@v9' in {ledger.path}")
    builtin = ", ".join(sorted(p.name for p in BUILTIN_DIR.iterdir() if p.is_dir()))
    with pytest.raises(BankError) as info:
        load_any("no-such-bank", ledger, home)
    assert info.value.message == (
        f"'no-such-bank' is not a bank folder, a bank published in {ledger.path} or a "
        f"built-in bank (built-in: {builtin})"
    )
