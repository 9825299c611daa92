"""The regression gate: compare a baseline scorecard with a current one, metric by metric.

A *scorecard* is what the gate needs of one run, taken from a canonical report
(:func:`scorecard`): the bank hash, scorer version, completeness, the invocation
controls actually recorded per attempt, the denominators and every metric of
``projections/metrics.py`` (the only place a metric is defined). A frozen
baseline pins the same dict on disk.

:func:`judge` decides, in this order (DESIGN.md "Regression gate" and its fine print):

1. comparability: both runs complete (every planned attempt has a terminal
   event and none was cancelled), the same bank hash, the same scorer major,
   equal invocation controls with full evidence on both sides (missing evidence
   is never equal), and ``min_n`` judged attempts on each side. Any problem
   makes the verdict ``could_not_judge`` (exit 2), which wins over a regression;
2. per metric: ``pass`` or ``regression`` (worse than the tolerance in the bad
   direction, boundary included in pass), ``incomparable`` (null on a side,
   coverage incomplete on a side, or no definition), ``unpaired`` (present on
   one side only) or ``ignored``. Only a ``regression`` of a *gating* metric
   blocks (exit 1); a timing metric (wall time) gates only when the
   configuration sets ``gate_timing``, otherwise its regression is a warning;
3. a judged-count drift above ``drift_warn`` (20% by default) warns, never blocks.

Pure: no I/O, no clock; every number is a Decimal and is shown as a decimal string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import msgspec

from ledger.errors import UsageError
from ledger.events import Invocation
from projections import metrics
from projections.fairness import CONTROLS
from projections.gate_text import render_text
from projections.metrics import MISSING, Tolerance, field_at, parse_tolerance
from projections.numbers import show
from projections.report.schema import CONTRACT as REPORT_CONTRACT
from projections.report.schema import CONTRACT_V2 as REPORT_CONTRACT_V2
from projections.report.schema import CONTRACT_V3 as REPORT_CONTRACT_V3
from projections.report.schema import GATE_CONTRACT as CONTRACT
from projections.report.schema import (
    SCORECARD_CONTRACT,
    Completeness,
    Drift,
    GateSide,
    GateVerdict,
    Interval,
    InvocationControls,
    MetricCoverage,
    MetricRow,
    PairedComparison,
    Report,
    ReportV2,
    Scorecard,
    ScorecardBank,
)
from projections.report.significance import compare_entries, run_statistics
from projections.statistics import ALPHA

__all__ = [
    "CONFIG_KEYS",
    "CONTRACT",
    "EXIT_CODES",
    "REPORT_CONTRACT",
    "REPORT_CONTRACTS",
    "REPORT_CONTRACT_V2",
    "SCORECARD_CONTRACT",
    "GateConfig",
    "GateOptions",
    "config_from_mapping",
    "judge",
    "judge_metric",
    "read_scorecard",
    "render_text",
    "scorecard",
]

EXIT_CODES = {"pass": 0, "regression": 1, "could_not_judge": 2}
DEFAULT_DRIFT_WARN = Decimal("0.20")
#: The report contracts a scorecard is read from: the run entries and each CaseRun's
#: ``response.invocation`` (all it reads) are the same in both (docs/reports.md "Versions").
REPORT_CONTRACTS = (REPORT_CONTRACT, REPORT_CONTRACT_V2, REPORT_CONTRACT_V3)
CONFIG_KEYS = (
    "enabled",
    "tolerances",
    "ignore",
    "min_n",
    "drift_warn",
    "gate_timing",
    "gate_significance",
    "alpha",
)


# ----------------------------------------------------------------- scorecard


def _entries(report: Any) -> list[tuple[Any, Any]]:
    sections = field_at(report, ("sections",))
    out = []
    for section in [] if sections is MISSING else sections:
        runs = field_at(section, ("runs",))
        out += [(section, e) for e in ([] if runs is MISSING else runs)]
    return out


def _or_none(value: Any) -> Any:
    return None if value is MISSING else value


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def _sorted_values(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return sorted(seen, key=lambda v: (type(v).__name__, repr(v)))


def scorecard(
    report: Report | ReportV2 | Mapping[str, Any],
    run: str | None = None,
    *,
    include_withdrawn: bool = False,
) -> Scorecard:
    """The scorecard (:class:`~projections.report.schema.Scorecard`) of one run of a
    ``caseledger-report/1``, ``/2`` or ``/3`` report (:func:`projections.report.jsonio.plain`
    encodes it).

    ``report`` is a built :class:`~projections.report.schema.Report` or the same document
    read from a report file (read by the same schema field names; a field a file lacks is
    absent, so a metric missing on one side is ``unpaired``). ``run`` may be omitted when
    the report holds exactly one run. A withdrawn run (a report built with
    ``--include-withdrawn``) is refused unless ``include_withdrawn``.

    Raises:
        UsageError: not a report of this contract, the run is missing or ambiguous, or
            it is withdrawn.
    """
    contract = _or_none(field_at(report, ("contract",)))
    if contract not in REPORT_CONTRACTS:
        raise UsageError(
            f"not a {' or '.join(REPORT_CONTRACTS)} report (contract is {contract!r})",
            hint="build one with `caseledger report --format json`",
        )
    found = _entries(report)
    names = sorted(field_at(e, ("run",)) for _, e in found)
    if run is None:
        if len(found) != 1:
            raise UsageError(
                f"the report holds {len(found)} runs ({', '.join(names) or 'none'}); name one",
                hint="write REPORT:RUN",
            )
        section, entry = found[0]
    else:
        match = [(s, e) for s, e in found if field_at(e, ("run",)) == run]
        if not match:
            raise UsageError(f"no run {run!r} in the report (runs: {', '.join(names) or 'none'})")
        section, entry = match[0]
    run_id = field_at(entry, ("run",))
    withdrawn = _or_none(field_at(entry, ("withdrawn",)))
    if withdrawn is not None and not include_withdrawn:
        raise UsageError(
            f"run {run_id} is withdrawn (reason: {field_at(withdrawn, ('reason',))}); "
            "the gate leaves withdrawn runs out",
            hint="add --include-withdrawn to judge it anyway",
        )
    caseruns = _or_none(field_at(section, ("caseruns",))) or []
    invocations = [
        field_at(c, ("response", "invocation")) for c in caseruns if field_at(c, ("run",)) == run_id
    ]
    recorded = [i for i in invocations if isinstance(i, Mapping | Invocation)]
    planned = _or_none(field_at(entry, ("quality", "total"))) or 0
    cancelled = dict(sorted((_or_none(field_at(entry, ("quality", "cancelled"))) or {}).items()))
    unscored = _or_none(field_at(entry, ("quality", "unscored"))) or 0
    coverage = {
        name: MetricCoverage(covered=have, planned=of)
        for name, (have, of) in metrics.read_coverage(entry).items()
    }
    extra: dict[str, Any] = {"coverage": coverage} if coverage else {}
    card = Scorecard(
        **extra,
        contract=SCORECARD_CONTRACT,
        run=run_id,
        run_kind=_or_none(field_at(entry, ("run_kind",))),
        profile=_or_none(field_at(entry, ("profile",))),
        bank=ScorecardBank(
            id=field_at(section, ("bank", "id")),
            version=field_at(section, ("bank", "version")),
            hash=field_at(section, ("bank", "hash")),
            engine=_engine_name(field_at(section, ("bank", "engine", "name"))),
        ),
        scorer_version=field_at(entry, ("scorer_version",)),
        scorer_major=field_at(section, ("scorer_major",)),
        attempts_per_case=_or_none(field_at(entry, ("attempts_per_case",))),
        completeness=Completeness(
            status=_or_none(field_at(entry, ("status",))),
            planned=planned,
            unscored=unscored,
            cancelled=cancelled,
            complete=planned > 0 and unscored == 0 and not cancelled,
        ),
        controls=InvocationControls(
            attempts=planned,
            with_invocation=len(recorded),
            values={
                c: _sorted_values(_or_none(field_at(i, (c,))) for i in recorded) for c in CONTROLS
            },
        ),
        denominators=metrics.read_denominators(entry),
        metrics={m.name: _text(m.read(entry)) for m in metrics.METRICS if m.present(entry)},
    )
    return card


def read_scorecard(where: str, card: Scorecard | Mapping[str, Any]) -> Scorecard:
    """A scorecard read into the schema (a pinned file is checked field by field);
    ``where`` names it in the error (a side of the gate, or a file).

    Raises:
        UsageError: not a scorecard of this contract (names the field that does not match).
    """
    if isinstance(card, Scorecard):
        return card
    if not isinstance(card, Mapping) or card.get("contract") != SCORECARD_CONTRACT:
        raise UsageError(f"{where} is not a {SCORECARD_CONTRACT} scorecard")
    try:
        return msgspec.convert(card, Scorecard)
    except msgspec.ValidationError as exc:
        raise UsageError(
            f"{where} scorecard does not match {SCORECARD_CONTRACT}: {exc}",
            hint="re-pin it with `caseledger baseline pin` (docs/gate.md)",
        ) from None


# ----------------------------------------------------------------- options and config


@dataclass(frozen=True)
class GateOptions:
    """Tolerance overrides (exact names or ``prefix.*``), ignored metrics, min-n, drift,
    and whether timing metrics gate (``gate_timing``; advisory by default)."""

    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    ignore: frozenset[str] = frozenset()
    min_n: int | None = None
    drift_warn: Decimal = DEFAULT_DRIFT_WARN
    gate_timing: bool = False
    #: Issue 32: a quality metric's regression blocks only when the paired result-correct
    #: difference is significant at ``alpha`` too (docs/gate.md "Significance").
    significance: bool = False
    alpha: Decimal = ALPHA

    def tolerance(self, name: str, default: Tolerance) -> Tolerance:
        """A metric's tolerance: exact override, then the longest ``prefix.*``, else default."""
        if name in self.tolerances:
            return self.tolerances[name]
        best = None
        for key in self.tolerances:
            wild = key.endswith(".*") and name.startswith(key[:-1])
            if wild and (best is None or len(key) > len(best)):
                best = key
        return self.tolerances[best] if best is not None else default

    def ignored(self, name: str) -> bool:
        """Whether the metric is ignored (exact name or ``prefix.*``)."""
        return any(
            name == key or (key.endswith(".*") and name.startswith(key[:-1])) for key in self.ignore
        )


def check_metric_names(names: Iterable[str], where: str) -> None:
    """Refuse a name (or ``prefix.*``) that matches no metric of projections/metrics.py."""
    known = [m.name for m in metrics.METRICS]
    for name in names:
        hit = any(k.startswith(name[:-1]) for k in known) if name.endswith(".*") else name in known
        if not hit:
            raise UsageError(
                f"{where}: unknown metric {name!r}",
                hint="known metrics: " + ", ".join(known),
            )


@dataclass(frozen=True)
class GateConfig:
    """The ``gate`` section of the project configuration, validated."""

    enabled: bool = True
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    ignore: tuple[str, ...] = ()
    min_n: int | None = None
    drift_warn: Decimal = DEFAULT_DRIFT_WARN
    source: str | None = None
    gate_timing: bool = False
    gate_significance: bool = False
    alpha: Decimal = ALPHA


def _decimal_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(f"expected a number or a string, got {value!r}")
    return str(value)


def config_from_mapping(raw: Mapping[str, Any], source: str) -> GateConfig:
    """Validate a ``gate`` mapping (from pyproject.toml or caseledger.yaml) read from ``source``.

    Raises:
        UsageError: an unknown key, a wrong type, an unknown metric or a bad tolerance.
    """

    def bad(message: str) -> UsageError:
        return UsageError(
            f"{source}: gate configuration: {message}",
            hint="keys: " + ", ".join(CONFIG_KEYS) + " (see docs/gate.md)",
        )

    if not isinstance(raw, Mapping):
        raise bad("must be a table / mapping")
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise bad(f"enabled must be true or false, got {enabled!r}")
    tolerances: dict[str, Tolerance] = {}
    tol_raw = raw.get("tolerances", {})
    if not isinstance(tol_raw, Mapping):
        raise bad("tolerances must map metric names to tolerances")
    for name, value in tol_raw.items():
        try:
            tolerances[str(name)] = parse_tolerance(_decimal_text(value))
        except ValueError as exc:
            raise bad(f"tolerance of {name}: {exc}") from None
    ignore = raw.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(i, str) for i in ignore):
        raise bad("ignore must be a list of metric names")
    min_n = raw.get("min_n")
    if min_n is not None and (isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 0):
        raise bad(f"min_n must be an integer >= 0, got {min_n!r}")
    drift = raw.get("drift_warn", DEFAULT_DRIFT_WARN)
    try:
        drift_warn = Decimal(_decimal_text(drift))
    except (ValueError, ArithmeticError):
        raise bad(f"drift_warn must be a share such as 0.20, got {drift!r}") from None
    if not drift_warn.is_finite() or drift_warn < 0:
        raise bad(f"drift_warn must be a share >= 0, got {drift!r}")
    gate_timing = raw.get("gate_timing", False)
    if not isinstance(gate_timing, bool):
        raise bad(f"gate_timing must be true or false, got {gate_timing!r}")
    significance = raw.get("gate_significance", False)
    if not isinstance(significance, bool):
        raise bad(f"gate_significance must be true or false, got {significance!r}")
    alpha_raw = raw.get("alpha", ALPHA)
    try:
        alpha = parse_alpha(_decimal_text(alpha_raw))
    except ValueError as exc:
        raise bad(str(exc)) from None
    check_metric_names([*tolerances, *ignore], f"{source}: gate configuration")
    return GateConfig(
        enabled,
        tolerances,
        tuple(ignore),
        min_n,
        drift_warn,
        source,
        gate_timing,
        significance,
        alpha,
    )


def parse_alpha(text: str) -> Decimal:
    """A significance level: a decimal strictly between 0 and 1. Raises ValueError.

    >>> parse_alpha("0.01")
    Decimal('0.01')
    """
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise ValueError(f"alpha must be a share such as 0.05, got {text!r}") from None
    if not value.is_finite() or not 0 < value < 1:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {text!r}")
    return value


# ----------------------------------------------------------------- judging


def judge_metric(
    direction: str, tolerance: Tolerance, baseline: Decimal, current: Decimal
) -> tuple[str, Decimal, Decimal]:
    """(verdict, delta, allowed worsening) of one paired metric.

    A relative tolerance is a share of the baseline, so on a zero baseline it
    allows no worsening at all. The boundary passes.

    >>> judge_metric("higher", parse_tolerance("0.02"), Decimal("0.90"), Decimal("0.85"))
    ('regression', Decimal('-0.05'), Decimal('0.02'))
    >>> judge_metric("lower", parse_tolerance("0.10-r"), Decimal("1000"), Decimal("1100"))[0]
    'pass'
    >>> judge_metric("lower", parse_tolerance("0.10-r"), Decimal("0"), Decimal("0.01"))[0]
    'regression'
    """
    delta = current - baseline
    allowed = tolerance.value * abs(baseline) if tolerance.relative else tolerance.value
    worse = -delta if direction == "higher" else delta
    return ("regression" if worse > allowed else "pass"), delta, allowed


def _completeness_problem(side: str, card: Scorecard) -> str | None:
    c = card.completeness
    if c.complete:
        return None
    parts = []
    if c.planned == 0:
        parts.append("no planned attempts")
    if c.unscored:
        parts.append(f"{c.unscored} of {c.planned} planned attempts have no terminal event")
    if c.cancelled:
        detail = ", ".join(f"{k} {v}" for k, v in c.cancelled.items())
        parts.append(f"{sum(c.cancelled.values())} cancelled ({detail})")
    return f"{side} run {card.run} is not complete (status {c.status}): " + "; ".join(parts)


def _engine_name(value: Any) -> str | msgspec.UnsetType:
    return value if isinstance(value, str) else msgspec.UNSET


def _engine_of(card: Scorecard) -> str:
    engine = card.bank.engine
    return engine if isinstance(engine, str) else "duckdb"


def _comparability(base: Scorecard, cur: Scorecard) -> list[str]:
    problems = [
        p
        for p in (_completeness_problem("baseline", base), _completeness_problem("current", cur))
        if p
    ]
    engines = (_engine_of(base), _engine_of(cur))
    if engines[0] != engines[1]:
        problems.append(
            f"engine differs: baseline {engines[0]}, current {engines[1]} (results of "
            "different engines are never compared)"
        )
    if base.bank.hash != cur.bank.hash:
        problems.append(
            f"bank hash differs: baseline {base.bank.id}@{base.bank.version} "
            f"{base.bank.hash}, current {cur.bank.id}@{cur.bank.version} "
            f"{cur.bank.hash}"
        )
    if base.scorer_major != cur.scorer_major:
        problems.append(
            f"scorer major differs: baseline {base.scorer_major} ({base.scorer_version}), "
            f"current {cur.scorer_major} ({cur.scorer_version})"
        )
    for side, card in (("baseline", base), ("current", cur)):
        ctl = card.controls
        if ctl.with_invocation < ctl.attempts or ctl.attempts == 0:
            problems.append(
                f"invocation evidence missing on {side}: {ctl.with_invocation} of "
                f"{ctl.attempts} attempts recorded what was sent (missing evidence is "
                "never equal)"
            )
    bv, cv = base.controls.values, cur.controls.values
    for control in sorted(set(bv) | set(cv)):
        if bv.get(control) != cv.get(control):
            problems.append(
                f"invocation control {control} differs: baseline {_show(bv.get(control))}, "
                f"current {_show(cv.get(control))}"
            )
    return problems


def _show(values: Any) -> str:
    if values is None:
        return "(not recorded)"
    if isinstance(values, list):
        return "[" + ", ".join(_show(v) for v in values) + "]"
    if isinstance(values, bool):
        return "true" if values else "false"
    return "null" if values is None else str(values)


def _drift(base: int | None, cur: int | None, threshold: Decimal) -> Drift:
    change: str | None = None
    warn = False
    if base is not None and cur is not None:
        if base == 0:
            warn = cur != 0
        else:
            ratio = Fraction(cur - base, base)
            change = show(ratio, 4)
            warn = abs(ratio) > Fraction(threshold)
    return Drift(
        judged_baseline=base,
        judged_current=cur,
        change=change,
        threshold=format(threshold, "f"),
        warn=warn,
    )


def _coverage_text(card: Scorecard, name: str) -> str:
    """``12/18``: attempts with the figure / planned attempts (complete when not listed)."""
    found = card.coverage.get(name) if isinstance(card.coverage, dict) else None
    if found is None:
        planned = card.completeness.planned
        return f"{planned}/{planned}"
    return f"{found.covered}/{found.planned}"


def _incomplete_coverage(card: Scorecard, name: str) -> bool:
    return isinstance(card.coverage, dict) and name in card.coverage


def _row(name: str, base_card: Scorecard, cur_card: Scorecard, options: GateOptions) -> MetricRow:
    definitions = {m.name: m for m in metrics.METRICS}
    metric = definitions.get(name)
    base, cur = base_card.metrics, cur_card.metrics
    in_base, in_cur = name in base, name in cur
    b, c = base.get(name), cur.get(name)
    gating = (
        metric is not None
        and not options.ignored(name)
        and (options.gate_timing or not metric.timing)
    )
    row = MetricRow(
        metric=name,
        direction=metric.direction if metric else None,
        tolerance=str(options.tolerance(name, metric.tolerance)) if metric else None,
        baseline=b,
        current=c,
        delta=None,
        allowed=None,
        verdict="incomparable",
        note=None,
        gating=gating,
    )
    replace = msgspec.structs.replace
    if options.ignored(name):
        return replace(row, verdict="ignored", note="ignored by configuration or --ignore")
    if in_base != in_cur:
        return replace(
            row, verdict="unpaired", note=f"only in {'baseline' if in_base else 'current'}"
        )
    if not in_base:
        return replace(row, note="absent on both sides")
    if metric is None:
        return replace(row, note="no definition in projections/metrics.py")
    if b is None or c is None:
        sides = [s for s, v in (("baseline", b), ("current", c)) if v is None]
        return replace(row, note="null on " + " and ".join(sides))
    if _incomplete_coverage(base_card, name) or _incomplete_coverage(cur_card, name):
        return replace(
            row,
            note=f"coverage {_coverage_text(base_card, name)} vs {_coverage_text(cur_card, name)}"
            " (compared only when every planned attempt has the figure on both sides)",
        )
    tol = options.tolerance(name, metric.tolerance)
    verdict, delta, allowed = judge_metric(metric.direction, tol, Decimal(b), Decimal(c))
    note = None
    if verdict == "regression":
        note = f"worse by more than {format(allowed, 'f')}"
        if not gating:
            note += " (timing: advisory; gate_timing = true in the configuration makes it gate)"
    return replace(
        row, verdict=verdict, delta=format(delta, "f"), allowed=format(allowed, "f"), note=note
    )


def _side(card: Scorecard) -> GateSide:
    return GateSide(
        run=card.run,
        profile=card.profile,
        bank_hash=card.bank.hash,
        scorer_version=card.scorer_version,
        complete=card.completeness.complete,
        n=card.denominators.get("n"),
        judged=card.denominators.get("judged"),
    )


#: What ``judge`` is told about a side with no per-case results (a scorecard file).
NO_CASES = "a scorecard, which holds no per-case results"


def _paired_metric(name: str) -> bool:
    """Whether ``--significance`` judges a metric: every metric computed over the planned
    attempts or the result-correct ones (quality, scores, per-correct tokens and cost),
    not a timing metric (wall time; advisory unless ``gate_timing``)."""
    metric = {m.name: m for m in metrics.METRICS}.get(name)
    return metric is not None and not metric.timing


def _with_intervals(rows: list[MetricRow], entries: Sequence[Any | None]) -> list[MetricRow]:
    """Each side's 95% interval beside result_correct_rate and model_score (issue 32)."""
    found: list[dict[str, Interval | None]] = []
    for entry in entries:
        stats = None if entry is None else run_statistics(entry, None)
        found.append(
            {}
            if stats is None
            else {
                "result_correct_rate": stats.result_correct_rate.interval,
                "model_score": stats.model_score.interval,
            }
        )
    out = []
    for r in rows:
        extra: dict[str, Any] = {}
        for key, side in (("baseline_interval", found[0]), ("current_interval", found[1])):
            if side.get(r.metric) is not None:
                extra[key] = side[r.metric]
        out.append(msgspec.structs.replace(r, **extra) if extra else r)
    return out


def _significance_rule(
    rows: list[MetricRow], paired: PairedComparison, alpha: Decimal
) -> list[MetricRow]:
    """``--significance``: a quality metric beyond its tolerance is a regression only when
    the paired result-correct difference (baseline - current) is positive and its p-value
    is below ``alpha``; every compared row names the rule that decided it."""
    p = Decimal(paired.p_value)
    worse = paired.difference is not None and Decimal(paired.difference) > 0 and p < alpha
    said = f"paired result-correct difference {paired.difference}, p = {paired.p_value}"
    out = []
    for r in rows:
        if r.verdict not in ("pass", "regression"):
            out.append(r)
        elif not _paired_metric(r.metric) or r.verdict == "pass":
            out.append(msgspec.structs.replace(r, rule="tolerance"))
        elif worse:
            note = f"{r.note}; {said} < alpha {alpha}: significant"
            out.append(msgspec.structs.replace(r, rule="significance", note=note))
        else:
            note = (
                f"{r.note}, but {said} is not a significant worsening at alpha {alpha}: "
                "passes under --significance"
            )
            out.append(msgspec.structs.replace(r, verdict="pass", rule="significance", note=note))
    return out


def judge(
    baseline: Scorecard | Mapping[str, Any],
    current: Scorecard | Mapping[str, Any],
    options: GateOptions,
    entries: Sequence[Any | None] = (None, None),
) -> GateVerdict:
    """The gate's verdict on two scorecards: a :class:`~projections.report.schema.GateVerdict`
    (docs/gate-verdict.schema.json is generated from that struct;
    :func:`projections.report.jsonio.plain` encodes it).

    ``entries``: each side's report run entry (:class:`~projections.report.schema.RunEntry`)
    when the side has per-case results (None for a scorecard file): the intervals shown
    beside the metrics, and the paired comparison ``options.significance`` needs.

    Raises:
        UsageError: a side is not a scorecard of this contract (names the field).
    """
    base, cur = read_scorecard("baseline", baseline), read_scorecard("current", current)
    problems = _comparability(base, cur)
    paired: PairedComparison | None = None
    if entries[0] is not None and entries[1] is not None:
        paired = compare_entries(entries[0], entries[1]).row
    if options.significance:
        missing = [s for s, e in zip(("baseline", "current"), entries, strict=True) if e is None]
        if missing:
            problems.append(
                f"--significance needs per-case results on both sides: {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} {NO_CASES}"
            )
        elif paired is not None and paired.cases == 0:
            problems.append("--significance: the two runs have no case in common")
    jb = base.denominators.get("judged")
    jc = cur.denominators.get("judged")
    if options.min_n is not None and (
        jb is None or jc is None or jb < options.min_n or jc < options.min_n
    ):
        problems.append(
            f"too few judged attempts for --min-n {options.min_n}: baseline {jb}, current {jc}"
        )
    bm, cm = base.metrics, cur.metrics
    order = [m.name for m in metrics.METRICS]
    names = order + sorted((set(bm) | set(cm)) - set(order))
    rows = _with_intervals([_row(n, base, cur, options) for n in names], entries)
    judged_by: dict[str, Any] = {}
    if options.significance and paired is not None and not problems:
        rows = _significance_rule(rows, paired, options.alpha)
        judged_by = {"significance": paired, "alpha": format(options.alpha, "f")}
    drift = _drift(jb, jc, options.drift_warn)
    warnings = []
    if drift.warn:
        warnings.append(
            f"judged attempts drift {drift.change or 'from 0'} (baseline {jb}, current {jc}) "
            f"exceeds {drift.threshold}: the samples differ in size"
        )
    for r in rows:
        if r.verdict == "regression" and not r.gating:
            warnings.append(
                f"{r.metric} {r.baseline} -> {r.current} is worse by more than {r.allowed}, "
                "but timing metrics are advisory (set gate_timing = true to gate them)"
            )
    regressions = [r.metric for r in rows if r.verdict == "regression" and r.gating]
    verdict: Literal["pass", "regression", "could_not_judge"]
    if problems:
        verdict = "could_not_judge"
    elif regressions:
        verdict = "regression"
    else:
        verdict = "pass"
    return GateVerdict(
        **judged_by,
        contract=CONTRACT,
        verdict=verdict,
        exit_code=EXIT_CODES[verdict],
        baseline=_side(base),
        current=_side(cur),
        comparable=not problems,
        problems=problems,
        min_n=options.min_n,
        drift=drift,
        warnings=warnings,
        metrics=rows,
        regressions=regressions,
        unpaired=[r.metric for r in rows if r.verdict == "unpaired"],
        incomparable=[r.metric for r in rows if r.verdict == "incomparable"],
    )
