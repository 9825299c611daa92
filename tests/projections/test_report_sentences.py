"""Issue 35 items 5 and 6: what the ``caseledger-report/3`` views say is true of the data.

Every sentence the Markdown and HTML write is derived from the report it describes: a
single-model section says nothing about controls that differ, ``unknown`` is not a
difference, the attempts per case are the ones the runs planned; a CaseRun the SQL never
reached shows no diff; score items are listed in the formula's order with their maximum;
the Failure table's ``guard`` column is defined as a failure count. The ``/1`` and ``/2``
views keep their bytes (tests/projections/test_legacy_v2.py, test_evidence.py).
Expected texts are written out by hand from the runs each test records.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger import events as ev
from ledger.app.reporting import report_bytes
from ledger.app.snapshot import read_state
from ledger.cli import main
from ledger.merkle import root_hash
from projections.report.build import build_report
from projections.report.html import numeric_columns, score_items
from projections.report.schema import Score
from projections.report.tables import fairness_sentences

CASES = [("a", "basic", "easy", "1")]


def _sentences(h: Any) -> list[str]:
    state = read_state(h.ledger).state
    report = build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size)))
    (section,) = report.sections
    assert section.fairness is not None
    return fairness_sentences(section.fairness)


def _md(path: Path) -> str:
    return report_bytes(path, fmt="md", detail="stats")[0].decode()


def _runs(h: Any, controls: dict[str, dict[str, Any]], attempts: dict[str, int]) -> None:
    for run_id, overrides in controls.items():
        h.run(run_id, attempts=attempts.get(run_id, 1))
        for n in range(1, attempts.get(run_id, 1) + 1):
            h.scored(run_id, "a", n, "100.00", invocation=h.invocation(**overrides))


# ----------------------------------------------------------------- fairness sentences


def test_a_single_model_says_nothing_about_controls_that_differ(hand_ledger, tmp_path: Path):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"retries": 2, "tools": "unknown"}}, {})
    assert _sentences(h) == [
        "Fairness class: single_model (one model run: nothing to compare it with)."
    ]
    md = _md(tmp_path / "ledger.db")
    assert (
        "### Invocation controls and fairness\n\n"
        "Fairness class: single_model (one model run: nothing to compare it with).\n"
    ) in md
    assert "differ" not in md.split("### Invocation controls and fairness")[1].split("###")[0]
    # the /2 view keeps its bytes (and its old sentence)
    old = report_bytes(tmp_path / "ledger.db", fmt="md", detail="compact")[0].decode()
    assert "Controls that differ: tools, retries." in old


def test_unknown_is_not_a_difference(hand_ledger, tmp_path: Path):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"tools": "unknown"}, "r2": {"tools": "unknown"}}, {})
    assert _sentences(h) == [
        "Fairness class: not_controlled.",
        "Not recorded (unknown, so not a difference): tools for every run.",
    ]
    page = report_bytes(tmp_path / "ledger.db", fmt="html", detail="stats")[0].decode()
    assert (
        "<p>Fairness class: not_controlled.</p>"
        "<p>Not recorded (unknown, so not a difference): tools for every run.</p>"
    ) in page
    assert "ontrols that differ" not in page


def test_one_run_unknown_the_other_known(hand_ledger):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"tools": "off"}, "r2": {"tools": "unknown"}}, {})
    assert _sentences(h) == [
        "Fairness class: not_controlled.",
        "Not recorded (unknown, so not a difference): tools for r2.",
    ]


def test_controls_that_really_differ_are_named(hand_ledger):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"retries": 0}, "r2": {"retries": 2, "tools": "on"}}, {})
    assert _sentences(h) == [
        "Fairness class: not_controlled.",
        "Controls that differ between runs: tools, retries.",
    ]


def test_the_same_disallowed_value_is_not_called_a_difference(hand_ledger):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"retries": 2}, "r2": {"retries": 2, "single_call": False}}, {})
    assert _sentences(h) == [
        "Fairness class: not_controlled.",
        "Controls that differ between runs: single_call.",
        "The same in every run, outside a controlled harness: retries 2 (a controlled "
        "harness has 0).",
    ]


def test_a_controlled_pair_with_a_disclosed_difference(hand_ledger):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {"model": "m-1"}, "r2": {"model": "m-2"}}, {})
    assert _sentences(h) == [
        "Fairness class: controlled_harness.",
        "Disclosed variables that differ: model.",
    ]


# ----------------------------------------------------------------- attempts per case


@pytest.mark.parametrize(
    ("attempts", "note"),
    [
        (
            {"r1": 1, "r2": 2},
            "- Attempts per case here: 2 for r2; 1 for r1: repeated attempts show spread, "
            "not statistical significance; a difference between two models can be noise.",
        ),
        (
            {"r1": 1, "r2": 1},
            "- Every run here made 1 attempt per case: one attempt shows no spread at all; "
            "a difference between two models can be noise.",
        ),
    ],
)
def test_the_markdown_says_the_attempts_per_case_as_they_were(
    hand_ledger, tmp_path: Path, attempts: dict[str, int], note: str
):
    h = hand_ledger(CASES)
    _runs(h, {"r1": {}, "r2": {}}, attempts)
    md = _md(tmp_path / "ledger.db")
    assert note + "\n" in md
    assert "Three attempts per case" not in md


# ----------------------------------------------------------------- score items


def test_score_items_in_the_formula_order_with_their_maximum():
    # docs/scoring.md's example of a wrong answer: rows 45 x 2/3 = 30, order 0, a JSON fence
    items = dict(protocol=0, guard=5, executed=10, column_count=5, column_names=5, rows=30)
    score = Score(
        scorer_version="2.0.0",
        total="70.00",
        items=ev.ScoreItems(
            **{k: Decimal(v) for k, v in items.items()}, order=Decimal(0), ast=Decimal(15)
        ),
        ast_rules=[],
        result_correct=False,
        format_ok=False,
        failure_kind="none",
        sql_structural_match=None,
    )
    assert score_items(score) == [
        ["protocol", "0 of 5"],
        ["guard", "5 of 5"],
        ["executed", "10 of 10"],
        ["column count", "5 of 5"],
        ["column names", "5 of 5"],
        ["rows", "30 of 45"],
        ["order", "0 of 10"],
        ["ast", "15 of 15"],
        ["total", "70.00 of 100"],
    ]
    unknown = score_items(Score(**{**_fields(score), "scorer_version": "9.0.0"}))
    assert unknown[5] == ["rows", "30"]
    assert unknown[-1] == ["total", "70.00"]


def _fields(struct: Any) -> dict[str, Any]:
    return {f: getattr(struct, f) for f in struct.__struct_fields__}


def test_number_columns():
    rows = [
        ["a", 1, "0.9630", "52/2/0", None, "3853.32 (52 of 54 attempts)", "2=", "no"],
        ["b", 2, "-0.1 to 0.5", "1/2", "x", "12.50 (estimate)", "1", "yes"],
    ]
    assert numeric_columns(rows) == [False, True, True, True, False, True, True, False]
    assert numeric_columns([[None, True]]) == [False, False]


# ----------------------------------------------------------------- the real run's views


def _cli(ledger: Path, *args: str) -> str:
    done = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    assert done.exit_code == 0, done.stderr
    return done.stdout


def _blob(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="evidence">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_rows_the_sql_never_reached_show_no_diff(real_ledger: Path):
    md = _cli(real_ledger, "report", "--format", "md")
    # build_real_ledger: model-a's sf-02 attempt 3 timed out at the provider (no SQL), its
    # sf-03 attempt 1 was DROP TABLE (refused by the guard, never ran): no rows to miss
    assert "| model-a | sf-02 | 3 | scored | 0.00 | - | provider | - | - | - | - |\n" in md
    assert "| model-a | sf-03 | 1 | scored | 5.00 | - | guard | - | - | rejected | - |\n" in md
    # the self-test's reference answer ran: 0 missing, 0 extra
    assert "| self-test | sf-03 | 1 | scored | 100.00 | yes | none | 0 | 0 | passed | - |\n" in md
    page = _cli(real_ledger, "report", "--format", "html")
    blob = _blob(page)
    heads = blob["h"]
    by_caserun = {}
    for blocks in blob["c"]:
        first = blocks[0][1]
        by_caserun[first.split(":")[0]] = blocks
    provider = by_caserun["model-a / sf-02 / attempt 3"]
    texts = [b[1] for b in provider if b[0] == "p" and isinstance(b[1], str)]
    assert not any(t.startswith("Result diff") for t in texts)
    assert "Provider failure" in [b[1] for b in provider if b[0] == "h"]
    right = by_caserun["self-test / sf-03 / attempt 1"]
    assert any(b[0] == "p" and b[1].startswith("Result diff: 0 missing rows") for b in right)
    (items,) = [b for b in right if b[0] == "t" and heads[b[1]] == ["item", "points of maximum"]]
    assert items[2] == [
        ["protocol", "5 of 5"],
        ["guard", "5 of 5"],
        ["executed", "10 of 10"],
        ["column count", "5 of 5"],
        ["column names", "5 of 5"],
        ["rows", "45 of 45"],
        ["order", "10 of 10"],
        ["ast", "15 of 15"],
        ["total", "100.00 of 100"],
    ]


def test_the_html_tables_of_the_v3_view(real_ledger: Path):
    page = _cli(real_ledger, "report", "--format", "html")
    # the Failure table's guard column counts guard failures (not the CaseRuns verdict)
    failures = page.split("<h3>Failure classification")[1].split("</details>")[0]
    assert (
        '<th title="planned attempts whose SQL the guard refused, so it never ran (failure '
        'kind guard)">guard</th>'
    ) in failures
    assert "the SQL guard&#x27;s verdict" not in failures
    # model-a (build_real_ledger): policy_refusal 0, protocol 0 (a recovered fence still
    # scores), guard 1 (DROP TABLE), execution 0, provider 1 (the timeout),
    # infrastructure 0, cancelled missing_recording 1, unscored 0: numbers on the right
    assert (
        '<tr><td>model-a</td><td class="num">0</td><td class="num">0</td>'
        '<td class="num">1</td><td class="num">0</td><td class="num">1</td>'
        '<td class="num">0</td><td>missing_recording 1</td><td class="num">0</td></tr>'
    ) in failures
    # the Models table leads with what a phone must see
    models = page.split('<div id="summary">')[1]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", models.split("</tr>")[0])
    assert heads[:4] == ["rank", "run", "result-correct", "score (auxiliary)"]
    # the variant note's Markdown code spans are code, not backticks
    assert (
        "<code>variant_mismatch</code>: on a variant database the answer is not "
        "result-correct against that variant&#x27;s gold; <code>scope_leak</code>:"
    ) in page
    assert "`" not in page.split("<script")[0]
    # the 64-hex root folds; its whole text stays in the page
    root = json.loads(_cli(real_ledger, "report", "--format", "json"))["checkpoint"]["root_hash"]
    assert f'root <code class="hash" tabindex="0" title="{root}">{root}</code>' in page
    # one script only, and it is the one the policy allows
    assert page.count("<script>") == 1
