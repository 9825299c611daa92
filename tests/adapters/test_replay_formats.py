"""Issue 16: `caseledger run --adapter replay --replay-format bird|spider`.

A benchmark's own prediction file is read as it is and each SQL is answered as
protocol verdict ``imported``. The parsers are checked on BIRD's real published
files (../shared/benchmarks/bird-mini-dev, read there, never copied) and by a
hypothesis round trip; the runs are real: banks imported and published through
the CLI in real processes, SQL executed on SQLite. Every expected score is
worked out by hand from docs/scoring.md (items protocol 5, guard 5, executed 10,
column count 5, column names 5, rows 45 x F1, order 10, AST 15; an imported
answer never gets the protocol points).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import BENCHMARKS

from ledger import events
from ledger.adapters import Reply, Request, build_adapter
from ledger.adapters.benchmark_files import (
    BIRD_SEPARATOR,
    answers_for_bank,
    parse_bird,
    parse_spider,
    sniff,
    write_bird,
    write_spider,
)
from ledger.bank.registry import bank_paths
from ledger.engines import executor_for, sql_timeout_s
from ledger.errors import AdapterError, UsageError
from ledger.store import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runkit import check_attempts, cli, head, stream

BIRD = BENCHMARKS / "bird-mini-dev"
PREDICTIONS = BIRD / "predictions"
GPT4 = PREDICTIONS / "predict_mini_dev_gpt-4_sqlite.json"


# ------------------------------------------------------------------ parsers, real files


@pytest.mark.benchmark_data
def test_bird_parser_on_a_real_published_file() -> None:
    found = parse_bird(GPT4.read_bytes(), str(GPT4))
    assert sorted(found) == list(range(500))  # mini-dev: 500 questions, keys "0".."499"
    superhero = [p for p in found.values() if p.db_id == "superhero"]
    assert len(superhero) == 52  # README: superhero has 52 questions
    # question_id 717 is at position 239 of BIRD's question file (read here on its own)
    questions = json.loads((BIRD / "mini_dev_sqlite.json").read_text(encoding="utf-8"))
    where = [i for i, q in enumerate(questions) if q["question_id"] == 717]
    assert where == [239]
    entry = found[239]
    assert (entry.db_id, entry.where) == ("superhero", 'key "239"')
    raw = json.loads(GPT4.read_text(encoding="utf-8"))["239"]
    assert entry.sql == raw.split("\t----- bird -----\t")[0]
    assert "'3-D Man'" in entry.sql


@pytest.mark.benchmark_data
@pytest.mark.parametrize(
    "path",
    # without the data, one placeholder: the test is deselected (tests/conftest.py)
    sorted(PREDICTIONS.glob("*.json")) or [PREDICTIONS / "missing.json"],
    ids=lambda p: p.stem,
)
def test_every_published_bird_file_parses_with_52_superhero_entries(path: Path) -> None:
    found = parse_bird(path.read_bytes(), path.name)
    assert len(found) == 500
    assert sum(p.db_id == "superhero" for p in found.values()) == 52


# ------------------------------------------------------------------ parsers, properties

_SQL = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60).filter(
    lambda s: BIRD_SEPARATOR not in s
)
_DB = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True)


@given(st.dictionaries(st.integers(0, 10**6), st.none() | st.tuples(_SQL, _DB), min_size=1))
def test_bird_round_trip(entries: dict[int, tuple[str, str] | None]) -> None:
    found = parse_bird(write_bird(entries), "p.json")
    assert sorted(found) == sorted(entries)
    for index, entry in entries.items():
        got = found[index]
        assert (got.index, got.where) == (index, f'key "{index}"')
        if entry is None:
            assert (got.sql, got.db_id) == ("", None)
        else:
            assert (got.sql, got.db_id) == entry


# A Spider line is stripped and ends at its first tab, as in Spider's evaluation.py.
_LINE = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\t"),
    max_size=60,
).map(lambda s: s.strip(" "))


@given(st.lists(_LINE, min_size=1, max_size=30))
def test_spider_round_trip(sqls: list[str]) -> None:
    found = parse_spider(write_spider(sqls), "p.sql")
    assert [found[i].sql for i in range(len(sqls))] == sqls
    assert sorted(found) == list(range(len(sqls)))
    assert [found[i].where for i in range(len(sqls))] == [
        f"line {n}" for n in range(1, len(sqls) + 1)
    ]


def test_spider_line_rules() -> None:
    text = b"SELECT 1\r\n  SELECT 2\tpets_small\n\nSELECT 3"
    found = parse_spider(text, "p.sql")
    assert [(i, p.sql) for i, p in sorted(found.items())] == [
        (0, "SELECT 1"),
        (1, "SELECT 2"),
        (2, ""),  # a blank line keeps its place: an empty prediction for index 2
        (3, "SELECT 3"),
    ]


BAD_BIRD = {
    "not an object": (b'["SELECT 1"]', "p.json: not one JSON object (got array)"),
    "invalid JSON": (b'{"0": "x"', "p.json: invalid JSON: Expecting ',' delimiter (line 1"),
    "key": (b'{"07": "SELECT 1\\t----- bird -----\\tshop"}', 'p.json key "07": not a question'),
    "duplicate": (
        b'{"3": "A\\t----- bird -----\\tshop", "3": "B\\t----- bird -----\\tshop"}',
        'p.json key "3": duplicate key',
    ),
    "number": (b'{"0": 5}', 'p.json key "0": value must be a string or null, got number'),
    "no separator": (b'{"0": "SELECT 1"}', "separator '\\t----- bird -----\\t' once, found 0"),
    "no db": (b'{"0": "SELECT 1\\t----- bird -----\\t "}', "no database id after the separator"),
    "empty": (b"{}", "BIRD prediction file p.json holds no predictions"),
    "not utf-8": (b'{"0": "\xff"}', "p.json: not UTF-8 (byte offset 7)"),
}


@pytest.mark.parametrize("case", list(BAD_BIRD), ids=list(BAD_BIRD))
def test_bad_bird_files_name_the_key(case: str) -> None:
    data, message = BAD_BIRD[case]
    with pytest.raises(AdapterError) as exc:
        parse_bird(data, "p.json")
    assert message in exc.value.message


def test_empty_spider_file_is_refused() -> None:
    with pytest.raises(AdapterError) as exc:
        parse_spider(b"", "p.sql")
    assert exc.value.message == "Spider prediction file p.sql holds no predictions"


# ------------------------------------------------------------------ a small BIRD bank

# item: pen 3, cup 5, box 5. Two databases in one question file, as in BIRD:
# indexes 0 and 2 are zoo's (not imported), 1, 3, 4, 5 are shop's.
SHOP_SQL = """
CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER NOT NULL);
INSERT INTO item VALUES (1, 'pen', 3), (2, 'cup', 5), (3, 'box', 5);
"""


def _q(qid: int, db: str, question: str, sql: str) -> dict[str, Any]:
    return {"question_id": qid, "db_id": db, "question": question, "evidence": "",
            "SQL": sql, "difficulty": "simple"}  # fmt: skip


QUESTIONS = [
    _q(10, "zoo", "How many animals are there?", "SELECT COUNT(*) FROM animal"),
    _q(11, "shop", "How many items have the highest price?",
       "SELECT COUNT(*) FROM item WHERE price = (SELECT MAX(price) FROM item)"),  # [[2]]
    _q(12, "zoo", "Name every animal.", "SELECT name FROM animal"),
    _q(13, "shop", "List the names of the items with the highest price.",
       "SELECT name FROM item WHERE price = (SELECT MAX(price) FROM item)"),  # cup, box
    _q(14, "shop", "Which item is the cheapest? Give its name.",
       "SELECT name FROM item ORDER BY price LIMIT 1"),  # pen
    _q(15, "shop", "How many items are there?", "SELECT COUNT(*) FROM item"),  # [[3]]
]  # fmt: skip

BIRD_FILE = {
    0: ("SELECT COUNT(*) FROM animal", "zoo"),
    1: ("SELECT COUNT(*) FROM item WHERE price >= 5", "shop"),  # right: [[2]]
    2: ("SELECT name FROM animal", "zoo"),
    # each name twice: right as a set (BIRD), a duplicate under caseledger's multiset
    3: ("SELECT name FROM item WHERE price = 5 UNION ALL SELECT name FROM item WHERE price = 5",
        "shop"),
    # 4: no prediction
    5: ("SELECT COUNT(*) FROM stock", "shop"),  # no such table: the guard refuses it
}  # fmt: skip


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with the shop bank imported from BIRD's layout and from Spider's."""
    root = tmp_path_factory.mktemp("formats")
    home = root / "led"
    home.mkdir()
    assert cli(home, "init").returncode == 0
    bird_db, spider_db = root / "bird" / "shop", root / "spider" / "shop"
    for folder in (bird_db, spider_db):
        folder.mkdir(parents=True)
        con = sqlite3.connect(folder / "shop.sqlite")
        con.executescript(SHOP_SQL)
        con.close()
    questions = root / "questions.json"
    questions.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    done = cli(home, "bank", "import", "bird", str(questions), "--databases", str(root / "bird"),
               "--db-id", "shop", "-o", str(root / "bird-banks"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cli(home, "bank", "publish", str(root / "bird-banks" / "shop")).returncode == 0
    # The same questions in Spider's layout, as bank shop-spider (its own folder).
    dev = [{"db_id": q["db_id"], "question": q["question"], "query": q["SQL"]} for q in QUESTIONS]
    (root / "dev.json").write_text(json.dumps(dev), encoding="utf-8")
    tables = [{"db_id": "shop", "table_names_original": ["item"], "table_names": ["item"],
               "column_names_original": [[-1, "*"], [0, "id"], [0, "name"], [0, "price"]],
               "column_names": [[-1, "*"], [0, "id"], [0, "name"], [0, "price"]]}]  # fmt: skip
    (root / "tables.json").write_text(json.dumps(tables), encoding="utf-8")
    done = cli(home, "bank", "import", "spider", str(root / "dev.json"), "--tables",
               str(root / "tables.json"), "--databases", str(root / "spider"), "--db-id", "shop",
               "-o", str(root / "spider-banks"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    cases = root / "spider-banks" / "shop" / "cases.yaml"
    cases.write_text(cases.read_text().replace('bank: "shop"', 'bank: "shop-spider"', 1))
    done = cli(home, "bank", "publish", str(root / "spider-banks" / "shop"))
    assert done.returncode == 0, done.stderr
    return home


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _scores(home: Path, run_id: str) -> dict[str, events.ScoreComputed]:
    out = {}
    for stored in stream(home, run_id):
        event = stored.event()
        if isinstance(event, events.ScoreComputed):
            out[event.case_id] = event
    return out


def _parsed(home: Path, run_id: str) -> dict[str, events.OutputParsed]:
    return {
        e.case_id: e
        for e in (s.event() for s in stream(home, run_id))
        if isinstance(e, events.OutputParsed)
    }


def test_bird_run_scores_by_hand(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "predict_dev.json", write_bird(BIRD_FILE))
    done = cli(home, "run", "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
               "--replay-file", path, "--allow-missing", "--run-id", "b1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "attempts: 4 planned, 4 done" in done.stdout
    assert "result-correct: 1/4 planned attempts" in done.stdout
    chains = check_attempts(stream(home, "b1"), [("q11", 1), ("q13", 1), ("q14", 1), ("q15", 1)])
    assert len(chains) == 4
    scores = _scores(home, "b1")
    # q11 right: 0 + 5 + 10 + 5 + 5 + 45 + 10 + 15 = 95; never format_ok (not strict)
    q11 = scores["q11"]
    assert (q11.total, q11.result_correct, q11.format_ok, q11.failure_kind) == (
        Decimal("95.00"), True, False, "none")  # fmt: skip
    assert q11.items.protocol == Decimal(0)
    # q13 cup, box, cup, box against cup, box: matched 2, P = 2/4, R = 1, F1 = 2/3,
    # rows 45 x 2/3 = 30, order 0 (F1 < 1): 5 + 10 + 5 + 5 + 30 + 0 + 15 = 70
    q13 = scores["q13"]
    assert (q13.total, q13.result_correct, q13.matched, q13.actual_rows) == (
        Decimal("70.00"), False, 2, 4)  # fmt: skip
    # q14 missing: an empty answer, nothing extracted, every item 0
    q14 = scores["q14"]
    assert (q14.total, q14.failure_kind) == (Decimal("0.00"), "protocol")
    # q15 reads a table the bank does not publish: guard failure, 0 (no protocol points)
    q15 = scores["q15"]
    assert (q15.total, q15.failure_kind) == (Decimal("0.00"), "guard")
    parsed = _parsed(home, "b1")
    assert {c: p.imported for c, p in parsed.items()} == dict.fromkeys(
        ("q11", "q13", "q14", "q15"), True
    )
    assert (parsed["q11"].protocol_strict, parsed["q11"].recovered_from_fence) == (False, False)
    assert (parsed["q11"].error, parsed["q11"].plan) == (None, None)
    assert parsed["q11"].sql == "SELECT COUNT(*) FROM item WHERE price >= 5"
    assert (parsed["q14"].sql, parsed["q14"].error) == (None, "empty output")
    responded = [e for e in (s.event() for s in stream(home, "b1"))
                 if isinstance(e, events.ModelResponded)]  # fmt: skip
    assert {e.invocation.wire_protocol for e in responded} == {"replay-bird"}
    started = stream(home, "b1")[0].event()
    assert isinstance(started, events.RunStarted)
    assert started.attempts == 1
    # The recorded evidence re-derives the same scores.
    verified = cli(home, "verify", "--recompute")
    assert verified.returncode == 0, verified.stderr
    assert "scores recomputed" in verified.stdout
    # The report says "imported" where it shows the protocol verdict.
    report = cli(home, "report", "--run", "b1", "--format", "json")
    assert report.returncode == 0, report.stderr
    caseruns = json.loads(report.stdout)["sections"][0]["caseruns"]
    assert {c["case"]: c["parsed"].get("imported") for c in caseruns} == dict.fromkeys(
        ("q11", "q13", "q14", "q15"), True
    )
    html = cli(home, "report", "--run", "b1", "--format", "html")
    assert html.stdout.count("Protocol: imported") == 4


def test_a_strict_answer_keeps_its_bytes(home: Path, tmp_path: Path) -> None:
    """A JSON Lines replay (today's format) records OutputParsed without ``imported``."""
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    answer = json.dumps({"plan": {"grain": "g", **plan}, "sql": "SELECT COUNT(*) FROM item",
                         "summary": "s", "assumptions": []})  # fmt: skip
    line = json.dumps({"case": "q15", "attempt": 1, "output": answer})
    path = _write(tmp_path, "r.jsonl", line.encode())
    done = cli(home, "run", "--bank", "shop", "--adapter", "replay", "--replay-file", path,
               "--run-id", "j1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        stored = ledger.stream_events("j1")
        raw = [s.body for s in stored if isinstance(s.event(), events.OutputParsed)]
    assert len(raw) == 1
    assert b"imported" not in raw[0]
    assert _scores(home, "j1")["q15"].total == Decimal("100.00")


def test_spider_run_scores_by_hand(home: Path, tmp_path: Path) -> None:
    # line n = index n - 1; lines 1 and 3 are zoo's and ignored; line 5 is blank.
    lines = ["SELECT 1", "SELECT COUNT(*) FROM item WHERE price >= 5", "SELECT 2",
             "SELECT name FROM item WHERE price = 3", "", "SELECT COUNT(id) FROM item"]  # fmt: skip
    path = _write(tmp_path, "pred.sql", write_spider(lines))
    done = cli(home, "run", "--bank", "shop-spider", "--adapter", "replay", "--replay-format",
               "spider", "--replay-file", path, "--run-id", "s1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    scores = _scores(home, "s1")
    # Spider has no question ids: the cases are q<index>.
    assert sorted(scores) == ["q1", "q3", "q4", "q5"]
    assert scores["q1"].total == Decimal("95.00")
    # q3: pen against cup, box: F1 0, rows 0, order 0: 5 + 10 + 5 + 5 + 0 + 0 + 15 = 40
    assert (scores["q3"].total, scores["q3"].matched) == (Decimal("40.00"), 0)
    assert (scores["q4"].total, scores["q4"].failure_kind) == (Decimal("0.00"), "protocol")
    # q5 COUNT(id) = 3: right, the column is named differently from gold's COUNT(*)
    # (docs/scoring.md: names fail, count and rows pass): 5 + 10 + 5 + 0 + 45 + 10 + 15 = 90
    assert scores["q5"].total == Decimal("90.00")


def _streams(home: Path) -> set[str]:
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        return set(ledger.streams())


@pytest.mark.parametrize(
    ("fmt", "name", "profile"),
    [
        ("bird", "predict_mini_dev_gpt-4_sqlite.json", "predict_mini_dev_gpt-4_sqlite"),
        ("spider", "my preds (v2).sql", "my-preds-v2"),
    ],
)
def test_a_benchmark_file_names_its_run(
    home: Path, tmp_path: Path, fmt: str, name: str, profile: str
) -> None:
    """Issue 35: without --profile/--run-id, a BIRD/Spider file gives the run its profile
    and id from the file's name (was ``replay`` and ``replay-<n>``)."""
    data = write_bird(BIRD_FILE) if fmt == "bird" else write_spider(["SELECT 1"] * 6)
    path = _write(tmp_path, name, data)
    before = _streams(home)
    run_id = f"{profile}-{len(before):04d}"  # <profile>-<n>, n = streams already there
    bank = "shop" if fmt == "bird" else "shop-spider"
    done = cli(home, "run", "--bank", bank, "--adapter", "replay", "--replay-format", fmt,
               "--replay-file", path, "--allow-missing")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _streams(home) - before == {run_id}
    started = stream(home, run_id)[0].event()
    assert isinstance(started, events.RunStarted)
    assert (started.run_id, started.profile) == (run_id, profile)
    assert f"run {run_id}" in done.stdout
    # --profile still names the run
    again = cli(home, "run", "--bank", bank, "--adapter", "replay", "--replay-format", fmt,
                "--replay-file", path, "--allow-missing", "--profile", "gpt-4")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert _streams(home) - before == {run_id, f"gpt-4-{len(before) + 1:04d}"}


# ------------------------------------------------------------------ refusals (exit 2)


def _refused(home: Path, *args: str) -> str:
    before = head(home)
    done = cli(home, "run", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr
    assert head(home) == before  # nothing appended
    return done.stderr


def test_missing_prediction_is_refused_without_allow_missing(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", write_bird(BIRD_FILE))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
                   "--replay-file", path)  # fmt: skip
    assert f'error: BIRD prediction file {path} has no key "4" for case q14 (index 4)' in err
    assert "--allow-missing" in err


def test_spider_file_too_short_names_the_line(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.sql", write_spider(["SELECT 1", "SELECT 2"]))
    err = _refused(home, "--bank", "shop-spider", "--adapter", "replay", "--replay-format",
                   "spider", "--replay-file", path)  # fmt: skip
    # Line 2 (index 1, case q1) is there; indexes 3, 4 and 5 have no line.
    expected = f"Spider prediction file {path} has no line 4 for case q3 (index 3)"
    assert expected + " (nor for q4, q5)" in err


def test_file_for_another_database_is_refused(home: Path, tmp_path: Path) -> None:
    wrong = {**BIRD_FILE, 1: ("SELECT COUNT(*) FROM animal", "zoo"), 4: ("SELECT 1", "shop")}
    path = _write(tmp_path, "p.json", write_bird(wrong))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
                   "--replay-file", path)  # fmt: skip
    assert (
        f'BIRD prediction file {path} key "1" (case q11): the prediction is for database '
        "'zoo', but bank shop@v1 is database 'shop'"
    ) in err


def test_file_of_only_other_databases_says_which(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", write_bird({0: ("SELECT 1", "zoo"), 2: ("SELECT 2", "zoo")}))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
                   "--replay-file", path)  # fmt: skip
    assert "its entries are for database zoo" in err


def test_attempts_over_one_are_refused(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", write_bird(BIRD_FILE))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
                   "--replay-file", path, "--allow-missing", "--attempts", "2")  # fmt: skip
    assert "error: --attempts 2 with --replay-format bird" in err


def test_a_bank_without_benchmark_indexes_is_refused(home: Path, tmp_path: Path) -> None:
    assert cli(home, "bank", "publish", "sales-fixture").returncode == 0
    path = _write(tmp_path, "p.json", write_bird(BIRD_FILE))
    err = _refused(home, "--bank", "sales-fixture", "--adapter", "replay", "--replay-format",
                   "bird", "--replay-file", path)  # fmt: skip
    assert "error: bank sales-fixture@" in err
    assert "has no benchmark index on case sf-01" in err
    assert "caseledger bank import bird" in err


def test_the_other_benchmarks_format_is_refused(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.sql", write_spider(["SELECT 1"] * 6))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "spider",
                   "--replay-file", path)  # fmt: skip
    assert "bank shop@v1 was imported from BIRD, not Spider" in err
    assert "--replay-format bird" in err


def test_allow_missing_needs_a_benchmark_format(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "r.jsonl", b'{"case": "q11", "attempt": 1, "output": "x"}\n')
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-file", path,
                   "--allow-missing")  # fmt: skip
    assert "--allow-missing goes with --replay-format bird|spider only" in err


def test_price_snapshot_is_not_taken_with_a_benchmark_format(home: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", write_bird(BIRD_FILE))
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-format", "bird",
                   "--replay-file", path, "--price-snapshot", "x.json")  # fmt: skip
    assert "the replay adapter does not take --price-snapshot" in err


# ------------------------------------------------------------------ the library path


def test_adapter_without_a_bank_is_a_usage_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", write_bird(BIRD_FILE))
    with pytest.raises(UsageError) as exc:
        build_adapter("replay", {"replay_file": path, "replay_format": "bird"})
    assert "--replay-format bird needs the bank of the run" in exc.value.message


def test_answers_for_bank_maps_indexes(home: Path, tmp_path: Path) -> None:
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        bank = next(
            e
            for e in (s.event() for s in ledger.iter_events(0, ledger.head()[0]))
            if isinstance(e, events.BankPublished) and e.bank_id == "shop"
        )
    found = parse_bird(write_bird(BIRD_FILE), "p.json")
    answers, missing = answers_for_bank("bird", found, bank, "p.json", allow_missing=True)
    assert answers == {
        "q11": BIRD_FILE[1][0],
        "q13": BIRD_FILE[3][0],
        "q14": "",
        "q15": BIRD_FILE[5][0],
    }
    assert missing == ("q14",)
    adapter = build_adapter(
        "replay",
        {"replay_file": _write(tmp_path, "p.json", write_bird(BIRD_FILE)),
         "replay_format": "bird", "allow_missing": True},
        bank=bank,
    )  # fmt: skip
    reply = adapter.call(Request(case_id="q11", attempt=1, prompt="ignored"))
    assert isinstance(reply, Reply)
    assert (reply.raw_output, reply.imported) == (BIRD_FILE[1][0], True)
    assert adapter.identity.default_attempts == 1


# ------------------------------------------------------------------ the real superhero bank


@pytest.mark.benchmark_data
@pytest.mark.slow
def test_real_superhero_bank_and_a_published_bird_file(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "banks"
    done = cli(home, "bank", "import", "bird", str(BIRD / "mini_dev_sqlite.json"), "--databases",
               str(BIRD / "databases"), "--db-id", "superhero", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cli(home, "bank", "publish", str(out / "superhero")).returncode == 0
    done = cli(home, "run", "--bank", "superhero", "--adapter", "replay", "--replay-format",
               "bird", "--replay-file", str(GPT4), "--run-id", "gpt4")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "attempts: 52 planned, 52 done" in done.stdout
    scores = _scores(home, "gpt4")
    assert len(scores) == 52
    # q717 (index 239): the power names of '3-D Man', the gold's rows under other table
    # aliases: every item but protocol, 95.
    assert (scores["q717"].total, scores["q717"].result_correct) == (Decimal("95.00"), True)
    assert {s.items.protocol for s in scores.values()} == {Decimal(0)}
    assert not any(s.format_ok for s in scores.values())


# ------------------------------------------- a benchmark file without --replay-format (issue 31)


SPIDER = BIRD.parent / "spider-concert-singer"


@pytest.mark.benchmark_data
@pytest.mark.parametrize(
    ("path", "label", "flag"),
    [
        (GPT4, "BIRD", "bird"),
        (SPIDER / "pred_example.txt", "Spider", "spider"),
        (SPIDER / "gold_example.txt", "Spider", "spider"),
    ],
    ids=["bird", "spider-pred", "spider-gold"],
)
def test_a_benchmark_file_without_its_format_names_the_flag(
    home: Path, path: Path, label: str, flag: str
) -> None:
    before = head(home)
    err = _refused(home, "--bank", "shop", "--adapter", "replay", "--replay-file", str(path))
    assert (
        f"error: replay file {path} is a {label} prediction file, not caseledger's JSON Lines "
        "replay (read as one: line 1: invalid JSON"
    ) in err
    assert f"hint: add --replay-format {flag}" in err
    assert head(home) == before  # nothing recorded


@given(
    st.dictionaries(st.integers(0, 10**6), st.none() | st.tuples(_SQL, _DB), min_size=1),
    st.lists(st.sampled_from(["SELECT 1", "select a", "WITH x AS (SELECT 1) SELECT * FROM x"]),
             min_size=1, max_size=5),
)  # fmt: skip
def test_sniff_tells_the_formats_apart(
    entries: dict[int, tuple[str, str] | None], sqls: list[str]
) -> None:
    assert sniff(write_bird(entries)) == "bird"
    assert sniff(write_spider(sqls)) == "spider"
    jsonl = b'{"case": "q1", "attempt": 1, "output": "SELECT 1"}\n'
    assert sniff(jsonl) is None
    assert sniff(b"not sql at all\n") is None


def test_a_benchmark_bank_runs_its_sql_under_the_benchmarks_own_deadline(home: Path) -> None:
    # BIRD's evaluation_ex.py waits 30 s for a query (--meta_time_out 30.0), Spider's
    # exec_eval.py 60 s (TIMEOUT = 60); a bank written for caseledger keeps 5 s. The
    # executor a run and `verify --recompute` get for each published bank says so.
    assert cli(home, "bank", "publish", "sales-fixture").returncode == 0
    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        published = {
            e.bank_id: e
            for e in (r.event() for r in ledger.events_of_type(events.BankPublished))
            if isinstance(e, events.BankPublished)
        }
    expected = {"shop": 30.0, "shop-spider": 60.0, "sales-fixture": 5.0}
    assert {b: sql_timeout_s(published[b]) for b in expected} == expected
    bird = published["shop"]
    database, _ = bank_paths(home, bird.content_sha256, bird.build.engine)
    executor = executor_for(bird, database)
    try:
        assert executor.timeout_s == 30.0
    finally:
        executor.close()
