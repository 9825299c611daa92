"""Issue 31, must-show: Spider's ``concert_singer`` imported with ``bank import spider``,
Spider's own example files replayed with ``--replay-format spider``, and the report's
Spider EX equal to the verdicts of Spider's own evaluator
(``test-suite-verdicts/*.json``: test-suite-sql-eval ``exec_eval.eval_exec_match``,
unmodified, ``plug_value=False``, ``keep_distinct=False``) on every question.

The expected values are the evaluator's files, not this code's output:

- ``pred_example.txt``: ``pred_example.json``, 21 of 45 correct. It was made with
  ``dev.json``'s ``query`` as the gold, which is the gold ``bank import spider`` freezes
  (the imported bank's reference SQL is ``dev.json``'s ``query``).
- ``gold.json`` (45 of 45) is every gold against itself. ``gold_example.txt`` is not
  ``dev.json``'s ``query`` on every line: at indices 16, 43 and 44 its SQL gives other
  rows (16: ``avg(capacity), max(capacity)`` where dev.json asks ``max(capacity),
  average``; 43 and 44: a join counting 6 rows where dev.json's subquery counts 0).
  Against this bank's gold, Spider's evaluator says 0 for those three (checked by
  running ``eval_exec_match(db, gold_example[i], dev[i]["query"], False, False, False)``
  from test-suite-sql-eval at commit e97acc5 on this database: 0 at 16, 43, 44 and 1 at
  the 42 others). So ``gold_example.txt`` agrees with ``gold.json`` on 42 of 45 and with
  the evaluator on this bank's gold on 45 of 45; a file of ``dev.json``'s own queries
  agrees with ``gold.json`` on 45 of 45.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from runkit import cli
from support import BENCHMARKS

from ledger.adapters.benchmark_files import write_spider

SPIDER = BENCHMARKS / "spider-concert-singer"
VERDICTS = SPIDER / "test-suite-verdicts"
CASES = [f"q{i}" for i in range(45)]  # dev.json indices 0-44 are concert_singer's
# gold_example.txt lines whose SQL answers otherwise than dev.json's query (see above).
GOLD_FILE_DIFFERS = {"q16", "q43", "q44"}


def _verdicts(name: str) -> dict[str, int]:
    doc = json.loads((VERDICTS / name).read_text(encoding="utf-8"))
    return {f"q{k}": v for k, v in doc.items()}


def _block(doc: dict[str, Any], run_id: str) -> dict[str, Any]:
    runs = {r["run"]: r for s in doc["sections"] for r in s["runs"]}
    block: dict[str, Any] = runs[run_id]["benchmark"]
    return block


@pytest.mark.slow
@pytest.mark.benchmark_data
def test_spider_ex_equals_spiders_own_evaluator_on_concert_singer(tmp_path: Path) -> None:
    home = tmp_path / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    out = tmp_path / "banks"
    done = cli(home, "bank", "import", "spider", str(SPIDER / "dev.json"), "--tables",
               str(SPIDER / "tables.json"), "--databases", str(SPIDER / "database"),
               "--db-id", "concert_singer", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cli(home, "bank", "publish", str(out / "concert_singer")).returncode == 0
    dev = json.loads((SPIDER / "dev.json").read_text(encoding="utf-8"))
    own = tmp_path / "dev_queries.txt"
    own.write_bytes(write_spider([q["query"] for q in dev]))
    files = {
        "sp-pred": SPIDER / "pred_example.txt",
        "sp-gold": SPIDER / "gold_example.txt",
        "sp-dev": own,
    }
    for run_id, path in files.items():
        done = cli(home, "run", "--bank", "concert_singer", "--adapter", "replay",
                   "--replay-format", "spider", "--replay-file", str(path),
                   "--run-id", run_id)  # fmt: skip
        assert done.returncode == 0, done.stderr
        # Benchmark predictions carry no answer contract: format-ok does not apply (not 0/45).
        assert (
            "  format-ok: not applicable: the answers are a benchmark's predictions (plain SQL, "
            "--replay-format), which carry no answer contract"
        ) in done.stdout.splitlines()
    report = tmp_path / "report.json"
    done = cli(home, "report", "-o", str(report))
    assert done.returncode == 0, done.stderr
    doc = json.loads(report.read_text(encoding="utf-8"))

    runs = {r["run"]: r for s in doc["sections"] for r in s["runs"]}
    assert {runs[r]["quality"]["format_ok_rate"] for r in files} == {None}
    markdown = cli(home, "report", "--format", "md").stdout
    assert markdown.count("n/a (benchmark predictions: no answer contract)") == 3

    pred = _block(doc, "sp-pred")
    assert pred["name"] == "spider"
    assert "any column permutation" in pred["rule"]
    assert pred["rows"] == "multiset"  # Spider counts duplicates
    ex = {v["case"]: v["ex"] for v in pred["verdicts"]}
    want = _verdicts("pred_example.json")
    assert set(ex) == set(CASES) == set(want)
    assert [c for c in CASES if ex[c] is None or int(ex[c]) != want[c]] == []  # 45 of 45
    assert (pred["ex_correct"], pred["ex_judged"]) == (21, 45)

    gold = _block(doc, "sp-gold")
    ex = {v["case"]: v["ex"] for v in gold["verdicts"]}
    want = _verdicts("gold.json")
    assert sum(want.values()) == 45
    assert all(ex[c] is not None for c in CASES)
    assert {c for c in CASES if int(ex[c]) != want[c]} == GOLD_FILE_DIFFERS
    assert all(ex[c] is False for c in GOLD_FILE_DIFFERS)
    assert (gold["ex_correct"], gold["ex_judged"]) == (42, 45)

    mine = _block(doc, "sp-dev")
    ex = {v["case"]: v["ex"] for v in mine["verdicts"]}
    assert [c for c in CASES if ex[c] is not True] == []  # 45 of 45, as gold.json
    assert (mine["ex_correct"], mine["ex_judged"]) == (45, 45)

    # The CaseRuns export carries the benchmark, its question key and its verdict.
    exported = tmp_path / "caseruns.csv"
    done = cli(home, "export", "caseruns", "--run", "sp-pred", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    with exported.open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [r["case_id"] for r in table] == CASES
    assert {r["benchmark"] for r in table} == {"spider"}
    # Spider questions have no id: the key is the index in dev.json (q7 -> "7").
    assert [r["benchmark_question_id"] for r in table] == [str(i) for i in range(45)]
    want = _verdicts("pred_example.json")
    assert {r["case_id"]: r["benchmark_ex"] for r in table} == {
        c: ("true" if want[c] else "false") for c in CASES
    }

    # Every attempt where Spider's verdict and caseledger's differ is listed with a reason.
    for block in (pred, gold, mine):
        differ = {v["case"] for v in block["verdicts"] if v["ex"] != (v["caseledger"] is True)}
        assert {d["case"] for d in block["disagreements"]} == differ
        assert all(d["reason"] for d in block["disagreements"])


@pytest.mark.slow
@pytest.mark.benchmark_data
def test_each_file_against_the_gold_its_verdicts_were_made_with(tmp_path: Path) -> None:
    """Spider's evaluator scores a prediction file against a gold file. The shipped verdicts
    were made against two golds: pred_example.json against dev.json's queries (the test
    above: 45 of 45), gold.json against gold_example.txt itself. `bank import spider --gold
    gold_example.txt` takes the reference SQL from Spider's gold file; replaying
    gold_example.txt on that bank equals gold.json on 45 of 45. pred_example.txt on it
    differs from pred_example.json only at q16, where gold_example.txt's gold
    (avg(capacity), max(capacity)) is not dev.json's (max(capacity), average)."""
    home = tmp_path / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    out = tmp_path / "banks"
    done = cli(home, "bank", "import", "spider", str(SPIDER / "dev.json"), "--tables",
               str(SPIDER / "tables.json"), "--gold", str(SPIDER / "gold_example.txt"),
               "--databases", str(SPIDER / "database"), "--db-id", "concert_singer",
               "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cli(home, "bank", "publish", str(out / "concert_singer")).returncode == 0
    for run_id, name in (("g-gold", "gold_example.txt"), ("g-pred", "pred_example.txt")):
        done = cli(home, "run", "--bank", "concert_singer", "--adapter", "replay",
                   "--replay-format", "spider", "--replay-file", str(SPIDER / name),
                   "--run-id", run_id)  # fmt: skip
        assert done.returncode == 0, done.stderr
    report = tmp_path / "report.json"
    assert cli(home, "report", "-o", str(report)).returncode == 0
    doc = json.loads(report.read_text(encoding="utf-8"))
    gold = {v["case"]: v["ex"] for v in _block(doc, "g-gold")["verdicts"]}
    want = _verdicts("gold.json")
    assert [c for c in CASES if gold[c] is None or int(gold[c]) != want[c]] == []  # 45 of 45
    pred = {v["case"]: v["ex"] for v in _block(doc, "g-pred")["verdicts"]}
    want = _verdicts("pred_example.json")
    assert [c for c in CASES if pred[c] is None or int(pred[c]) != want[c]] == ["q16"]


def test_a_gold_file_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    """One gold line per question, on the question's database: else exit 2 naming the line."""
    questions = tmp_path / "dev.json"
    questions.write_text(json.dumps([
        {"db_id": "a", "question": "how many?", "query": "SELECT 1"},
        {"db_id": "b", "question": "how many more?", "query": "SELECT 2"},
    ]))  # fmt: skip
    tables = tmp_path / "tables.json"
    tables.write_text("[]")
    home = tmp_path / "led"
    home.mkdir()
    for text, message in (
        ("SELECT 1\ta\n", "1 gold lines for the 2 questions of"),
        ("SELECT 1\ta\nSELECT 2\tc\n", ":2: db_id 'c', but question #1 of"),
        ("SELECT 1\ta\nSELECT 2\n", ":2: not 'SQL<TAB>db_id'"),
    ):
        gold = tmp_path / "gold.txt"
        gold.write_text(text)
        done = cli(home, "bank", "import", "spider", str(questions), "--tables", str(tables),
                   "--gold", str(gold), "--databases", str(tmp_path), "-o",
                   str(tmp_path / "out"))  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr
