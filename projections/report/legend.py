"""How to read a report: the column definitions and the how-to-read notes of a report.

Shared by the Markdown and HTML renderers, as ``tables.py``: every column's meaning
(one definition per metric, ``projections.metrics``) and the notes under a report.
"""

from __future__ import annotations

from projections.aggregates import DIMENSIONS
from projections.metrics import by_name
from projections.quality import FAILURE_CATEGORIES
from projections.report.build import HOW_TO_READ
from projections.report.schema import Report
from projections.report.tables import model_runs

__all__ = [
    "column_definitions",
    "how_to_read",
]


def _metric(name: str) -> str:
    return by_name(name).description


#: One-line definitions of the columns of the tables above, by column head: the HTML shows
#: them on hover and under each table. Gateable metrics take the text of projections/metrics.py.
DEFINITIONS: dict[str, str] = {
    "rank": "position among the ranked runs of the section (by result-correct rate); - when "
    "not ranked",
    "model [identity from]": "the model requested, the ids the provider resolved (or a "
    "recording claims), and where the identity comes from",
    "status": "how the run ended (completed, interrupted, failed, ...)",
    "planned": "planned attempts: every case x attempts per case; the denominator of every rate",
    "result-correct": _metric("result_correct_rate"),
    "correct/wrong/unknown": "attempts whose result matched gold / executed but did not / "
    "neither (nothing executed, cancelled or unscored)",
    "format-ok": _metric("format_ok_rate"),
    "SQL exec ok": _metric("sql_exec_success_rate"),
    "coverage": "attempts scored under the viewed scorer / planned attempts",
    "score (auxiliary)": _metric("model_score") + ", 0-100",
    "variant flags (diagnostic)": "flags raised on variant databases; never change a score",
    "tokens/correct": _metric("tokens_per_correct"),
    "cost/correct": _metric("cost_per_correct") + "; not billed = an estimate",
    "gen P95 ms": _metric("generation_p95_ms"),
    "correct (C)": "result-correct attempts (the C of every per-correct figure)",
    "tokens total": "input + cache + output tokens over the attempts that report them",
    "tokens coverage": "attempts that report tokens / planned attempts",
    "cost total": "the provider's bill where reported, else the price-snapshot estimate",
    "cost kind": "billed (the provider's bill), estimate (price snapshot) or mixed (an estimate)",
    "cost coverage": "attempts that have a cost / planned attempts",
    "gen ms/correct": "generation time over all attempts / result-correct attempts, ms",
    "gen coverage": "attempts with a generation time / planned attempts",
    "SQL exec P95 ms": _metric("sql_exec_p95_ms"),
    **{k: f"planned attempts whose score names failure kind {k}" for k in FAILURE_CATEGORIES},
    "cancelled": "cancelled attempts by reason",
    "unscored": "planned attempts with no terminal event",
    "checked": "attempts run on the variant databases / planned attempts",
    "variant_mismatch": "on a variant database the answer is not result-correct against "
    "that variant's gold",
    "scope_leak": "a variant that only changes rows outside the question's scope moved the answer",
    "any flag": "attempts with at least one variant flag",
    **{
        d: f"weighted score over the {d} cases, 0-100 (- when the bank has none)"
        for d in DIMENSIONS
    },
    "unassigned": "weighted score over the cases with no dimension, 0-100",
    **{
        d: f"weighted score over the {d} cases, 0-100 (- when the bank has none)"
        for d in ("easy", "medium", "hard")
    },
    "no difficulty": "weighted score over the cases with no difficulty, 0-100",
    "weight": "the case's weight in the weighted scores",
    "mean / sd / nonzero": "mean attempt total, its population standard deviation, and the "
    "share of attempts scoring above 0 (partial credit is not success)",
    "mean / sd / nonzero / totals": "mean attempt total, its population standard deviation, "
    "the share of attempts scoring above 0, then each attempt's total",
    "outcome": "what the attempt's last event says (scored, cancelled, ...)",
    "total": "the attempt's score, 0-100",
    "failure": "the scored failure kind, or why the attempt was cancelled",
    "missing rows": "gold rows the answer lacks",
    "extra rows": "answer rows gold does not have",
    "guard": "the SQL guard's verdict (passed or rejected)",
    # Issue 32 (caseledger-report/3; docs/statistics.md).
    "rank group": "runs whose paired difference is not significant share a group (1, 2=, 2=)",
    "cases": "cases of the run (the unit of every standard error)",
    "result-correct rate": "mean over cases of result-correct attempts / planned attempts",
    "rate SE": "sd of the per-case rates (ddof=1) / sqrt(cases)",
    "rate 95% CI": "rate +- 1.96 SE, clipped to [0, 1]",
    "score": _metric("model_score") + ", 0-100",
    "score SE": "standard error of the weighted mean of the case means",
    "score 95% CI": "score +- 1.96 SE, clipped to [0, 100]",
    "difference A-B": "mean over the paired cases of A's case rate - B's",
    "SE": "sd of the paired differences (ddof=1) / sqrt(cases)",
    "95% CI": "difference +- 1.96 SE",
    "p": "two-sided p-value: exact sign-flip test up to 20 differing cases, else normal",
    "significant": "p (as shown) below 0.05",
    "A better": "cases where A's rate is higher (one attempt: A right, B wrong)",
    "B better": "cases where B's rate is higher (one attempt: B right, A wrong)",
    "MDD": "minimum detectable difference at 80% power, alpha 0.05: 2.8016 SE",
}

#: The same head means something else in these tables.
_DIAGNOSTICS_DEFINITIONS = {"coverage": "attempts checked on variants / planned attempts"}

#: The Failure table's columns (issue 35: its ``guard`` column counts failures of kind
#: guard; it is not the CaseRuns table's guard verdict). docs/scoring.md "Boundary rules".
FAILURE_DEFINITIONS = {
    "policy_refusal": "planned attempts the provider refused to answer (a refusal or content "
    "filter; failure kind policy_refusal)",
    "protocol": "planned attempts whose output broke the answer contract or held no SQL "
    "(failure kind protocol)",
    "guard": "planned attempts whose SQL the guard refused, so it never ran (failure kind guard)",
    "execution": "planned attempts whose SQL failed when it ran: an error, a timeout, the "
    "memory or result cap (failure kind execution)",
    "provider": "planned attempts whose model call failed: timeout, rate limit, server or "
    "transport error (failure kind provider)",
    "infrastructure": "planned attempts cancelled because the harness failed (a SQL worker "
    "crashed twice)",
}


def column_definitions(
    head: list[str], diagnostics: bool = False, failures: bool = False
) -> list[tuple[str, str]]:
    """The defined columns of a table head, each with its one-line definition (a per-run
    column ``<run> mean / sd / nonzero`` is defined by its suffix). ``failures``: the
    Failure table's definitions (:data:`FAILURE_DEFINITIONS`) of its failure kinds."""
    out = []
    for h in head:
        text = (
            (_DIAGNOSTICS_DEFINITIONS.get(h) if diagnostics else None)
            or (FAILURE_DEFINITIONS.get(h) if failures else None)
            or DEFINITIONS.get(h)
        )
        if text is None:
            for suffix in ("mean / sd / nonzero / totals", "mean / sd / nonzero"):
                if h.endswith(suffix):
                    h, text = suffix, DEFINITIONS[suffix]
                    break
        if text is not None and (h, text) not in out:
            out.append((h, text))
    return out


def how_to_read(report: Report) -> list[str]:
    """The report's reading notes, with the fixed first note (three attempts per case)
    replaced by the attempts per case the runs of this report actually planned."""
    by_count: dict[int, list[str]] = {}
    for section in report.sections:
        for r in model_runs(section):
            by_count.setdefault(r.attempts_per_case, []).append(r.run)
    if not by_count:
        return list(report.how_to_read)
    if len(by_count) == 1:
        ((n, _),) = by_count.items()
        said = f"Every run here made {n} attempt{'s' if n != 1 else ''} per case"
    else:
        said = "Attempts per case here: " + "; ".join(
            f"{n} for {', '.join(runs)}" for n, runs in sorted(by_count.items(), reverse=True)
        )
    most = max(by_count)
    tail = (
        ": repeated attempts show spread, not statistical significance"
        if most > 1
        else ": one attempt shows no spread at all"
    )
    note = said + tail + "; a difference between two models can be noise."
    return [note if item == HOW_TO_READ[0] else item for item in report.how_to_read]
