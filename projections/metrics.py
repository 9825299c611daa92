"""THE definition of every gateable metric: name, direction, default tolerance, where it is read.

A metric is read from one run entry of a report (a
:class:`~projections.report.schema.RunEntry`, or the same entry of a report
file) by following its ``path`` of field names of that schema (a test checks
every path resolves in the schema); a value is a decimal string or null.
Tolerances are absolute (``"0.02"``) or relative (``"0.10-r"``, a share of
the baseline value). ``DENOMINATORS`` are sample sizes, shown beside the
metrics and never gated (DESIGN.md: ``n`` and judged counts are denominators).

A *timing* metric measures wall time, which moves with the machine's load: the
gate reports it but only warns about it unless its configuration sets
``gate_timing = true``. A metric computed over the attempts that have a figure
(tokens, cost) names where its coverage is read (``covered``, present in a
report only when some planned attempt lacks the figure); the gate compares it
only when both sides' coverage is complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal, NamedTuple

import msgspec

from projections.aggregates import DIMENSIONS
from projections.quality import FAILURE_CATEGORIES

__all__ = [
    "DENOMINATORS",
    "METRICS",
    "Metric",
    "Tolerance",
    "by_name",
    "field_at",
    "parse_tolerance",
    "read_coverage",
    "read_denominators",
    "read_metrics",
]


class Tolerance(NamedTuple):
    """An allowed worsening: ``value`` absolute, or a share of the baseline when relative."""

    value: Decimal
    relative: bool

    def __str__(self) -> str:
        return f"{self.value}-r" if self.relative else str(self.value)


def parse_tolerance(text: str) -> Tolerance:
    """``"0.02"`` -> absolute, ``"0.10-r"`` -> relative. Raises ValueError otherwise.

    >>> parse_tolerance("0.10-r")
    Tolerance(value=Decimal('0.10'), relative=True)
    >>> str(parse_tolerance("2.0"))
    '2.0'
    """
    relative = text.endswith("-r")
    body = text[:-2] if relative else text
    try:
        value = Decimal(body)
    except ArithmeticError:
        raise ValueError(f"bad tolerance {text!r}: write 0.02 or 0.10-r") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"bad tolerance {text!r}: must be a finite number >= 0")
    return Tolerance(value, relative)


class Metric(NamedTuple):
    """One gateable metric."""

    name: str
    direction: Literal["higher", "lower"]
    tolerance: Tolerance
    path: tuple[str, ...]
    description: str
    #: Wall time: advisory in the gate unless the configuration sets ``gate_timing``.
    timing: bool = False
    #: Path of the count of attempts that have the figure (absent when all have it).
    covered: tuple[str, ...] | None = None

    def read(self, run: Any) -> Decimal | None:
        """The value in a report run entry, or None when it is null or absent."""
        value = field_at(run, self.path)
        return None if value is None or value is MISSING else Decimal(str(value))

    def present(self, run: Any) -> bool:
        """Whether the run entry has the field at all (a report file may lack it)."""
        return field_at(run, self.path) is not MISSING


#: What :func:`field_at` returns for a field the value does not have.
MISSING: Any = msgspec.UNSET


def field_at(value: Any, path: Sequence[str]) -> Any:
    """Follow schema field names through a report struct (attributes; a ``dict[str, ...]``
    field by key) or through the same shape read from a JSON file; :data:`MISSING` when
    a name is absent.

    >>> field_at({"quality": {"total": 3}}, ("quality", "total"))
    3
    """
    for key in path:
        if isinstance(value, msgspec.Struct):
            value = getattr(value, key, MISSING)
        elif isinstance(value, Mapping):
            value = value.get(key, MISSING)
        else:
            return MISSING
        if value is MISSING:
            return MISSING
    return value


def _m(
    name: str,
    direction: str,
    tol: str,
    path: str,
    description: str,
    *,
    timing: bool = False,
    covered: str | None = None,
) -> Metric:
    return Metric(
        name,
        direction,  # type: ignore[arg-type]
        parse_tolerance(tol),
        tuple(path.split(".")),
        description,
        timing,
        None if covered is None else tuple(covered.split(".")),
    )


METRICS: tuple[Metric, ...] = (
    _m("result_correct_rate", "higher", "0.02", "quality.result_correct_rate",
       "result-correct attempts / planned attempts"),
    _m("format_ok_rate", "higher", "0.02", "quality.format_ok_rate",
       "format-ok attempts / planned attempts"),
    _m("sql_exec_success_rate", "higher", "0.02", "quality.sql_exec_success_rate",
       "attempts whose SQL executed without error / planned attempts"),
    _m("model_score", "higher", "1.0", "scores.model_score",
       "weighted mean of case means (auxiliary composite)"),
    *(
        _m(f"dimension.{d}", "higher", "2.0", f"scores.dimensions.{d}",
           f"weighted score over the {d} cases")
        for d in DIMENSIONS
    ),
    *(
        _m(f"failure_rate.{k}", "lower", "0.02", f"quality.failure_rates.{k}",
           f"{k} failures / planned attempts")
        for k in FAILURE_CATEGORIES
    ),
    _m("tokens_per_correct", "lower", "0.10-r", "efficiency.tokens.per_correct",
       "tokens / result-correct attempts, over the attempts that report tokens",
       covered="efficiency.tokens.covered"),
    _m("cost_per_correct", "lower", "0.10-r", "efficiency.cost.per_correct",
       "cost (billed, else estimated) / result-correct attempts, over the attempts "
       "that have a cost", covered="efficiency.cost.covered"),
    _m("generation_p95_ms", "lower", "0.20-r", "efficiency.generation_ms.p95",
       "nearest-rank P95 of generation time, ms", timing=True),
    _m("sql_exec_p95_ms", "lower", "0.20-r", "efficiency.sql_exec_ms.p95",
       "nearest-rank P95 of SQL execution time, ms", timing=True),
)  # fmt: skip

#: Sample sizes: name -> path. Never gated; drift is only warned about.
DENOMINATORS: dict[str, tuple[str, ...]] = {
    "n": ("quality", "total"),
    "judged": ("quality", "evaluated"),
    "correct": ("efficiency", "correct"),
}

_BY_NAME = {m.name: m for m in METRICS}


def by_name(name: str) -> Metric:
    """The metric called ``name``. Raises KeyError naming the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(_BY_NAME)}") from None


def read_metrics(run: Any) -> dict[str, Decimal | None]:
    """Every metric of one report run entry, by name."""
    return {m.name: m.read(run) for m in METRICS}


def read_coverage(run: Any) -> dict[str, tuple[int, int]]:
    """(attempts that have the figure, planned attempts) of every metric whose coverage
    is incomplete in one report run entry; a metric with full coverage is left out.

    >>> read_coverage({"quality": {"total": 18}, "efficiency": {"tokens": {"covered": 12}}})
    {'tokens_per_correct': (12, 18)}
    """
    planned = field_at(run, DENOMINATORS["n"])
    out: dict[str, tuple[int, int]] = {}
    for m in METRICS:
        covered = MISSING if m.covered is None else field_at(run, m.covered)
        if isinstance(covered, int) and isinstance(planned, int) and covered < planned:
            out[m.name] = (covered, planned)
    return out


def read_denominators(run: Any) -> dict[str, int | None]:
    """The denominators of one report run entry."""
    out: dict[str, int | None] = {}
    for name, path in DENOMINATORS.items():
        value = field_at(run, path)
        out[name] = value if isinstance(value, int) else None
    return out
