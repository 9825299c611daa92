"""Issue 16: a prompt is compared with its own case's gold, shared files with every case's
SQL and multi-cell rows, a reasoned waiver, and BIRD's superhero questions."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import msgspec
import pytest
from banktest import edit
from click.testing import CliRunner
from support import BENCHMARKS

from ledger.bank.leak import leak_context, leak_findings, shared_findings
from ledger.bank.publish import publish, validate_bank
from ledger.cli import main
from ledger.engines.cells import encode_cell
from ledger.errors import BankError
from ledger.events import Column, GoldResult
from ledger.keys import Signer
from ledger.store import Ledger

_OF_CASE = re.compile(r"gold row of case (\d+) ")
BIRD = BENCHMARKS / "bird-mini-dev"

# tiny-bank gold, worked out from docs/examples/tiny-bank/seed.sql by hand:
# tiny-01 (city unknown): (3, 'Chen'); tiny-03 (per city): Beijing 1, Hangzhou 0, Shanghai 1.
TINY_03_Q = "question: 每个城市有多少位客户"


def _gold(case_id: str, *rows: tuple[object, ...]) -> GoldResult:
    cols = tuple(Column(name=f"c{i}", type="VARCHAR") for i in range(len(rows[0])))
    return GoldResult(case_id=case_id, columns=cols, rows=rows, digest="sha256:" + "cd" * 32)


def test_another_cases_answer_in_a_question_publishes(tiny: Path) -> None:
    # tiny-03's question names tiny-01's whole gold row (3, Chen).
    edit(tiny, "cases.yaml", TINY_03_Q, "question: 客户 3 Chen 不计。每个城市有多少位客户")
    checked = validate_bank(tiny)  # no BankError
    prompt = next(c for c in checked.preview().cases if c.id == "tiny-03").question
    # The rule before issue 16 (every case's gold) refused it:
    ctx = leak_context({}, checked.preview().gold)
    assert leak_findings(prompt, ctx) == [
        "contains a whole gold row of case tiny-01 (3 | chen): '3 chen'"
    ]
    assert leak_findings(prompt, ctx, case_id="tiny-03") == []


def test_own_gold_in_own_prompt_and_notes_is_refused(tiny: Path) -> None:
    edit(tiny, "cases.yaml", TINY_03_Q, "question: Beijing 1. 每个城市有多少位客户")
    edit(
        tiny, "cases.yaml", "notes: Trap - filtering", "notes: Expect Shanghai 1. Trap - filtering"
    )
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    msg = info.value.message
    assert (
        "prompt.md: case tiny-03: the rendered prompt contains a whole gold row of case "
        "tiny-03 (beijing | 1): 'beijing 1'" in msg
    )
    assert (
        "cases.yaml:57: case tiny-03: field notes: contains a whole gold row of case "
        "tiny-03 (shanghai | 1): 'shanghai 1'" in msg
    )
    assert "tiny-01" not in msg
    assert "tiny-02" not in msg


def test_a_short_waiver_is_refused_with_its_line(tiny: Path) -> None:
    edit(
        tiny,
        "cases.yaml",
        "    notes: A city of NULL",
        "    leak_waiver: it is fine\n    notes: A city of NULL",
    )
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    assert "cases.yaml:19: case tiny-01: field leak_waiver: the reason must say why" in (
        info.value.message
    )


REASON = "the question names the city it asks about; the count is the answer"


def test_a_reasoned_waiver_publishes_and_is_recorded(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path, tmp_path: Path
) -> None:
    edit(tiny, "cases.yaml", TINY_03_Q, "question: Beijing 1. 每个城市有多少位客户")
    edit(
        tiny,
        "cases.yaml",
        "    notes: Trap - filtering",
        f"    leak_waiver: {REASON}\n    notes: Trap - filtering",
    )
    result = publish(ledger, signer, tiny, home)
    cases = {c.id: c for c in result.published.event.cases}
    assert cases["tiny-03"].leak_waiver == REASON
    assert cases["tiny-01"].leak_waiver is msgspec.UNSET
    raw = ledger.get(result.published.seq)
    assert raw is not None
    body = raw.event()
    assert msgspec.json.encode(body).count(b'"leak_waiver"') == 1  # only the waived case
    # At run time the published waiver holds too, and other cases stay strict.
    ctx = result.published.leak_context(ledger_path=ledger.path, cwd=tmp_path)
    assert leak_findings("Beijing 1", ctx, case_id="tiny-03") == []
    assert leak_findings("Beijing 1", ctx, case_id="tiny-01") == []  # not tiny-01's gold
    assert leak_findings("Chen 3", ctx, case_id="tiny-01") == []  # out of order
    assert leak_findings("3 Chen", ctx, case_id="tiny-01") != []
    shown = CliRunner().invoke(
        main, ["--ledger", str(ledger.path), "bank", "show", "tiny@v1"], catch_exceptions=False
    )
    assert f"    leak waiver: {REASON}" in shown.output
    data = json.loads(
        CliRunner()
        .invoke(main, ["--ledger", str(ledger.path), "bank", "show", "tiny@v1", "--json"])
        .output
    )
    assert [c.get("leak_waiver") for c in data["cases"]] == [None, None, REASON]


def test_shared_text_allows_one_cell_vocabulary_but_not_records_or_sql() -> None:
    ctx = leak_context(
        {"a": "SELECT publisher_name FROM publisher", "b": "SELECT 1"},
        [_gold("a", ("Marvel Comics",)), _gold("b", ("Marvel Comics", "387"))],
    )
    assert shared_findings("Publishers include Marvel Comics and DC.", ctx) == []
    assert shared_findings("Top: Marvel Comics | 387", ctx) == [
        "contains a whole gold row of case b (marvel comics | 387): 'marvel comics | 387'"
    ]
    assert shared_findings("e.g. select publisher_name from publisher;", ctx) == [
        "contains the reference SQL of case a: 'select publisher_name from publisher'"
    ]
    # A prompt is checked as its own case's: case a's answer is a leak in a's prompt
    # only; without a case, every case's gold counts.
    assert leak_findings("Q for a: Marvel Comics", ctx, case_id="a") == [
        "contains a whole gold row of case a (marvel comics): 'marvel comics'"
    ]
    assert leak_findings("Q for b: Marvel Comics", ctx, case_id="b") == []
    assert leak_findings("other: Marvel Comics", ctx) == [
        "contains a whole gold row of case a (marvel comics): 'marvel comics'"
    ]


def test_null_separates_cells_only_as_a_word() -> None:
    ctx = leak_context({}, [_gold("a", ("acme", "300"))])
    assert leak_findings("acme null 300", ctx) != []
    assert leak_findings("acmenull300", ctx) == []


# ---------------------------------------------------------------- BIRD superhero


def _bird_superhero() -> tuple[dict[str, str], list[GoldResult]]:
    questions = [
        q
        for q in json.loads((BIRD / "mini_dev_sqlite.json").read_text(encoding="utf-8"))
        if q["db_id"] == "superhero"
    ]
    assert len(questions) == 52  # the README's count
    db = sqlite3.connect(f"file:{BIRD / 'databases/superhero/superhero.sqlite'}?mode=ro", uri=True)
    prompts, gold = {}, []
    for q in questions:
        cid = str(q["question_id"])
        # BIRD shows the evidence as part of the question text.
        prompts[cid] = f"{q['question']}\n{q['evidence']}"
        cur = db.execute(q["SQL"])
        cols = tuple(Column(name=d[0], type="ANY") for d in cur.description)
        rows = tuple(tuple(encode_cell(v) for v in r) for r in cur.fetchall())
        gold.append(GoldResult(case_id=cid, columns=cols, rows=rows, digest="sha256:" + "0" * 64))
    db.close()
    return prompts, gold


@pytest.mark.benchmark_data
def test_bird_superhero_prompts_leak_only_under_the_every_case_rule() -> None:
    prompts, gold = _bird_superhero()
    ctx = leak_context({}, gold)
    own = {cid: leak_findings(text, ctx, case_id=cid) for cid, text in prompts.items()}
    assert {cid: f for cid, f in own.items() if f} == {}
    every = {cid: leak_findings(text, ctx) for cid, text in prompts.items()}
    # The README's "5 of 52 refused" counts the questions whose answers the old rule
    # finds in other questions' prompts (each finding names the case whose gold it is).
    named = {m.group(1) for fs in every.values() for f in fs for m in [_OF_CASE.search(f)] if m}
    assert len(named) == 5, sorted(named)
    # No prompt is refused for its own answer: every finding names another case.
    for cid, found in every.items():
        assert all(f"of case {cid} " not in f for f in found)
