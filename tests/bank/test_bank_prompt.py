"""Issue 3 item 4 / issue 4 "Prompt": the blind prompt reads only what the contract allows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.bank.leak import leak_context, leak_findings
from ledger.bank.publish import validate_bank
from ledger.bank.registry import builtin_banks
from ledger.events import BankPublished, CaseSpec, Plan
from ledger.harness.prompt import (
    DIALECT_NOTES,
    QUERY_PLAN_V1_SCHEMA,
    QUERY_PLAN_V1_SCHEMA_TEXT,
    prompt_contract_digest,
    render_prompt,
)

# build: only its engine, which picks the dialect notes (issue 15).
_ALLOWED_BANK = {"prompt_template", "schema_sql", "semantic_json", "build"}
_ALLOWED_CASE = {"question"}


class _Only:
    """Lets through only the named attributes; touching any other one fails the test."""

    def __init__(self, inner: Any, allowed: set[str]) -> None:
        self._inner, self._allowed = inner, allowed

    def __getattr__(self, name: str) -> Any:
        if name not in self._allowed:
            raise AssertionError(f"render_prompt touched {name!r}")
        return getattr(self._inner, name)


_BANKS = {"tiny": Path(__file__).resolve().parents[2] / "docs/examples/tiny-bank"}
_BANKS.update(builtin_banks())


@pytest.fixture(scope="module", params=sorted(_BANKS))
def checked(request: pytest.FixtureRequest):
    return validate_bank(_BANKS[request.param])


def test_prompt_material_never_touches_hidden_fields(checked) -> None:
    event: BankPublished = checked.preview()
    for case in event.cases:
        blind = render_prompt(_Only(event, _ALLOWED_BANK), _Only(case, _ALLOWED_CASE))  # type: ignore[arg-type]
        assert blind == render_prompt(event, case)


def test_every_rendered_prompt_is_free_of_hidden_material(checked) -> None:
    event: BankPublished = checked.preview()
    bank = checked.bank
    ctx = leak_context(
        {c.id: c.reference_sql for c in bank.cases}, event.gold, gold_digest=event.gold_digest
    )
    for spec, case in zip(event.cases, bank.cases, strict=True):
        prompt = render_prompt(event, spec)
        assert leak_findings(prompt, ctx) == []
        assert case.question in prompt
        collapsed = " ".join(prompt.split())
        for other in bank.cases:
            assert " ".join(other.reference_sql.split()) not in collapsed
        assert spec.reference_sql_sha256[7:] not in prompt
        assert "reference_sql" not in prompt
        assert "required_ast" not in prompt
        assert str(bank.source.folder) not in prompt


def test_changing_hidden_fields_leaves_the_prompt_unchanged(checked) -> None:
    event: BankPublished = checked.preview()
    case = event.cases[0]
    import msgspec

    other_case: CaseSpec = msgspec.structs.replace(
        case,
        weight=case.weight + 7,
        required_ast=("cte",),
        reference_sql_sha256="sha256:00",
        notes="x",
    )
    other_event = msgspec.structs.replace(event, gold=(), gold_digest="sha256:00", cases=())
    assert render_prompt(other_event, other_case) == render_prompt(event, case)


def test_placeholders_are_filled_once_and_not_re_expanded() -> None:
    event = validate_bank(_BANKS["tiny"]).preview()
    import msgspec

    case = msgspec.structs.replace(event.cases[0], question="why {{schema}} and {{question}}?")
    prompt = render_prompt(event, case)
    assert "why {{schema}} and {{question}}?" in prompt
    assert prompt.count("CREATE TABLE customers") == 1
    assert DIALECT_NOTES.splitlines()[0] in prompt
    assert "{{" not in prompt.replace("{{schema}} and {{question}}", "")
    # The semantic layer is shown as indented JSON equal to the published canonical text.
    start = prompt.index("```json\n", prompt.index("## Semantic")) + len("```json\n")
    shown = prompt[start : prompt.index("\n```", start)]
    assert json.loads(shown) == json.loads(event.semantic_json)


def test_output_schema_matches_query_plan_v1() -> None:
    schema = QUERY_PLAN_V1_SCHEMA
    assert schema["required"] == ["plan", "sql", "summary", "assumptions"]
    assert schema["additionalProperties"] is False
    plan = schema["properties"]["plan"]
    assert plan["required"] == ["grain", "sources", "joins", "filters", "metrics", "steps", "risks"]
    assert set(plan["required"]) == set(Plan.__struct_fields__)
    assert plan["properties"]["grain"]["type"] == "string"
    for name in ("sources", "joins", "filters", "metrics", "steps", "risks"):
        assert plan["properties"][name]["type"] == "array"
        assert plan["properties"][name]["items"] == {"type": "string"}
    assert json.loads(QUERY_PLAN_V1_SCHEMA_TEXT) == schema
    assert " " not in QUERY_PLAN_V1_SCHEMA_TEXT.split('"description"')[0]


def test_prompt_contract_digest_covers_template_only() -> None:
    event = validate_bank(_BANKS["tiny"]).preview()
    import msgspec

    digest = prompt_contract_digest(event)
    assert digest.startswith("sha256:")
    assert len(digest) == 71
    assert prompt_contract_digest(msgspec.structs.replace(event, gold=())) == digest
    changed = msgspec.structs.replace(event, prompt_template=event.prompt_template + "\n")
    assert prompt_contract_digest(changed) != digest
