"""query-plan-v1 protocol: a table of raw outputs and their exact verdicts."""

from __future__ import annotations

import json

import jsonschema
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.codec import canonical_json
from ledger.events import OutputParsed, Plan
from ledger.harness.protocol import (
    ANSWER_FIELDS,
    OUTPUT_CONTRACT,
    PLAN_FIELDS,
    QUERY_PLAN_V1_SCHEMA,
    Parsed,
    parse_output,
)

PLAN = (
    '{"grain": "one row per store", "sources": ["stores", "sales"], "joins": ["sales.store_id"],'
    ' "filters": ["2024"], "metrics": ["sum(revenue)"], "steps": ["join", "group"],'
    ' "risks": []}'
)
SQL = '"SELECT store_id, sum(revenue) FROM sales GROUP BY 1"'
GOOD = f'{{"plan": {PLAN}, "sql": {SQL}, "summary": "revenue per store", "assumptions": ["UTC"]}}'


def answer(**fields: str | None) -> str:
    """A JSON object text with the four fields, some replaced (raw JSON) or dropped (None)."""
    parts = {"plan": PLAN, "sql": SQL, "summary": '"revenue per store"', "assumptions": '["UTC"]'}
    parts.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in parts.items() if v is not None) + "}"


def plan(**fields: str | None) -> str:
    parts = {
        "grain": '"g"',
        "sources": "[]",
        "joins": "[]",
        "filters": "[]",
        "metrics": "[]",
        "steps": "[]",
        "risks": "[]",
    }
    parts.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in parts.items() if v is not None) + "}"


STRICT = "strict"
RECOVERED = "recovered"

# (title, raw output, expected verdict: STRICT, RECOVERED or the exact error reason)
TABLE = [
    ("one object", GOOD, STRICT),
    ("surrounding whitespace", "\n\n  " + GOOD + " \t\r\n", STRICT),
    ("compact object", GOOD.replace(": ", ":").replace(", ", ","), STRICT),
    (
        "empty strings and arrays are still the right types",
        answer(sql='""', assumptions="[]"),
        STRICT,
    ),
    (
        "fields in another order",
        '{"assumptions": [], "summary": "", "sql": "", "plan": ' + PLAN + "}",
        STRICT,
    ),
    ("sql string holding a fence", answer(sql="\"SELECT '```' AS x\""), STRICT),
    ("unicode escapes", answer(summary='"caf\\u00e9 \\ud83d\\ude00"'), STRICT),
    ("fenced", "```json\n" + GOOD + "\n```", RECOVERED),
    (
        "fenced with whitespace around and inside",
        "  \n```json  \n\n" + GOOD + "\n\n```\n",
        RECOVERED,
    ),
    ("fenced, CRLF line endings", "```json\r\n" + GOOD + "\r\n```", RECOVERED),
    ("fence closed right after the object", "```json\n" + GOOD + "```", RECOVERED),
    ("empty output", "", "empty output"),
    ("only whitespace", " \n\t ", "empty output"),
    ("prose only", "I cannot answer that.", "not JSON"),
    ("text before the object", "Here is the plan: " + GOOD, "text before the object"),
    ("text after the object", GOOD + "\nHope this helps!", "text after the object"),
    ("two objects", GOOD + "\n" + GOOD, "text after the object"),
    (
        "bare fence without language",
        "```\n" + GOOD + "\n```",
        "fence is not opened by a ```json line",
    ),
    ("sql fence", "```sql\nSELECT 1\n```", "fence is not opened by a ```json line"),
    (
        "upper-case JSON fence",
        "```JSON\n" + GOOD + "\n```",
        "fence is not opened by a ```json line",
    ),
    (
        "fence opener and object on one line",
        "```json " + GOOD + "```",
        "fence is not opened by a ```json line",
    ),
    ("text before the fence", "Answer:\n```json\n" + GOOD + "\n```", "text before the fence"),
    ("text after the fence", "```json\n" + GOOD + "\n```\nDone.", "text after the fence"),
    ("two fences", "```json\n" + GOOD + "\n```\n```json\n" + GOOD + "\n```", "several fences"),
    ("a fence inside the fence", "```json\n```\n" + GOOD + "\n```", "several fences"),
    ("unclosed fence", "```json\n" + GOOD, "unclosed fence"),
    ("empty fence", "```json\n\n```", "empty fence"),
    ("prose inside the fence", "```json\nHere:\n" + GOOD + "\n```", "text before the object"),
    (
        "fenced body with a missing field",
        "```json\n" + answer(summary=None) + "\n```",
        "missing field summary",
    ),
    ("array at the top", "[" + GOOD + "]", "not an object: got array"),
    ("string at the top", '"SELECT 1"', "not an object: got string"),
    ("number at the top", "42", "not an object: got number"),
    ("missing sql", answer(sql=None), "missing field sql"),
    ("missing two fields", answer(sql=None, assumptions=None), "missing fields sql, assumptions"),
    ("missing plan field", answer(plan=plan(risks=None)), "missing field plan.risks"),
    ("extra field", answer(confidence="0.9"), "extra field confidence"),
    ("extra plan field", answer(plan=plan(notes='"n"')), "extra field plan.notes"),
    ("missing and extra: missing is reported", answer(sql=None, query=SQL), "missing field sql"),
    (
        "sql is not a string",
        answer(sql='["SELECT 1"]'),
        "wrong type for sql: expected string, got array",
    ),
    ("sql is null", answer(sql="null"), "wrong type for sql: expected string, got null"),
    (
        "summary is a number",
        answer(summary="3"),
        "wrong type for summary: expected string, got number",
    ),
    (
        "assumptions is a string",
        answer(assumptions='"none"'),
        "wrong type for assumptions: expected array, got string",
    ),
    (
        "assumption item is a number",
        answer(assumptions='["a", 2]'),
        "wrong type for assumptions[1]: expected string, got number",
    ),
    (
        "plan is a string",
        answer(plan='"join and sum"'),
        "wrong type for plan: expected object, got string",
    ),
    (
        "plan grain is an array",
        answer(plan=plan(grain='["store"]')),
        "wrong type for plan.grain: expected string, got array",
    ),
    (
        "plan step is an object",
        answer(plan=plan(steps='[{"do": "x"}]')),
        "wrong type for plan.steps[0]: expected string, got object",
    ),
    (
        "plan joins item is a boolean",
        answer(plan=plan(joins="[true]")),
        "wrong type for plan.joins[0]: expected string, got boolean",
    ),
    ("duplicate top-level key", answer()[:-1] + ', "sql": "SELECT 2"}', "duplicate key sql"),
    ("duplicate nested key", answer(plan=plan()[:-1] + ', "grain": "h"}'), "duplicate key grain"),
    (
        "duplicate key spelled with an escape",
        answer()[:-1] + ', "s\\u0071l": "SELECT 2"}',
        "duplicate key sql",
    ),
    ("NaN value", answer(summary="NaN"), "NaN/Infinity is not JSON"),
    ("Infinity value", answer(summary="-Infinity"), "NaN/Infinity is not JSON"),
    (
        "single quotes",
        "{'plan': {}, 'sql': 'SELECT 1'}",
        "not JSON: JSON is malformed: object keys must be strings (byte 1)",
    ),
    # msgspec names the offset of the "}" found after the comma: 12 in {"sql": "x",}.
    (
        "trailing comma",
        '{"sql": "x",}',
        "not JSON: JSON is malformed: trailing comma in object (byte 12)",
    ),
    ("truncated object", GOOD[:40], "not JSON: Input data was truncated"),
    ("byte order mark", "\ufeff" + GOOD, "text before the object"),
]


def verdict(parsed: Parsed) -> str:
    if parsed.error is not None:
        return parsed.error
    return STRICT if parsed.protocol_strict else RECOVERED


@pytest.mark.parametrize(
    ("raw", "expected"), [(r, e) for _, r, e in TABLE], ids=[t for t, _, _ in TABLE]
)
def test_verdict_table(raw: str, expected: str) -> None:
    assert verdict(parse_output(raw)) == expected


def test_table_is_large_and_covers_all_three_verdicts() -> None:
    outcomes = [e for _, _, e in TABLE]
    assert len(TABLE) >= 30
    assert STRICT in outcomes
    assert RECOVERED in outcomes
    assert len({e for e in outcomes if e not in (STRICT, RECOVERED)}) >= 20


def test_strict_answer_fields() -> None:
    parsed = parse_output(GOOD)
    assert parsed == Parsed(
        protocol_strict=True,
        recovered_from_fence=False,
        plan=Plan(
            grain="one row per store",
            sources=("stores", "sales"),
            joins=("sales.store_id",),
            filters=("2024",),
            metrics=("sum(revenue)",),
            steps=("join", "group"),
            risks=(),
        ),
        sql="SELECT store_id, sum(revenue) FROM sales GROUP BY 1",
        summary="revenue per store",
        assumptions=("UTC",),
        error=None,
    )


def test_recovered_answer_keeps_the_content() -> None:
    parsed = parse_output("```json\n" + GOOD + "\n```")
    assert (parsed.protocol_strict, parsed.recovered_from_fence) == (False, True)
    assert parsed.sql == "SELECT store_id, sum(revenue) FROM sales GROUP BY 1"
    assert parsed.error is None


def test_contract_error_extracts_nothing() -> None:
    parsed = parse_output(answer(summary="3"))
    assert parsed == Parsed(
        protocol_strict=False,
        recovered_from_fence=False,
        plan=None,
        sql=None,
        summary=None,
        assumptions=None,
        error="wrong type for summary: expected string, got number",
    )


def test_parsed_becomes_an_output_parsed_event() -> None:
    for raw in (GOOD, "```json\n" + GOOD + "\n```", "nope"):
        parsed = parse_output(raw)
        event = OutputParsed(
            stream="run-1",
            stream_seq=3,
            stream_prev=None,
            at="2026-12-02T10:00:00.000000Z",
            case_id="c1",
            attempt=1,
            **msgspec.structs.asdict(parsed),
        )
        assert event.error == parsed.error
        assert event.sql == parsed.sql


def test_field_lists_match_the_event_shapes() -> None:
    assert tuple(n for n, _ in PLAN_FIELDS) == Plan.__struct_fields__
    assert tuple(n for n, _ in ANSWER_FIELDS) == ("plan", "sql", "summary", "assumptions")


def test_field_checks_derived_from_the_struct() -> None:
    # The kinds the parser checks, as DESIGN's fine print "Output" lists them.
    assert PLAN_FIELDS == (
        ("grain", "string"),
        ("sources", "strings"),
        ("joins", "strings"),
        ("filters", "strings"),
        ("metrics", "strings"),
        ("steps", "strings"),
        ("risks", "strings"),
    )
    assert ANSWER_FIELDS == (
        ("plan", "object"),
        ("sql", "string"),
        ("summary", "string"),
        ("assumptions", "strings"),
    )
    assert OUTPUT_CONTRACT == "query-plan-v1"


# The schema text every prompt of every bank has carried since the first release
# (checked in by hand): the schema derived from the struct must stay these bytes,
# or every PromptSent event and pinned baseline would change.
SCHEMA_TEXT = (
    '{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,'
    '"description":"Answer with exactly one JSON object of this shape and nothing else.",'
    '"properties":{"assumptions":{"description":"Assumptions made where the question is '
    'ambiguous.","items":{"type":"string"},"type":"array"},"plan":{"additionalProperties":'
    'false,"properties":{"filters":{"description":"Each filter, with time boundaries stated '
    'exactly.","items":{"type":"string"},"type":"array"},"grain":{"description":"What one '
    'result row stands for.","type":"string"},"joins":{"description":"Each join with its '
    'keys and type.","items":{"type":"string"},"type":"array"},"metrics":{"description":'
    '"Each computed measure and its business definition.","items":{"type":"string"},"type":'
    '"array"},"risks":{"description":"What could make the answer wrong (grain, NULLs, '
    'ties...).","items":{"type":"string"},"type":"array"},"sources":{"description":"Tables '
    'the query reads.","items":{"type":"string"},"type":"array"},"steps":{"description":'
    '"The query\'s steps in order.","items":{"type":"string"},"type":"array"}},"required":'
    '["grain","sources","joins","filters","metrics","steps","risks"],"type":"object"},'
    '"sql":{"description":"One read-only DuckDB query answering it.","type":"string"},'
    '"summary":{"description":"One or two sentences on the approach.","type":"string"}},'
    '"required":["plan","sql","summary","assumptions"],"title":"query-plan-v1","type":'
    '"object"}'
)


def test_schema_derived_from_the_struct_is_the_published_text() -> None:
    from ledger.harness.prompt import QUERY_PLAN_V1_SCHEMA_TEXT

    assert canonical_json(QUERY_PLAN_V1_SCHEMA).decode("utf-8") == SCHEMA_TEXT
    assert QUERY_PLAN_V1_SCHEMA_TEXT == SCHEMA_TEXT


_SCHEMA = jsonschema.Draft202012Validator(QUERY_PLAN_V1_SCHEMA)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
_PLAN_OK = json.loads(PLAN)


@given(
    answer_drop=st.sets(st.sampled_from([n for n, _ in ANSWER_FIELDS]), max_size=1),
    plan_drop=st.sets(st.sampled_from([n for n, _ in PLAN_FIELDS]), max_size=1),
    answer_swap=st.dictionaries(st.sampled_from([n for n, _ in ANSWER_FIELDS]), _json, max_size=1),
    plan_swap=st.dictionaries(st.sampled_from([n for n, _ in PLAN_FIELDS]), _json, max_size=1),
    extra=st.dictionaries(st.sampled_from(["note", "sql2", "Plan"]), _json, max_size=1),
)
def test_the_parser_and_the_schema_agree(
    answer_drop: set[str],
    plan_drop: set[str],
    answer_swap: dict[str, object],
    plan_swap: dict[str, object],
    extra: dict[str, object],
) -> None:
    """Both come from one struct: an object is strict exactly when the schema accepts it."""
    plan_obj = {k: v for k, v in {**_PLAN_OK, **plan_swap}.items() if k not in plan_drop}
    obj = {"plan": plan_obj, "sql": "SELECT 1", "summary": "s", "assumptions": [], **extra}
    obj = {k: v for k, v in {**obj, **answer_swap}.items() if k not in answer_drop}
    assert parse_output(json.dumps(obj)).protocol_strict == _SCHEMA.is_valid(obj)


def test_nesting_bomb_is_a_contract_error() -> None:
    deep = answer(summary="[" * 200_000 + "]" * 200_000)
    assert parse_output(deep).error == "not JSON: nested too deeply"


_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
_strings = st.lists(_text, max_size=4)


@given(
    grain=_text,
    lists=st.tuples(*[_strings] * 7),
    sql=_text,
    summary=_text,
    pad=st.tuples(*[st.text(alphabet=" \t\r\n", max_size=3)] * 2),
)
def test_any_well_typed_answer_round_trips(
    grain: str,
    lists: tuple[list[str], ...],
    sql: str,
    summary: str,
    pad: tuple[str, str],
) -> None:
    sources, joins, filters, metrics, steps, risks, assumptions = lists
    obj = {
        "plan": {
            "grain": grain,
            "sources": sources,
            "joins": joins,
            "filters": filters,
            "metrics": metrics,
            "steps": steps,
            "risks": risks,
        },
        "sql": sql,
        "summary": summary,
        "assumptions": assumptions,
    }
    text = json.dumps(obj, ensure_ascii=False)
    strict = parse_output(pad[0] + text + pad[1])
    assert strict.error is None
    assert strict.protocol_strict
    assert (strict.sql, strict.summary, strict.assumptions) == (sql, summary, tuple(assumptions))
    fenced = parse_output(pad[0] + "```json\n" + text + "\n```" + pad[1])
    if "```" in text:
        assert fenced.error == "several fences"
    else:
        assert fenced.recovered_from_fence
        assert fenced.sql == sql


@given(st.text(max_size=200))
def test_arbitrary_text_never_raises(raw: str) -> None:
    parsed = parse_output(raw)
    assert (parsed.error is None) == (parsed.plan is not None)
    if parsed.error is not None:
        assert parsed.sql is None
        assert not parsed.protocol_strict
