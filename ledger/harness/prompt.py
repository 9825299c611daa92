"""The blind prompt: a bank's prompt.md filled in for one case, and the output schema.

Blind prompt contract (DESIGN.md): the model receives DuckDB dialect notes,
the published schema snapshot, the semantic layer, the question and the
query-plan-v1 JSON Schema (derived from ``protocol.Answer``, the struct the
parser checks against). ``render_prompt`` reads exactly those fields of
the published bank and case (``prompt_template``, ``schema_sql``,
``semantic_json``, ``question``) and nothing else: never reference SQL, gold,
required_ast, weights or a path.
"""

from __future__ import annotations

import re

import msgspec

from ledger.codec import canonical_json, digest
from ledger.engines import get_engine
from ledger.engines.functions import DIALECT_NOTES
from ledger.events import BankPublished, CaseSpec
from ledger.harness.protocol import OUTPUT_CONTRACT, QUERY_PLAN_V1_SCHEMA

__all__ = [
    "DIALECT_NOTES",
    "OUTPUT_CONTRACT",
    "QUERY_PLAN_V1_SCHEMA",
    "QUERY_PLAN_V1_SCHEMA_TEXT",
    "dialect_notes",
    "prompt_contract_digest",
    "render_prompt",
]

# The canonical text (sorted keys, compact) is what digests cover.
QUERY_PLAN_V1_SCHEMA_TEXT: str = canonical_json(QUERY_PLAN_V1_SCHEMA).decode("utf-8")


def dialect_notes(engine: str) -> str:
    """What the prompt's ``{{dialect}}`` says for a bank on ``engine``."""
    if engine == "duckdb":
        return DIALECT_NOTES
    return get_engine(engine).dialect_notes()


_SLOT = re.compile(r"\{\{(dialect|schema|semantic|question|output_schema)\}\}")


def _pretty_json(text: str) -> str:
    # msgspec.json.format re-indents without parsing numbers into floats.
    return msgspec.json.format(text.encode("utf-8"), indent=2).decode("utf-8")


def render_prompt(bank: BankPublished, case: CaseSpec) -> str:
    """Fill the bank's prompt template for one case (one pass: filled text is never re-expanded).

    Reads only ``bank.prompt_template``, ``bank.schema_sql``, ``bank.semantic_json``,
    ``bank.build.engine`` (the dialect notes of the bank's engine) and ``case.question``.
    """
    values = {
        "dialect": dialect_notes(bank.build.engine).rstrip("\n"),
        "schema": bank.schema_sql.strip("\n"),
        "semantic": _pretty_json(bank.semantic_json),
        "question": case.question.strip("\n"),
        "output_schema": _pretty_json(QUERY_PLAN_V1_SCHEMA_TEXT),
    }
    return _SLOT.sub(lambda m: values[m.group(1)], bank.prompt_template)


def prompt_contract_digest(bank: BankPublished) -> str:
    """Digest of what every prompt of a bank shares: template, dialect notes and output schema.

    Two runs with equal digests sent their models the same instructions (fairness compares it).
    """
    return digest(
        {
            "output_contract": OUTPUT_CONTRACT,
            "template": bank.prompt_template,
            "dialect": dialect_notes(bank.build.engine),
            "output_schema": QUERY_PLAN_V1_SCHEMA_TEXT,
        }
    )
