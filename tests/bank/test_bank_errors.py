"""Issue 3 item 2: every bank error comes from a small fixture and names its place."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from banktest import edit

from ledger.bank.model import load_bank
from ledger.bank.publish import validate_bank
from ledger.errors import BankError

# (title, file, old text, new text, substrings the message must contain)
EDITS = [
    (
        "unknown case field",
        "cases.yaml",
        "    max_rows: 10\n    required_ast: []\n    notes: A city",
        "    max_rows: 10\n    colour: red\n    required_ast: []\n    notes: A city",
        ["cases.yaml:18", "case tiny-01", "field colour", "unknown field"],
    ),
    (
        "unknown top-level field",
        "cases.yaml",
        "version: v1\n",
        "version: v1\nowner: me\n",
        ["cases.yaml:3", "field owner", "unknown top-level field"],
    ),
    (
        "duplicate case id",
        "cases.yaml",
        "  - id: tiny-03",
        "  - id: tiny-01",
        ["cases.yaml:40", "case tiny-01", "field id", "duplicate case id (first at line 5)"],
    ),
    (
        "missing reference SQL",
        "cases.yaml",
        "    reference_sql: |\n      SELECT customer_id, name\n      FROM customers\n"
        "      WHERE city IS NULL\n      ORDER BY customer_id\n",
        "",
        ["cases.yaml:5", "case tiny-01", "field reference_sql", "missing (required)"],
    ),
    (
        "unknown dimension",
        "cases.yaml",
        "dimension: time_window",
        "dimension: timing",
        ["cases.yaml:22", "case tiny-02", "field dimension", "unknown value 'timing'"],
    ),
    (
        "unknown difficulty",
        "cases.yaml",
        "difficulty: easy",
        "difficulty: trivial",
        ["cases.yaml:7", "case tiny-01", "field difficulty", "'trivial'"],
    ),
    (
        "weight zero",
        "cases.yaml",
        "weight: 1.5",
        "weight: 0",
        ["cases.yaml:24", "case tiny-02", "field weight", "must be > 0, got 0"],
    ),
    (
        "weight negative string",
        "cases.yaml",
        'weight: "2"',
        'weight: "-2"',
        ["cases.yaml:43", "case tiny-03", "field weight", "must be > 0"],
    ),
    (
        "weight not a number",
        "cases.yaml",
        'weight: "2"',
        "weight: two",
        ["case tiny-03", "field weight", "'two' is not a decimal number"],
    ),
    (
        "negative abs tolerance",
        "cases.yaml",
        "abs_tolerance: 0.005",
        "abs_tolerance: -0.005",
        ["cases.yaml:34", "case tiny-02", "field abs_tolerance", "must be >= 0"],
    ),
    (
        "negative rel tolerance as exponent string",
        "cases.yaml",
        "rel_tolerance: 0",
        "rel_tolerance: -1e-6",
        ["cases.yaml:35", "case tiny-02", "field rel_tolerance", "must be >= 0"],
    ),
    (
        "tolerance of the wrong type",
        "cases.yaml",
        "rel_tolerance: 0",
        "rel_tolerance: true",
        ["case tiny-02", "field rel_tolerance", "must be a decimal number"],
    ),
    (
        "non-finite YAML number",
        "cases.yaml",
        "rel_tolerance: 0",
        "rel_tolerance: .inf",
        ["cases.yaml:35", "not a finite decimal"],
    ),
    (
        "unknown AST rule",
        "cases.yaml",
        "required_ast: [left_join, distinct_count]",
        "required_ast: [left_join, pivot_magic]",
        ["case tiny-03", "field required_ast", "unknown rule 'pivot_magic'"],
    ),
    (
        "max_rows not an integer",
        "cases.yaml",
        "max_rows: 5",
        "max_rows: 5.5",
        ["case tiny-02", "field max_rows", "positive integer"],
    ),
    (
        "unquoted numeric version",
        "cases.yaml",
        "version: v1",
        "version: 1",
        ["cases.yaml:2", "field version", "quote it"],
    ),
    (
        "YAML syntax error",
        "cases.yaml",
        "    difficulty: medium\n    weight: 1.5",
        "    difficulty: medium\n   weight: [1.5",
        ["cases.yaml:24", "YAML syntax error"],
    ),
    (
        "duplicate YAML key",
        "cases.yaml",
        "    max_rows: 5\n",
        "    max_rows: 5\n    max_rows: 6\n",
        ["cases.yaml:37", "duplicate key 'max_rows'"],
    ),
    (
        "semantic unknown key",
        "semantic.json",
        '  "business_rules": [',
        '  "secrets": [],\n  "business_rules": [',
        ["semantic.json", "unknown top-level key 'secrets'"],
    ),
    (
        "semantic item without name",
        "semantic.json",
        '{"name": "city", "column": "customers.city"}',
        '{"column": "customers.city"}',
        ["semantic.json", "dimensions[1]", "'name'"],
    ),
    (
        "semantic JSON syntax",
        "semantic.json",
        '"many-to-one"}',
        '"many-to-one",}',
        ["semantic.json:7", "JSON syntax error"],
    ),
    (
        "semantic duplicate key",
        "semantic.json",
        '{"name": "order_count",',
        '{"name": "order_count", "name": "x",',
        ["semantic.json", "duplicate key 'name'"],
    ),
    (
        "unknown placeholder",
        "prompt.md",
        "## Question\n",
        "## Question ({{bank_path}})\n",
        ["prompt.md:16", "unknown placeholder '{{bank_path}}'"],
    ),
    (
        "placeholder twice",
        "prompt.md",
        "## Question\n",
        "## Question {{question}}\n",
        ["prompt.md:17", "'{{question}}' appears twice"],
    ),
    (
        "placeholder missing",
        "prompt.md",
        "{{dialect}}",
        "(none)",
        ["prompt.md", "'{{dialect}}' is missing"],
    ),
    (
        "placeholder with spaces",
        "prompt.md",
        "{{schema}}",
        "{{ schema }}",
        ["prompt.md:8", "unknown placeholder '{{ schema }}'"],
    ),
    (
        "seed reads now()",
        "seed.sql",
        "(5, 'Eve',   'Hangzhou')",
        "(5, 'Eve', now()::VARCHAR)",
        ["seed.sql:6", "now()"],
    ),
    (
        "seed reads current_date",
        "seed.sql",
        "(5, 'Eve',   'Hangzhou')",
        "(5, 'Eve', current_date::VARCHAR)",
        ["seed.sql:6", "current_date"],
    ),
    (
        "seed reads current_timestamp",
        "seed.sql",
        "TIMESTAMPTZ '2026-09-05 10:00:00+08'",
        "current_timestamp",
        ["seed.sql:16", "current_timestamp"],
    ),
    ("seed calls random()", "seed.sql", "60.00);", "random() * 100);", ["seed.sql:16", "random()"]),
    ("seed calls uuid()", "seed.sql", "'Hangzhou'", "uuid()::VARCHAR", ["seed.sql:6", "uuid()"]),
    (
        "seed reads a file",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "INSERT INTO customers SELECT * FROM read_csv('c.csv');\nINSERT INTO customers VALUES",
        ["seed.sql:1", "read_csv()"],
    ),
    (
        "seed scans a path",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "INSERT INTO customers SELECT * FROM '/etc/passwd';\nINSERT INTO customers VALUES",
        ["seed.sql:1", "file reference"],
    ),
    (
        "seed copies",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "COPY customers FROM 'c.csv';\nINSERT INTO customers VALUES",
        ["seed.sql:1", "COPY statement"],
    ),
    (
        "seed attaches",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "ATTACH 'other.db' AS o;\nINSERT INTO customers VALUES",
        ["seed.sql:1", "ATTACH statement"],
    ),
    (
        "seed sets",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "SET TimeZone = 'Asia/Shanghai';\nINSERT INTO customers VALUES",
        ["seed.sql:1", "SET statement"],
    ),
    (
        "seed samples",
        "seed.sql",
        "INSERT INTO customers VALUES",
        "CREATE TABLE s AS SELECT * FROM range(10) USING SAMPLE 5;\nINSERT INTO customers VALUES",
        ["seed.sql:1", "sample"],
    ),
    (
        "schema default clock",
        "schema.sql",
        "ordered_at  TIMESTAMPTZ NOT NULL,",
        "ordered_at  TIMESTAMPTZ NOT NULL DEFAULT now(),",
        ["schema.sql:11", "now()"],
    ),
]


@pytest.mark.parametrize(
    ("title", "name", "old", "new", "expected"), EDITS, ids=[e[0] for e in EDITS]
)
def test_structural_error_names_its_place(
    tiny: Path, title: str, name: str, old: str, new: str, expected: list[str]
) -> None:
    edit(tiny, name, old, new)
    with pytest.raises(BankError) as info:
        load_bank(tiny)
    message = info.value.message
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"


def test_impure_words_in_strings_and_comments_are_fine(tiny: Path) -> None:
    edit(tiny, "seed.sql", "(5, 'Eve',   'Hangzhou')", "(5, 'now() random()', 'Hangzhou') -- now()")
    bank = load_bank(tiny)  # no BankError: the words are data and a comment, not calls
    assert "(5, 'now() random()', 'Hangzhou') -- now()" in bank.source.files["seed.sql"].decode()


def test_missing_file(tiny: Path) -> None:
    (tiny / "prompt.md").unlink()
    with pytest.raises(BankError, match=r"prompt\.md: missing"):
        load_bank(tiny)


def test_invalid_utf8_names_the_line(tiny: Path) -> None:
    path = tiny / "schema.sql"
    path.write_bytes(path.read_bytes().replace(b"yuan", b"yu\xffan"))
    with pytest.raises(BankError, match=r"schema\.sql:1: not valid UTF-8"):
        load_bank(tiny)


def test_all_problems_are_listed_at_once(tiny: Path) -> None:
    edit(tiny, "cases.yaml", "weight: 1.5", "weight: -1")
    edit(tiny, "cases.yaml", "difficulty: easy", "difficulty: trivial")
    with pytest.raises(BankError) as info:
        load_bank(tiny)
    # Both, each with its file:line (counted in docs/examples/tiny-bank/cases.yaml), in
    # file order, under one heading.
    assert info.value.message == (
        f"bank {tiny}: 2 problems\n"
        "  cases.yaml:7: case tiny-01: field difficulty: unknown value 'trivial', "
        "expected one of easy, medium, hard\n"
        "  cases.yaml:24: case tiny-02: field weight: must be > 0, got -1"
    )


# ---------------------------------------------------------------- errors found by executing


@pytest.mark.parametrize(
    ("title", "old", "new", "expected"),
    [
        (
            "reference SQL fails",
            "      WHERE city IS NULL\n",
            "      WHERE town IS NULL\n",
            ["cases.yaml:11", "case tiny-01", "field reference_sql", "fails to execute", "town"],
        ),
        (
            "reference SQL writes",
            "      SELECT customer_id, name\n      FROM customers\n"
            "      WHERE city IS NULL\n      ORDER BY customer_id\n",
            "      DELETE FROM customers\n",
            ["case tiny-01", "field reference_sql", "fails to execute", "read-only"],
        ),
        (
            "two statements",
            "      ORDER BY customer_id\n",
            "      ORDER BY customer_id;\n      SELECT 1\n",
            ["case tiny-01", "field reference_sql", "exactly one statement, found 2"],
        ),
        (
            "max_rows equals the gold row count",
            "    max_rows: 10\n    required_ast: [left_join",
            "    max_rows: 3\n    required_ast: [left_join",
            ["cases.yaml:55", "case tiny-03", "field max_rows", "gold has 3 rows, max_rows is 3"],
        ),
        (
            "gold with infinity",
            "SELECT sum(amount) AS revenue",
            "SELECT sum(amount) / 0 AS revenue",
            ["case tiny-02", "field reference_sql", "NaN or Infinity"],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v and len(v) < 40 else None,
)
def test_execution_error_names_its_place(
    tiny: Path, title: str, old: str, new: str, expected: list[str]
) -> None:
    edit(tiny, "cases.yaml", old, new)
    load_bank(tiny)  # structurally fine: the problem shows only when executed
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    for part in expected:
        assert part in info.value.message, f"{part!r} not in:\n{info.value.message}"


def test_seed_that_fails_in_duckdb_names_the_file(tiny: Path) -> None:
    edit(tiny, "seed.sql", "(5, 'Eve',   'Hangzhou');", "(5, 'Eve');")
    with pytest.raises(BankError, match=r"seed\.sql: DuckDB error"):
        validate_bank(tiny)


def test_another_duckdb_version_is_refused(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(duckdb, "__version__", "1.4.3")  # the module the build imports
    with pytest.raises(BankError) as info:
        validate_bank(tiny)
    assert "DuckDB 1.5.5 exactly" in info.value.message
    assert "DuckDB 1.4.3" in info.value.message
    assert info.value.hint is not None
    assert "duckdb==1.5.5" in info.value.hint
