"""``caseledger claims`` (issue 19, the answer contract) on sales-fixture v2.

A real ledger, the real built-in bank sales-fixture-v2 published and built, a
reference self-test run and a replay of the recorded answers in
tests/data/claims/sales-fixture-v2-answers.jsonl through the real worker:

* sf-01: the reference filter; "3单，共600元" (supported twice) and "约占全公司的6%"
  (a share no column carries: unverifiable). Correct.
* sf-02: by store with a total; "门店A 300元，门店B 300元，合计600元" (two names, three
  numbers: five supported). Correct.
* sf-04: validity forgotten, so S06 (500, invalid) is counted: 5 orders / 10,100 yuan
  (100 + 200 + 300 + 9000 + 500) instead of gold's 4 / 9,600; the summary says what the
  wrong result says: supported against the result, contradicted against gold. Wrong.
* sf-08: correct SQL (FILTER instead of CASE) for the composition effect, whose summary
  says the total rose like both stores did: the total went 0.45 -> 0.2333, so that one
  claim is contradicted; its two names, four rates and the two stores' directions
  (three direction claims) are supported. Correct.

By hand: 2 + 1 + 5 + 2 + 10 = 20 claims; supported 18, contradicted 1, unverifiable 1;
checkable 19; faithfulness 18/19 = 0.9474; contradicted rate 1/20 = 0.0500; correct
results with a contradiction: sf-08 of (sf-01, sf-02, sf-08) = 1/3 = 0.3333.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))
from report_testkit import fixed_clock, operator

from ledger.cli import main
from ledger.store import Ledger

ANSWERS = Path(__file__).resolve().parents[1] / "data" / "claims" / "sales-fixture-v2-answers.jsonl"


def _build(folder: Path) -> Path:
    from ledger.adapters.base import build_adapter
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import builtin_banks
    from ledger.run import runner

    folder.mkdir(parents=True)
    signer = operator()
    signer.save(folder / "keys" / "operator.key")
    path = folder / "ledger.db"
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        bank_folder = builtin_banks()["sales-fixture-v2"]
        pb = publish(ledger, signer, bank_folder, folder, cwd=folder).published
        bank = bank_context(pb, path, folder)
        reference = build_adapter("reference", {}, cases=bank.reference_sql)
        plan = runner.RunPlan(run_id="self-test", profile="reference", attempts=1)
        runner.run(ledger, signer, bank, reference, plan, clock=fixed_clock)
        adapter = build_adapter("replay", {"replay_file": str(ANSWERS), "tools": "off"})
        plan = runner.RunPlan(run_id="model-a", profile="model-a", attempts=1)
        runner.run(ledger, signer, bank, adapter, plan, clock=fixed_clock)
    return folder


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("claims") / "home")


def run(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_v2_gold_is_the_composition_effect_worked_by_hand(home: Path) -> None:
    from ledger.events import BankPublished

    with Ledger.open(home / "ledger.db", readonly=True) as led:
        events = [row.event() for row in led.iter_events()]
    banks = [e for e in events if isinstance(e, BankPublished)]
    assert [(b.bank_id, b.version) for b in banks] == [("sales-fixture", "v2")]
    gold = {g.case_id: g for g in banks[0].gold}
    # 门店A 80/100 -> 9/10, 门店B 10/100 -> 40/200, together 90/200 -> 49/210 (0.2333...)
    assert [c.name for c in gold["sf-08"].columns] == ["store_name", "rate_2026_08", "rate_2026_09"]
    assert sorted(gold["sf-08"].rows) == [
        ("合计", "0.45", "0.2333"),
        ("门店A", "0.8", "0.9"),
        ("门店B", "0.1", "0.2"),
    ]
    # v1's cases are unchanged in v2: same literal answers (3 orders / 600 yuan ...)
    assert gold["sf-01"].rows == ((3, "600.00"),)
    assert gold["sf-04"].rows == ((4, "9600.00"),)


def test_help() -> None:
    result = CliRunner().invoke(main, ["claims", "--help"])
    assert result.exit_code == 0
    assert "--run" in result.output


def test_claims_records_then_counts(home: Path) -> None:
    with Ledger.open(home / "ledger.db", readonly=True) as led:
        before = led.size()
    code, out, err = run(home, "claims", "--run", "model-a")
    assert code == 0, err
    assert out.splitlines() == [
        "run model-a (sales-fixture@v2, scorer 2.0.0): 4 summaries of 8 attempts checked; "
        "claims 1.0.0 (4 recorded now)",
        "claims read 20: supported 18, contradicted 1, unverifiable 1",
        "faithfulness rate (supported / checkable 19)   0.9474",
        "contradicted-claim rate (contradicted / read)   0.0500",
        "correct results whose summary contradicts them   1 of 3  0.3333",
        "by kind: number 11/0/1; item 4/0/0; direction 3/1/0 (supported/contradicted/unverifiable)",
        "  contradicted: sf-08 #1: the total went up "
        "(row 3: rate_2026_08 0.45 -> rate_2026_09 0.2333)",
    ]
    with Ledger.open(home / "ledger.db", readonly=True) as led:
        assert led.size() == before + 4
    # A second call appends nothing and prints the same counts.
    code, again, _ = run(home, "claims", "--run", "model-a")
    assert code == 0
    assert again.splitlines()[0].endswith("(0 recorded now)")
    assert again.splitlines()[1:] == out.splitlines()[1:]


def test_json_lists_every_claim_with_its_gold_verdict(home: Path) -> None:
    code, out, _ = run(home, "claims", "--run", "model-a", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["diagnostic_only"] is True
    assert (doc["faithfulness_rate"], doc["contradicted_rate"]) == ("0.9474", "0.0500")
    assert doc["gold_counts"] == {"supported": 16, "contradicted": 3, "unverifiable": 1}
    rows = {a["case"]: a for a in doc["attempts"]}
    assert rows["sf-03"]["claims"] is None  # no recording: cancelled, nothing to check
    wrong = rows["sf-04"]
    assert wrong["result_correct"] is False
    assert [(c["reading"], c["verdict"], c["gold_verdict"]) for c in wrong["claims"]] == [
        ("5 orders (total)", "supported", "contradicted"),
        ("10100 yuan", "supported", "contradicted"),
    ]
    simpson = rows["sf-08"]
    assert simpson["result_correct"] is True
    assert [c["verdict"] for c in simpson["claims"] if c["kind"] == "direction"] == [
        "supported",
        "supported",
        "supported",
        "contradicted",
    ]


def test_nothing_checkable_exits_2(home: Path) -> None:
    # The reference adapter's summary ("Reference answer (harness self-test).") has no claim.
    code, out, err = run(home, "claims", "--run", "self-test")
    assert code == 2
    assert "claims read 0: supported 0, contradicted 0, unverifiable 0" in out
    assert err == "nothing could be checked: no claim could be read from its 8 summaries (exit 2)\n"


def test_unknown_run_is_a_usage_error(home: Path) -> None:
    code, _, err = run(home, "claims", "--run", "nope")
    assert code == 2
    assert "no run 'nope'" in err


def test_report_shows_the_contract_beside_the_score(home: Path) -> None:
    code, _, err = run(home, "claims", "--run", "model-a")
    assert code == 0, err
    assert run(home, "claims", "--run", "self-test")[0] == 2  # records, then exits 2
    # sf-04 forgot validity: its understanding slice is filters; sf-01, sf-02, sf-08 are
    # correct (sliced too, never counted).
    code, _, err = run(home, "slices", "--run", "model-a")
    assert code == 0, err
    code, out, err = run(home, "report", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    runs = {r["run"]: r for s in doc["sections"] for r in s["runs"]}
    block = runs["model-a"]["claims"]
    assert (block["claims"], block["checkable"]) == (20, 19)
    assert block["counts"] == {"supported": 18, "contradicted": 1, "unverifiable": 1}
    assert block["faithfulness_rate"] == "0.9474"
    assert block["correct_contradicted_share"] == "0.3333"
    # Beside the score, never inside it: 3 of 8 planned attempts are result-correct.
    assert runs["model-a"]["quality"]["result_correct_rate"] == "0.3750"
    # Every reference SQL of v2 (sf-08 included) is result-correct against its gold.
    assert runs["self-test"]["quality"]["result_correct_rate"] == "1.0000"
    # The self-test run has claim events too (its summaries hold no claim): a block of zeros
    # with no rates, never an empty 100%.
    assert runs["self-test"]["claims"]["faithfulness_rate"] is None
    caseruns = {(c["run"], c["case"]): c for s in doc["sections"] for c in s["caseruns"]}
    sf08 = caseruns[("model-a", "sf-08")]
    assert [x["verdict"] for x in sf08["claims"]][-1] == "contradicted"
    # Correct, but written with FILTER and without the reference's store_id IN (1, 2): the
    # slice is a structural signature (filters), never counted for a correct answer.
    assert sf08["slice"]["component"] == "filters"
    assert caseruns[("model-a", "sf-04")]["slice"]["component"] == "filters"
    assert "claims" not in caseruns[("model-a", "sf-03")]  # no answer, no claims
    code, md, _ = run(home, "report", "--format", "md")
    assert code == 0
    assert "### Answer contract (diagnostic: never changes a score, a rate or the ranking)" in md
    assert "| model-a | 4 | 20 | 18 | 1 | 1 | 0.9474 | 0.0500 | 1/3 (0.3333) |" in md
    assert "### Per attempt: understanding slice and claims (diagnostic)" in md
    assert (
        "| model-a | sf-08 | 1 | yes | - | direction: the total went up | contradicted | "
        "contradicted | row 3: rate_2026_08 0.45 -> rate_2026_09 0.2333 |" in md
    )
    sf04 = [line for line in md.splitlines() if line.startswith("| model-a | sf-04 | 1 | no |")]
    assert sf04[0].startswith("| model-a | sf-04 | 1 | no | filters: ")
    assert sf04[0].endswith(
        "| number: 5 orders (total) | supported | contradicted | order_count = 5 in row 1 |"
    )
    # A report of the one run (read through the run's own events) shows the same block.
    code, one, _ = run(home, "report", "--run", "model-a", "--format", "json")
    assert code == 0
    only = [r for s in json.loads(one)["sections"] for r in s["runs"]]
    assert [r["run"] for r in only] == ["model-a"]
    assert only[0]["claims"] == block
    code, page, _ = run(home, "report", "--format", "html")
    assert code == 0
    assert '<div id="claims">' in page
    assert '<div id="attempt-diagnostics">' in page
