"""The gate's rules on scorecards, one at a time, and tampered baseline bundles."""

from __future__ import annotations

import copy
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app.baseline_check import check_baseline
from ledger.cli import main
from projections import gate
from projections.metrics import parse_tolerance

DEMO = Path(__file__).resolve().parents[2] / "tests" / "baselines" / "demo"
CARD = json.loads((DEMO / "lumen-mini" / "scorecard.json").read_text("utf-8"))


@pytest.mark.parametrize(
    ("direction", "tol", "base", "cur", "verdict"),
    [
        ("higher", "0.02", "0.50", "0.48", "pass"),  # exactly at the tolerance
        ("higher", "0.02", "0.50", "0.4799", "regression"),
        ("higher", "0.02", "0.50", "0.90", "pass"),  # better
        ("lower", "0.10-r", "200", "220", "pass"),
        ("lower", "0.10-r", "200", "220.01", "regression"),
        ("lower", "0.10-r", "0", "0", "pass"),
        ("lower", "0.10-r", "0", "0.0001", "regression"),  # zero baseline allows no change
        ("lower", "0.02", "0.0000", "0.0200", "pass"),
    ],
)
def test_judge_metric(direction, tol, base, cur, verdict) -> None:
    got = gate.judge_metric(direction, parse_tolerance(tol), Decimal(base), Decimal(cur))
    assert got[0] == verdict


def _card(**metrics_: str | None) -> dict:
    card = copy.deepcopy(CARD)
    card["metrics"].update(metrics_)
    return card


def test_null_is_incomparable_and_does_not_block() -> None:
    v = gate.judge(_card(), _card(result_correct_rate=None), gate.GateOptions())
    row = next(r for r in v.metrics if r.metric == "result_correct_rate")
    assert (v.exit_code, row.verdict, row.note) == (0, "incomparable", "null on current")


def test_unknown_metric_on_both_sides_and_unpaired() -> None:
    base, cur = _card(old_metric="1"), _card(old_metric="2")
    del base["metrics"]["model_score"]
    v = gate.judge(base, cur, gate.GateOptions())
    assert v.exit_code == 0
    assert v.unpaired == ["model_score"]
    assert "old_metric" in v.incomparable


def test_family_tolerance_and_ignore() -> None:
    base = _card(**{"dimension.basic": "90.00"})
    cur = _card(**{"dimension.basic": "87.00"})
    assert gate.judge(base, cur, gate.GateOptions()).regressions == ["dimension.basic"]
    wide = gate.GateOptions(tolerances={"dimension.*": parse_tolerance("3.0")})
    assert gate.judge(base, cur, wide).exit_code == 0
    ignore = gate.GateOptions(ignore=frozenset({"dimension.*"}))
    assert gate.judge(base, cur, ignore).exit_code == 0


def test_missing_invocation_evidence_is_never_equal() -> None:
    cur = copy.deepcopy(CARD)
    cur["controls"]["with_invocation"] = 53
    v = gate.judge(CARD, cur, gate.GateOptions())
    assert v.exit_code == 2
    assert v.problems == [
        "invocation evidence missing on current: 53 of 54 attempts recorded what was sent "
        "(missing evidence is never equal)"
    ]


def test_scorer_major_differs() -> None:
    cur = copy.deepcopy(CARD)
    cur["scorer_major"], cur["scorer_version"] = "3", "3.0.0"
    assert gate.judge(CARD, cur, gate.GateOptions()).problems == [
        "scorer major differs: baseline 2 (2.0.0), current 3 (3.0.0)"
    ]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    dst = tmp_path / "b"
    shutil.copytree(DEMO / "northwind-sql-pro", dst)
    return dst


def _lines(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text("utf-8").splitlines()]


def _write(folder: Path, lines: list[dict]) -> None:
    (folder / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")


def test_flipped_body_byte_fails(bundle: Path) -> None:
    lines = _lines(bundle)
    lines[40]["body"] = lines[40]["body"].replace('"attempt":1', '"attempt":2', 1)
    _write(bundle, lines)
    result = CliRunner().invoke(main, ["baseline", "check", str(bundle)])
    assert result.exit_code == 1
    assert f"seq {lines[40]['seq']}" in result.output
    assert "hashes to" in result.output


def test_foreign_signature_fails(bundle: Path) -> None:
    lines = _lines(bundle)
    lines[30]["sig"], lines[31]["sig"] = lines[31]["sig"], lines[30]["sig"]
    _write(bundle, lines)
    result = check_baseline(bundle)
    assert result.errors == [
        f"bundle does not verify: seq {lines[30]['seq']}: signature by key id "
        f"{lines[30]['key_id']} does not verify"
    ]


def test_dropped_event_breaks_the_stream(bundle: Path) -> None:
    lines = _lines(bundle)
    del lines[50]
    _write(bundle, lines)
    errors = check_baseline(bundle).errors
    assert len(errors) == 1
    assert "stream demo-northwind-sql-pro: stream_seq" in errors[0]


def test_not_a_baseline_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["baseline", "check", str(tmp_path)])
    assert result.exit_code == 2
    assert "manifest.json is missing" in result.output


def test_unknown_required_field_exits_2(bundle: Path) -> None:
    result = CliRunner().invoke(main, ["baseline", "check", str(bundle), "--require-fields", "x"])
    assert result.exit_code == 2
    assert "unknown field 'x'" in result.output


def test_require_fields_gap_is_an_error() -> None:
    result = check_baseline(DEMO / "lumen-mini", require_fields=("tokens",))
    assert result.errors == ["--require-fields tokens: only 52 of 54 attempts have it"]
