"""Issue 32 on the demo: the report's error bars and pairwise numbers for its three model
runs, checked against values computed here, independently, from the rows of
``caseledger export caseruns`` (CSV, one row per planned attempt) with scipy.

Nothing here uses projections/statistics.py: per-case rates come from the CSV's
``result_correct`` column, standard errors from ``scipy.stats.sem``, exact p-values from
``scipy.stats.permutation_test`` (paired: ``permutation_type="samples"``), normal ones from
``scipy.stats.norm``; rounding is half-up (docs/statistics.md "Precision").
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sp

from ledger.cli import main

MODELS = ("demo-harbor-coder-14b", "demo-lumen-mini", "demo-northwind-sql-pro")


def _q(value: float | Fraction, places: int = 4) -> str:
    exact = (
        Decimal(value.numerator) / Decimal(value.denominator)
        if isinstance(value, Fraction)
        else Decimal(repr(value))
    )
    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


@pytest.fixture(scope="module")
def demo(
    demo_made: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict, dict[str, dict[str, Fraction]]]:
    folder = Path(shutil.copytree(demo_made[0], tmp_path_factory.mktemp("demo") / "demo"))
    report = json.loads((folder / "report.json").read_text("utf-8"))
    rows = folder / "caseruns.csv"
    done = CliRunner().invoke(
        main, ["--ledger", str(folder / "ledger.db"), "export", "caseruns", "-o", str(rows)]
    )
    assert done.exit_code == 0, done.output
    right: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    planned: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with rows.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            planned[row["run"]][row["case_id"]] += 1
            right[row["run"]][row["case_id"]] += row["result_correct"] == "true"
    rates = {
        run: {case: Fraction(right[run][case], n) for case, n in cases.items()}
        for run, cases in planned.items()
    }
    return report, rates


@pytest.mark.slow
def test_the_demo_report_is_v3_and_its_models_are_the_three(demo) -> None:
    report, rates = demo
    assert report["contract"] == "caseledger-report/3"
    models = report["sections"][0]
    assert models["kind"] == "models"
    assert sorted(r["run"] for r in models["statistics"]["runs"]) == list(MODELS)
    assert all(len(rates[run]) == 18 for run in MODELS)  # 18 cases, 3 attempts each


@pytest.mark.slow
def test_each_runs_error_bars_match_the_exported_rows(demo) -> None:
    report, rates = demo
    for stat in report["sections"][0]["statistics"]["runs"]:
        ys = [float(y) for y in rates[stat["run"]].values()]
        mean = sum(rates[stat["run"]].values(), Fraction(0)) / len(ys)
        se = float(sp.sem(ys))
        low, high = max(0.0, float(mean) - 1.96 * se), min(1.0, float(mean) + 1.96 * se)
        assert stat["result_correct_rate"] == {
            "value": _q(mean), "se": _q(se), "interval": {"low": _q(low), "high": _q(high)},
        }, stat["run"]  # fmt: skip


@pytest.mark.slow
def test_the_pairwise_numbers_match_the_exported_rows(demo) -> None:
    report, rates = demo
    stats = report["sections"][0]["statistics"]
    order = [r["run"] for r in stats["runs"]]
    assert len(stats["pairs"]) == 3
    for pair in stats["pairs"]:
        a, b = rates[pair["a"]], rates[pair["b"]]
        assert order.index(pair["a"]) < order.index(pair["b"])
        cases = sorted(a)
        ya = np.array([float(a[c]) for c in cases])
        yb = np.array([float(b[c]) for c in cases])
        d = [a[c] - b[c] for c in cases]
        k = sum(1 for x in d if x != 0)
        diff = sum(d, Fraction(0)) / len(d)
        se = float(sp.sem(ya - yb))
        if k <= 20:
            p = sp.permutation_test(
                (ya, yb),
                lambda x, y, axis: np.mean(x - y, axis=axis),
                permutation_type="samples",
                n_resamples=math.inf,
                alternative="two-sided",
                vectorized=True,
            ).pvalue
            test = "exact_sign_flip"
        else:
            p = 2 * sp.norm.sf(abs(float(diff)) / se)
            test = "normal"
        expected = {
            "a": pair["a"],
            "b": pair["b"],
            "cases": 18,
            "difference": _q(diff),
            "se": _q(se),
            "interval": {"low": _q(float(diff) - 1.96 * se), "high": _q(float(diff) + 1.96 * se)},
            "p_value": _q(float(p)),
            "test": test,
            "significant": Decimal(_q(float(p))) < Decimal("0.05"),
            "a_better": sum(1 for x in d if x > 0),
            "b_better": sum(1 for x in d if x < 0),
            "mdd": _q((1.96 + 0.8416) * se),
        }
        assert pair == expected, (pair["a"], pair["b"])
    # Rank groups from the same rows: a run joins its group's first run unless the pair
    # is significant (docs/statistics.md).
    significant = {(p["a"], p["b"]): p["significant"] for p in stats["pairs"]}
    groups: list[list[str]] = []
    for run in order:
        if groups and not significant[(groups[-1][0], run)]:
            groups[-1].append(run)
        else:
            groups.append([run])
    labels = {}
    position = 1
    for group in groups:
        for run in group:
            labels[run] = f"{position}=" if len(group) > 1 else str(position)
        position += len(group)
    assert {r["run"]: r["rank_group"] for r in stats["runs"]} == labels
