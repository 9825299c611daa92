"""The reference adapter: strict query-plan-v1 answers carrying the reference SQL."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.adapters import Reply, Request, build_adapter
from ledger.errors import AdapterError, UsageError
from ledger.harness.protocol import parse_output

CASES = {
    "r01": "SELECT count(*) AS orders FROM orders",
    "r02": '-- 门店\nSELECT "store", sum(amount)\nFROM sales\nWHERE note = \'a "quoted" \\ path\'\n'
    "GROUP BY 1;",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_answers_are_strict_and_carry_the_reference_sql(case: str) -> None:
    a = build_adapter("reference", {}, cases=CASES)
    reply = a.call(Request(case_id=case, attempt=1, prompt="ignored"))
    assert isinstance(reply, Reply)
    parsed = parse_output(reply.raw_output)
    assert parsed.protocol_strict is True
    assert parsed.error is None
    assert parsed.sql == CASES[case]
    assert (reply.usage, reply.cost, reply.generation_us, reply.resolved_model) == (
        None,
        None,
        None,
        None,
    )


def test_identity_is_a_self_test() -> None:
    a = build_adapter("reference", {"attempts": 1}, cases=CASES)
    assert (a.identity.adapter_kind, a.identity.run_kind) == ("reference", "self_test")
    assert a.identity.requested_model is None
    inv = a.invocation("sha256:" + "c" * 64, 0)
    assert (inv.harness_kind, inv.wire_protocol, inv.tools) == (
        "caseledger-reference",
        "reference",
        "off",
    )
    a.validate_cases(["r01", "r02"])
    with pytest.raises(AdapterError) as exc:
        a.validate_cases(["r01", "r03"])
    assert exc.value.message == "reference adapter: no reference SQL for case 'r03'"


def test_needs_cases_and_takes_no_options() -> None:
    with pytest.raises(AdapterError) as exc:
        build_adapter("reference", {})
    assert exc.value.message == "the reference adapter needs the bank's reference SQL (cases=...)"
    with pytest.raises(UsageError) as usage:
        build_adapter("reference", {"model": "x"}, cases=CASES)
    assert usage.value.message == "the reference adapter does not take --model (option 'model')"


@pytest.mark.parametrize("kind", ["openai", "command", "replay"])
def test_only_the_reference_adapter_gets_reference_sql(kind: str) -> None:
    options: dict[str, Any] = {}
    with pytest.raises(UsageError) as exc:
        build_adapter(kind, options, cases=CASES)
    assert exc.value.message == f"the {kind} adapter must not receive reference SQL"
