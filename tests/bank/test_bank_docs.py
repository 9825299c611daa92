"""docs/bank-format.md: its example is the real tiny bank, validates, and covers the format."""

from __future__ import annotations

import re
from pathlib import Path

from ledger.bank.model import CASE_FIELDS, DIMENSIONS, PLACEHOLDERS, SEMANTIC_KEYS, TOP_FIELDS
from ledger.bank.publish import validate_bank
from ledger.bank.source import BANK_FILES
from ledger.cli.bank import bank_group

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "bank-format.md"
EXAMPLE = REPO / "docs" / "examples" / "tiny-bank"


def _blocks() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"### `([^`]+)`\n\n(`{3,4})\w*\n(.*?)\2\n", text, flags=re.S)
    return {name: body for name, _, body in found}


def test_doc_example_is_exactly_the_example_folder() -> None:
    blocks = _blocks()
    assert sorted(blocks) == sorted(BANK_FILES)
    for name in BANK_FILES:
        assert blocks[name] == (EXAMPLE / name).read_text(encoding="utf-8"), name


def test_doc_example_validates(tmp_path: Path) -> None:
    for name, body in _blocks().items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    checked = validate_bank(tmp_path)
    assert checked.bank.ref == "tiny@v1"
    assert checked.bank.content_sha256 == validate_bank(EXAMPLE).bank.content_sha256


def test_doc_names_every_field_and_command() -> None:
    text = DOC.read_text(encoding="utf-8")
    for word in (*CASE_FIELDS, *TOP_FIELDS, *DIMENSIONS, *SEMANTIC_KEYS, *BANK_FILES):
        assert f"`{word}`" in text, word
    for slot in PLACEHOLDERS:
        assert f"`{{{{{slot}}}}}`" in text, slot
    for command in bank_group.commands:
        assert f"caseledger bank {command}" in text, command
