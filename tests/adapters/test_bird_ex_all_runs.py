"""Issue 16, must-show 1: BIRD mini-dev's superhero bank imported, BIRD's 13 published
prediction files replayed, and the report's BIRD EX equal to BIRD's own verdicts
(``bird-ex-verdicts/superhero/*.json``, produced by BIRD's unmodified evaluator) on
every one of the 676 predictions; every attempt where caseledger's verdict differs
is listed with a reason.

The expected values are BIRD's files, not this code's output; the per-run totals
are the README's (gpt-4-o_cot 47, ..., mixtral-8x7b 12).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from runkit import cli
from support import BENCHMARKS

BIRD = BENCHMARKS / "bird-mini-dev"
README_TOTALS = {
    "gpt-4-o_cot_SQLite": 47,
    "gpt-4-turbo_cot_SQLite": 46,
    "gpt-4_sqlite": 40,
    "gpt-4-32k_sqlite": 38,
    "gpt-35-turbo_cot_SQLite": 37,
    "meta-llama-3-70b-instruct2_cot_SQLite": 36,
    "meta-llama-3-70b-instruct-2_sqlite": 35,
    "gpt-35-turbo_sqlite": 32,
    "phi-3-medium-128k-instruct-1_sqlite": 30,
    "gpt-4-turbo_sqlite": 29,
    "gpt-35-turbo-instruct_sqlite": 28,
    "meta-llama-3-8b-instruct-2_sqlite": 26,
    "mistralai-mixtral-8x7b-instru-4_sqlite": 12,
}


def _run_id(model: str) -> str:
    return "bird-" + model.lower().replace("_", "-").replace(".", "-")


@pytest.mark.benchmark_data
@pytest.mark.slow
def test_bird_ex_equals_birds_own_verdicts_on_all_676_predictions(tmp_path: Path) -> None:
    home = tmp_path / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    out = tmp_path / "banks"
    questions_file = str(BIRD / "mini_dev_sqlite.json")
    databases = str(BIRD / "databases")
    done = cli(home, "bank", "import", "bird", questions_file, "--databases", databases,
               "--db-id", "superhero", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cli(home, "bank", "publish", str(out / "superhero")).returncode == 0
    # case id -> BIRD question_id, from the question file itself.
    questions = json.loads((BIRD / "mini_dev_sqlite.json").read_text(encoding="utf-8"))
    superhero = {f"q{q['question_id']}" for q in questions if q["db_id"] == "superhero"}
    assert len(superhero) == 52
    for model in README_TOTALS:
        predictions = BIRD / "predictions" / f"predict_mini_dev_{model}.json"
        run_id = _run_id(model)
        done = cli(home, "run", "--bank", "superhero", "--adapter", "replay", "--replay-format",
                   "bird", "--replay-file", str(predictions), "--run-id", run_id)  # fmt: skip
        assert done.returncode == 0, done.stderr
    report = tmp_path / "report.json"
    done = cli(home, "report", "-o", str(report))
    assert done.returncode == 0, done.stderr
    doc = json.loads(report.read_text(encoding="utf-8"))
    runs = {r["run"]: r for s in doc["sections"] for r in s["runs"]}
    compared = 0
    for model, total in README_TOTALS.items():
        block = runs[_run_id(model)]["benchmark"]
        verdicts = json.loads(
            (BIRD / "bird-ex-verdicts" / "superhero" / f"{model}.json").read_text("utf-8")
        )
        ours = {v["case"]: v["ex"] for v in block["verdicts"]}
        assert set(ours) == superhero
        for case, ex in ours.items():
            assert ex is not None, (model, case)
            assert int(ex) == verdicts[case.removeprefix("q")], (model, case)
            compared += 1
        assert (block["ex_correct"], block["ex_judged"]) == (total, 52), model
        # Every attempt where the verdicts differ is listed, with a reason.
        differ = {v["case"] for v in block["verdicts"] if v["ex"] != (v["caseledger"] is True)}
        assert {d["case"] for d in block["disagreements"]} == differ
        assert all(d["reason"] for d in block["disagreements"])
        assert block["agree"] == 52 - len(differ)
    assert compared == 676
    # The CaseRuns export joins with BIRD's files by question_id, not by case_id[1:].
    exported = tmp_path / "gpt4.csv"
    done = cli(home, "export", "caseruns", "--run", _run_id("gpt-4_sqlite"), "-o", str(exported))
    assert done.returncode == 0, done.stderr
    with exported.open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    verdicts = json.loads(
        (BIRD / "bird-ex-verdicts" / "superhero" / "gpt-4_sqlite.json").read_text("utf-8")
    )
    assert {r["benchmark"] for r in table} == {"bird"}
    assert {r["benchmark_question_id"] for r in table} == {q[1:] for q in superhero}
    assert {r["benchmark_question_id"]: r["benchmark_ex"] for r in table} == {
        qid: ("true" if ok else "false") for qid, ok in verdicts.items()
    }
    markdown = cli(home, "report", "--format", "md")
    assert "BIRD execution accuracy beside caseledger" in markdown.stdout
