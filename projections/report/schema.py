"""THE report schema: the report, its sections, runs, CaseRuns, the scorecard and the gate verdict.

Every report is an instance of :class:`Report` (built by ``build.py``) and is
encoded with ``ledger.codec.canonical_json`` (sorted keys, decimals as
strings, no floats). The Markdown and HTML renderers, ``metrics.py`` and the
gate read these attributes; ``docs/reports.md`` documents every field (a test
checks both directions) and ``docs/report.schema.json`` and
``docs/gate-verdict.schema.json`` are generated from here by
``tools/gen_report_schema.py``.

Typed as open values on purpose (documented as such in docs/reports.md):
result cells (``rows``: DuckDB values as the worker stored them), and the
fairness control and disclosed values (one value, or the sorted list of the
differing values, or null). Nested evidence copied from events (``Versions``,
``GenerationParams``, ``Invocation``, ``Usage``, ``Plan``, ``Violation``,
``AstRule``, ``ScoreItems``, ``Column``) uses the event structs of
``ledger/events.py`` (docs/events.md): one definition for both.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from ledger.events import (
    AstRule,
    Column,
    GenerationParams,
    Invocation,
    Plan,
    ScoreItems,
    Usage,
    Versions,
    Violation,
)

__all__ = [
    "CONTRACT",
    "CONTRACT_V2",
    "CONTRACT_V3",
    "GATE_CONTRACT",
    "SCORECARD_CONTRACT",
    "GateVerdict",
    "Report",
    "ReportV2",
    "ReportV3",
    "RunComparison",
    "RunEntry",
    "RunSigner",
    "Scorecard",
    "Section",
    "SectionStatistics",
    "report_schema",
    "report_v2_schema",
    "report_v3_schema",
    "verdict_schema",
]

CONTRACT: Final = "caseledger-report/1"
#: The compact report (issue 21): the default of ``caseledger report --format json``.
CONTRACT_V2: Final = "caseledger-report/2"
#: Issue 32: ``/2`` with error bars, paired comparisons and rank groups (the default).
CONTRACT_V3: Final = "caseledger-report/3"
SCORECARD_CONTRACT: Final = "caseledger-scorecard/1"
GATE_CONTRACT: Final = "caseledger-gate/1"

#: A decimal string (every number that is not a count), e.g. ``"0.8500"``, ``"-0.05"``.
Dec = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]+(\.[0-9]+)?$")]
#: A count (>= 0).
Count = Annotated[int, msgspec.Meta(ge=0)]
#: A content hash ``sha256:<64 hex>``.
Sha256 = Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
#: A gate tolerance: absolute ``0.02`` or relative ``0.10-r``.
Tol = Annotated[str, msgspec.Meta(pattern=r"^[0-9]+(\.[0-9]+)?(-r)?$")]

#: A value of a fairness control or disclosed variable: one value, a sorted list, or null.
Recorded = Any
#: One result cell (DuckDB value as stored: str, int, bool or null).
Cell = Any


class _S(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every report struct."""


# ----------------------------------------------------------------- top level


class Checkpoint(_S, frozen=True, kw_only=True):
    """The tree the report was built from."""

    tree_size: Count
    root_hash: Sha256


class ScorerView(_S, frozen=True, kw_only=True):
    """The scorer version every run is viewed under."""

    requested: str | None


class Selection(_S, frozen=True, kw_only=True):
    """The runs asked for."""

    runs: list[str] | None


class BankEngine(_S, frozen=True, kw_only=True):
    """The engine of a bank that is not DuckDB."""

    name: str
    version: str
    transpiled_from: str | None
    differences: list[str]


class Bank(_S, frozen=True, kw_only=True):
    """The bank of a section."""

    id: str
    version: str
    hash: Sha256
    published_seq: Count
    gold_digest: str
    #: The engine the bank runs on, with its version and the engine differences it was
    #: published with; absent for DuckDB (the default engine).
    engine: BankEngine | msgspec.UnsetType = msgspec.UNSET


class SectionCase(_S, frozen=True, kw_only=True):
    """One case of the section's bank."""

    case: str
    dimension: str
    difficulty: str
    weight: Dec
    question: str
    question_en: str | None
    required_ast: list[str]


class Gold(_S, frozen=True, kw_only=True):
    """One case's gold result (internal view only)."""

    case: str
    columns: list[Column]
    rows: list[list[Cell]]
    digest: str


# ----------------------------------------------------------------- run entries


class Dates(_S, frozen=True, kw_only=True):
    """The earliest and latest ``at`` claimed by the run's events."""

    first_event: str
    last_event: str


class ModelIdentity(_S, frozen=True, kw_only=True):
    """Who answered: requested, resolved by the provider, or claimed by a recording."""

    requested: str | None
    provider: str | None
    auth_mode: str | None
    identity_source: Literal["resolved_by_provider", "recorded_claim", "requested_only"]
    resolved: list[str]
    recorded: list[str]


class Configured(_S, frozen=True, kw_only=True):
    """The controls RunStarted declared."""

    harness_kind: str
    bridge_version: str | None
    policy_version: str | None
    response_mode: str
    single_turn: bool
    tools: str
    retries: int
    context_isolation: str
    timeout_ms: int
    system_prompt_digest: str | None
    prompt_contract_digest: str
    params: GenerationParams


class Quality(_S, frozen=True, kw_only=True):
    """Counts and rates over every planned attempt."""

    total: Count
    evaluated: Count
    coverage: Dec | None
    correct: Count
    wrong: Count
    unknown: Count
    unscored: Count
    result_correct_rate: Dec | None
    format_ok_rate: Dec | None
    sql_exec_success_rate: Dec | None
    failures: dict[str, Count]
    failure_rates: dict[str, Dec | None]
    cancelled: dict[str, Count]


class Scores(_S, frozen=True, kw_only=True):
    """Weighted scores (auxiliary)."""

    auxiliary: bool
    model_score: Dec | None
    dimensions: dict[str, Dec | None]
    difficulties: dict[str, Dec | None]


class CaseScores(_S, frozen=True, kw_only=True):
    """One case of one run: its attempts and their statistics."""

    case: str
    dimension: str
    difficulty: str
    weight: Dec
    totals: list[Dec]
    outcomes: list[str]
    result_correct: list[bool | None]
    mean: Dec
    nonzero_rate: Dec | None
    stddev: Dec


class TokenParts(_S, frozen=True, kw_only=True):
    """Token counts summed over the attempts that have the figure."""

    input: Count
    cache_read: Count
    cache_write: Count
    output: Count
    reasoning_output: Count


class Tokens(_S, frozen=True, kw_only=True):
    """Tokens of the run."""

    total: Count | None
    parts: TokenParts | None
    per_correct: Dec | None
    coverage: Dec | None
    #: Attempts that report tokens, present only when some planned attempt does not.
    covered: Count | msgspec.UnsetType = msgspec.UNSET


class Cost(_S, frozen=True, kw_only=True):
    """Cost of the run (billed, else estimated)."""

    total: Dec | None
    kind: Literal["billed", "estimate", "mixed"] | None
    per_correct: Dec | None
    coverage: Dec | None
    #: Attempts that have a cost, present only when some planned attempt does not.
    covered: Count | msgspec.UnsetType = msgspec.UNSET


class GenerationTime(_S, frozen=True, kw_only=True):
    """Generation time of the run, in ms."""

    total: Dec | None
    per_correct: Dec | None
    p95: Dec | None
    coverage: Dec | None


class SqlExecTime(_S, frozen=True, kw_only=True):
    """SQL execution time of the run, in ms."""

    p95: Dec | None
    coverage: Dec | None


class Efficiency(_S, frozen=True, kw_only=True):
    """The efficiency-v2 block of one run."""

    version: str
    correct: Count
    tokens: Tokens
    cost: Cost
    generation_ms: GenerationTime
    sql_exec_ms: SqlExecTime


class VariantDiagnostics(_S, frozen=True, kw_only=True):
    """Variant diagnostics of one run (never part of a score)."""

    diagnostic_only: bool
    total: Count
    checked: Count
    coverage: Dec | None
    flagged: Count
    flags: dict[str, Count]
    calibration_sha256: list[str]


class Withdrawal(_S, frozen=True, kw_only=True):
    """An operator's withdrawal of a run (run.withdrawn.v1): why, at which seq, when."""

    reason: str
    seq: Count
    at: str


class WithdrawnRun(Withdrawal, frozen=True, kw_only=True):
    """A withdrawn run of the report's selection, and whether the report shows it."""

    run: str
    shown: bool


class RunSigner(_S, frozen=True, kw_only=True):
    """The key that signed a run imported from another machine (docs/exchange.md): its
    name and key id; ``origin``, the ledger the run was recorded on as the key attested
    it (``unattested`` when the bundle carried no attestation); ``trusted_since``, the
    seq of the ``signer.trusted.v1`` that trusts the key here; ``revoked_at``, the seq
    of the ``signer.untrusted.v1`` that revoked that trust later (the run stays
    readable). ``origin`` is what the run's wrappers record (before issue 29: the origin
    the bundle claimed); ``trusted_since`` is absent when no trust names the key."""

    name: str
    key_id: str
    origin: str | msgspec.UnsetType = msgspec.UNSET
    trusted_since: Count | msgspec.UnsetType = msgspec.UNSET
    revoked_at: Count | msgspec.UnsetType = msgspec.UNSET


class _Entry(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="run_kind"
):
    """Fields every run entry has; ``run_kind`` is the tag."""

    run: str
    profile: str
    adapter_kind: str
    dates: Dates
    status: str
    scorer_version: str
    versions: Versions
    rank: int | None
    # Issue 18: only for a run imported from another machine, whose key signed it there
    # (absent for a run recorded in this ledger, signed by its own operator).
    signer: RunSigner | msgspec.UnsetType = msgspec.UNSET
    # Issue 20: only for a withdrawn run shown with --include-withdrawn (absent otherwise).
    withdrawn: Withdrawal | msgspec.UnsetType = msgspec.UNSET

    @property
    def run_kind(self) -> str:
        """``model``, ``self_test`` or ``calibration`` (the JSON tag)."""
        return str(type(self).__struct_config__.tag)


class BenchmarkVerdict(_S, frozen=True, kw_only=True):
    """One attempt: the benchmark's EX and caseledger's result_correct (null: undecided)."""

    case: str
    attempt: int
    ex: bool | None
    caseledger: bool | None


class BenchmarkDisagreement(BenchmarkVerdict, frozen=True, kw_only=True):
    """An attempt where the two verdicts differ (or EX is undecided), and why."""

    reason: str


class BenchmarkBlock(_S, frozen=True, kw_only=True):
    """For a bank imported from a public benchmark: its own EX beside caseledger's verdict
    (projections/benchmark.py; docs/benchmarks.md)."""

    name: str
    rule: str
    rows: str
    attempts: int
    ex_correct: int
    ex_judged: int
    caseledger_correct: int
    agree: int
    verdicts: list[BenchmarkVerdict]
    disagreements: list[BenchmarkDisagreement]


class SliceCounts(_S, frozen=True, kw_only=True):
    """First divergences over wrong attempts: ``counts`` per component, ``none``,
    ``unknown`` and ``not_recorded``; ``shares`` = count / checked (null when nothing
    was checked)."""

    wrong: Count
    checked: Count
    counts: dict[str, Count]
    shares: dict[str, Dec | None]


class SliceAttempt(_S, frozen=True, kw_only=True):
    """A wrong attempt left out of the shares (unknown or not recorded), and why."""

    case: str
    attempt: int
    component: str
    detail: str


class SliceBlock(SliceCounts, frozen=True, kw_only=True):
    """Understanding slices of a run (issue 19, projections/slices.py, docs/slices.md):
    where each wrong answer first departs from the reference SQL. Diagnostic only."""

    diagnostic_only: bool
    slicer_versions: list[str]
    dimensions: dict[str, SliceCounts]
    unattributed: list[SliceAttempt]


class ClaimCounts(_S, frozen=True, kw_only=True):
    """Claims by verdict."""

    supported: Count
    contradicted: Count
    unverifiable: Count


class ClaimBlock(_S, frozen=True, kw_only=True):
    """The answer contract of a run (issue 19, projections/claims.py, docs/claims.md): the
    claims of its summaries checked against their own results. Diagnostic only."""

    diagnostic_only: bool
    claims_versions: list[str]
    attempts_checked: Count
    attempts_with_claims: Count
    claims: Count
    counts: ClaimCounts
    checkable: Count
    faithfulness_rate: Dec | None
    contradicted_rate: Dec | None
    correct_checked: Count
    correct_contradicted: Count
    correct_contradicted_share: Dec | None
    kinds: dict[str, ClaimCounts]
    gold_counts: ClaimCounts


class RunEntry(_Entry, tag="model", frozen=True, kw_only=True):
    """A run with attempts (a model; :class:`SelfTestRunEntry` for the reference adapter)."""

    attempts_per_case: int
    model: ModelIdentity
    configured: Configured
    price_snapshot_digest: str | None
    replay_file_sha256: str | None
    quality: Quality
    scores: Scores
    cases: list[CaseScores]
    efficiency: Efficiency
    variant_diagnostics: VariantDiagnostics
    # Issue 16: only for a bank imported from a benchmark (absent otherwise).
    benchmark: BenchmarkBlock | msgspec.UnsetType = msgspec.UNSET
    # Issue 19: only when the run has SliceComputed events (absent otherwise).
    slices: SliceBlock | msgspec.UnsetType = msgspec.UNSET
    # Issue 19: only when the run has ClaimsChecked events (absent otherwise).
    claims: ClaimBlock | msgspec.UnsetType = msgspec.UNSET


class SelfTestRunEntry(RunEntry, tag="self_test", frozen=True, kw_only=True):
    """A self-test run (the reference adapter): the same fields as a model run."""


class MutantCounts(_S, frozen=True, kw_only=True):
    """Mutants in each status."""

    killed: int
    survived: int
    equivalent: int
    blocked: int
    unsupported: int
    not_applicable: int


class FailedControl(_S, frozen=True, kw_only=True):
    """A positive control the oracle rejected."""

    case: str
    index: int
    sql_sha256: str


class PositiveControls(_S, frozen=True, kw_only=True):
    """Correct alternative queries the oracle must accept."""

    passed: int
    total: int
    failed: list[FailedControl]


class Mutant(_S, frozen=True, kw_only=True):
    """A planted error (its SQL is never in the log, only its hash)."""

    case: str
    mutant: str
    operator: str
    pattern: str
    sql_sha256: str


class ReviewedMutant(Mutant, frozen=True, kw_only=True):
    """A mutant reviewed as equivalent, with the review from calibration.yaml."""

    review: str | None


class VariantDatabase(_S, frozen=True, kw_only=True):
    """A variant database of the calibration."""

    id: str
    stale: bool
    tables_digest: str
    gold_digest: str


class Calibration(_S, frozen=True, kw_only=True):
    """What the oracle did with planted errors and correct alternatives."""

    finished: bool
    calibration_sha256: str | None
    scorer_version: str | None
    kill_rate: Dec | None
    counts: MutantCounts
    applicable: Count
    judged_events: Count
    positive_controls: PositiveControls
    passed: bool | None
    survivors: list[Mutant]
    equivalents: list[ReviewedMutant]
    operators: dict[str, MutantCounts]
    variants: list[VariantDatabase]
    report_digest: str | None


class CalibrationRunEntry(_Entry, tag="calibration", frozen=True, kw_only=True):
    """A calibration run: no attempts and no score."""

    calibration: Calibration


AnyRunEntry = RunEntry | SelfTestRunEntry | CalibrationRunEntry


# ----------------------------------------------------------------- fairness


class Controls(_S, frozen=True, kw_only=True):
    """The invocation controls recorded for one run (value, sorted list, or null)."""

    harness_kind: Recorded
    response_mode: Recorded
    single_call: Recorded
    tools: Recorded
    retries: Recorded
    prompt_contract_digest: Recorded


class Disclosed(_S, frozen=True, kw_only=True):
    """The disclosed variables recorded for one run."""

    provider: Recorded
    auth_mode: Recorded
    model: Recorded
    parameters: dict[str, Recorded]


class Fairness(_S, frozen=True, kw_only=True):
    """The fairness class of a models section."""

    class_: Literal["single_model", "controlled_harness", "not_controlled"] = msgspec.field(
        name="class"
    )
    runs: list[str]
    controls: dict[str, Controls]
    differing_controls: list[str]
    missing_invocation_evidence: list[str]
    invocation_coverage: dict[str, Dec | None]
    disclosed: dict[str, Disclosed]
    disclosed_differences: list[str]


# ----------------------------------------------------------------- CaseRuns


class ProviderFailure(_S, frozen=True, kw_only=True):
    """Why the provider call failed."""

    kind: str
    message: str
    http_status: int | None


class Response(_S, frozen=True, kw_only=True):
    """The model's response, or the provider failure."""

    kind: Literal["model_responded", "provider_failed"]
    raw_output: str | None
    resolved_model: str | None
    recorded_model: str | None
    provider_request_id: str | None
    invocation: Invocation | None
    usage: Usage | None
    cost: str | None
    estimated_cost: str | None
    generation_us: int | None
    failure: ProviderFailure | None


class Parsed(_S, frozen=True, kw_only=True):
    """The output protocol's reading of the raw output."""

    protocol_strict: bool
    recovered_from_fence: bool
    plan: Plan | None
    sql: str | None
    summary: str | None
    assumptions: list[str] | None
    error: str | None
    # Issue 16: true for a benchmark's prediction read from its own file (protocol
    # verdict "imported": plain SQL, neither strict nor a contract error); absent otherwise.
    imported: bool | msgspec.UnsetType = msgspec.UNSET


class Guard(_S, frozen=True, kw_only=True):
    """The SQL guard's verdict."""

    passed: bool
    violations: list[Violation]
    ast_digest: str | None


class Execution(_S, frozen=True, kw_only=True):
    """The attempt's last execution."""

    ok: bool
    error_kind: str | None
    error_message: str | None
    columns: list[Column]
    rows: list[list[Cell]]
    row_count: int
    truncated: bool
    sql_us: int
    tries: int


class Diff(_S, frozen=True, kw_only=True):
    """The result diff against gold."""

    alignment: str
    expected_rows: Count
    actual_rows: Count
    matched: Count
    missing_rows: Count
    extra_rows: Count
    precision: Dec
    recall: Dec
    f1: Dec
    order_ok: bool
    non_finite: bool


class Score(_S, frozen=True, kw_only=True):
    """The score under the viewed scorer version."""

    scorer_version: str
    total: Dec
    items: ScoreItems
    ast_rules: list[AstRule]
    result_correct: bool | None
    format_ok: bool
    failure_kind: str
    sql_structural_match: bool | None


class Cancel(_S, frozen=True, kw_only=True):
    """Why the attempt was cancelled."""

    reason: str
    message: str


class VariantOutcomeRow(_S, frozen=True, kw_only=True):
    """The attempt's SQL on one variant database."""

    variant: str
    non_interfering: bool
    result_correct: bool | None
    moved: bool | None
    error_kind: str | None


class CaseRunVariants(_S, frozen=True, kw_only=True):
    """Variant diagnostics of one CaseRun."""

    calibration_sha256: str
    flags: list[str]
    outcomes: list[VariantOutcomeRow]


class EventRef(_S, frozen=True, kw_only=True):
    """One event of a CaseRun."""

    seq: int
    type: str
    leaf_hash: str


class CaseRunSlice(_S, frozen=True, kw_only=True):
    """The understanding slice of a CaseRun's answer (issue 19, docs/slices.md)."""

    component: str
    detail: str
    slicer_version: str


class CaseRunClaim(_S, frozen=True, kw_only=True):
    """One claim of a CaseRun's summary and its verdicts (issue 19, docs/claims.md)."""

    kind: str
    reading: str
    text: str
    verdict: str
    detail: str
    gold_verdict: str | None


class CaseRun(_S, frozen=True, kw_only=True):
    """One run x case x attempt and its evidence."""

    run: str
    case: str
    attempt: int
    outcome: str
    prompt: str | None
    prompt_sha256: str | None
    response: Response | None
    parsed: Parsed | None
    guard: Guard | None
    execution: Execution | None
    diff: Diff | None
    score: Score | None
    cancel: Cancel | None
    variants: CaseRunVariants | None
    events: list[EventRef]
    # Issue 19: only when a slice.computed.v1 / claims.checked.v1 event names this
    # answer (absent otherwise, so reports without them keep their bytes).
    slice: CaseRunSlice | msgspec.UnsetType = msgspec.UNSET
    claims: list[CaseRunClaim] | msgspec.UnsetType = msgspec.UNSET


# ----------------------------------------------------------------- sections and the report


class Section(_S, frozen=True, kw_only=True):
    """Runs of one kind, bank hash and scorer major."""

    kind: Literal["models", "self_test", "calibration"]
    ranked: bool
    title: str
    bank: Bank
    scorer_major: str
    scorer_versions: list[str]
    fairness: Fairness | None
    cases: list[SectionCase]
    runs: list[AnyRunEntry]
    caseruns: list[CaseRun]
    gold: list[Gold] | None


class Report(_S, frozen=True, kw_only=True):
    """A ``caseledger-report/1`` report."""

    contract: Literal["caseledger-report/1"]
    checkpoint: Checkpoint
    view: Literal["public", "internal-with-gold"]
    notice: str
    scorer: ScorerView
    selection: Selection
    sections: list[Section]
    how_to_read: list[str]
    # Issue 20: the withdrawn runs of the selection (absent when there is none).
    withdrawn: list[WithdrawnRun] | msgspec.UnsetType = msgspec.UNSET


# ----------------------------------------------------------------- caseledger-report/2


class CompactResponse(_S, frozen=True, kw_only=True):
    """The model's response in a ``caseledger-report/2`` CaseRun: no raw output, no
    provider request id, no model names (the run entry's ``model`` lists them)."""

    kind: Literal["model_responded", "provider_failed"]
    invocation: Invocation | None
    usage: Usage | None
    cost: str | None
    estimated_cost: str | None
    generation_us: int | None
    failure: ProviderFailure | None


class CompactParsed(_S, frozen=True, kw_only=True):
    """The output protocol's reading in a ``caseledger-report/2`` CaseRun: the SQL and
    the protocol verdict (no plan, summary or assumptions)."""

    protocol_strict: bool
    recovered_from_fence: bool
    sql: str | None
    error: str | None
    imported: bool | msgspec.UnsetType = msgspec.UNSET


class CompactGuard(_S, frozen=True, kw_only=True):
    """The SQL guard's verdict in a ``caseledger-report/2`` CaseRun (no AST digest)."""

    passed: bool
    violations: list[Violation]


class CompactExecution(_S, frozen=True, kw_only=True):
    """The last execution in a ``caseledger-report/2`` CaseRun: counts, no rows or columns."""

    ok: bool
    error_kind: str | None
    error_message: str | None
    row_count: int
    truncated: bool
    sql_us: int
    tries: int


class CompactCaseRun(_S, frozen=True, kw_only=True):
    """One run x case x attempt in a ``caseledger-report/2`` report: why it scored what it
    scored, and the leaf hashes of the events that say so (docs/reports.md "Versions")."""

    run: str
    case: str
    attempt: int
    outcome: str
    prompt_sha256: str | None
    response: CompactResponse | None
    parsed: CompactParsed | None
    guard: CompactGuard | None
    execution: CompactExecution | None
    diff: Diff | None
    score: Score | None
    cancel: Cancel | None
    variant_flags: list[str] | None
    evidence: list[EventRef]
    slice: CaseRunSlice | msgspec.UnsetType = msgspec.UNSET
    claims: list[CaseRunClaim] | msgspec.UnsetType = msgspec.UNSET


class SectionV2(Section, frozen=True, kw_only=True):
    """A section of a ``caseledger-report/2`` report: compact CaseRuns."""

    caseruns: list[CompactCaseRun]  # type: ignore[assignment]


class ReportV2(_S, frozen=True, kw_only=True):
    """A ``caseledger-report/2`` report: the fields of ``caseledger-report/1`` with compact
    CaseRuns and every prompt text once, by its SHA-256."""

    contract: Literal["caseledger-report/2"]
    checkpoint: Checkpoint
    view: Literal["public", "internal-with-gold"]
    notice: str
    scorer: ScorerView
    selection: Selection
    prompts: dict[str, str]
    sections: list[SectionV2]
    how_to_read: list[str]
    withdrawn: list[WithdrawnRun] | msgspec.UnsetType = msgspec.UNSET


# ----------------------------------------------------------------- caseledger-report/3


class Interval(_S, frozen=True, kw_only=True):
    """A 95% interval: estimate +- 1.96 standard errors (a run's: clipped to its range)."""

    low: Dec
    high: Dec


class Estimate(_S, frozen=True, kw_only=True):
    """A run's rate or score over its cases with its standard error and 95% interval
    (``se`` and ``interval`` null with fewer than 2 cases; docs/statistics.md)."""

    value: Dec | None
    se: Dec | None
    interval: Interval | None


class RunStatistics(_S, frozen=True, kw_only=True):
    """One run's error bars: the case is the unit (docs/statistics.md)."""

    run: str
    cases: Count
    result_correct_rate: Estimate
    model_score: Estimate
    #: ``1``, ``2=``, ...: runs of one group cannot be told apart (null outside models).
    rank_group: str | None


class PairedComparison(_S, frozen=True, kw_only=True):
    """Run ``a`` against run ``b`` on the cases both planned, paired by case: the
    result-correct rate's difference ``a - b`` (docs/statistics.md)."""

    a: str
    b: str
    cases: Count
    difference: Dec | None
    se: Dec | None
    interval: Interval | None
    p_value: Dec
    test: Literal["exact_sign_flip", "normal", "none"]
    significant: bool
    a_better: Count
    b_better: Count
    #: Minimum detectable difference at 80% power, alpha 0.05 (null with fewer than 2 cases).
    mdd: Dec | None


class SectionStatistics(_S, frozen=True, kw_only=True):
    """A section's error bars, pairwise comparisons, rank groups and headline."""

    alpha: Dec
    confidence: Dec
    runs: list[RunStatistics]
    pairs: list[PairedComparison]
    headline: str | None


class SectionV3(SectionV2, frozen=True, kw_only=True):
    """A section of a ``caseledger-report/3`` report: a ``/2`` section with its statistics
    (null for a calibration section)."""

    statistics: SectionStatistics | None


class ReportV3(ReportV2, frozen=True, kw_only=True):
    """A ``caseledger-report/3`` report (issue 32): ``/2`` with each section's statistics."""

    contract: Literal["caseledger-report/3"]  # type: ignore[assignment]
    sections: list[SectionV3]  # type: ignore[assignment]


class DifferingCase(_S, frozen=True, kw_only=True):
    """A case where two compared runs' case rates differ (``caseledger compare``)."""

    case: str
    a: Dec
    b: Dec


class RunComparison(_S, frozen=True, kw_only=True):
    """What ``caseledger compare RUN_A RUN_B --json`` prints: two runs on one bank, paired
    by case (docs/statistics.md), and every case where their rates differ."""

    tree_size: Count
    bank: ScorecardBank
    alpha: Dec
    a: RunStatistics
    b: RunStatistics
    comparison: PairedComparison
    differing: list[DifferingCase]


# ----------------------------------------------------------------- the gate


class ScorecardBank(_S, frozen=True, kw_only=True):
    """The bank a scorecard's run answered (``engine``: absent for DuckDB)."""

    id: str
    version: str
    hash: Sha256
    engine: str | msgspec.UnsetType = msgspec.UNSET


class Completeness(_S, frozen=True, kw_only=True):
    """Whether every planned attempt has a terminal event and none was cancelled."""

    status: str | None
    planned: Count
    unscored: Count
    cancelled: dict[str, Count]
    complete: bool


class InvocationControls(_S, frozen=True, kw_only=True):
    """The invocation controls recorded per attempt."""

    attempts: Count
    with_invocation: Count
    values: dict[str, list[Recorded]]


class MetricCoverage(_S, frozen=True, kw_only=True):
    """How many planned attempts have the figure a metric is computed over."""

    covered: Count
    planned: Count


class Scorecard(_S, frozen=True, kw_only=True):
    """What the gate needs of one run (``caseledger-scorecard/1``)."""

    contract: Literal["caseledger-scorecard/1"]
    run: str
    run_kind: str | None
    profile: str | None
    bank: ScorecardBank
    scorer_version: str
    scorer_major: str
    attempts_per_case: int | None
    completeness: Completeness
    controls: InvocationControls
    denominators: dict[str, Count | None]
    metrics: dict[str, Dec | None]
    #: Metrics whose figure some planned attempt lacks (absent when every metric is complete).
    coverage: dict[str, MetricCoverage] | msgspec.UnsetType = msgspec.UNSET


class GateSide(_S, frozen=True, kw_only=True):
    """One side of the gate."""

    run: str
    profile: str | None
    bank_hash: Sha256
    scorer_version: str
    complete: bool
    n: Count | None
    judged: Count | None
    source: str | msgspec.UnsetType = msgspec.UNSET


class Drift(_S, frozen=True, kw_only=True):
    """The judged-count drift between the sides."""

    judged_baseline: Count | None
    judged_current: Count | None
    change: Dec | None
    threshold: Dec
    warn: bool


class MetricRow(_S, frozen=True, kw_only=True):
    """One metric's comparison."""

    metric: str
    direction: Literal["higher", "lower"] | None
    tolerance: Tol | None
    baseline: Dec | None
    current: Dec | None
    delta: Dec | None
    allowed: Dec | None
    verdict: Literal["pass", "regression", "incomparable", "unpaired", "ignored"]
    note: str | None
    #: Whether a regression of this metric blocks (exit 1); false for an ignored metric,
    #: one without a definition, and a timing metric unless ``gate_timing`` is set.
    gating: bool
    # Issue 32: each side's 95% interval (result_correct_rate and model_score, when the
    # side has per-case results), and under --significance the rule that decided a
    # compared metric; absent otherwise.
    baseline_interval: Interval | msgspec.UnsetType = msgspec.UNSET
    current_interval: Interval | msgspec.UnsetType = msgspec.UNSET
    rule: Literal["tolerance", "significance"] | msgspec.UnsetType = msgspec.UNSET


class GateVerdict(_S, frozen=True, kw_only=True):
    """The gate's verdict (``caseledger-gate/1``)."""

    contract: Literal["caseledger-gate/1"]
    verdict: Literal["pass", "regression", "could_not_judge"]
    exit_code: int
    baseline: GateSide
    current: GateSide
    comparable: bool
    problems: list[str]
    min_n: Count | None
    drift: Drift
    warnings: list[str]
    metrics: list[MetricRow]
    regressions: list[str]
    unpaired: list[str]
    incomparable: list[str]
    # Issue 32: with --significance (or gate_significance = true), the paired comparison
    # of the result-correct rate, baseline as ``a`` and current as ``b``, and its alpha.
    significance: PairedComparison | msgspec.UnsetType = msgspec.UNSET
    alpha: Dec | msgspec.UnsetType = msgspec.UNSET


def report_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a report, generated from :class:`Report`."""
    return _titled(msgspec.json.schema(Report), "caseledger-report/1")


def report_v2_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a ``caseledger-report/2`` report (:class:`ReportV2`)."""
    return _titled(msgspec.json.schema(ReportV2), "caseledger-report/2")


def report_v3_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a ``caseledger-report/3`` report (:class:`ReportV3`)."""
    return _titled(msgspec.json.schema(ReportV3), "caseledger-report/3")


def verdict_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a gate verdict, generated from :class:`GateVerdict`."""
    return _titled(msgspec.json.schema(GateVerdict), "caseledger-gate/1")


def _titled(schema: dict[str, Any], contract: str) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": contract,
        "description": "Generated from projections/report/schema.py by tools/gen_report_schema.py;"
        " do not edit.",
        **schema,
    }
