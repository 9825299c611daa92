"""The 100-point score of one attempt, by a named scorer version (2.0.0 today).

Pure: it reads the attempt's evidence (CaseSpec, GoldResult, OutputParsed,
SqlGuarded, SqlExecuted or ProviderFailed) and returns the ScoreComputed
fields. The runner adds the envelope, case, attempt and evidence digests.

Items are exact fractions while they are computed; the total is their exact
sum rounded half-up to 2 places (``Decimal``, never ``float`` ``round``). For
the event each item is shown rounded half-up to 10 places, trailing zeros
dropped (``Decimal('12.8571428571')``, ``Decimal('5')``), so the shown items
may differ from the total by rounding only. docs/scoring.md has the table,
the boundary rules and worked examples.

Caps (``ledger.harness.limits``): an attempt stopped by a cap is scored in
its stage like any other failure of that stage, and ``failure_detail`` names
the cap: ``output_too_large`` (protocol: 0 points), ``sql_too_large`` and
``too_complex`` (guard: protocol points only), ``result_too_large``
(execution: protocol, guard and AST points). A result with truncated cells is
scored like a result with truncated rows. Evidence recorded before caps existed
has none of these markers, so its scores are unchanged.

Errors: a ScoringError is a named refusal (the evidence does not fit together,
a malformed result, an unknown AST rule); any other exception is a bug and
propagates unchanged, so it can never be recorded as a score or a cancellation.

Versions: ``SCORERS`` maps a version string to a :class:`Scorer`. A later
version subclasses it and overrides the one method whose rule changes; a
rescore appends new ScoreComputed events under the new version and leaves the
old ones alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ledger.engines.reading import Readings
from ledger.errors import BankError, LedgerError, UsageError, broken
from ledger.events import (
    AstRule,
    CaseSpec,
    GoldResult,
    OutputParsed,
    ProviderFailed,
    ScoreItems,
    SqlExecuted,
    SqlGuarded,
)
from ledger.harness.ast_rules import check_rules, structural_match
from ledger.harness.compare import (
    Comparison,
    MalformedResult,
    compare,
    fraction_to_decimal,
    rounded,
)
from ledger.harness.protocol import OUTPUT_TOO_LARGE

__all__ = [
    "ITEM_PLACES",
    "SCORERS",
    "SCORER_VERSION",
    "Points",
    "Scorer",
    "ScoringError",
    "get_scorer",
    "score_attempt",
]

SCORER_VERSION = "2.0.0"
ITEM_PLACES = Decimal("1e-10")
TOTAL_PLACES = Decimal("0.01")
EXECUTION_ERRORS = frozenset({"sql_runtime", "timeout", "memory", "result_too_large"})
# Guard violations of a cap (ledger.harness.limits.LIMIT_CHECKS), in the order they win.
_GUARD_LIMITS = ("sql_too_large", "too_complex")


class ScoringError(LedgerError):
    """The evidence cannot be scored (it does not fit together, a malformed result, an
    unknown AST rule): no score is recorded; the runner cancels the attempt as an
    infrastructure failure with this message."""


@dataclass(frozen=True)
class Points:
    """Points per item (DESIGN.md table); they sum to 100."""

    protocol: int = 5
    guard: int = 5
    executed: int = 10
    column_count: int = 5
    column_names: int = 5
    rows: int = 45
    order: int = 10
    ast: int = 15


_ZERO_ITEMS = dict.fromkeys(
    ("protocol", "guard", "executed", "column_count", "column_names", "rows", "order", "ast"),
    Fraction(0),
)


class Scorer:
    """Scorer 2.0.0. Subclass and override one method for a later version."""

    version = "2.0.0"
    points = Points()

    def score(
        self,
        *,
        case: CaseSpec,
        gold: GoldResult,
        parsed: OutputParsed | None,
        guarded: SqlGuarded | None,
        executed: SqlExecuted | None,
        provider_failure: ProviderFailed | None,
        reference_sql: str | None,
        dialect: str = "duckdb",
        readings: Readings | None = None,
    ) -> dict[str, Any]:
        """The ScoreComputed fields (all but envelope, case_id, attempt and evidence).

        ``dialect``: the sqlglot dialect of the bank's engine, for the AST rules and
        the structural match; ``readings``: those two already computed by a SQL worker.
        """
        _check_evidence(case, gold, parsed, guarded, executed, provider_failure)
        items = dict(_ZERO_ITEMS)
        fields: dict[str, Any] = {
            "ast_rules": (),
            "result_correct": None,
            "format_ok": False,
            "sql_structural_match": None,
        }
        comparison: Comparison | None = None
        truncated = False
        detail: str | None = None
        if provider_failure is not None:
            failure = self.provider_failure_kind(provider_failure)
        elif parsed is None or parsed.error is not None or not parsed.sql:
            failure = "protocol"  # an output_contract_error extracts no SQL: every item 0
            if parsed is not None and (parsed.error or "").startswith(OUTPUT_TOO_LARGE):
                detail = "output_too_large"
        else:
            if guarded is None:  # _check_evidence
                raise broken("SQL to score without a SqlGuarded")
            sql = parsed.sql
            strict = parsed.protocol_strict
            items["protocol"] = Fraction(self.points.protocol if strict else 0)
            detail = _guard_limit(guarded)
            try:
                # SQL refused by a cap is never handed to sqlglot.
                if reference_sql is not None and detail is None:
                    fields["sql_structural_match"] = _match(readings, sql, reference_sql, dialect)
                rules = _rules(readings, sql, case.required_ast, dialect) if guarded.passed else ()
            except RecursionError:
                fields["sql_structural_match"] = None
                detail, rules = "too_complex", ()
            except BankError as exc:
                raise ScoringError(f"case {case.id}: {exc.message}") from exc
            # The worker's own DuckDB parse check refused it: a guard failure, nothing ran.
            refused = executed is not None and executed.error_kind == "refused"
            if not guarded.passed or detail is not None or refused:
                failure = "guard"
            else:
                items["guard"] = Fraction(self.points.guard)
                fields["ast_rules"] = rules
                items["ast"] = self.ast_points(rules)
                if executed is None:  # _check_evidence
                    raise broken("guarded SQL to score without a SqlExecuted")
                if not executed.ok:
                    failure = "execution"
                    if executed.error_kind == "result_too_large":
                        detail = "result_too_large"
                else:
                    failure = "none"
                    # Cells cut to the cell cap count as truncation, as rows beyond max_rows do.
                    truncated = executed.truncated or bool(executed.cells_truncated)
                    comparison = self.compare(case, gold, executed)
                    self.result_items(items, comparison, truncated)
                    fields["result_correct"] = self.result_correct(comparison, truncated)
                    fields["format_ok"] = bool(
                        strict and items["column_names"] and items["column_count"]
                    )
        fields.update(_comparison_fields(comparison, gold, truncated))
        total = sum(items.values(), Fraction(0))
        if not 0 <= total <= 100:
            raise ScoringError(f"case {case.id}: total {total} outside [0, 100]")
        out = {
            "scorer_version": self.version,
            "gold_digest": gold.digest,
            **fields,
            "items": ScoreItems(**{k: _item(v) for k, v in items.items()}),
            "total": fraction_to_decimal(total, TOTAL_PLACES),
            "failure_kind": failure,
        }
        if detail is not None:  # absent otherwise: scores without a cap keep their bytes
            out["failure_detail"] = detail
        return out

    def provider_failure_kind(self, failure: ProviderFailed) -> str:
        """policy_refusal when the provider refused or filtered, else provider."""
        return "policy_refusal" if failure.kind == "policy_refusal" else "provider"

    def ast_points(self, rules: tuple[AstRule, ...]) -> Fraction:
        """All points when the case has no rules, else the share passed."""
        if not rules:
            return Fraction(self.points.ast)
        return Fraction(self.points.ast * sum(r.passed for r in rules), len(rules))

    def compare(self, case: CaseSpec, gold: GoldResult, executed: SqlExecuted) -> Comparison:
        """Compare the executed result (the rows read) with gold under the case's contract.

        The contract includes the case's row contract (``CaseSpec.rows``): under
        ``set`` the counts are of distinct rows, and the same 2.0.0 formula applies
        (docs/scoring.md "Row contract"); a case without it compares as before.

        Raises:
            ScoringError: the recorded result or gold is malformed.
        """
        try:
            return compare(
                gold.columns,
                gold.rows,
                executed.columns,
                executed.rows,
                abs_tolerance=case.abs_tolerance,
                rel_tolerance=case.rel_tolerance,
                order_significant=case.row_order_significant,
                rows=case.row_contract,
            )
        except MalformedResult as exc:
            raise ScoringError(f"case {case.id}: cannot compare: {exc}") from exc

    def result_items(self, items: dict[str, Fraction], c: Comparison, truncated: bool) -> None:
        """Fill the executed, count, names, rows and order items of an executed answer."""
        p = self.points
        items["executed"] = Fraction(p.executed)
        items["column_count"] = Fraction(p.column_count if c.column_count_ok else 0)
        items["column_names"] = Fraction(p.column_names if c.column_names_ok else 0)
        items["rows"] = p.rows * c.f1_exact
        items["order"] = Fraction(p.order if c.order_ok and not truncated else 0)

    def result_correct(self, c: Comparison, truncated: bool) -> bool:
        """Count, rows (F1 = 1) and order pass, not truncated, not non-finite."""
        return (
            c.column_count_ok
            and c.f1_exact == 1
            and c.order_ok
            and not truncated
            and not c.non_finite
            and c.mapped
        )


def _match(readings: Readings | None, sql: str, reference_sql: str, dialect: str) -> bool:
    """The structural match a SQL worker read (``readings``), else computed here."""
    found = None if readings is None else readings.match_for(sql, reference_sql, dialect)
    return structural_match(sql, reference_sql, dialect) if found is None else found


def _rules(
    readings: Readings | None, sql: str, rules: Sequence[str], dialect: str
) -> tuple[AstRule, ...]:
    """The AST rules a SQL worker read (``readings``), else checked here."""
    found = None if readings is None else readings.rules_for(sql, rules, dialect)
    return check_rules(sql, rules, dialect) if found is None else found


def _guard_limit(guarded: SqlGuarded) -> str | None:
    """The cap that rejected the SQL (a guard violation named after it), if any."""
    checks = {v.check for v in guarded.violations}
    return next((c for c in _GUARD_LIMITS if c in checks), None)


def _item(value: Fraction) -> Decimal:
    return rounded(value, ITEM_PLACES)


def _comparison_fields(c: Comparison | None, gold: GoldResult, truncated: bool) -> dict[str, Any]:
    if c is None:
        return {
            "alignment": "not_executed",
            "column_mapping": None,
            "matched": 0,
            "expected_rows": len(gold.rows),
            "actual_rows": 0,
            "precision": Decimal(0),
            "recall": Decimal(0),
            "f1": Decimal(0),
            "order_ok": False,
            "non_finite": False,
        }
    return {
        "alignment": c.alignment,
        "column_mapping": c.column_mapping,
        "matched": c.matched,
        "expected_rows": c.expected_rows,
        "actual_rows": c.actual_rows,
        "precision": c.precision,
        "recall": c.recall,
        "f1": c.f1,
        "order_ok": c.order_ok and not truncated,
        "non_finite": c.non_finite,
    }


def _check_evidence(
    case: CaseSpec,
    gold: GoldResult,
    parsed: OutputParsed | None,
    guarded: SqlGuarded | None,
    executed: SqlExecuted | None,
    provider_failure: ProviderFailed | None,
) -> None:
    """Refuse evidence that does not fit together (a harness fault, never a model's)."""
    problems = []
    if gold.case_id != case.id:
        problems.append(f"gold is for case {gold.case_id}")
    for name, event in (
        ("parsed", parsed),
        ("guarded", guarded),
        ("executed", executed),
        ("provider_failure", provider_failure),
    ):
        if event is not None and event.case_id != case.id:
            problems.append(f"{name} is for case {event.case_id}")
    has_sql = parsed is not None and parsed.error is None and bool(parsed.sql)
    if provider_failure is not None:
        if parsed is not None or guarded is not None or executed is not None:
            problems.append("a provider failure cannot have parse, guard or execution evidence")
    elif parsed is None:
        problems.append("no OutputParsed and no ProviderFailed")
    elif not has_sql:
        if guarded is not None or executed is not None:
            problems.append("no SQL was extracted, yet there is guard or execution evidence")
    elif guarded is None:
        problems.append("SQL was extracted but has no guard verdict")
    elif not guarded.passed and executed is not None:
        problems.append("the guard rejected the SQL, yet it was executed")
    elif guarded.passed and executed is None:
        problems.append("the guard passed the SQL but there is no execution")
    if executed is not None:
        if executed.ok != (executed.error_kind is None):
            problems.append(f"execution ok={executed.ok} with error_kind {executed.error_kind}")
        elif executed.error_kind == "worker_crash":
            problems.append("a worker crash is an infrastructure cancellation, never a score")
        elif executed.error_kind not in (None, "refused", *EXECUTION_ERRORS):
            problems.append(f"unknown execution error_kind {executed.error_kind!r}")
    if problems:
        raise ScoringError(f"case {case.id}: cannot score: " + "; ".join(problems))


SCORERS: dict[str, Scorer] = {Scorer.version: Scorer()}


def get_scorer(version: str) -> Scorer:
    """The scorer registered under ``version``.

    Raises:
        UsageError: no such version.
    """
    try:
        return SCORERS[version]
    except KeyError:
        raise UsageError(
            f"unknown scorer version {version!r}", hint=f"known versions: {sorted(SCORERS)}"
        ) from None


def score_attempt(
    *,
    case: CaseSpec,
    gold: GoldResult,
    parsed: OutputParsed | None,
    guarded: SqlGuarded | None,
    executed: SqlExecuted | None,
    provider_failure: ProviderFailed | None,
    reference_sql: str | None,
    version: str = SCORER_VERSION,
    dialect: str = "duckdb",
    readings: Readings | None = None,
) -> dict[str, Any]:
    """Score one attempt; the result unpacks into ScoreComputed next to the envelope.

    ``readings``: the AST rules and structural match of the SQL already read by a SQL
    worker (``ledger.harness.reading``); the same values the scorer would compute.

    Raises:
        UsageError: unknown scorer version.
        ScoringError: the evidence cannot be scored (a named refusal); the runner
            cancels the attempt (reason infrastructure) and records the message.
        Exception: anything else is a caseledger bug and propagates unchanged
            (the runner, rescore and baselines then record nothing for the attempt).
    """
    scorer = get_scorer(version)
    return scorer.score(
        case=case,
        gold=gold,
        parsed=parsed,
        guarded=guarded,
        executed=executed,
        provider_failure=provider_failure,
        reference_sql=reference_sql,
        dialect=dialect,
        readings=readings,
    )
