"""The caps that bound what one attempt may cost, and the checks that apply them.

A run records its caps in ``RunStarted.limits`` (docs/running.md "Limits").
Going over one is the model's failure, recorded as evidence and scored in its
stage, never an infrastructure fault:

==================  ============================  ==========  ===================
cap                 what it bounds                stage       failure_detail
==================  ============================  ==========  ===================
max_output_bytes    the answer as stored           protocol    output_too_large
max_sql_bytes       the SQL text (UTF-8)          guard       sql_too_large
max_nesting         bracket and CASE depth        guard       too_complex
judge_budget_ms     CPU for parse, guard, rules   guard       too_complex
max_result_bytes    one execution as stored       execution   result_too_large
max_cell_bytes      one result cell as stored     (truncated, never result_correct)
max_text_bytes      every other free text         (cut, listed in ``texts_cut``)
==================  ============================  ==========  ===================

Issue 30: no event an answer produces is over 1 MiB under the default caps.
An answer is stored in ModelResponded (raw output within ``max_output_bytes``,
512 KiB, plus at most 11 tries' messages, a usage object, a request id and a
model name of ``max_text_bytes``, 8 KiB, each), OutputParsed (within
``max_output_bytes``), SqlGuarded (violation messages of at most 8 KiB),
SqlExecuted (a result within ``max_result_bytes``, 512 KiB, which scrubbing a
secret can grow by at most 10/7: the 10-character marker replaces pieces of 7
or more characters; or an error message of at most 8 KiB) and ScoreComputed
(no free text). :class:`TextPolicy` cuts (and scrubs) every free text of a run
event; ``stored_result`` does the same for an execution before it is scored.

The SQL checks run before sqlglot sees the text: a size check, then a linear
scan of its nesting depth (``ledger.harness.depth``, whose prefix-operator and cast
chains the guard limits too), so a hostile text is refused in milliseconds.
What remains (parse, guard, AST rules and the structural match, all done
before the SQL runs) is bounded by those two caps; its CPU time is measured
and a judge that went over the budget rejects the SQL as ``too_complex``.
A ``RecursionError`` anywhere in that work also means ``too_complex``.
Result caps are enforced inside the SQL worker (``ledger.engines.cells``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ledger.engines import cells, engine_rules
from ledger.engines.cells import prefix_within, stored_size
from ledger.errors import UsageError
from ledger.events import AstRule, Limits, TextCut, Violation
from ledger.harness import guard as guard_mod
from ledger.harness.ast_rules import check_rules, structural_match
from ledger.harness.depth import nesting_depth
from ledger.secrets import SecretSet

__all__ = [
    "BOUNDS",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_TEXT_BYTES",
    "LIMIT_CHECKS",
    "PREFIX_BYTES",
    "BoundedText",
    "Judged",
    "TextPolicy",
    "bound_text",
    "cut_text",
    "judge_sql",
    "nesting_depth",
    "over_budget",
    "stored_size",
    "text_cap",
    "validate",
]

#: The cap on every other free text of a run event (issue 30), and the one a run recorded
#: before the cap existed is read and resumed under.
DEFAULT_MAX_TEXT_BYTES = 8 * 1024

DEFAULT_LIMITS = Limits(
    max_output_bytes=512 * 1024,
    max_sql_bytes=64 * 1024,
    max_nesting=32,
    max_result_bytes=cells.DEFAULT_MAX_RESULT_BYTES,
    max_cell_bytes=cells.DEFAULT_MAX_CELL_BYTES,
    judge_budget_ms=5000,
    max_text_bytes=DEFAULT_MAX_TEXT_BYTES,
)

# Accepted range of each cap (inclusive): a cap is a promise about cost, so no 10**30.
BOUNDS: dict[str, tuple[int, int]] = {
    "max_output_bytes": (1024, 64 * 1024 * 1024),
    "max_sql_bytes": (256, 1024 * 1024),
    # sqlglot recurses about 20 frames per level: deeper than this it cannot parse anyway.
    "max_nesting": (1, 40),
    "max_result_bytes": (1024, 256 * 1024 * 1024),
    "max_cell_bytes": (1024, 16 * 1024 * 1024),
    "judge_budget_ms": (100, 60_000),
    "max_text_bytes": (256, 256 * 1024),
}

# How much of an output over the cap is stored (UTF-8 JSON string bytes, escapes included).
PREFIX_BYTES = 16 * 1024

# Guard violations a cap produces; the scorer reads them as failure_detail.
LIMIT_CHECKS = ("sql_too_large", "too_complex")


def validate(limits: Limits) -> Limits:
    """The limits, if every cap is within :data:`BOUNDS` (and a cell fits the result).

    Raises:
        UsageError: naming the option (``--max-cell-bytes``) and its accepted range.
    """
    for name, (low, high) in BOUNDS.items():
        value = getattr(limits, name)
        if value is msgspec.UNSET:  # a run recorded before the cap: the default applies
            continue
        if not low <= value <= high:
            raise UsageError(
                f"--{name.replace('_', '-')} {value} is out of range",
                hint=f"use a value from {low} to {high} (default {getattr(DEFAULT_LIMITS, name)})",
            )
    if limits.max_cell_bytes > limits.max_result_bytes:
        raise UsageError(
            f"--max-cell-bytes {limits.max_cell_bytes} is larger than "
            f"--max-result-bytes {limits.max_result_bytes}",
            hint="a cell must fit in a result",
        )
    return limits


@dataclass(frozen=True)
class BoundedText:
    """A text to store, and when it is a prefix, the whole text's UTF-8 length and SHA-256."""

    text: str
    full_bytes: int | None = None
    full_sha256: str | None = None


def bound_text(text: str, cap: int, prefix_bytes: int = PREFIX_BYTES) -> BoundedText:
    """``text`` itself when its stored size is within ``cap``, else its longest prefix whose
    stored size is within ``min(cap, prefix_bytes)`` plus the whole text's length and hash.

    >>> bound_text("abc", 10).text
    'abc'
    >>> b = bound_text("x" * 50, 10, prefix_bytes=4)
    >>> (b.text, b.full_bytes, b.full_sha256 == "sha256:" + hashlib.sha256(b"x" * 50).hexdigest())
    ('xxxx', 50, True)
    """
    if len(text) <= cap and stored_size(text) <= cap:
        return BoundedText(text)
    data = text.encode("utf-8", "surrogatepass")
    return BoundedText(
        prefix_within(text, min(cap, prefix_bytes)),
        full_bytes=len(data),
        full_sha256="sha256:" + hashlib.sha256(data).hexdigest(),
    )


def text_cap(limits: Limits) -> int:
    """The run's ``max_text_bytes`` (the default for a run recorded before it existed)."""
    cap = limits.max_text_bytes
    return DEFAULT_MAX_TEXT_BYTES if cap is msgspec.UNSET else cap


def cut_text(text: str, cap: int, secrets: SecretSet | None = None) -> tuple[str, int | None]:
    """(the text to store, the whole text's UTF-8 length when it was cut, else None).

    Secrets are scrubbed first (from a window of ``cap`` characters plus the scrubber's
    margin: no more can be stored), then the text is cut to its longest prefix whose
    stored size (a JSON string, escapes included) is within ``cap``: a character
    boundary, the same for the same text on every machine.

    >>> cut_text("abc", 8)
    ('abc', None)
    >>> cut_text("é" * 6, 8)
    ('éééé', 12)
    >>> cut_text('say "hi" now', 8)
    ('say "hi', 12)
    """
    if not secrets and len(text) * 6 <= cap:  # fits whatever it escapes: the common case
        return text, None
    margin = secrets.margin + 64 if secrets else 0
    window = text if len(text) <= cap + margin else text[: cap + margin]
    clean = secrets.scrub(window) if secrets else window
    if window is text and stored_size(clean) <= cap:
        return clean, None
    return prefix_within(clean, cap), len(text.encode("utf-8", "surrogatepass"))


_JSON = msgspec.json.Encoder()

# Fields a TextPolicy leaves alone: bounded by their own caps, or not free text.
_OWN_CAPS = frozenset(
    {"raw_output", "raw_output_sha256", "rows", "columns", "texts_cut", "prompt", "plan", "sql",
     "summary", "assumptions", "stream", "stream_prev", "at", "case_id"}
)  # fmt: skip


@dataclass(frozen=True)
class TextPolicy:
    """How a run stores free text (issue 30): each cut to ``cap`` (``max_text_bytes``) and,
    with ``secrets``, scrubbed of them first; cuts are listed in the event's ``texts_cut``."""

    cap: int
    secrets: SecretSet | None = None

    def fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The fields of one event with every free text cut and scrubbed (``texts_cut``
        extended with what was cut); fields with caps of their own are left alone.

        Without secrets, fields whose JSON is within the cap as a whole are returned as
        they are, unwalked (issue 34: nearly every event): no text in them is longer
        than their JSON, so none would be cut."""
        if not self.secrets:
            free = {key: value for key, value in fields.items() if key not in _OWN_CAPS}
            try:
                whole = len(_JSON.encode(free))
            except (TypeError, UnicodeEncodeError):  # not JSON as it is: walk it
                whole = self.cap + 1
            if whole <= self.cap:
                return dict(fields)
        return self.walked(fields)

    def walked(self, fields: dict[str, Any]) -> dict[str, Any]:
        """:meth:`fields` by walking every value (the definition; ``fields`` skips the walk
        only where it cannot cut anything)."""
        known = fields.get("texts_cut", msgspec.UNSET)
        cuts: list[TextCut] = [] if known is msgspec.UNSET else list(known)
        before = len(cuts)
        out = {
            key: value if key in _OWN_CAPS else self._walk(value, key, cuts)
            for key, value in fields.items()
        }
        if len(cuts) > before:
            out["texts_cut"] = tuple(cuts)
        return out

    def _walk(self, value: Any, path: str, cuts: list[TextCut]) -> Any:
        if isinstance(value, str):
            text, whole = cut_text(value, self.cap, self.secrets)
            if whole is not None:
                cuts.append(TextCut(field=path, bytes=whole))
            return text
        if isinstance(value, msgspec.Struct):
            changed = {
                name: self._walk(getattr(value, name), f"{path}.{name}", cuts)
                for name in value.__struct_fields__
                if isinstance(getattr(value, name), str | msgspec.Struct | tuple | dict)
            }
            return msgspec.structs.replace(value, **changed)
        if isinstance(value, tuple):
            return tuple(self._walk(v, f"{path}.{i}", cuts) for i, v in enumerate(value))
        if isinstance(value, dict):
            return {k: self._walk(v, f"{path}.{k}", cuts) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Judged:
    """The guard stage of one attempt: the guard's verdict, or a cap's rejection.

    ``rules`` and ``match``: the AST rules and structural match computed on the way
    (None: not computed), so that a reader need not compute them again; never compared.
    """

    passed: bool
    violations: tuple[Violation, ...]
    ast_digest: str | None
    rules: tuple[AstRule, ...] | None = field(default=None, compare=False)
    match: bool | None = field(default=None, compare=False)


def _rejected(check: str, message: str) -> Judged:
    return Judged(False, (Violation(check=check, message=message),), None)


_BUDGET = " CPU budget"


def over_budget(violations: Sequence[Violation]) -> bool:
    """Whether a verdict's violations say the judging ran out of its CPU budget: the one
    part of a verdict that depends on the machine's speed, not on the SQL text alone."""
    return any(v.check == "too_complex" and v.message.endswith(_BUDGET) for v in violations)


def _too_deep(violations: Sequence[Violation]) -> bool:
    # The guard turns its own RecursionError into these two verdicts.
    return any(v.check == "nesting" or "nested too deeply" in v.message for v in violations)


def judge_sql(
    sql: str,
    tables: Collection[str],
    *,
    rules: Sequence[str],
    reference_sql: str | None,
    limits: Limits,
    spent_ns: Callable[[], int],
    engine: str = "duckdb",
) -> Judged:
    """Judge one model SQL under the caps: size, nesting, then the guard, AST rules and the
    structural match within the CPU budget; ``spent_ns()`` is the CPU time (ns) the
    attempt's judging has used so far (output parse included).

    Rejections: ``sql_too_large`` or ``too_complex`` (see the module doc), else the guard's
    own verdict. The AST rules and the structural match are computed here so that their
    cost counts against the budget; they are kept in the result (``Judged.rules``,
    ``Judged.match``) for ``ledger.harness.reading``; the scorer in this process
    recomputes them (from caches).
    """
    size = len(sql.encode("utf-8", "surrogatepass"))
    if size > limits.max_sql_bytes:
        return _rejected(
            "sql_too_large", f"the SQL is {size} bytes, over the {limits.max_sql_bytes}-byte cap"
        )
    depth = nesting_depth(sql)
    if depth > limits.max_nesting:
        return _rejected(
            "too_complex", f"nesting depth {depth} is over the cap of {limits.max_nesting}"
        )
    try:
        verdict = guard_mod.guard(sql, tables, engine)
        dialect = engine_rules(engine)[0]
        if verdict.violations and verdict.violations[0].check == "too_complex":
            return Judged(False, verdict.violations, None)  # the guard's depth rule
        if _too_deep(verdict.violations):
            return _rejected("too_complex", "nested too deeply for the SQL parser")
        # The scorer reads the rules of SQL that passed, and the structural match of any.
        found = check_rules(sql, rules, dialect) if verdict.passed else None
        match = None if reference_sql is None else structural_match(sql, reference_sql, dialect)
    except RecursionError:
        return _rejected("too_complex", "nested too deeply for the SQL parser")
    if spent_ns() > limits.judge_budget_ms * 1_000_000:
        over = Violation(
            check="too_complex",
            message=f"parsing, guarding and checking the SQL took over the "
            f"{limits.judge_budget_ms} ms{_BUDGET}",
        )
        return Judged(False, (*verdict.violations, over), verdict.ast_digest, found, match)
    return Judged(verdict.passed, verdict.violations, verdict.ast_digest, found, match)
