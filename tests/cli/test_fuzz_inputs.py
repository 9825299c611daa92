"""Hostile inputs through the real CLI (issue 13 section 4): no traceback, documented exit codes.

Several hundred malformed inputs, generated deterministically (plus hypothesis
for arbitrary bytes), across CLI options, every file of a bank, replay files,
checkpoint notes and ledger files. Each goes through ``caseledger`` in-process
(click's CliRunner) against a real ledger, a real published bank and real
files. For every input: no traceback, no escaped exception, and the exit code
the docs give for its class (docs/cli.md "Exit codes"): 2 for input that could
not be checked, 1 for a ledger whose content is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import TAMPERED

from ledger.bank.registry import builtin_banks
from ledger.checkpoint import MAX_NOTE_BYTES, NoteFormatError, check_note_format
from ledger.cli import main

SALES = builtin_banks()["sales-fixture"]


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=True)


def assert_clean(result: Result, expected: set[int]) -> None:
    """No traceback, nothing escaped, and an exit code of the documented set."""
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not escaped, f"escaped: {result.exception!r}\n{result.output}"
    assert "Traceback" not in result.output
    assert result.exit_code in expected, result.output
    if result.exit_code != 0:
        # One error line (a bank lists each problem on its own indented line).
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        failed = [line for line in result.output.splitlines() if "FAILED" in line]
        assert errors or failed, result.output


# ----------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ledger with sales-fixture published and one reference run, plus a checkpoint."""
    folder = tmp_path_factory.mktemp("fuzz")
    ledger = str(folder / "ledger.db")
    for args in (
        ["init"],
        ["bank", "publish", "sales-fixture"],
        ["run", "--bank", "sales-fixture", "--adapter", "reference", "--no-variants"],
        ["checkpoint", "-o", str(folder / "checkpoint.note")],
    ):
        result = invoke(["--ledger", ledger, *args])
        assert result.exit_code == 0, result.output
    return folder


# ----------------------------------------------------------------- 1. CLI options

_BAD_INTS = ["0", "-1", "abc", "1.5", "1e3", "", "99999999999999999999", "9" * 5000]
_INT_OPTIONS: list[tuple[list[str], str, set[str]]] = [
    # (command, option, values that are in range and so not refused)
    (["run", "--bank", "sales-fixture", "--adapter", "reference"], "--attempts", set()),
    (["run", "--bank", "sales-fixture", "--adapter", "reference"], "--concurrency", set()),
    (["run", "--bank", "sales-fixture", "--adapter", "reference"], "--retries", {"0"}),
    (["verify"], "--workers", set()),
    (["report"], "--at-size", {"0"}),
    (["prove", "inclusion", "--checkpoint", "CHECKPOINT"], "--seq", {"0"}),
    (["gate", "--baseline", "x", "--current", "y"], "--min-n", {"0"}),
]
OPTION_CASES = [
    pytest.param(cmd, opt, value, id=f"{cmd[0]}{opt}={value[:12]}")
    for cmd, opt, ok in _INT_OPTIONS
    for value in _BAD_INTS
    if value not in ok
]
_ADAPTER = ["run", "--bank", "sales-fixture", "--adapter"]
OTHER_CASES = [
    pytest.param(args, id=" ".join(args)[:60])
    for args in [
        ["no-such-command"],
        ["verify", "--no-such-option"],
        ["report", "--format", "pdf"],
        ["run"],
        ["run", "--bank"],
        ["prove", "inclusion"],
        ["keys", "add", "../evil", "--role", "operator"],
        ["keys", "add", "x", "--role", "god"],
        ["log", "--type", "no.such.type"],
        ["report", "--run", "no-such-run"],
        ["bank", "show", "no-such-bank"],
        ["bank", "validate", "/no/such/folder"],
        ["bank", "diff", "sales-fixture", "/no/such"],
        ["verify", "--checkpoint", "/no/such/file"],
        # Endless files (issue 30): read no further than a note's maximum size.
        ["verify", "--checkpoint", "/dev/zero"],
        ["verify", "--checkpoint", "/dev/urandom"],
        ["verify", "--key", "/dev/zero"],
        ["prove", "inclusion", "--seq", "0", "--checkpoint", "/dev/zero"],
        ["prove", "consistency", "--old", "/dev/zero", "--new", "/dev/zero"],
        ["verify", "--banks", tempfile.gettempdir()],  # a folder that holds no banks
        ["verify", "--key", "not-a-key"],
        ["verify", "--key", "a+b+c"],
        ["verify", "--key", "name+00000000+AAAA"],
        ["gate", "--baseline", "/no/such.json", "--current", "/no/such.json"],
        ["gate", "--baseline", "x", "--current", "y", "--tol", "nonsense"],
        ["baseline", "check", "/no/such/folder"],
        ["calibrate", "--bank", "/no/such/folder"],
        [*_ADAPTER, "bogus"],
        [*_ADAPTER, "command"],
        [*_ADAPTER, "command", "--command", ""],
        [*_ADAPTER, "command", "--command", "'unclosed"],
        [*_ADAPTER, "command", "--command", "/no/such/program"],
        *[
            [*_ADAPTER, "command", "--command", "/bin/cat", "--timeout", value]
            for value in ("0", "-1", "nan", "inf", "1e999", "99999999999999999999", "abc", "1e-9")
        ],
        *[
            [*_ADAPTER, "openai", "--base-url", "http://127.0.0.1:9", "--model", "m", opt, value]
            for opt, value in (
                ("--max-tokens", "0"),
                ("--max-tokens", "99999999999999999999"),
                ("--max-tokens", "9" * 5000),
                ("--temperature", "1e999"),
                ("--temperature", "-1"),
                ("--temperature", "nan"),
                ("--timeout", "1e999999"),
            )
        ],
        [*_ADAPTER, "replay"],
        [*_ADAPTER, "replay", "--replay-file", "/no/such.jsonl"],
        [*_ADAPTER, "reference", "--model", "x"],
        [*_ADAPTER, "reference", "--resume", "a", "--run-id", "b"],
        [*_ADAPTER, "reference", "--run-id", ""],
        [*_ADAPTER, "reference", "--resume", ""],
    ]
]


@pytest.mark.parametrize(("command", "option", "value"), OPTION_CASES)
def test_bad_int_option_exits_2(home: Path, command: list[str], option: str, value: str) -> None:
    args = [str(home / "checkpoint.note") if a == "CHECKPOINT" else a for a in command]
    assert_clean(invoke(["--ledger", str(home / "ledger.db"), *args, option, value]), {2})


@pytest.mark.parametrize("args", OTHER_CASES)
def test_bad_usage_exits_2(home: Path, args: list[str]) -> None:
    assert_clean(invoke(["--ledger", str(home / "ledger.db"), *args]), {2})


# ----------------------------------------------------------------- 2. bank files


def _cases() -> dict[str, Any]:
    return yaml.safe_load((SALES / "cases.yaml").read_text("utf-8"))  # type: ignore[no-any-return]


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


def _with_case_field(field: str, value: Any) -> str:
    doc = _cases()
    doc["cases"][0][field] = value
    return _dump(doc)


def _without_case_field(field: str) -> str:
    doc = _cases()
    del doc["cases"][0][field]
    return _dump(doc)


_DEEP = "x:\n" + "".join("  " * i + "- \n" for i in range(1, 200))
_ALIAS_BOMB = (
    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    + "bank: sales-fixture\n"
)
_JUNK = [
    pytest.param("", id="empty"),
    pytest.param(b"\x00\x01\x02\xff\xfe" * 50, id="binary"),
    pytest.param(b"\xc3\x28 invalid utf-8", id="invalid-utf8"),
    pytest.param("[" * 100_000 + "]" * 100_000, id="deep-flow"),
    pytest.param("{" * 50_000, id="deep-unclosed"),
    pytest.param(_DEEP, id="deep-block"),
    pytest.param(_ALIAS_BOMB, id="alias-bomb"),
    pytest.param("x: " + "9" * 5000 + "\n", id="int-5000-digits"),
    pytest.param("x: " + ":".join(["59"] * 3000) + "\n", id="sexagesimal"),
    pytest.param("x: 1.0e999999999\n", id="float-huge"),
    pytest.param("x: !!python/object:os.system echo\n", id="python-tag"),
    pytest.param("- a\n- b\n", id="a-list"),
    pytest.param("just text", id="scalar"),
    pytest.param("\t{bad: yaml", id="tab"),
]
# calibration.yaml is optional and its content is checked by `calibrate`: only what
# cannot be read at all is a bank error there.
_CALIBRATION_VALID = {"empty", "float-huge", "a-list", "scalar"}
BANK_FILE_CASES = [
    pytest.param(name, junk.values[0], id=f"{name}:{junk.id}")
    for name in ("cases.yaml", "semantic.json", "calibration.yaml")
    for junk in _JUNK
    if not (name == "calibration.yaml" and junk.id in _CALIBRATION_VALID)
]
BANK_FILE_CASES += [
    pytest.param(name, content, id=f"{name}:{label}")
    for name in ("prompt.md", "schema.sql", "seed.sql")
    for label, content in (
        ("binary", b"\x00\xff\xfe\x00"),
        ("invalid-utf8", b"\xc3\x28"),
        ("deep", "(" * 100_000),
        ("deep-select", "SELECT " + "(" * 5000 + "1" + ")" * 5000 + ";"),
        ("impure", "SELECT now();"),
    )
]
BANK_FILE_CASES += [
    pytest.param("semantic.json", content, id=f"semantic.json:{label}")
    for label, content in (
        ("int-5000", '{"entities": [' + "9" * 5000 + "]}"),
        ("nan", '{"entities": [NaN]}'),
        ("dup", '{"entities": [], "entities": []}'),
        ("deep-64", "[" * 65 + "]" * 65),
        ("wrong-types", json.dumps({k: 1 for k in ("entities", "relations", "metrics")})),
    )
]
_BAD_FIELD_VALUES: dict[str, list[Any]] = {
    "id": [None, "", 5, [], "has space", "a" * 10 + "/x"],
    "dimension": [None, "nope", 3, []],
    "difficulty": [None, "trivial", 1],
    "weight": [0, -1, "abc", "1e999999999", 10**30, 1e300, [1], "nan", True, "9" * 5000],
    "question": [None, "", 5, []],
    "question_en": [5, [], {}],
    "reference_sql": [None, "", 5],
    "row_order_significant": ["yes", 1, None],
    "abs_tolerance": [-1, "abc", "1e999999999", "-1e-999999"],
    "rel_tolerance": [-1, 2, "1e5", "abc"],
    "max_rows": [0, -1, 10**30, 10**7, "10", 1.5, None, True, [], 2**63],
    "required_ast": ["cte", [1], ["no_such_rule"], ["cte", "cte"], {"a": 1}],
    "notes": [5, []],
    "unknown_field": [1],
}
BANK_FIELD_CASES = [
    pytest.param(field, value, id=f"{field}={str(value)[:16]}")
    for field, values in _BAD_FIELD_VALUES.items()
    for value in values
] + [
    # dimension, difficulty, weight and max_rows may be left away (issue 16).
    pytest.param(field, "<missing>", id=f"{field}=<missing>")
    for field in ("id", "question", "reference_sql")
]


def _bank(tmp_path: Path) -> Path:
    folder = tmp_path / "bank"
    shutil.copytree(SALES, folder)
    return folder


@pytest.mark.parametrize(("name", "content"), BANK_FILE_CASES)
def test_malformed_bank_file_exits_2(tmp_path: Path, name: str, content: str | bytes) -> None:
    folder = _bank(tmp_path)
    target = folder / name
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content, "utf-8")
    for command in (["bank", "validate"], ["bank", "show"]):
        result = invoke(["--ledger", str(tmp_path / "none.db"), *command, str(folder)])
        assert_clean(result, {2})


@pytest.mark.parametrize(("field", "value"), BANK_FIELD_CASES)
def test_bad_case_field_exits_2_naming_file_line_case_field(
    tmp_path: Path, field: str, value: Any
) -> None:
    folder = _bank(tmp_path)
    text = _without_case_field(field) if value == "<missing>" else _with_case_field(field, value)
    (folder / "cases.yaml").write_text(text, "utf-8")
    result = invoke(["--ledger", str(tmp_path / "none.db"), "bank", "validate", str(folder)])
    assert_clean(result, {2})
    assert "cases.yaml:" in result.output
    assert f"field {field}" in result.output or "YAML" in result.output


def test_max_rows_beyond_the_cap_is_refused_at_validation(tmp_path: Path) -> None:
    folder = _bank(tmp_path)
    (folder / "cases.yaml").write_text(_with_case_field("max_rows", 10**30), "utf-8")
    result = invoke(["bank", "validate", str(folder)])
    assert result.exit_code == 2
    assert (
        "case sf-01: field max_rows: must be at most 1,000,000, "
        "got 1000000000000000000000000000000" in result.output
    )


# ----------------------------------------------------------------- 3. replay files

_GOOD_LINE = {"case": "sf-01", "attempt": 1, "output": "{}", "generation_ms": 12}


def _line(**changes: Any) -> str:
    obj: dict[str, Any] = {**_GOOD_LINE, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not _DROP})


_DROP = object()
REPLAY_CASES = [
    pytest.param(content, id=label)
    for label, content in [
        ("empty", ""),
        ("blank-lines", "\n\n\n"),
        ("binary", b"\x00\xff\xfe"),
        ("invalid-utf8", b'{"case": "\xc3\x28"}'),
        ("not-json", "hello"),
        ("array", "[1, 2]"),
        ("deep-100000", "[" * 100_000 + "]" * 100_000),
        ("deep-object", '{"case": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"),
        ("generation-1e999999999", _line(generation_ms="1e999999999")),
        ("generation-huge-int", _line(generation_ms=10**30)),
        ("generation-negative", _line(generation_ms=-1)),
        ("generation-nan", _line(generation_ms="NaN")),
        ("generation-inf", _line(generation_ms="Infinity")),
        (
            "generation-float",
            '{"case": "sf-01", "attempt": 1, "output": "x", "generation_ms": 1e999}',
        ),
        ("generation-places", _line(generation_ms="0.0001")),
        ("generation-list", _line(generation_ms=[1])),
        ("attempt-0", _line(attempt=0)),
        ("attempt-huge", _line(attempt=10**20)),
        ("attempt-5000-digits", '{"case": "sf-01", "attempt": ' + "9" * 5000 + ', "output": "x"}'),
        ("attempt-1001", _line(attempt=1001)),
        ("attempt-string", _line(attempt="1")),
        ("attempt-bool", _line(attempt=True)),
        ("attempt-missing", _line(attempt=_DROP)),
        ("case-missing", _line(case=_DROP)),
        ("case-empty", _line(case="")),
        ("case-int", _line(case=5)),
        ("output-missing", _line(output=_DROP)),
        ("output-int", _line(output=5)),
        ("usage-huge", _line(usage={"input": 10**30})),
        ("usage-negative", _line(usage={"input": -1})),
        ("usage-float", _line(usage={"input": 1.5})),
        ("usage-unknown", _line(usage={"tokens": 1})),
        ("usage-not-object", _line(usage=[1])),
        ("usage-deep", _line(usage={"input": [[[[[[1]]]]]]})),
        ("error-kind", _line(error={"kind": "boom", "message": "x"})),
        ("error-not-object", _line(error="x")),
        ("error-extra", _line(error={"kind": "timeout", "message": "x", "extra": 1})),
        ("unknown-field", _line(extra=1)),
        ("duplicate-key", '{"case": "sf-01", "case": "sf-02", "attempt": 1, "output": "x"}'),
        ("nan-constant", '{"case": "sf-01", "attempt": 1, "output": "x", "usage": NaN}'),
        ("duplicate-line", _line() + "\n" + _line()),
        ("model-int", _line(model=5)),
        ("request-null", _line(request_id=None)),
        ("trailing-garbage", _line() + " trailing"),
    ]
]


@pytest.mark.parametrize("content", REPLAY_CASES)
def test_malformed_replay_file_exits_2(home: Path, tmp_path: Path, content: str | bytes) -> None:
    replay = tmp_path / "recorded.jsonl"
    if isinstance(content, bytes):
        replay.write_bytes(content)
    else:
        replay.write_text(content, "utf-8")
    before = invoke(["--ledger", str(home / "ledger.db"), "log"]).output
    result = invoke(
        [
            "--ledger",
            str(home / "ledger.db"),
            "run",
            "--bank",
            "sales-fixture",
            "--adapter",
            "replay",
            "--replay-file",
            str(replay),
            "--no-variants",
        ]
    )
    assert_clean(result, {2})
    assert "replay file" in result.output
    # Refused input appends nothing.
    assert invoke(["--ledger", str(home / "ledger.db"), "log"]).output == before


# ----------------------------------------------------------------- 4. checkpoint notes


def _note_variants(good: str) -> list[tuple[str, str, int]]:
    text, sig = good.split("\n\n")
    origin, size, root = text.split("\n")
    sig = sig.rstrip("\n")
    name, b64 = sig.removeprefix("\u2014 ").split(" ")
    malformed = [
        ("empty", ""),
        ("newline", "\n"),
        ("no-blank-line", f"{text}\n{sig}\n"),
        ("no-final-newline", f"{text}\n\n{sig}"),
        ("bad-base64", f"{text}\n\n\u2014 {name} !!!{b64[3:]}\n"),
        ("short-signature", f"{text}\n\n\u2014 {name} AAAA\n"),
        ("ascii-dash", f"{text}\n\n- {name} {b64}\n"),
        ("no-key-name", f"{text}\n\n\u2014 {b64}\n"),
        ("space-in-name", f"{text}\n\n\u2014 a b {b64}\n"),
        ("trailing-junk", f"{good}junk"),
        ("trailing-junk-line", f"{good}junk\n"),
        ("origin-not-caseledger", f"example.com/log\n{size}\n{root}\n\n{sig}\n"),
        ("origin-empty", f"\n{size}\n{root}\n\n{sig}\n"),
        ("size-not-a-number", f"{origin}\nabc\n{root}\n\n{sig}\n"),
        ("size-negative", f"{origin}\n-1\n{root}\n\n{sig}\n"),
        ("size-leading-zero", f"{origin}\n0{size}\n{root}\n\n{sig}\n"),
        ("size-2^63", f"{origin}\n{2**63}\n{root}\n\n{sig}\n"),
        ("size-5000-digits", f"{origin}\n{'9' * 5000}\n{root}\n\n{sig}\n"),
        ("root-not-base64", f"{origin}\n{size}\n!!{root[2:]}\n\n{sig}\n"),
        ("root-short", f"{origin}\n{size}\nAAAA\n\n{sig}\n"),
        ("two-lines", f"{origin}\n{size}\n\n{sig}\n"),
        ("control-char", f"{text}\x07\n\n{sig}\n"),
        ("101-signatures", f"{text}\n\n" + f"{sig}\n" * 101),
    ]
    # Well-formed notes that do not verify: the check ran and failed (1).
    failing = [
        ("other-root", f"{origin}\n{size}\n{'A' * 43}=\n\n{sig}\n"),
        ("other-size", f"{origin}\n1\n{root}\n\n{sig}\n"),
        ("other-caseledger-log", f"caseledger/0000000000000000\n{size}\n{root}\n\n{sig}\n"),
        ("unknown-signer", f"{text}\n\n\u2014 someone-else {b64}\n"),
    ]
    return [(label, note, 2) for label, note in malformed] + [
        (label, note, 1) for label, note in failing
    ]


NOTE_LABELS = [label for label, _, _ in _note_variants("o\n1\nr\n\n\u2014 k AAAA\n")]


@pytest.mark.parametrize("label", NOTE_LABELS)
def test_checkpoint_note(home: Path, tmp_path: Path, label: str) -> None:
    good = (home / "checkpoint.note").read_text("utf-8")
    note, expected = next((n, code) for lab, n, code in _note_variants(good) if lab == label)
    path = tmp_path / "cp.note"
    path.write_text(note, "utf-8")
    ledger = str(home / "ledger.db")
    for args in (
        ["verify", "--checkpoint", str(path)],
        ["prove", "inclusion", "--seq", "0", "--checkpoint", str(path)],
        ["prove", "consistency", "--old", str(path), "--new", str(home / "checkpoint.note")],
    ):
        result = invoke(["--ledger", ledger, *args])
        assert_clean(result, {expected})


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_arbitrary_bytes_as_a_checkpoint_exit_2(home: Path, data: bytes) -> None:
    path = home / "fuzzed.note"
    path.write_bytes(data)
    result = invoke(["--ledger", str(home / "ledger.db"), "verify", "--checkpoint", str(path)])
    assert_clean(result, {2})


# ----------------------------------------------------------------- 5. ledger files


def _sqlite(path: Path, script: str) -> None:
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()


def _tampered(home: Path, tmp_path: Path, script: str) -> Path:
    path = tmp_path / "ledger.db"
    src = sqlite3.connect(home / "ledger.db")
    dst = sqlite3.connect(path)
    src.backup(dst)
    src.close()
    dst.close()
    _sqlite(
        path,
        "DROP TRIGGER IF EXISTS events_refuse_update; DROP TRIGGER IF EXISTS events_refuse_delete;"
        + script,
    )
    return path


NOT_A_LEDGER: list[tuple[str, Callable[[Path], None]]] = [
    ("empty-file", lambda p: p.write_bytes(b"")),
    ("junk", lambda p: p.write_bytes(b"not a database at all" * 100)),
    ("sqlite-header-junk", lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 2000)),
    ("other-sqlite", lambda p: _sqlite(p, "CREATE TABLE t (a); INSERT INTO t VALUES (1);")),
    ("meta-only", lambda p: _sqlite(p, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);")),
    ("a-folder", lambda p: p.mkdir()),
]
BAD_CONTENT = [
    ("no-events-table", "DROP TABLE events;", 2),
    ("non-json-body", "UPDATE events SET body = x'6e6f74206a736f6e' WHERE seq = 2;", 1),
    ("text-body", "UPDATE events SET body = 'text' WHERE seq = 2;", 1),
    ("null-bytes-body", "UPDATE events SET body = x'00ff00' WHERE seq = 2;", 1),
    (
        "deep-body",
        "UPDATE events SET body = CAST(printf('%.*c', 100000, '[') AS BLOB) WHERE seq = 2;",
        1,
    ),
    ("wrong-type-column", "UPDATE events SET type = 'bank.published.v1' WHERE seq = 3;", 1),
    ("bogus-type-column", "UPDATE events SET type = 'x' WHERE seq = 3;", 1),
    ("text-stream-seq", "UPDATE events SET stream_seq = 'x' WHERE seq = 4;", 1),
    ("short-leaf-hash", "UPDATE events SET leaf_hash = x'00' WHERE seq = 2;", 1),
    ("deleted-middle", "DELETE FROM events WHERE seq = 3;", 1),
    (  # 4611686018427387904 is 2**62
        "huge-seq",
        "UPDATE events SET seq = 4611686018427387904 WHERE seq = (SELECT MAX(seq) FROM events);",
        1,
    ),
]
READ_COMMANDS = [["verify"], ["log"], ["log", "--json"], ["report"], ["bank", "list"], ["runs"]]
#: The seq each damage is at, worked out from its script (None: the last row, moved away;
#: a deleted row is missing where the next stored row is not its successor).
DAMAGED_SEQ = {
    "non-json-body": 2,
    "text-body": 2,
    "null-bytes-body": 2,
    "deep-body": 2,
    "wrong-type-column": 3,
    "bogus-type-column": 3,
    "text-stream-seq": 4,
    "short-leaf-hash": 2,
    "deleted-middle": 3,
    "huge-seq": None,
}


@pytest.mark.parametrize("label", [label for label, _ in NOT_A_LEDGER])
@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_a_file_that_is_not_a_ledger_exits_2(
    tmp_path: Path, label: str, command: list[str]
) -> None:
    path = tmp_path / "ledger.db"
    dict(NOT_A_LEDGER)[label](path)
    result = invoke(["--ledger", str(path), *command])
    assert_clean(result, {2})


BAD_CONTENT_CASES = [
    pytest.param(
        label,
        script,
        code,
        command,
        id=f"{' '.join(command)}:{label}",
    )
    for label, script, code in BAD_CONTENT
    for command in READ_COMMANDS
]


@TAMPERED
@pytest.mark.parametrize(("label", "script", "code", "command"), BAD_CONTENT_CASES)
def test_a_ledger_with_bad_content(
    home: Path, tmp_path: Path, label: str, script: str, code: int, command: list[str]
) -> None:
    path = _tampered(home, tmp_path, script)
    result = invoke(["--ledger", str(path), *command])
    if command == ["verify"] or code == 2:
        # verify names the first bad seq (1); a file without events is not a ledger (2).
        assert_clean(result, {code})
    elif command[0] == "log":
        # log lists rows as stored (it is not a check); a body it cannot decode is 1.
        assert_clean(result, {0, 1})
    elif command in (["bank", "list"], ["runs"]):
        # Both list from a few rows (a run's first and last, the ledger stream's banks),
        # but check every row of the log first (issue 33): the damage is named by its seq,
        # also where it lies inside the run, between the rows they list from.
        assert_clean(result, {1})
        seq = DAMAGED_SEQ[label]
        if seq is None:
            with contextlib.closing(sqlite3.connect(home / "ledger.db")) as con:
                seq = con.execute("SELECT MAX(seq) FROM events").fetchone()[0]
        assert f"error: seq {seq}: " in result.output, result.output
        assert "hint: run `caseledger verify` on this ledger" in result.output, result.output
    else:
        # Reading commands never print a traceback and never pass bad content off as
        # good: they refuse, with 1 naming the seq (or 2).
        assert_clean(result, {1, 2})


# ----------------------------------------------------------------- 6. issue 30 item 4


def test_an_endless_checkpoint_is_read_no_further_than_a_notes_maximum(
    home: Path, tmp_path: Path
) -> None:
    """A FIFO fed without end: the command stops reading after MAX_NOTE_BYTES (+ 1), exit 2."""
    fifo = tmp_path / "endless.note"
    os.mkfifo(fifo)
    written = [0]

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as out:
            while written[0] < 100 * MAX_NOTE_BYTES:  # the reader gave up long before
                out.write(b"\0" * 4096)
                out.flush()
                written[0] += 4096

    writer = threading.Thread(target=feed)
    writer.start()
    result = invoke(["--ledger", str(home / "ledger.db"), "verify", "--checkpoint", str(fifo)])
    writer.join(timeout=60)
    assert_clean(result, {2})
    assert (
        f"error: cannot read checkpoint {fifo}: longer than 65,536 bytes "
        "(not a checkpoint note or key file)"
    ) in result.output
    assert MAX_NOTE_BYTES == 65536
    # What the reader took, plus at most one pipe buffer (64 KiB) and one 4 KiB write.
    assert written[0] <= MAX_NOTE_BYTES + 1 + 65536 + 4096


def test_a_note_text_over_the_maximum_is_malformed_without_parsing() -> None:
    good_shape = "caseledger/0123456789abcdef\n1\n" + "A" * 43 + "=\n\n"
    with pytest.raises(NoteFormatError, match="longer than 65,536 bytes"):
        check_note_format(good_shape + "\u2014 k AAAA\n" * 10_000, label="n")


_NOT_BUNDLES = [
    pytest.param("[" * 100_000 + "]" * 100_000, id="deep-array-100000"),
    pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, id="deep-object-100000"),
    pytest.param('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}", id="deep-format-value"),
    pytest.param("", id="empty"),
    pytest.param(b"\x00\xff\xfe", id="binary"),
    pytest.param("[1, 2]", id="array"),
    pytest.param('{"format": "caseledger-run-bundle/v0"}', id="other-format"),
]


@pytest.mark.parametrize("content", _NOT_BUNDLES)
def test_import_of_a_file_that_is_not_a_bundle_exits_2(
    home: Path, tmp_path: Path, content: str | bytes
) -> None:
    bundle = tmp_path / "bundle.json"
    if isinstance(content, bytes):
        bundle.write_bytes(content)
    else:
        bundle.write_text(content, "utf-8")
    ledger = str(home / "ledger.db")
    before = invoke(["--ledger", ledger, "log"]).output
    result = invoke(["--ledger", ledger, "import", "run", str(bundle)])
    assert_clean(result, {2})
    assert f"error: {bundle}: not a" in result.output
    assert invoke(["--ledger", ledger, "log"]).output == before


def _replay_run(home: Path, replay: Path, run_id: str) -> list[dict[str, Any]]:
    """Run the sales-fixture bank on the replay file ``replay`` as ``run_id`` (exit 0, no
    traceback); the run's events, in order."""
    ledger = str(home / "ledger.db")
    result = invoke(
        [
            *("--ledger", ledger, "run", "--bank", "sales-fixture", "--adapter", "replay"),
            *("--replay-file", str(replay), "--no-variants", "--run-id", run_id),
        ]
    )
    assert_clean(result, {0})
    found = [
        json.loads(line)["event"]
        for line in invoke(["--ledger", ledger, "log", "--json"]).stdout.splitlines()
    ]
    return [e for e in found if e["stream"] == run_id]


def test_a_lone_surrogate_in_a_replay_answer_is_a_provider_failure_not_a_crash(
    home: Path, tmp_path: Path
) -> None:
    """``"\\ud800"`` (a JSON escape with no pair) decodes to a str with no UTF-8 form: the
    attempt is recorded as the provider failure ``malformed_response`` (what the openai
    adapter makes of a body that is not UTF-8), the other attempts go on, exit 0."""
    ok = json.dumps({"case": "sf-05", "attempt": 1, "output": "{}"})
    lines = [
        '{"case": "sf-01", "attempt": 1, "output": "\\ud800"}',
        '{"case": "sf-02", "attempt": 1, "output": "SELECT \\udfff"}',
        '{"case": "sf-03", "attempt": 1, "output": "x", "model": "m\\ud800"}',
        '{"case": "sf-04", "attempt": 1, "output": "x", "request_id": "\\udbff"}',
        ok,
    ]
    replay = tmp_path / "surrogates.jsonl"
    replay.write_text("\n".join(lines) + "\n", "ascii")
    events = _replay_run(home, replay, "surrogates")
    failed = {
        e["case_id"]: (e["kind"], e["message"], e["raw_output"])
        for e in events
        if e["type"] == "provider.failed.v1"
    }
    lone = (
        "malformed_response: the answer is not valid Unicode text: {} holds a lone surrogate ({})"
    )
    assert {case: (f"{kind}: {message}", raw) for case, (kind, message, raw) in failed.items()} == {
        "sf-01": (lone.format("raw_output", "\\ud800 at character 0"), None),
        "sf-02": (lone.format("raw_output", "\\udfff at character 7"), None),
        "sf-03": (lone.format("recorded_model", "\\ud800 at character 1"), None),
        "sf-04": (lone.format("provider_request_id", "\\udbff at character 0"), None),
    }
    answered = [e["case_id"] for e in events if e["type"] == "model.responded.v1"]
    assert answered == ["sf-05"]


@pytest.mark.parametrize("flag", ["--run-id", "--resume"])
def test_an_empty_run_id_is_refused_not_taken_as_none(home: Path, flag: str) -> None:
    ledger = str(home / "ledger.db")
    before = invoke(["--ledger", ledger, "log"]).output
    result = invoke(
        ["--ledger", ledger, "run", "--bank", "sales-fixture", "--adapter", "reference", flag, ""]
    )
    assert_clean(result, {2})
    assert result.output.splitlines()[0] == f"error: {flag} '' names no run"
    assert invoke(["--ledger", ledger, "log"]).output == before


# A full disk (issue 30): a small tmpfs mounted by the test (we run as root, also in CI),
# filled with a file until only a few KiB are left, then unmounted.


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        message = "mounting a tmpfs needs root (CI runs as root)"
        if os.environ.get("CI"):
            pytest.fail(message)  # in CI nothing skips
        pytest.skip(message)
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` with one file until ``leave`` bytes are free; returns the file."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free - leave
    with filler.open("wb") as f:
        f.write(b"\0" * max(free, 0))
    return filler


def _published_on(disk: Path) -> str:
    ledger = str(disk / "l" / "ledger.db")
    for args in (["init"], ["bank", "publish", "sales-fixture"]):
        assert invoke(["--ledger", ledger, *args]).exit_code == 0
    return ledger


def test_a_full_disk_while_variants_are_built_is_a_clear_error(small_disk: Path) -> None:
    ledger = _published_on(small_disk)
    before = invoke(["--ledger", ledger, "log"]).output
    filler = _fill(small_disk, 400 * 1024)  # less than one variant database needs
    run = ["--ledger", ledger, "run", "--bank", "sales-fixture", "--adapter", "reference"]
    result = invoke([*run, "--run-id", "v"])
    assert_clean(result, {2})
    folder = small_disk / "l" / "banks" / "variants"
    assert result.output.splitlines()[-2:] == [
        f"error: disk full: no space left on the disk of {folder}/ while building the "
        "database of bank sales-fixture@v1 on duckdb",
        f"  hint: free space on that disk (df {folder}), then run the command again",
    ]
    assert list(folder.iterdir()) == []  # nothing half-built left
    filler.unlink()
    assert invoke(["--ledger", ledger, "log"]).output == before  # nothing lost, nothing added
    assert_clean(invoke(["--ledger", ledger, "verify"]), {0})
    assert_clean(invoke([*run, "--run-id", "v"]), {0})


def test_a_full_disk_under_the_ledger_is_a_clear_error_and_the_run_resumes(
    small_disk: Path,
) -> None:
    ledger = _published_on(small_disk)
    filler = _fill(small_disk, 80 * 1024)  # the run starts; a later batch finds no space
    run = ["--ledger", ledger, "run", "--bank", "sales-fixture", "--adapter", "reference"]
    result = invoke([*run, "--no-variants", "--run-id", "r"])
    assert_clean(result, {2})
    folder = small_disk / "l"
    assert result.output.splitlines()[-2:] == [
        f"error: disk full: no space left on the disk of {folder}/ while writing the ledger "
        f"{ledger} (database or disk is full); the batch was not appended and every event "
        "before it is kept",
        "  hint: free space on that disk, then finish the run with the same command plus "
        "--resume r (`caseledger runs` lists it)",
    ]
    assert "cannot rollback" not in result.output
    filler.unlink()
    assert_clean(invoke(["--ledger", ledger, "verify"]), {0})
    assert "unfinished" in invoke(["--ledger", ledger, "runs"]).output
    assert_clean(invoke([*run, "--no-variants", "--resume", "r"]), {0})
    listed = invoke(["--ledger", ledger, "runs"]).output.splitlines()
    assert [line.split()[5:7] for line in listed[1:]] == [["completed", "7/7"]]


_OPENING = [["runs"], ["run", "--bank", "sales-fixture", "--adapter", "reference", "--no-variants"]]


@pytest.mark.parametrize("command", _OPENING, ids=lambda c: c[0])
def test_a_disk_too_full_to_open_the_ledger_says_so(small_disk: Path, command: list[str]) -> None:
    """WAL mode needs room for ``-shm`` beside the file: SQLite's "disk I/O error"
    (SQLITE_IOERR_SHMSIZE) with 8 KiB free is named as a full disk, for readers too."""
    ledger = _published_on(small_disk)
    filler = _fill(small_disk, 8 * 1024)
    result = invoke(["--ledger", ledger, *command])
    assert_clean(result, {2})
    folder = small_disk / "l"
    assert result.output.splitlines()[-2:] == [
        f"error: disk full: no space left on the disk of {folder}/ while opening the ledger "
        f"{ledger} (disk I/O error); nothing was written",
        f"  hint: free space on that disk (df {folder}), then run the command again",
    ]
    filler.unlink()
    assert_clean(invoke(["--ledger", ledger, "verify"]), {0})


def test_one_huge_value_is_a_memory_failure_and_the_run_completes(
    home: Path, tmp_path: Path
) -> None:
    """A 1.5 GB printf value (issue 30: the worker grew to 1.69 GB): the SQL worker stops
    itself over its resident-memory bound, the attempt is executed as ``memory`` and
    scored (not retried as a crash), and the run completes."""
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    answer = {
        "plan": {"grain": "one row", **plan},
        "sql": "SELECT printf('%1500000000d', 1) AS x",
        "summary": "s",
        "assumptions": [],
    }
    replay = tmp_path / "huge.jsonl"
    line = {"case": "sf-01", "attempt": 1, "output": json.dumps(answer)}
    replay.write_text(json.dumps(line) + "\n", "utf-8")
    ours = _replay_run(home, replay, "huge-value")
    executed = [
        (e["case_id"], e["ok"], e["error_kind"], e["worker_try"])
        for e in ours
        if e["type"] == "sql.executed.v1"
    ]
    assert executed == [("sf-01", False, "memory", 1)]
    # scored as a failed execution (a crash would be retried, then cancelled unscored)
    scored = [(e["case_id"], e["failure_kind"]) for e in ours if e["type"] == "score.computed.v1"]
    assert scored == [("sf-01", "execution")]
    (finished,) = [e for e in ours if e["type"] == "run.finished.v1"]
    assert finished["status"] == "completed"


def test_sql_sqlglot_reads_but_cannot_write_is_refused_not_a_crash(
    home: Path, tmp_path: Path
) -> None:
    """DuckDB's `date()` and `time()` without their argument parse, but sqlglot cannot write
    them back (its DuckDB generator raises 'SQL cannot be None'). The guard refuses them as
    not parsed and the structural match says no match; the run goes on (exit 0), each attempt
    recorded as a guard refusal; before, the run ended as an internal error."""
    from ledger.harness.ast_rules import structural_match
    from ledger.harness.guard import guard

    for sql in ("SELECT date()", "SELECT time()"):
        verdict = guard(sql, ["orders"])
        assert not verdict.passed
        assert ("parse", "cannot be normalised by sqlglot: SQL cannot be None") in [
            (v.check, v.message) for v in verdict.violations
        ]
        assert structural_match(sql, "SELECT 1") is False
    plan = {k: [] for k in ("sources", "joins", "filters", "metrics", "steps", "risks")}
    lines = [
        {"case": case, "attempt": 1, "output": json.dumps(
            {"plan": {"grain": "g", **plan}, "sql": sql, "summary": "s", "assumptions": []})}
        for case, sql in (("sf-01", "SELECT date()"), ("sf-02", "SELECT time()"))
    ]  # fmt: skip
    replay = tmp_path / "unwritable.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    stored = _replay_run(home, replay, "unwritable")
    guarded = [(e["case_id"], e["passed"]) for e in stored if e["type"] == "sql.guarded.v1"]
    assert guarded == [("sf-01", False), ("sf-02", False)]
    assert [e["status"] for e in stored if e["type"] == "run.finished.v1"] == ["completed"]
