"""The reference adapter: answers each case with its reference SQL (a self-test of the harness).

Its output is strict query-plan-v1 JSON whose plan fields hold short neutral
strings, so every attempt of an honest harness scores 100. Its runs are
labelled ``self_test`` and are never ranked as a model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ledger import events
from ledger.adapters import base
from ledger.adapters.base import Identity, Reply, Request
from ledger.errors import AdapterError

__all__ = ["ADAPTER_VERSION", "ReferenceAdapter", "build", "reference_output"]

ADAPTER_VERSION = "1"
HARNESS_KIND = "caseledger-reference"
WIRE_PROTOCOL = "reference"


def reference_output(sql: str) -> str:
    """The query-plan-v1 answer carrying ``sql``.

    >>> json.loads(reference_output("SELECT 1"))["sql"]
    'SELECT 1'
    """
    answer = {
        "plan": {
            "grain": "as defined by the reference query",
            "sources": ["reference query"],
            "joins": [],
            "filters": [],
            "metrics": [],
            "steps": ["run the reference query"],
            "risks": [],
        },
        "sql": sql,
        "summary": "Reference answer (harness self-test).",
        "assumptions": [],
    }
    return json.dumps(answer, ensure_ascii=False, indent=2)


class ReferenceAdapter:
    """Returns the bank's reference SQL for every case."""

    def __init__(self, cases: Mapping[str, str]) -> None:
        self._cases = dict(cases)
        self._client = base.client_version(ADAPTER_VERSION, "adapter-reference")
        self.identity = Identity(
            adapter_kind="reference", run_kind="self_test", harness_kind=HARNESS_KIND
        )

    def invocation(self, prompt_contract_digest: str, retries: int) -> events.Invocation:
        """No call is made: the answer is read from the bank."""
        return base.text_invocation(
            self.identity,
            tools="off",
            wire_protocol=WIRE_PROTOCOL,
            client_version=self._client,
            prompt_contract_digest=prompt_contract_digest,
            retries=retries,
        )

    def validate_cases(self, case_ids: Iterable[str]) -> None:
        """Every planned case must have a reference SQL."""
        missing = sorted(set(case_ids) - set(self._cases))
        if missing:
            raise AdapterError(f"reference adapter: no reference SQL for case {missing[0]!r}")

    def close(self) -> None:
        """Nothing to release."""

    def call(self, request: Request) -> Reply:
        """The reference answer; zero tokens, zero cost, no time."""
        sql = self._cases.get(request.case_id)
        if sql is None:
            # A harness fault, not a model failure: the runner planned an unknown case.
            raise AdapterError(f"reference adapter: no reference SQL for case {request.case_id!r}")
        return Reply(
            raw_output=reference_output(sql),
            provider_request_id=None,
            resolved_model=None,
            recorded_model=None,
            usage=None,
            cost=None,
            estimated_cost=None,
            generation_us=None,
        )


def build(options: dict[str, Any], ctx: base.BuildContext) -> ReferenceAdapter:
    """Build the reference adapter; it takes no options, only the bank's reference SQL."""
    base.take_options("reference", options, ())
    if ctx.cases is None:
        raise AdapterError(
            "the reference adapter needs the bank's reference SQL (cases=...)",
            hint="the runner passes it for --adapter reference",
        )
    return ReferenceAdapter(ctx.cases)
