"""The ``rows: multiset | set`` case contract (issue 16): cases.yaml, the published case,
existing bytes, ``bank show``, and a real run whose scores rescore and recompute the same."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest
from banktest import edit
from click.testing import CliRunner
from ledger_audit import TEST_SCORER

from ledger.bank.model import load_bank
from ledger.bank.publish import publish
from ledger.cli import main
from ledger.errors import BankError
from ledger.events import ScoreComputed, SqlExecuted
from ledger.harness import score as score_mod
from ledger.keys import Signer
from ledger.store import Ledger

ORDERED_03 = "    row_order_significant: true\n"
UNORDERED_03 = "    row_order_significant: false\n    rows: set\n"


def test_set_with_significant_order_is_refused_naming_case_line_and_field(tiny: Path) -> None:
    # tiny-03's row_order_significant: true is on line 54; rows goes on line 55
    edit(tiny, "cases.yaml", ORDERED_03, ORDERED_03 + "    rows: set\n")
    with pytest.raises(BankError) as info:
        load_bank(tiny)
    assert (
        "cases.yaml:55: case tiny-03: field rows: rows: set compares rows without their "
        "order, so it cannot be combined with row_order_significant: true" in info.value.message
    )


def test_an_unknown_contract_is_refused(tiny: Path) -> None:
    edit(tiny, "cases.yaml", ORDERED_03, "    row_order_significant: false\n    rows: bag\n")
    with pytest.raises(BankError) as info:
        load_bank(tiny)
    assert (
        "cases.yaml:55: case tiny-03: field rows: unknown value 'bag', expected one of "
        "multiset, set" in info.value.message
    )


def test_multiset_written_out_keeps_the_published_case_bytes(tiny: Path) -> None:
    before = [msgspec.json.encode(c.spec()) for c in load_bank(tiny).cases]
    assert all(b'"rows"' not in b for b in before)
    edit(tiny, "cases.yaml", ORDERED_03, ORDERED_03 + "    rows: multiset\n")
    after = [msgspec.json.encode(c.spec()) for c in load_bank(tiny).cases]
    assert after == before


def test_set_is_published_in_the_case_and_shown(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    edit(tiny, "cases.yaml", ORDERED_03, UNORDERED_03)
    result = publish(ledger, signer, tiny, home)
    cases = {c.id: c for c in result.published.event.cases}
    assert cases["tiny-03"].rows == "set"
    assert cases["tiny-03"].row_contract == "set"
    assert cases["tiny-01"].rows is msgspec.UNSET
    assert cases["tiny-01"].row_contract == "multiset"
    encoded = {cid: msgspec.json.encode(c) for cid, c in cases.items()}
    assert [b'"rows":"set"' in encoded[cid] for cid in sorted(encoded)] == [False, False, True]
    shown = CliRunner().invoke(
        main, ["--ledger", str(ledger.path), "bank", "show", "tiny@v1"], catch_exceptions=False
    )
    assert "    rows: set" in shown.output
    data = json.loads(
        CliRunner()
        .invoke(main, ["--ledger", str(ledger.path), "bank", "show", "tiny@v1", "--json"])
        .output
    )
    assert [c.get("rows") for c in data["cases"]] == [None, None, "set"]


def _cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _answer(sql: str) -> str:
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    body = {"plan": {"grain": "one row per result", **plan}, "sql": sql, "summary": "s"}
    return json.dumps({**body, "assumptions": []}, ensure_ascii=False)


class SameRules(score_mod.Scorer):
    """Scorer 2.0.0's rules under another version name: a rescore must give the same numbers."""

    version = "2.0.1-rows-test"


@TEST_SCORER
def test_a_run_scores_the_set_contract_and_rescore_and_recompute_agree(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit(tiny, "cases.yaml", ORDERED_03, UNORDERED_03)
    ledger = tmp_path / "led" / "ledger.db"
    ledger.parent.mkdir()
    assert _cli(ledger, "init")[0] == 0
    code, _, err = _cli(ledger, "bank", "publish", str(tiny))
    assert code == 0, err
    refs = {c.id: c.reference_sql for c in load_bank(tiny).cases}
    inner = refs["tiny-03"].replace("ORDER BY c.city", "")
    # every gold row twice: 6 rows, 3 distinct (gold: Beijing 1, Hangzhou 0, Shanghai 1)
    doubled = f"SELECT * FROM ({inner}) AS a UNION ALL SELECT * FROM ({inner}) AS b"  # noqa: S608
    answers = {"tiny-01": refs["tiny-01"], "tiny-02": refs["tiny-02"], "tiny-03": doubled}
    replay = tmp_path / "answers.jsonl"
    replay.write_text(
        "".join(
            json.dumps({"case": c, "attempt": 1, "output": _answer(sql)}) + "\n"
            for c, sql in answers.items()
        ),
        encoding="utf-8",
    )
    code, out, err = _cli(
        ledger, "run", "--bank", "tiny", "--adapter", "replay", "--replay-file", str(replay),
        "--run-id", "r", "--no-variants",
    )  # fmt: skip
    assert code == 0, err + out

    def scores() -> list[ScoreComputed]:
        with Ledger.open(ledger, readonly=True) as led:
            found = [s.event() for s in led.stream_events("r")]
        return [e for e in found if isinstance(e, ScoreComputed) and e.case_id == "tiny-03"]

    (first,) = scores()
    with Ledger.open(ledger, readonly=True) as led:
        (executed,) = [
            e
            for e in (s.event() for s in led.stream_events("r"))
            if isinstance(e, SqlExecuted) and e.case_id == "tiny-03"
        ]
    assert executed.row_count == 6  # as a multiset: F1 = 2*3/(3+6) = 2/3, not 1
    # set: 3 distinct answer rows, all gold's: every item, 100 points
    assert (first.matched, first.expected_rows, first.actual_rows) == (3, 3, 3)
    assert (first.f1, first.total, first.result_correct) == (Decimal(1), Decimal("100.00"), True)

    code, _, err = _cli(ledger, "verify", "--recompute")
    assert code == 0, err

    monkeypatch.setitem(score_mod.SCORERS, SameRules.version, SameRules())
    code, out, err = _cli(ledger, "rescore", "--scorer", SameRules.version, "--run", "r")
    assert code == 0, err
    old, new = scores()
    assert new.scorer_version == SameRules.version
    same = ("matched", "expected_rows", "actual_rows", "precision", "recall", "f1", "total")
    assert [getattr(new, f) for f in same] == [getattr(old, f) for f in same]
    code, _, err = _cli(ledger, "verify", "--recompute")
    assert code == 0, err
