"""Real ledgers through the CLI: variant flags of a model run on the sales fixture, and
calibration runs in their own never-ranked sections, exactly as ``calibrate --json`` printed."""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.adapters.reference import reference_output
from ledger.bank.registry import BUILTIN_DIR

pytestmark = pytest.mark.slow

FIXTURE = BUILTIN_DIR / "sales-fixture"
CLI = (sys.executable, "-c", "from ledger.cli import main; main()")
# issue 9 item 3: both score 100 on the base snapshot (only regions 甲 and 乙 exist there)
EXCLUDING = """SELECT COUNT(*) AS order_count, SUM(amount) AS amount FROM sales
WHERE region <> '区域乙' AND valid = 'Y'
  AND deal_time >= TIMESTAMPTZ '2026-09-01 00:00:00+08:00'
  AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"""
SELECTING = EXCLUDING.replace("region <> '区域乙'", "region = '区域甲'")
# A weakened copy: no second tag, no region 乙 rows, and no calibration.yaml (survivors).
WEAKEN = (
    "DELETE FROM sale_tags WHERE (sale_id, tag) IN "
    "(('S01', '促销'), ('S02', '促销'), ('S02', '会员'));\n"
    "DELETE FROM sales WHERE region = '区域乙';\n"
    "DELETE FROM stores WHERE region = '区域乙';\n"
)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``caseledger --ledger HOME/ledger.db ARGS`` in a real process."""
    env = {k: v for k, v in os.environ.items() if k != "CASELEDGER_LEDGER"}
    done = subprocess.run(
        [*CLI, "--ledger", str(home / "ledger.db"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def weakened(folder: Path) -> Path:
    folder.mkdir()
    for name in ("schema.sql", "semantic.json", "prompt.md"):
        shutil.copyfile(FIXTURE / name, folder / name)
    seed = (FIXTURE / "seed.sql").read_text(encoding="utf-8")
    (folder / "seed.sql").write_text(seed + "\n" + WEAKEN, encoding="utf-8")
    cases = (FIXTURE / "cases.yaml").read_text(encoding="utf-8")
    assert 'version: "v1"' in cases
    (folder / "cases.yaml").write_text(
        cases.replace('version: "v1"', 'version: "v1-weak"'), encoding="utf-8"
    )
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("calreport")
    cli(home, "init")
    cli(home, "bank", "publish", "sales-fixture")
    replay = home / "leaky.jsonl"
    lines = [
        {"case": "sf-01", "attempt": 1, "output": reference_output(EXCLUDING)},
        {"case": "sf-01", "attempt": 2, "output": reference_output(SELECTING)},
    ]
    replay.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    common = ["run", "--bank", "sales-fixture", "--adapter", "replay", "--attempts", "2"]
    common += ["--replay-file", str(replay), "--tools", "off"]
    cli(home, *common, "--run-id", "leaky", "--profile", "leaky")
    cli(home, *common, "--run-id", "plain", "--profile", "plain", "--no-variants")
    printed = cli(home, "calibrate", "--bank", "sales-fixture", "--json").stdout
    weak = cli(home, "calibrate", "--bank", str(weakened(home / "weak")), "--json").stdout
    reports = {  # caseledger-report/1 (--detail full): the variant outcomes of each CaseRun
        fmt: cli(home, "report", "--format", fmt, "--detail", "full").stdout
        for fmt in ("json", "md", "html")
    }
    return {
        "home": home,
        # parse_float=str keeps the printed number's exact text ("1.0000")
        "printed": json.loads(printed, parse_float=str),
        "weak": json.loads(weak, parse_float=str),
        "reports": reports,
        "report": json.loads(reports["json"]),
    }


def _sections(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s for s in report["sections"] if s["kind"] == kind]


def test_excluding_query_is_the_one_scope_leak_of_its_run(built: dict[str, Any]) -> None:
    (models,) = _sections(built["report"], "models")
    runs = {r["run"]: r for r in models["runs"]}
    leaky = runs["leaky"]["variant_diagnostics"]
    # 7 cases x 2 attempts planned; only sf-01's two attempts were recorded and checked
    assert (leaky["total"], leaky["checked"], leaky["coverage"]) == (14, 2, "0.1429")
    assert leaky["flags"] == {"scope_leak": 1, "variant_mismatch": 1}
    assert leaky["flagged"] == 1
    by_key = {(c["run"], c["case"], c["attempt"]): c for c in models["caseruns"]}
    excl, sel = by_key[("leaky", "sf-01", 1)], by_key[("leaky", "sf-01", 2)]
    assert excl["variants"]["flags"] == ["scope_leak", "variant_mismatch"]
    third = next(o for o in excl["variants"]["outcomes"] if o["variant"] == "third-region")
    assert third["non_interfering"] is True
    assert third["moved"] is True
    assert sel["variants"]["flags"] == []
    # both score exactly as without diagnostics
    assert excl["score"]["total"] == sel["score"]["total"] == "100.00"
    assert excl["score"]["result_correct"] is True
    assert "variant_mismatch 1, scope_leak 1 of 2 checked" in built["reports"]["md"]
    html = built["reports"]["html"]
    assert (  # the CaseRun's row, then the first line of its evidence
        "<td>leaky</td><td>sf-01</td><td>1</td><td>scored</td><td>100.00</td><td>yes</td>"
        "<td>none</td><td>0</td><td>0</td><td>passed</td><td>scope_leak, variant_mismatch</td>"
    ) in html
    assert (
        "leaky / sf-01 / attempt 1: total 100.00, result-correct yes, failure none; "
        'variant flags (diagnostic): scope_leak, variant_mismatch"'
    ) in html


def test_the_same_answers_without_variants_score_and_rank_the_same(built: dict[str, Any]) -> None:
    (models,) = _sections(built["report"], "models")
    runs = {r["run"]: r for r in models["runs"]}
    leaky, plain = runs["leaky"], runs["plain"]
    assert plain["variant_diagnostics"]["checked"] == 0
    assert plain["variant_diagnostics"]["flags"] == {"scope_leak": 0, "variant_mismatch": 0}
    # equal result-correct rate and score: one shared rank, flags notwithstanding
    assert leaky["rank"] == plain["rank"] == 1
    for key in ("quality", "scores", "cases", "rank"):
        assert leaky[key] == plain[key], key
    tokens = ("tokens", "cost", "correct")
    assert {k: leaky["efficiency"][k] for k in tokens} == {
        k: plain["efficiency"][k] for k in tokens
    }


def test_calibration_section_matches_what_calibrate_printed(built: dict[str, Any]) -> None:
    report, printed = built["report"], built["printed"]
    assert [s["kind"] for s in report["sections"]] == ["models", "calibration", "calibration"]
    section = _sections(report, "calibration")[0]
    assert section["title"].startswith(
        "Calibration (oracle checks, never ranked) - bank sales-fixture v1 "
    )
    assert section["ranked"] is False
    assert section["fairness"] is None
    assert section["caseruns"] == []
    (entry,) = section["runs"]
    assert entry["rank"] is None
    assert "quality" not in entry
    assert "scores" not in entry
    c = entry["calibration"]
    # By hand: the sales fixture's data and calibration.yaml variants kill every mutant that
    # runs (tests/calibration/test_fixture.py names them), so survived = 0 and
    # kill rate = killed / (killed + 0) = 1, whatever the count of killed, printed to 4 places.
    assert (printed["survived"], printed["killed"] > 0) == (0, True)
    assert c["kill_rate"] == printed["kill_rate"] == "1.0000"
    for status in ("killed", "survived", "equivalent", "blocked", "unsupported", "not_applicable"):
        assert c["counts"][status] == printed[status], status
    assert c["applicable"] == printed["applicable"]
    pc = printed["positive_controls"]
    assert c["positive_controls"] == {"passed": pc["passed"], "total": pc["total"], "failed": []}
    assert c["passed"] is printed["passed"] is True
    assert [v["id"] for v in c["variants"]] == [v["id"] for v in printed["variants"]]
    assert c["calibration_sha256"] == printed["calibration_sha256"]
    assert [(m["case"], m["mutant"], m["review"]) for m in c["equivalents"]] == [
        (m["case"], m["mutant"], m["review"]) for m in printed["equivalents"]
    ]
    md = built["reports"]["md"]
    rate_row = f"| {entry['run']} | completed | 1.0000 | {printed['killed']} | 0 |"
    assert rate_row in md
    assert f"| {pc['passed']}/{pc['total']} | yes |" in md


def test_survivors_are_named_never_shown_as_sql(built: dict[str, Any]) -> None:
    weak = built["weak"]
    assert weak["survivors"], "the weakened fixture must have survivors"
    section = _sections(built["report"], "calibration")[1]
    assert section["bank"]["version"] == "v1-weak"
    c = section["runs"][0]["calibration"]
    # By hand: without the second tag, region 乙 and calibration.yaml, at least the three blind
    # spots survive (tests/calibration/test_fixture.py BLIND_SPOTS), so the rate is below 1.
    survived = {(s["case"], s["mutant"]) for s in weak["survivors"]}
    assert {
        ("sf-05", "one_to_many_join#0"),
        ("sf-01", "drop_scope_predicate#0"),
        ("sf-06", "join_key_swap#0"),
    } <= survived
    assert weak["kill_rate"].startswith("0.")
    assert c["kill_rate"] == weak["kill_rate"]
    assert c["counts"]["survived"] == weak["survived"] == len(weak["survivors"])
    assert [(s["case"], s["mutant"], s["operator"]) for s in c["survivors"]] == [
        (s["case"], s["mutant"], s["operator"]) for s in weak["survivors"]
    ]
    # the report names the mutated SQL only by its hash
    for shown, printed in zip(c["survivors"], weak["survivors"], strict=True):
        digest = "sha256:" + hashlib.sha256(printed["sql"].encode("utf-8")).hexdigest()
        assert shown["sql_sha256"] == digest
    for fmt, text in built["reports"].items():
        for s in weak["survivors"]:
            forms = {
                s["sql"],
                json.dumps(s["sql"], ensure_ascii=False)[1:-1],
                html.escape(s["sql"]),
            }
            assert all(form not in text for form in forms), (fmt, s["mutant"])
        assert "one_to_many_join#0" in text, fmt


def test_flags_and_calibration_sections_rebuild_to_the_same_bytes(built: dict[str, Any]) -> None:
    home = built["home"]
    env_seed = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = "4242"
    try:
        for fmt, first in built["reports"].items():
            again = cli(home, "report", "--format", fmt, "--detail", "full").stdout
            assert (
                hashlib.sha256(again.encode()).digest() == hashlib.sha256(first.encode()).digest()
            )
    finally:
        if env_seed is None:
            os.environ.pop("PYTHONHASHSEED")
        else:
            os.environ["PYTHONHASHSEED"] = env_seed
