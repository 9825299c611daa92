"""The leak check (DESIGN.md fine print) and the anti-memorisation check at validate/publish."""

from __future__ import annotations

from pathlib import Path

import pytest
from banktest import edit

from ledger.bank.leak import leak_context, leak_findings
from ledger.bank.publish import publish, validate_bank
from ledger.errors import BankError
from ledger.events import Column, GoldResult
from ledger.keys import Signer
from ledger.store import Ledger

REF = "SELECT c.city, count(*)\nFROM customers AS c\n  GROUP BY c.city\n"


def _gold(rows: tuple[tuple[object, ...], ...]) -> GoldResult:
    cols = tuple(Column(name=f"c{i}", type="VARCHAR") for i in range(len(rows[0])))
    return GoldResult(case_id="k1", columns=cols, rows=rows, digest="sha256:" + "ab" * 32)


def _ctx(rows: tuple[tuple[object, ...], ...] = (("Beijing", "1200.50"),), **kw: object):
    return leak_context({"k1": REF}, [_gold(rows)], **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "select C.CITY,   COUNT(*) from customers as c group by c.city;",
            "reference SQL of case k1",
        ),
        ("the REFERENCE_SQL field", "'reference_sql'"),
        ("see required_ast", "'required_ast'"),
        ("digest " + "AB" * 32, "gold digest of case k1"),
        ("Answer: | Beijing | 1200.50 |", "whole gold row of case k1"),
        ("('beijing', 1200.5)", "whole gold row of case k1"),
        ('["Beijing",null,"1200.50"]', "whole gold row of case k1"),
    ],
    ids=["sql", "word1", "word2", "digest", "row-table", "row-tuple", "row-json-null"],
)
def test_each_leak_is_found(text: str, expected: str) -> None:
    findings = leak_findings(text, _ctx())
    assert any(expected in f for f in findings), findings


@pytest.mark.parametrize(
    "text",
    [
        "SELECT c.city, count(*) FROM customers AS c",  # a prefix of the reference is not it
        "Beijing sold 1200.501 yuan",  # a longer number is another number
        "Beijing had 11200.50",
        "1200.50 Beijing",  # cells out of order
        "Beijing and then later on 1200.50 appears",  # words between the cells
        "reference sql and required ast",
    ],
)
def test_ordinary_text_is_not_a_leak(text: str) -> None:
    assert leak_findings(text, _ctx()) == []


def test_short_rows_are_not_matched_but_long_single_cells_are() -> None:
    ctx = _ctx((("3",), ("A", "1"), ("2026-09-30T16:00:00.000000Z",)))
    assert leak_findings("top 3 of A, 1", ctx) == []
    assert leak_findings("at 2026-09-30 16:00:00 UTC", ctx) != []


def test_paths_are_leaks(tmp_path: Path) -> None:
    work = tmp_path / "work"
    bank = work / "banks" / "tiny"
    ctx = _ctx(paths=[bank, Path("/srv/ledger/.caseledger/ledger.db")], cwd=work)
    assert leak_findings(f"see {bank}/seed.sql", ctx)
    assert leak_findings("open banks/tiny/seed.sql", ctx)  # relative to the working directory
    assert leak_findings("/srv/ledger/.caseledger/ledger.db", ctx)
    assert leak_findings(f"cd {work}", ctx)
    assert leak_findings("the tiny bank", ctx) == []  # a bare name is not a path


# ---------------------------------------------------------------- at validate / publish


def test_semantic_json_carrying_reference_sql_is_refused(tiny: Path) -> None:
    edit(
        tiny,
        "semantic.json",
        '"Months and days are calendar periods in Asia/Shanghai, not UTC."',
        '"Example: SELECT customer_id, name FROM customers '
        'WHERE city IS NULL ORDER BY customer_id"',
    )
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    msg = info.value.message
    assert "semantic.json: contains the reference SQL of case tiny-01" in msg
    # It reaches every rendered prompt too; a prompt is compared with its own case's SQL
    # (issue 16), so only tiny-01's prompt names it.
    assert "prompt.md: case tiny-01: the rendered prompt contains the reference SQL" in msg
    for cid in ("tiny-02", "tiny-03"):
        assert f"prompt.md: case {cid}: the rendered prompt contains" not in msg


def test_note_with_a_whole_gold_row_is_refused(tiny: Path) -> None:
    edit(
        tiny, "cases.yaml", "notes: Trap - filtering", "notes: Expect Hangzhou 0. Trap - filtering"
    )
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    msg = info.value.message
    assert (
        "cases.yaml:57: case tiny-03: field notes: contains a whole gold row of case tiny-03" in msg
    )
    assert "'hangzhou 0'" in msg


def test_question_naming_a_hidden_field_is_refused(tiny: Path) -> None:
    edit(tiny, "cases.yaml", "question: 哪些客户", "question: (required_ast) 哪些客户")
    with pytest.raises(BankError, match=r"case tiny-01: the rendered prompt contains the word"):
        validate_bank(tiny)


def test_schema_comment_with_the_ledger_path_is_refused_at_publish(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    edit(tiny, "schema.sql", "Amounts are in yuan.", f"Amounts are in yuan. Log: {ledger.path}")
    size = ledger.size()
    with pytest.raises(BankError, match=r"contains the private path"):
        publish(ledger, signer, tiny, home)
    assert ledger.size() == size
    assert not (home / "banks").exists() or not any((home / "banks").glob("*.duckdb"))
