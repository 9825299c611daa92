"""What the gate reads (issue 14 item 6): each kind of side it refuses, and where the gate
configuration comes from, with the exact messages. Real files: the gate ledger (five runs:
base4, cur3, tools-unknown, gaps, other-bank), the demo's frozen lumen-mini baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger.app.gate_inputs import load_config, load_side
from ledger.errors import UsageError
from projections.gate import GateConfig
from projections.report.jsonio import plain

LUMEN = Path(__file__).resolve().parents[1] / "baselines" / "demo" / "lumen-mini"


def refused(spec: str | Path) -> UsageError:
    with pytest.raises(UsageError) as info:
        load_side(str(spec))
    return info.value


def test_a_ledger_of_several_runs_needs_a_run(gate_ledger: Path) -> None:
    error = refused(gate_ledger)
    assert error.message == f"{gate_ledger} holds 5 runs; name one as {gate_ledger}:RUN"
    assert error.hint == "list them with `caseledger runs`"
    card, where = load_side(f"{gate_ledger}:cur3")
    assert (card.run, where) == ("cur3", f"ledger {gate_ledger} run cur3")


def test_a_baseline_folder(tmp_path: Path) -> None:
    card, where = load_side(str(LUMEN))
    assert (card.run, where) == (
        "demo-lumen-mini",
        f"frozen baseline {LUMEN} (pinned scorecard)",
    )
    assert refused(f"{LUMEN}:other").message == (
        f"{LUMEN} is the baseline of run demo-lumen-mini, not other"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert refused(empty).message == f"{empty} is a folder without scorecard.json: not a baseline"
    (empty / "scorecard.json").write_text('{"contract": "caseledger-report/1"}', "utf-8")
    assert refused(empty).message == (
        f"{empty / 'scorecard.json'}: not a caseledger-scorecard/1 scorecard"
    )


def test_a_scorecard_copied_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "pinned.json"
    shutil.copyfile(LUMEN / "scorecard.json", path)
    card, where = load_side(str(path))
    assert (card.run, where) == ("demo-lumen-mini", f"scorecard {path}")
    assert load_side(f"{path}:demo-lumen-mini")[0] == card
    assert refused(f"{path}:x").message == (
        f"{path} is the scorecard of run demo-lumen-mini, not x"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"<html>", "not a JSON report, scorecard or ledger (Expecting value: line 1 column 1 "
                    "(char 0))"),
        # (not \xff\xfe: json.loads reads that as a UTF-16 byte order mark)
        (b"\x80{}", "not a JSON report, scorecard or ledger ('utf-8' codec can't decode byte "
                    "0x80 in position 0: invalid start byte)"),
        (b"[1, 2]", "not a JSON object"),
    ],
    ids=["not-json", "not-utf8", "a-list"],
)  # fmt: skip
def test_a_file_that_is_no_report(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "side.json"
    path.write_bytes(content)
    assert refused(path).message == f"{path}: {message}"


# ----------------------------------------------------------------- configuration


def test_no_configuration_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == GateConfig()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', "utf-8")
    assert load_config(tmp_path) == GateConfig()


def test_the_gate_of_caseledger_yaml(tmp_path: Path) -> None:
    path = tmp_path / "caseledger.yaml"
    path.write_text("gate:\n  enabled: false\n  min_n: 3\n", "utf-8")
    assert load_config(tmp_path) == GateConfig(enabled=False, min_n=3, source=f"{path} gate:")
    path.write_text("gate:\n", "utf-8")  # an empty gate: mapping is the defaults, named
    assert load_config(tmp_path) == GateConfig(source=f"{path} gate:")


def test_the_gate_configured_in_both_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.caseledger.gate]\nenabled = true\n", "utf-8")
    (tmp_path / "caseledger.yaml").write_text("gate:\n  enabled: true\n", "utf-8")
    with pytest.raises(UsageError) as info:
        load_config(tmp_path)
    assert info.value.message == (
        f"the gate is configured twice: {tmp_path / 'pyproject.toml'} [tool.caseledger.gate] "
        f"and {tmp_path / 'caseledger.yaml'} gate:"
    )
    assert info.value.hint == "keep one of them"


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("pyproject.toml", "[tool.caseledger.gate\n", "TOML"),
        ("caseledger.yaml", "gate: [\n", "YAML"),
    ],
)
def test_a_configuration_file_that_does_not_parse(
    tmp_path: Path, name: str, text: str, kind: str
) -> None:
    (tmp_path / name).write_text(text, "utf-8")
    with pytest.raises(UsageError) as info:
        load_config(tmp_path)
    # the parser's own text follows in parentheses
    assert info.value.message.startswith(f"{tmp_path / name}: not valid {kind} (")


def test_scorecard_json_is_what_the_baseline_pins(tmp_path: Path) -> None:
    # a side read from a baseline folder is its scorecard.json, field for field as parsed
    card, _ = load_side(str(LUMEN))
    assert plain(card) == json.loads((LUMEN / "scorecard.json").read_bytes())


def test_a_scorecard_file_that_does_not_match_the_schema_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pinned.json"
    card = json.loads((LUMEN / "scorecard.json").read_bytes())
    card["completeness"]["planned"] = -1  # a count is never negative
    path.write_text(json.dumps(card), "utf-8")
    error = refused(path)
    assert error.message == (
        f"{path} scorecard does not match caseledger-scorecard/1: "
        "Expected `int` >= 0 - at `$.completeness.planned`"
    )
    assert error.hint == "re-pin it with `caseledger baseline pin` (docs/gate.md)"
