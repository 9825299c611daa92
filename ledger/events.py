"""Every event shape of the log, and nothing else.

Each event is a frozen msgspec Struct in one tagged union (``type`` tag). Tags
are stable strings written by hand and carry the shape's version (``.v1``).
A changed shape gets a new tag and an upcaster in ``UPCASTERS``; stored bytes
are never rewritten.

Every body carries the stream envelope fields (DESIGN.md "The log"):
``stream`` (a run id, or ``ledger``), ``stream_seq`` (0, 1, ... within the
stream), ``stream_prev`` (``sha256:<hex>`` leaf hash of the previous event of
the same stream, ``None`` for the first) and ``at`` (RFC 3339 UTC with
microseconds, a claim of the writer; order is by sequence number only).

Money, ratios, tolerances and scores are ``Decimal`` (encoded as strings);
durations are integer microseconds; there are no floats anywhere.

A field added to a shipped shape defaults to ``msgspec.UNSET``: it is left out
of the canonical bytes until it is set, so events that do not use it keep the
bytes they always had and old bodies decode unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "BENCHMARKS",
    "DIFFICULTIES",
    "DIMENSIONS",
    "ENGINES",
    "LEDGER_STREAM",
    "UNASSIGNED",
    "UPCASTERS",
    "AstRule",
    "AttemptCancelled",
    "BankPublished",
    "BenchmarkCase",
    "BenchmarkSource",
    "BuildSettings",
    "CalibrationControlChecked",
    "CalibrationFinished",
    "CalibrationMutantJudged",
    "CallTry",
    "CaseSpec",
    "CheckpointIssued",
    "ClaimCheck",
    "ClaimsChecked",
    "Column",
    "DatabaseVerdict",
    "EngineDifference",
    "Event",
    "EventBase",
    "EventImported",
    "ForeignKeyViolation",
    "ForeignSignerRegistered",
    "GenerationParams",
    "GoldResult",
    "Invocation",
    "Limits",
    "ModelResponded",
    "OutputParsed",
    "Plan",
    "PromptSent",
    "PromptStored",
    "ProviderFailed",
    "RunFinished",
    "RunStarted",
    "RunTotals",
    "RunWithdrawn",
    "ScoreComputed",
    "ScoreItems",
    "SignerRegistered",
    "SignerRetired",
    "SignerTrusted",
    "SignerUntrusted",
    "SliceComputed",
    "SqlExecuted",
    "SqlGuarded",
    "TableSchema",
    "TextCut",
    "Usage",
    "VariantChecked",
    "VariantOutcome",
    "VariantSummary",
    "Versions",
    "Violation",
]

LEDGER_STREAM = "ledger"

# A result cell as encoded by ledger.engines.cells.encode_cell (no floats).
Cell = Any


class _Part(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A nested value inside an event (not an event itself)."""


class EventBase(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="type",
):
    """Fields every event body carries: its place in its own stream."""

    stream: str
    stream_seq: int
    stream_prev: str | None
    at: str


# ---------------------------------------------------------------- nested parts


class Column(_Part, frozen=True, kw_only=True):
    """A result column: its name as returned and its DuckDB type name."""

    name: str
    type: str


class TableSchema(_Part, frozen=True, kw_only=True):
    """One published table of a bank's ``main`` schema."""

    name: str
    columns: tuple[Column, ...]


class EngineDifference(_Part, frozen=True, kw_only=True):
    """A case whose gold on the bank's engine differs from its gold on DuckDB."""

    case_id: str
    detail: str


class ForeignKeyViolation(_Part, frozen=True, kw_only=True):
    """Rows of a bank's data that break one foreign key its schema declares (issue 16).

    SQLite does not enforce foreign keys unless asked, so real SQLite files often
    break their own: the data is imported as it is and the violations are
    recorded. ``columns`` / ``parent_columns`` name the key (in order; the parent's
    are empty when the key names the parent's primary key implicitly), ``count``
    the child rows that have no parent row, ``example`` one of them as
    ``rowid <n>: <column>=<value>, ...`` (the smallest rowid).
    """

    table: str
    columns: tuple[str, ...]
    parent_table: str
    parent_columns: tuple[str, ...]
    count: int
    example: str


class BuildSettings(_Part, frozen=True, kw_only=True, omit_defaults=True):
    """How a bank database was built.

    ``engine`` executes the bank (``duckdb``, ``sqlite`` or ``postgres``) at
    ``engine_version``; a DuckDB bank leaves both at their defaults, so its bytes
    are those of a bank published before engines existed. ``transpiled_from``
    names the dialect the bank's SQL was written in when it was published for
    another engine (``bank publish --engine``), and ``engine_differences`` lists
    the cases whose gold differs between the two (accepted with
    ``--accept-engine-differences``).
    """

    duckdb_version: str
    timezone: str
    threads: int
    external_access: bool
    engine: str = "duckdb"
    engine_version: str = ""
    transpiled_from: str | None = None
    engine_differences: tuple[EngineDifference, ...] = ()
    # Issue 16: how the data was given (``seed.sql`` when absent; ``data.sqlite``,
    # ``csv`` or ``parquet``) and the foreign keys the data breaks, by key.
    data_source: str = "seed.sql"
    foreign_key_violations: tuple[ForeignKeyViolation, ...] = ()


#: The values of ``CaseSpec.dimension`` (DESIGN "Question bank"), in the order the
#: radar draws them; the bank loader accepts only these and projections group by them.
DIMENSIONS = ("basic", "joins_grain", "aggregation_metrics", "time_window", "complex", "data_dev")
#: The execution engines a bank may name (cases.yaml ``engine:``), the default first.
ENGINES = ("duckdb", "sqlite", "postgres")
#: The values of ``CaseSpec.difficulty``, easiest first.
DIFFICULTIES = ("easy", "medium", "hard")
#: The dimension / difficulty of a case whose source has none (an imported
#: benchmark question); reports show it only when a bank uses it.
UNASSIGNED = "unassigned"


#: The benchmarks ``bank import`` reads (issue 16).
BENCHMARKS = ("bird", "spider")


class BenchmarkSource(_Part, frozen=True, kw_only=True):
    """The public benchmark a bank was imported from (cases.yaml ``benchmark``).

    ``questions`` is the question file's name and ``questions_sha256`` its bytes'
    hash; ``rows`` is the benchmark's own row contract for its EX (``set`` for
    BIRD and Spider), kept beside the contract caseledger scores with.
    """

    name: str
    questions: str
    questions_sha256: str
    rows: str = "set"


class BenchmarkCase(_Part, frozen=True, kw_only=True):
    """Where a case comes from in its benchmark (cases.yaml case ``benchmark``).

    ``index`` is the question's position (from 0) in the benchmark's question
    file: BIRD's and Spider's prediction files are keyed by it. ``question_id``
    and ``difficulty`` are the benchmark's own, when it has them.
    """

    index: int
    question_id: str | None = None
    difficulty: str | None = None
    # Issue 31: what Spider's execution match reads from the gold SQL's text, which a
    # published case does not carry (only its hash). ``order_by``: the text holds
    # "order by" (Spider then keeps row order); ``distinct``: where DISTINCT stands
    # ("select": only as the outermost SELECT DISTINCT; "other": anywhere else), as
    # Spider's evaluator deletes it before running; ``rewritten``: Spider's evaluator
    # rewrites the text before running it ("> =" to ">=", YEAR(CURDATE()) to 2020).
    # UNSET (left out of the bytes): false / none, and every case not from Spider.
    order_by: bool | UnsetType = UNSET
    distinct: Literal["select", "other"] | UnsetType = UNSET
    rewritten: bool | UnsetType = UNSET


class CaseSpec(_Part, frozen=True, kw_only=True):
    """A case as published: everything but the reference SQL text (only its hash)."""

    id: str
    dimension: str
    difficulty: str
    weight: Decimal
    question: str
    question_en: str | None = None
    row_order_significant: bool = False
    abs_tolerance: Decimal = Decimal(0)
    rel_tolerance: Decimal = Decimal(0)
    max_rows: int
    required_ast: tuple[str, ...] = ()
    notes: str = ""
    reference_sql_sha256: str
    # Issue 16: why this case's own gold may appear in its prompt (cases.yaml
    # ``leak_waiver``); UNSET (left out of the bytes) for a case without one.
    leak_waiver: str | UnsetType = UNSET
    # Issue 16: the row contract (cases.yaml ``rows``): "set" when duplicate rows do
    # not count; UNSET (left out of the bytes, so every existing bank keeps its
    # bytes) means "multiset", the rule of every case before it.
    rows: Literal["multiset", "set"] | UnsetType = UNSET
    # Issue 16: the case's place in the benchmark it was imported from; UNSET for
    # a case written for caseledger.
    benchmark: BenchmarkCase | UnsetType = UNSET

    @property
    def row_contract(self) -> str:
        """``multiset`` (duplicate rows count; also when ``rows`` is absent) or ``set``."""
        return self.rows if isinstance(self.rows, str) else "multiset"


class GoldResult(_Part, frozen=True, kw_only=True):
    """The frozen typed result of one case's reference SQL."""

    case_id: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    digest: str


class GenerationParams(_Part, frozen=True, kw_only=True):
    """Explicit generation parameters (disclosed variables, not controls)."""

    temperature: Decimal | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = None


class Versions(_Part, frozen=True, kw_only=True):
    """Versions of everything that can change a number."""

    app: str
    scorer: str
    duckdb: str
    sqlglot: str
    output_contract: str
    report_contract: str


class Limits(_Part, frozen=True, kw_only=True):
    """The caps that bound what one attempt may cost (docs/running.md "Limits").

    ``max_output_bytes``: the raw output plus the plan, SQL, summary and
    assumptions extracted from it, as stored (UTF-8 JSON strings);
    ``max_sql_bytes``: the SQL text (UTF-8); ``max_nesting``: bracket and
    CASE depth of the SQL; ``max_result_bytes``: one execution's columns and
    rows as stored; ``max_cell_bytes``: one result cell as stored (longer
    cells are truncated); ``judge_budget_ms``: CPU time for parsing the
    output, guarding the SQL and checking its AST rules; ``max_text_bytes``
    (issue 30): every other free text of a run event as stored (an engine's
    error message, a provider's message, a guard violation, ...; longer texts
    are cut and listed in the event's ``texts_cut``). Unset in runs recorded
    before it existed, which are read (and resumed) under the default cap.
    """

    max_output_bytes: int
    max_sql_bytes: int
    max_nesting: int
    max_result_bytes: int
    max_cell_bytes: int
    judge_budget_ms: int
    max_text_bytes: int | UnsetType = UNSET


class TextCut(_Part, frozen=True, kw_only=True):
    """A free text of an event stored cut to the run's ``max_text_bytes`` (issue 30).

    ``field`` names it by its path in the event (``error_message``,
    ``violations.0.message``, ``tries.2.message``, ``usage.raw_json``); ``bytes`` is
    the UTF-8 length of the whole text as it was produced, before any secret was
    scrubbed from it. The stored text is its longest prefix within the cap (cut on a
    character boundary, counted as the ledger stores it: a JSON string, escapes included).
    """

    field: str
    bytes: int


class Invocation(_Part, frozen=True, kw_only=True):
    """What was actually sent for one attempt: the evidence fairness reads.

    Controls: ``harness_kind``, ``response_mode``, ``single_call``, ``tools``,
    ``retries``, ``prompt_contract_digest``. Disclosed variables: ``provider``,
    ``auth_mode``, ``model`` and ``parameters``.
    """

    harness_kind: str
    response_mode: str
    single_call: bool
    tools: str
    retries: int
    prompt_contract_digest: str
    system_prompt_digest: str | None
    wire_protocol: str
    client_version: str
    bridge_version: str | None = None
    policy_version: str | None = None
    provider: str | None = None
    auth_mode: str | None = None
    model: str | None = None
    parameters: dict[str, str] = {}


class CallTry(_Part, frozen=True, kw_only=True):
    """One try of an attempt's model call, when the call was retried (docs/running.md
    "Retries"). ``outcome`` is ``ok`` or the failure kind; ``at`` is the wall clock when
    the try began (a claim, like every ``at``); ``duration_us`` its length;
    ``waited_us`` the pause before it (backoff or the server's Retry-After);
    ``retry_after_ms`` what the server asked for in Retry-After, if it did."""

    outcome: str
    http_status: int | None = None
    at: str
    duration_us: int
    waited_us: int = 0
    retry_after_ms: int | None = None
    message: str | None = None


class Usage(_Part, frozen=True, kw_only=True):
    """Token usage. ``input`` excludes cached input; reasoning is a subset of output."""

    input: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    output: int | None = None
    reasoning_output: int | None = None
    raw_json: str | None = None


class Plan(_Part, frozen=True, kw_only=True):
    """The ``plan`` object of query-plan-v1."""

    grain: str
    sources: tuple[str, ...]
    joins: tuple[str, ...]
    filters: tuple[str, ...]
    metrics: tuple[str, ...]
    steps: tuple[str, ...]
    risks: tuple[str, ...]


class Violation(_Part, frozen=True, kw_only=True):
    """One reason the SQL guard rejected a query."""

    check: str
    message: str


class AstRule(_Part, frozen=True, kw_only=True):
    """One required AST capability and whether the model's SQL has it."""

    rule: str
    passed: bool


class ScoreItems(_Part, frozen=True, kw_only=True):
    """The eight items of scorer 2.x, in points."""

    protocol: Decimal
    guard: Decimal
    executed: Decimal
    column_count: Decimal
    column_names: Decimal
    rows: Decimal
    order: Decimal
    ast: Decimal


# ---------------------------------------------------------------- ledger events


class SignerRegistered(EventBase, tag="signer.registered.v1", frozen=True, kw_only=True):
    """A key may sign events from ``valid_from`` on (until it is retired)."""

    key_id: str
    public_key: str
    name: str
    role: Literal["operator", "adapter", "auditor"]
    valid_from: str


class SignerRetired(EventBase, tag="signer.retired.v1", frozen=True, kw_only=True):
    """A key signs nothing after ``retired_at``; its older events still verify."""

    key_id: str
    name: str
    retired_at: str
    reason: str = ""


class BankPublished(EventBase, tag="bank.published.v1", frozen=True, kw_only=True):
    """A question bank version, its content hashes, build settings and frozen gold."""

    bank_id: str
    version: str
    description: str = ""
    content_sha256: str
    files: dict[str, str]
    calibration_sha256: str | None = None
    build: BuildSettings
    schema_sql: str
    tables: tuple[TableSchema, ...]
    semantic_json: str
    prompt_template: str
    cases: tuple[CaseSpec, ...]
    gold: tuple[GoldResult, ...]
    gold_digest: str
    # Issue 16: the public benchmark the bank was imported from (UNSET otherwise).
    benchmark: BenchmarkSource | UnsetType = UNSET


class CheckpointIssued(EventBase, tag="checkpoint.issued.v1", frozen=True, kw_only=True):
    """A signed tree head over the first ``tree_size`` leaves."""

    tree_size: int
    root_hash: str
    note: str


# ---------------------------------------------------------------- run events


class RunStarted(EventBase, tag="run.started.v1", frozen=True, kw_only=True):
    """The identity and version evidence of a run (DESIGN.md event table)."""

    run_id: str
    run_kind: Literal["model", "self_test", "calibration"]
    bank_id: str
    bank_version: str
    bank_hash: str
    adapter_kind: str
    profile: str
    requested_model: str | None
    provider: str | None
    auth_mode: str | None
    params: GenerationParams
    timeout_ms: int
    harness_kind: str
    bridge_version: str | None
    policy_version: str | None
    response_mode: str
    single_turn: bool
    tools: str
    retries: int
    context_isolation: str
    system_prompt_digest: str | None
    prompt_contract_digest: str
    attempts: int
    case_ids: tuple[str, ...]
    price_snapshot_digest: str | None = None
    replay_file_sha256: str | None = None
    versions: Versions
    # Unset in runs recorded before caps existed.
    limits: Limits | UnsetType = UNSET


class PromptSent(EventBase, tag="prompt.sent.v1", frozen=True, kw_only=True):
    """The exact prompt of one attempt: its SHA-256, and its text verbatim or by reference.

    Since issue 22 the text is not repeated per attempt: ``prompt`` is unset and the
    run's stream holds the text once, in the PromptStored with the same
    ``prompt_sha256`` (before this event). Events written before keep the text inline
    (and their bytes). A reader resolves the text through the reference
    (projections/caseruns.py); ``verify`` refuses a reference that names no PromptStored.
    """

    case_id: str
    attempt: int
    prompt: str | UnsetType = UNSET
    prompt_sha256: str


class ModelResponded(EventBase, tag="model.responded.v1", frozen=True, kw_only=True):
    """The raw output of one attempt, verbatim, with what was sent and what it cost.

    An output over the run's ``max_output_bytes`` is stored as a prefix:
    ``raw_output_bytes`` and ``raw_output_sha256`` then give the whole output's
    UTF-8 length and SHA-256 (both unset when ``raw_output`` is the whole output).
    """

    case_id: str
    attempt: int
    raw_output: str
    provider_request_id: str | None
    resolved_model: str | None
    recorded_model: str | None = None
    invocation: Invocation
    usage: Usage | None
    cost: Decimal | None = None
    estimated_cost: Decimal | None = None
    generation_us: int | None
    raw_output_bytes: int | UnsetType = UNSET
    raw_output_sha256: str | UnsetType = UNSET
    # Every try of the call, the last one included, when there was more than one
    # (retries); UNSET (left out of the bytes) after a single try.
    tries: tuple[CallTry, ...] | UnsetType = UNSET
    # Issue 30: the free texts stored cut to the run's max_text_bytes (UNSET: none).
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


class ProviderFailed(EventBase, tag="provider.failed.v1", frozen=True, kw_only=True):
    """The adapter got no usable answer. ``kind`` is timeout, rate_limited,
    server_error, bad_request, auth, policy_refusal, command_failed, ...
    A ``raw_output`` over the output cap is a prefix, as in ModelResponded."""

    case_id: str
    attempt: int
    kind: str
    message: str
    invocation: Invocation
    provider_request_id: str | None = None
    http_status: int | None = None
    raw_output: str | None = None
    usage: Usage | None = None
    generation_us: int | None = None
    raw_output_bytes: int | UnsetType = UNSET
    raw_output_sha256: str | UnsetType = UNSET
    # As in ModelResponded: every try when there was more than one.
    tries: tuple[CallTry, ...] | UnsetType = UNSET
    # What the server asked for in HTTP Retry-After (ms), when it did.
    retry_after_ms: int | UnsetType = UNSET
    # Issue 30: the free texts stored cut to the run's max_text_bytes (UNSET: none).
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


class OutputParsed(EventBase, tag="output.parsed.v1", frozen=True, kw_only=True):
    """query-plan-v1 parse verdict. ``error`` set means output_contract_error."""

    case_id: str
    attempt: int
    protocol_strict: bool
    recovered_from_fence: bool
    plan: Plan | None
    sql: str | None
    summary: str | None
    assumptions: tuple[str, ...] | None
    error: str | None
    # Issue 16: True for a public benchmark's prediction (``run --replay-format
    # bird|spider``): plain SQL, neither strict nor a contract error, so 0 protocol
    # points. UNSET (left out of the bytes) for every other answer.
    imported: bool | UnsetType = UNSET
    # Issue 30: ``error`` stored cut to the run's max_text_bytes (UNSET: not cut); the
    # plan, SQL, summary and assumptions are bounded by max_output_bytes instead.
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


class SqlGuarded(EventBase, tag="sql.guarded.v1", frozen=True, kw_only=True):
    """Static guard verdict on the model's SQL."""

    case_id: str
    attempt: int
    passed: bool
    violations: tuple[Violation, ...]
    ast_digest: str | None
    # Issue 30: violation messages stored cut to the run's max_text_bytes (UNSET: none).
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


class SqlExecuted(EventBase, tag="sql.executed.v1", frozen=True, kw_only=True):
    """One execution in the sandboxed worker. ``error_kind`` is None when ok, else
    timeout, memory, sql_runtime, result_too_large or worker_crash.
    ``cells_truncated`` counts cells cut to the run's ``max_cell_bytes`` (unset: none).
    ``texts_cut`` (issue 30): ``error_message`` stored cut to the run's
    ``max_text_bytes``, with its whole length. ``scrubbed`` (issue 30): how many result
    texts (cells, column names and types) had a registered secret replaced by
    ``[redacted]``; the rows were scored as stored (unset: none)."""

    case_id: str
    attempt: int
    ok: bool
    error_kind: str | None
    error_message: str | None
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    row_count: int
    truncated: bool
    sql_us: int
    worker_try: int = 1
    cells_truncated: int | UnsetType = UNSET
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET
    scrubbed: int | UnsetType = UNSET


class ScoreComputed(EventBase, tag="score.computed.v1", frozen=True, kw_only=True):
    """One attempt's score breakdown under a named scorer version.

    ``failure_kind`` is the stage (protocol, guard, execution, ...);
    ``failure_detail`` names a cap that stopped the attempt inside its stage
    (output_too_large, sql_too_large, too_complex, result_too_large), else unset.
    """

    case_id: str
    attempt: int
    scorer_version: str
    evidence: tuple[str, ...]
    gold_digest: str
    alignment: str
    column_mapping: tuple[int, ...] | None
    matched: int
    expected_rows: int
    actual_rows: int
    precision: Decimal
    recall: Decimal
    f1: Decimal
    order_ok: bool
    non_finite: bool
    ast_rules: tuple[AstRule, ...]
    items: ScoreItems
    total: Decimal
    result_correct: bool | None
    format_ok: bool
    failure_kind: str
    sql_structural_match: bool | None
    failure_detail: str | UnsetType = UNSET


class AttemptCancelled(EventBase, tag="attempt.cancelled.v1", frozen=True, kw_only=True):
    """An attempt ended without a score (interrupted, missing_recording,
    prompt_leak, infrastructure). It stays in every denominator."""

    case_id: str
    attempt: int
    reason: str
    message: str
    # Issue 30: the message stored cut to the run's max_text_bytes (UNSET: not cut).
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


class RunTotals(_Part, frozen=True, kw_only=True):
    """The figures of a run's ``caseledger runs`` row that depend on its attempts (issue 22).

    Computed by the runner from the run's stream as recorded before its RunFinished
    (and the bank it names), by the one definition ``caseledger runs`` folds
    (``projections.report.build.run_totals``); ``verify --recompute`` re-derives them.
    """

    #: Planned attempts with an outcome (not ``unscored``).
    done: int
    #: Planned attempts (cases x attempts).
    planned: int
    #: Result-correct attempts / planned, 4 places; None when nothing is planned.
    result_correct_rate: str | None
    #: The weighted model score, as the report shows it; None when there is none.
    score: str | None
    #: The earliest ``at`` among the run's events before the RunFinished.
    first_event: str


class RunFinished(EventBase, tag="run.finished.v1", frozen=True, kw_only=True):
    """The run's final status: completed, cancelled or failed.

    ``totals`` (issue 22): the run's ``runs`` figures, set by the runner for a model
    or self-test run; UNSET (left out of the bytes) for a calibration run, a run
    withdrawn before it finished, and in every RunFinished written before it.
    """

    status: str
    message: str = ""
    totals: RunTotals | UnsetType = UNSET
    # Issue 30: the message stored cut to the run's max_text_bytes (UNSET: not cut).
    texts_cut: tuple[TextCut, ...] | UnsetType = UNSET


# ---------------------------------------------------------------- calibration events


class DatabaseVerdict(_Part, frozen=True, kw_only=True):
    """The scorer's verdict on one SQL on one database (``base`` or a variant id).

    ``result_correct`` is None when nothing was scored; ``error_kind`` then says
    why (guard, sql_runtime, timeout, memory, worker_crash, scoring).
    """

    database: str
    result_correct: bool | None
    error_kind: str | None = None
    result_digest: str | None = None


class VariantSummary(_Part, frozen=True, kw_only=True):
    """A variant database of a calibration: its id, digests of its tables and gold."""

    variant_id: str
    stale: bool
    tables_digest: str
    gold_digest: str


class CalibrationMutantJudged(
    EventBase, tag="calibration.mutant.judged.v1", frozen=True, kw_only=True
):
    """One mutant of one case in a calibration run (the mutated SQL only by its hash).

    ``status``: killed, survived, equivalent, blocked, unsupported, not_applicable.
    """

    case_id: str
    mutant_id: str
    operator: str
    pattern: str
    status: str
    reason: str
    sql_sha256: str | None
    verdicts: tuple[DatabaseVerdict, ...]
    review: str | None = None


class CalibrationControlChecked(
    EventBase, tag="calibration.control.checked.v1", frozen=True, kw_only=True
):
    """One positive control (an alternative_sql of a case): passed = correct everywhere."""

    case_id: str
    index: int
    sql_sha256: str
    passed: bool
    verdicts: tuple[DatabaseVerdict, ...]


class CalibrationFinished(EventBase, tag="calibration.finished.v1", frozen=True, kw_only=True):
    """The totals of a calibration run. ``kill_rate`` = killed / (killed + survived)."""

    calibration_sha256: str | None
    scorer_version: str
    variants: tuple[VariantSummary, ...]
    killed: int
    survived: int
    equivalent: int
    blocked: int
    unsupported: int
    not_applicable: int
    kill_rate: Decimal | None
    controls_passed: int
    controls_total: int
    passed: bool
    report_digest: str


class VariantOutcome(_Part, frozen=True, kw_only=True):
    """A model's SQL on one variant: correct against the variant's gold, and whether
    its answer moved from its base answer."""

    variant_id: str
    non_interfering: bool
    result_correct: bool | None
    moved: bool | None
    error_kind: str | None = None


class VariantChecked(EventBase, tag="variant.checked.v1", frozen=True, kw_only=True):
    """Variant diagnostics of one attempt (flags: variant_mismatch, scope_leak).
    They never change the score or result_correct."""

    case_id: str
    attempt: int
    calibration_sha256: str
    flags: tuple[str, ...]
    outcomes: tuple[VariantOutcome, ...]


class SliceComputed(EventBase, tag="slice.computed.v1", frozen=True, kw_only=True):
    """Where one attempt's SQL first departs from the reference SQL (issue 19,
    docs/slices.md): ``component`` is tables, joins, filters, grouping, aggregates,
    projection, order, none or unknown, by the rules of ``slicer_version``.
    ``evidence`` names the OutputParsed and SqlExecuted it read. A diagnostic: it
    never changes a score, a rate or a rank."""

    case_id: str
    attempt: int
    slicer_version: str
    evidence: tuple[str, ...]
    reference_sql_sha256: str
    component: str
    detail: str


# ---------------------------------------------------------------- runs from other machines


class ForeignSignerRegistered(EventBase, tag="signer.foreign.v1", frozen=True, kw_only=True):
    """The operator of this ledger accepts another machine's key as the signer of
    runs imported from it (issue 18, docs/exchange.md). In stream ``ledger``,
    signed by the accepting operator (``accepted_by``; ``at`` is when). The key
    may sign nothing in this log: it only vouches for the EventImported bodies
    it signed on its own ledger, ``origin``."""

    key_id: str
    name: str
    public_key: str
    origin: str
    accepted_by: str


class SignerTrusted(EventBase, tag="signer.trusted.v1", frozen=True, kw_only=True):
    """The operator of this ledger trusts a key to sign runs made elsewhere (issue 29,
    docs/exchange.md). In stream ``ledger``, signed by the operator (``trusted_by``).
    ``import run`` accepts a bundle only when every key that signed its run events is
    trusted and not revoked; ``origin``, when set, is the only ledger whose runs the
    key is trusted for (the bundle's origin must be attested by the key's signature).
    A name is bound to one key per ledger: no other key, native or trusted, may use
    ``name``."""

    key_id: str
    name: str
    public_key: str
    trusted_by: str
    origin: str | UnsetType = UNSET


class SignerUntrusted(EventBase, tag="signer.untrusted.v1", frozen=True, kw_only=True):
    """The operator revokes the trust a ``signer.trusted.v1`` gave (issue 29). Runs
    imported before this seq stay readable (reports say the trust was revoked); no run
    signed by the key is imported after it."""

    key_id: str
    name: str
    revoked_by: str


class EventImported(EventBase, tag="event.imported.v1", frozen=True, kw_only=True):
    """One event of a run recorded on another ledger, kept exactly as signed there
    (issue 18, docs/exchange.md). ``body`` is the original canonical bytes
    (standard base64), ``origin_seq`` its seq in ledger ``origin``, ``key_id``
    and ``sig`` its original signature, over ``prev_chain`` (that ledger's chain
    before it, hex; None for a rule event/v1 signature) and its leaf hash. The
    wrapper is in the run's stream and signed by this ledger's operator; readers
    fold the inner event as the run's own."""

    origin: str
    origin_seq: int
    body: str
    prev_chain: str | None
    key_id: str
    sig: str


class ClaimCheck(_Part, frozen=True, kw_only=True):
    """One claim of a summary and its verdicts (issue 19, docs/claims.md): ``kind`` is
    number, bound, item, extreme, comparison or direction; ``text`` the clause it was
    read from; ``reading`` what was read; ``verdict`` supported, contradicted or
    unverifiable against the executed result, ``gold_verdict`` the same against gold
    (None without gold); ``detail`` the value that decided it."""

    kind: str
    text: str
    reading: str
    verdict: str
    detail: str
    gold_verdict: str | None


class ClaimsChecked(EventBase, tag="claims.checked.v1", frozen=True, kw_only=True):
    """The answer contract of one attempt (issue 19, docs/claims.md): every claim read
    from its OutputParsed ``summary``, checked against its SqlExecuted rows and the
    case's gold (``gold_digest``), by the rules of ``claims_version``. ``evidence``
    names the OutputParsed and SqlExecuted it read. A diagnostic: it never changes a
    score, a rate or a rank."""

    case_id: str
    attempt: int
    claims_version: str
    evidence: tuple[str, ...]
    gold_digest: str | None
    claims: tuple[ClaimCheck, ...]


class RunWithdrawn(EventBase, tag="run.withdrawn.v1", frozen=True, kw_only=True):
    """An operator withdrew the run (``caseledger runs withdraw RUN --reason TEXT``), on
    the run's own stream and signed by an operator key: reports, ``runs`` and the gate
    leave it out by default and say so (``--include-withdrawn`` shows it, marked with
    this reason). Every event of the run stays in the log."""

    reason: str


class PromptStored(EventBase, tag="prompt.stored.v1", frozen=True, kw_only=True):
    """One distinct prompt text of a run, stored once in the run's stream (issue 22).

    The runner appends one per distinct prompt of the attempts it is about to send,
    after the leak check passed and before the first model call; the PromptSent of
    each attempt then names it by ``prompt_sha256`` (``sha256:<hex>`` of the UTF-8
    text) instead of repeating the text. ``verify`` checks the text hashes to it.
    """

    prompt_sha256: str
    prompt: str


Event = (
    SignerRegistered
    | SignerRetired
    | BankPublished
    | CheckpointIssued
    | RunStarted
    | PromptSent
    | ModelResponded
    | ProviderFailed
    | OutputParsed
    | SqlGuarded
    | SqlExecuted
    | ScoreComputed
    | AttemptCancelled
    | RunFinished
    | CalibrationMutantJudged
    | CalibrationControlChecked
    | CalibrationFinished
    | VariantChecked
    | SliceComputed
    | ForeignSignerRegistered
    | EventImported
    | ClaimsChecked
    | RunWithdrawn
    | PromptStored
    | SignerTrusted
    | SignerUntrusted
)

EVENT_TYPES: tuple[type[EventBase], ...] = (
    SignerRegistered,
    SignerRetired,
    BankPublished,
    CheckpointIssued,
    RunStarted,
    PromptSent,
    ModelResponded,
    ProviderFailed,
    OutputParsed,
    SqlGuarded,
    SqlExecuted,
    ScoreComputed,
    AttemptCancelled,
    RunFinished,
    CalibrationMutantJudged,
    CalibrationControlChecked,
    CalibrationFinished,
    VariantChecked,
    SliceComputed,
    ForeignSignerRegistered,
    EventImported,
    ClaimsChecked,
    RunWithdrawn,
    PromptStored,
    SignerTrusted,
    SignerUntrusted,
)

# Old tag -> function turning an old body (a dict) into the next version's body.
# Applied on read until the tag is a current one. Empty while every shape is v1.
UPCASTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def tag_of(cls: type[EventBase]) -> str:
    """The stable tag of an event class."""
    return str(cls.__struct_config__.tag)
