"""Table rows shared by the Markdown and HTML renderers (each renderer only formats them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from projections.calibration import STATUSES

__all__ = [
    "FAIRNESS_HEAD",
    "INTRO",
    "CalibrationTables",
    "calibration_tables",
    "cost_per_correct",
    "fairness_rows",
]

INTRO = (
    "Oracle checks, never ranked: planted errors (mutants) the oracle must reject and "
    "correct alternative queries (positive controls) it must accept. "
    "kill rate = killed / (killed + survived)."
)


@dataclass
class CalibrationTables:
    """Every table of a calibration section as (title, head, rows), plus failed controls."""

    head: list[str] = field(
        default_factory=lambda: [
            "run",
            "status",
            "kill rate",
            *STATUSES,
            "applicable",
            "positive controls",
            "passed",
        ]
    )
    rows: list[list[Any]] = field(default_factory=list)
    failed_controls: list[str] = field(default_factory=list)
    blocks: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)


def calibration_tables(section: dict[str, Any]) -> CalibrationTables:
    """Read a calibration section of the report into table rows (plain values, unescaped)."""
    out = CalibrationTables()
    survivors, equivalents, variants, operators = [], [], [], []
    for r in section["runs"]:
        c = r["calibration"]
        pc = c["positive_controls"]
        out.rows.append(
            [
                r["run"],
                r["status"],
                c["kill_rate"],
                *(c["counts"][s] for s in STATUSES),
                c["applicable"],
                f"{pc['passed']}/{pc['total']}",
                c["passed"],
            ]
        )
        survivors += [[r["run"], m["case"], m["mutant"], m["operator"]] for m in c["survivors"]]
        equivalents += [
            [r["run"], m["case"], m["mutant"], m["operator"], m["review"]] for m in c["equivalents"]
        ]
        variants += [
            [r["run"], v["id"], v["stale"], v["tables_digest"], v["gold_digest"]]
            for v in c["variants"]
        ]
        operators += [
            [r["run"], name, *(counts[s] for s in STATUSES)]
            for name, counts in c["operators"].items()
        ]
        out.failed_controls += [
            f"FAILED positive control in {r['run']}: case {f['case']} "
            f"alternative_sql[{f['index']}] was rejected by the oracle."
            for f in pc["failed"]
        ]
    out.blocks = [
        (
            "Survivors (planted errors the oracle did not notice: review each)",
            ["run", "case", "mutant", "operator"],
            survivors,
        ),
        (
            "Reviewed equivalent mutants",
            ["run", "case", "mutant", "operator", "review"],
            equivalents,
        ),
        (
            "Variant databases",
            ["run", "variant", "stale", "tables digest", "gold digest"],
            variants,
        ),
        ("Mutants per operator", ["run", "operator", *STATUSES], operators),
    ]
    return out


FAIRNESS_HEAD = [
    "run",
    "harness",
    "response",
    "single call",
    "tools",
    "retries",
    "prompt contract",
    "provider",
    "auth",
    "model",
    "parameters",
    "invocation coverage",
]


def fairness_rows(fairness: dict[str, Any]) -> list[list[Any]]:
    """One row per run: its recorded controls, then its disclosed variables."""
    rows = []
    for run in fairness["runs"]:
        c, d = fairness["controls"][run], fairness["disclosed"][run]
        params = ", ".join(f"{k}={v}" for k, v in d["parameters"].items())
        rows.append(
            [
                run,
                c["harness_kind"],
                c["response_mode"],
                c["single_call"],
                c["tools"],
                c["retries"],
                c["prompt_contract_digest"],
                d["provider"],
                d["auth_mode"],
                d["model"],
                params,
                fairness["invocation_coverage"][run],
            ]
        )
    return rows


def cost_per_correct(efficiency: dict[str, Any]) -> Any:
    """Cost per correct attempt as shown: a figure that is not the provider's bill is
    labelled as an estimate."""
    cost = efficiency["cost"]["per_correct"]
    if cost is not None and efficiency["cost"]["kind"] != "billed":
        return f"{cost} (estimate)"
    return cost
