"""Issue 32: ``caseledger-report/3`` (error bars, paired comparisons, rank groups, headline)
and ``caseledger compare``, on the real ledger of report_testkit (real runs, real log)
with a second model run, model-b (one attempt per case, replayed from model-a's
recording as tests/projections/test_evidence.py makes it).

The models section (sales-fixture, 7 cases): model-a made 3 attempts per case, model-b
one. Per case result-correct rates, read off the CaseRuns table by hand:

    case   sf-01 sf-02 sf-03 sf-04 sf-05 sf-06 sf-07
    model-a  1    2/3   2/3    1     1     1    2/3   (sf-02 #3 provider, sf-03 #1 guard,
    model-b  1     1     0     1     1     1     1     sf-07 #3 cancelled; model-b sf-03 guard)

Every expected number below was worked out from these by hand (the paired differences
d = b - a: 0, 1/3, -2/3, 0, 0, 0, 1/3) and checked with a calculator.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_testkit import build_real_ledger

from ledger.cli import main
from projections.report.build import from_json_v3, to_json


def _cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    return done.exit_code, done.stdout, done.stderr


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_real_ledger(tmp_path_factory.mktemp("v3") / "home")
    recording = str(path.parent / "model-a.jsonl")
    code, _, err = _cli(
        path, "run", "--bank", "sales-fixture", "--adapter", "replay", "--replay-file",
        recording, "--tools", "off", "--run-id", "model-b", "--attempts", "1",
    )  # fmt: skip
    assert code == 0, err
    return path


@pytest.fixture
def real_ledger(two_models: Path, tmp_path: Path) -> Path:
    """A private copy of the two-model ledger (this module's; the name reads as elsewhere)."""
    shutil.copytree(two_models.parent, tmp_path / "home")
    return tmp_path / "home" / "ledger.db"


def _report(ledger: Path, *args: str) -> dict:
    code, out, err = _cli(ledger, "report", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_the_default_report_is_v3_with_statistics_worked_by_hand(real_ledger: Path) -> None:
    doc = _report(real_ledger)
    assert doc["contract"] == "caseledger-report/3"
    models, self_test = doc["sections"]
    stats = models["statistics"]
    assert (stats["alpha"], stats["confidence"]) == ("0.05", "0.95")
    by_run = {r["run"]: r for r in stats["runs"]}
    assert [r["run"] for r in stats["runs"]] == ["model-b", "model-a"]  # the section's ranking
    # model-b: 6/7; sd^2 = 1/7, SE = sqrt(1/7 / 7) = 1/7; 6/7 + 1.96/7 = 1.137 -> clipped.
    assert by_run["model-b"]["result_correct_rate"] == {
        "value": "0.8571", "se": "0.1429", "interval": {"low": "0.5771", "high": "1.0000"},
    }  # fmt: skip
    # model-a: 6/7; sd^2 = (4 (1/7)^2 + 3 (4/21)^2) / 6 = 2/63; SE = sqrt(2)/21 = 0.06734.
    assert by_run["model-a"]["result_correct_rate"] == {
        "value": "0.8571", "se": "0.0673", "interval": {"low": "0.7251", "high": "0.9891"},
    }  # fmt: skip
    # Scores (case means 95, 100, 5, 100, 100, 100, 100): 600/7, SE 13.4708.
    assert by_run["model-b"]["model_score"] == {
        "value": "85.71", "se": "13.47", "interval": {"low": "59.31", "high": "100.00"},
    }  # fmt: skip
    # model-a case means 290/3, 200/3, 205/3, 100, 100, 100, 200/3: 1795/21, SE 6.4725.
    assert by_run["model-a"]["model_score"] == {
        "value": "85.48", "se": "6.47", "interval": {"low": "72.79", "high": "98.16"},
    }  # fmt: skip
    # The one pair, model-b (ranked first) as A: d sums to 0, so every sign assignment
    # reaches |sum| >= 0 and p = 1; SE = sqrt((1/9 + 4/9 + 1/9) / 6 / 7) = 1/(3 sqrt 7).
    assert stats["pairs"] == [
        {
            "a": "model-b", "b": "model-a", "cases": 7, "difference": "0.0000",
            "se": "0.1260", "interval": {"low": "-0.2469", "high": "0.2469"},
            "p_value": "1.0000", "test": "exact_sign_flip", "significant": False,
            "a_better": 2, "b_better": 1, "mdd": "0.3530",
        }
    ]  # fmt: skip
    assert [(r["run"], r["rank_group"]) for r in stats["runs"]] == [
        ("model-b", "1="), ("model-a", "1="),
    ]  # fmt: skip
    assert stats["headline"] == (
        "model-b and model-a cannot be told apart (p = 1.0000). On this bank (7 cases) "
        "differences under 35.30 points cannot be told apart (80% power, alpha 0.05)."
    )
    # The self-test section: error bars, no ranking, no pairs, no headline.
    assert self_test["statistics"] == {
        "alpha": "0.05",
        "confidence": "0.95",
        "runs": [
            {
                "run": "self-test", "cases": 7, "rank_group": None,
                "result_correct_rate": {
                    "value": "1.0000", "se": "0.0000",
                    "interval": {"low": "1.0000", "high": "1.0000"},
                },
                "model_score": {
                    "value": "100.00", "se": "0.00",
                    "interval": {"low": "100.00", "high": "100.00"},
                },
            }
        ],
        "pairs": [],
        "headline": None,
    }  # fmt: skip


def test_v3_is_v2_plus_statistics_and_decodes_to_the_same_bytes(real_ledger: Path) -> None:
    v3 = _report(real_ledger)
    v2 = _report(real_ledger, "--detail", "compact")
    stats = [s.pop("statistics") for s in v3["sections"]]
    assert stats[0] is not None
    assert v3.pop("contract") == "caseledger-report/3"
    assert v2.pop("contract") == "caseledger-report/2"
    assert v3 == v2
    _, out, _ = _cli(real_ledger, "report", "--format", "json")
    assert to_json(from_json_v3(out.encode())) == out.encode()


def test_markdown_and_html_show_the_headline_and_the_tables(real_ledger: Path) -> None:
    code, md, _ = _cli(real_ledger, "report", "--format", "md")
    assert code == 0
    lines = md.splitlines()
    assert lines[2] == "- Contract: `caseledger-report/3`"
    at = lines.index("## Headline")
    assert lines[at + 2] == (
        "- **Models - bank sales-fixture v1 (sha256:e759422e6d46) - scorer 2.x**: model-b and "
        "model-a cannot be told apart (p = 1.0000). On this bank (7 cases) differences under "
        "35.30 points cannot be told apart (80% power, alpha 0.05)."
    )
    assert at < lines.index("## Models - bank sales-fixture v1 (sha256:e759422e6d46) - scorer 2.x")
    assert (
        "| 1= | model-b | 7 | 0.8571 | 0.1429 | 0.5771 to 1.0000 | 85.71 | 13.47 "
        "| 59.31 to 100.00 |"
    ) in lines
    assert (
        "| model-b | model-a | 7 | 0.0000 | 0.1260 | -0.2469 to 0.2469 | 1.0000 | exact_sign_flip "
        "| no | 2 | 1 | 0.3530 |"
    ) in lines
    code, page, _ = _cli(real_ledger, "report", "--format", "html")
    assert code == 0
    assert '<h2>Headline</h2><ul id="headline"><li><strong>Models - bank sales-fixture' in page
    assert '<td>model-b</td><td>model-a</td><td class="num">7</td>' in page
    assert "<code>caseledger-report/3</code>" in page
    # --detail compact and full: the views of before, no statistics.
    for detail in ("compact", "full"):
        _, old, _ = _cli(real_ledger, "report", "--format", "md", "--detail", detail)
        assert "Headline" not in old
        assert "- Contract: `caseledger-report/1`" in old


def test_compare_prints_the_pair_worked_by_hand(real_ledger: Path) -> None:
    code, out, err = _cli(real_ledger, "compare", "model-a", "model-b")
    assert code == 0, err
    assert out.splitlines() == [
        "A = model-a, B = model-b: bank sales-fixture v1 (sha256:e759422e6d46), 7 paired cases, "
        f"tree size {_report(real_ledger)['checkpoint']['tree_size']}",
        "result-correct rate: A 0.8571 (95% CI 0.7251 to 0.9891), "
        "B 0.8571 (95% CI 0.5771 to 1.0000)",
        "difference A - B: 0.0000 (0.00 points), SE 0.1260, 95% CI -0.2469 to 0.2469",
        "p = 1.0000 (exact sign-flip test over 3 differing cases): not significant at alpha 0.05",
        "A better on 1 cases, B better on 2; minimum detectable difference 0.3530 (35.30 points)",
        "cases that differ (case rate of A, of B):",
        "  sf-02  0.6667  1.0000",
        "  sf-03  0.6667  0.0000",
        "  sf-07  0.6667  1.0000",
    ]
    code, out, _ = _cli(real_ledger, "compare", "model-a", "model-b", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["comparison"] == {
        "a": "model-a", "b": "model-b", "cases": 7, "difference": "0.0000", "se": "0.1260",
        "interval": {"low": "-0.2469", "high": "0.2469"}, "p_value": "1.0000",
        "test": "exact_sign_flip", "significant": False, "a_better": 1, "b_better": 2,
        "mdd": "0.3530",
    }  # fmt: skip
    assert doc["differing"] == [
        {"case": "sf-02", "a": "0.6667", "b": "1.0000"},
        {"case": "sf-03", "a": "0.6667", "b": "0.0000"},
        {"case": "sf-07", "a": "0.6667", "b": "1.0000"},
    ]
    assert (doc["a"]["run"], doc["b"]["run"], doc["bank"]["id"]) == (
        "model-a",
        "model-b",
        "sales-fixture",
    )


def test_compare_refuses_what_cannot_be_paired(real_ledger: Path) -> None:
    code, _, err = _cli(real_ledger, "compare", "model-a", "model-a")
    assert (code, err.splitlines()[0]) == (2, "error: compare needs two runs; both are model-a")
    code, _, err = _cli(real_ledger, "compare", "model-a", "nope")
    assert code == 2
    assert "no run nope in the first" in err
    assert "Traceback" not in err
