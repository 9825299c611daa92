"""``caseledger slices`` through click's CliRunner on a real ledger (issue 19).

The ledger is built by the real code: sales-fixture published, a replay run whose
answers are the reference SQL or a trap of tests/banks/traps.py, executed in the
sandboxed worker and scored. Every count below is worked out by hand from the
answers chosen here and the components pinned in tests/harness/test_slices.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from traps import TRAPS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))
from report_testkit import fixed_clock, operator

from ledger.cli import main
from ledger.store import Ledger

RECURSIVE = (  # executes, is wrong, and is not modelled: unknown
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2) "
    "SELECT COUNT(*) AS order_count, SUM(i) AS amount FROM n"
)


def _trap(case: str, name: str) -> str:
    return dict(TRAPS[case])[name]


def _answers(refs: dict[str, str]) -> dict[tuple[str, int], str]:
    out = {(case, n): refs[case] for case in refs for n in (1, 2)}
    out[("sf-01", 1)] = _trap("sf-01", "plain_tag_join")  # joins
    out[("sf-02", 1)] = _trap("sf-02", "missing_region")  # filters
    out[("sf-02", 2)] = _trap("sf-02", "no_total_row")  # grouping
    out[("sf-03", 1)] = RECURSIVE  # unknown
    out[("sf-04", 1)] = _trap("sf-04", "store_name_join")  # joins
    out[("sf-04", 2)] = _trap("sf-04", "kept_invalid")  # filters
    return out


def _build(folder: Path) -> Path:
    from ledger.adapters.base import build_adapter
    from ledger.adapters.reference import reference_output
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import BUILTIN_DIR
    from ledger.run import runner

    folder.mkdir(parents=True)
    signer = operator()
    signer.save(folder / "keys" / "operator.key")
    path = folder / "ledger.db"
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        pb = publish(ledger, signer, BUILTIN_DIR / "sales-fixture", folder, cwd=folder).published
        bank = bank_context(pb, path, folder)
        refs = bank.reference_sql
        reference = build_adapter("reference", {}, cases=refs)
        plan = runner.RunPlan(run_id="self-test", profile="reference", attempts=1)
        runner.run(ledger, signer, bank, reference, plan, clock=fixed_clock)
        lines = [
            {"case": c, "attempt": n, "output": reference_output(sql), "model": "m"}
            for (c, n), sql in sorted(_answers(refs).items())
        ]
        replay = folder / "model-a.jsonl"
        replay.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
        adapter = build_adapter("replay", {"replay_file": str(replay), "tools": "off"})
        plan = runner.RunPlan(run_id="model-a", profile="model-a", attempts=2)
        runner.run(ledger, signer, bank, adapter, plan, clock=fixed_clock)
    return folder


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("slices") / "home")


def run(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_help() -> None:
    result = CliRunner().invoke(main, ["slices", "--help"])
    assert result.exit_code == 0
    assert "--run" in result.output


def test_slices_records_then_counts(home: Path) -> None:
    with Ledger.open(home / "ledger.db", readonly=True) as led:
        before = led.size()
    code, out, err = run(home, "slices", "--run", "model-a")
    assert code == 0, err
    # 7 cases x 2 attempts, every one executed: 14 slices recorded
    assert out.splitlines() == [
        "run model-a (sales-fixture@v1, scorer 2.0.0): 6 wrong of 14 attempts, 5 checked; "
        "slices 1.0.0 (14 recorded now)",
        "first divergence   count  share of checked",
        "  joins               2  0.4000",
        "  filters             2  0.4000",
        "  grouping            1  0.2000",
        "  none                0  0.0000",
        "  unknown             1  (not in shares)",
        "by dimension: aggregation_metrics: joins 1, filters 2, grouping 1; "
        "basic: joins 1, unknown 1",
        "  unknown: sf-03 #1: a recursive CTE is not modelled",
    ]
    with Ledger.open(home / "ledger.db", readonly=True) as led:
        assert led.size() == before + 14
    # a second time appends nothing and prints the same counts
    code, again, _ = run(home, "slices", "--run", "model-a")
    assert code == 0
    assert again.splitlines()[0].endswith("(0 recorded now)")
    assert again.splitlines()[1:] == out.splitlines()[1:]
    with Ledger.open(home / "ledger.db", readonly=True) as led:
        assert led.size() == before + 14
    # the appended events are signed and chained like every other
    code, out, err = run(home, "verify")
    assert code == 0, err


def test_json_lists_every_attempt(home: Path) -> None:
    code, out, _ = run(home, "slices", "--run", "model-a", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["wrong"] == 6
    assert doc["checked"] == 5
    assert doc["counts"]["joins"] == 2
    assert doc["counts"]["unknown"] == 1
    assert doc["counts"]["not_recorded"] == 0
    assert doc["shares"]["filters"] == "0.4000"
    assert doc["dimensions"]["basic"]["checked"] == 1
    assert len(doc["attempts"]) == 14
    by_key = {(a["case"], a["attempt"]): a for a in doc["attempts"]}
    assert by_key[("sf-01", 1)]["verdict"] == "wrong"
    assert by_key[("sf-01", 1)]["component"] == "joins"
    assert by_key[("sf-01", 2)]["verdict"] == "correct"
    assert by_key[("sf-01", 2)]["component"] == "none"
    assert by_key[("sf-01", 2)]["counted"] is False
    assert by_key[("sf-02", 2)]["component"] == "grouping"
    assert doc["unattributed"] == [
        {
            "attempt": 1,
            "case": "sf-03",
            "component": "unknown",
            "detail": "a recursive CTE is not modelled",
        }
    ]


def test_nothing_to_check_exits_2(home: Path) -> None:
    code, out, err = run(home, "slices", "--run", "self-test")
    assert code == 2
    assert "0 wrong of 7 attempts, 0 checked" in out
    assert "nothing could be checked: the run has no executed wrong attempt" in err
    assert "0.0000" not in out  # never an empty 100%


def test_unknown_run_exits_2(home: Path) -> None:
    code, _, err = run(home, "slices", "--run", "nope")
    assert code == 2
    assert "no run 'nope'" in err
    assert "Traceback" not in err


@pytest.mark.dishonest_ledger("deletes the bank files on purpose")
def test_missing_bank_files_exit_2(tmp_path: Path) -> None:
    fresh = _build(tmp_path / "home")
    shutil.rmtree(fresh / "banks")
    code, _, err = run(fresh, "slices", "--run", "model-a")
    assert code == 2
    assert "cannot compute slices for runs on bank sales-fixture@v1" in err
    assert "bank publish" in err
    assert "Traceback" not in err


def test_report_section_and_old_report_bytes(tmp_path: Path) -> None:
    fresh = _build(tmp_path / "home")
    with Ledger.open(fresh / "ledger.db", readonly=True) as led:
        size = led.size()
    code, before, _ = run(fresh, "report", "--format", "json")
    assert code == 0
    assert '"slices"' not in before
    code, _, err = run(fresh, "slices", "--run", "model-a")
    assert code == 0, err
    # a report at the old tree size is the same bytes: slice events come after it
    code, old, _ = run(fresh, "report", "--format", "json", "--at-size", str(size))
    assert old == before
    code, out, _ = run(fresh, "report", "--format", "json")
    runs = {r["run"]: r for s in json.loads(out)["sections"] for r in s["runs"]}
    assert "slices" not in runs["self-test"]  # no slice events for that run
    block = runs["model-a"]["slices"]
    assert (block["wrong"], block["checked"]) == (6, 5)
    assert block["counts"]["grouping"] == 1
    assert block["dimensions"]["basic"]["counts"]["unknown"] == 1
    # the scores are the same as before the slices were recorded
    runs_before = {r["run"]: r for s in json.loads(before)["sections"] for r in s["runs"]}
    assert runs["model-a"]["scores"] == runs_before["model-a"]["scores"]
    assert runs["model-a"]["quality"] == runs_before["model-a"]["quality"]
    code, md, _ = run(fresh, "report", "--format", "md")
    assert "### Understanding slices (diagnostic: never change a score" in md
    assert (
        "| model-a | 6 | 5 | 0 (0.0000) | 2 (0.4000) | 2 (0.4000) | 1 (0.2000) | 0 (0.0000) "
        "| 0 (0.0000) | 0 (0.0000) | 0 (0.0000) | 1 | 0 |"
    ) in md
    assert "| model-a | sf-03 | 1 | unknown | a recursive CTE is not modelled |" in md
    code, page, _ = run(fresh, "report", "--format", "html")
    assert '<div id="slices">' in page
    assert '<td>model-a</td><td class="num">6</td><td class="num">5</td>' in page
