"""The one report schema (projections/report/schema.py): its generated JSON Schema files,
real reports validated by a maintained validator, documents that must be refused, and
docs/reports.md documenting exactly its fields."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ledger.app.snapshot import read_state
from ledger.errors import InternalError, UsageError
from ledger.store import Ledger
from projections import metrics
from projections.report import schema
from projections.report.build import build_report, from_json, from_plain, to_json, to_plain
from projections.report.render import render

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "reports.md").read_text("utf-8")


@pytest.fixture(scope="module")
def real_reports(real_ledger_master: Path) -> dict[str, bytes]:
    """Canonical JSON of the real fixture ledger: public, internal, and under scorer 2.0.0."""
    with Ledger.open(real_ledger_master, readonly=True) as ledger:
        snap = read_state(ledger)
    out = {}
    for name, options in {
        "public": {},
        "gold": {"with_gold": True},
        "scorer": {"scorer": "2.0.0", "runs": ["model-a"]},
    }.items():
        report = build_report(snap.state, root_hash=snap.root, **options)
        out[name] = to_json(report)
    return out


def test_checked_in_schemas_are_the_generated_ones() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_report_schema.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (0, ""), "run python tools/gen_report_schema.py"
    for name in ("report.schema.json", "gate-verdict.schema.json"):
        Draft202012Validator.check_schema(json.loads((REPO / "docs" / name).read_text("utf-8")))


def _validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads((REPO / "docs" / "report.schema.json").read_text()))


def test_real_reports_are_valid_and_read_back_to_the_same_bytes(real_reports) -> None:
    validator = _validator()
    for name, data in real_reports.items():
        document = json.loads(data)
        assert [e.message for e in validator.iter_errors(document)] == [], name
        assert to_json(from_json(data)) == data, name
        # A saved JSON report renders to the same Markdown as the built one.
        assert render(document, "md") == render(from_json(data), "md")
    # The real fixture has a self-test section and a models section (tags of the run union).
    kinds = [
        r["run_kind"] for s in json.loads(real_reports["public"])["sections"] for r in s["runs"]
    ]
    assert kinds == ["model", "self_test"]


# (edit of the public report, the JSON path the validator names, a word of its message)
BAD = [
    ("drop contract", lambda d: d.pop("contract"), "$", "'contract' is a required property"),
    ("other contract", lambda d: d.update(contract="caseledger-report/2"), "$.contract", "not one"),
    ("unknown top field", lambda d: d.update(extra=1), "$", "Additional properties"),
    (
        "float rate",
        lambda d: d["sections"][0]["runs"][0]["quality"].update(result_correct_rate=0.5),
        "$.sections[0].runs[0].quality.result_correct_rate",
        "is not valid",
    ),
    (
        "rate not a decimal",
        lambda d: d["sections"][0]["runs"][0]["quality"].update(format_ok_rate="high"),
        "$.sections[0].runs[0].quality.format_ok_rate",
        "is not valid",
    ),
    (
        "negative count",
        lambda d: d["sections"][0]["runs"][0]["quality"].update(total=-1),
        "$.sections[0].runs[0].quality.total",
        "less than the minimum of 0",
    ),
    (
        "unknown run kind",
        lambda d: d["sections"][0]["runs"][0].update(run_kind="robot"),
        "$.sections[0].runs[0]",
        "is not valid",
    ),
    (
        "bank hash not sha256",
        lambda d: d["sections"][0]["bank"].update(hash="md5:00"),
        "$.sections[0].bank.hash",
        "does not match",
    ),
    (
        "caserun without events",
        lambda d: d["sections"][0]["caseruns"][0].pop("events"),
        "$.sections[0].caseruns[0]",
        "'events' is a required property",
    ),
]


@pytest.mark.parametrize(("edit", "path", "word"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_documents_are_refused_by_both_readers(real_reports, edit, path, word) -> None:
    document = json.loads(real_reports["public"])
    edit(document)
    errors = list(_validator().iter_errors(document))
    assert len(errors) == 1
    # Inside the run-kind union the validator names the union and, per branch, the cause.
    found = [e for e in _descendants(errors[0]) if e.json_path == path]
    assert any(word in e.message for e in found), [(e.json_path, e.message) for e in found]
    with pytest.raises(UsageError, match="not a caseledger-report/1 report"):
        from_plain(document)


def _descendants(error: Any) -> list[Any]:
    return [error, *(d for child in error.context for d in _descendants(child))]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every (dict, key) location of a document whose key is a struct field."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*path, k))
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


_OPEN = {"dimensions", "difficulties", "failures", "failure_rates", "cancelled", "flags"}
_OPEN |= {"operators", "controls", "disclosed", "parameters", "invocation_coverage", "usage"}
_OPEN |= {"invocation", "params", "rows", "plan"}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_any_dropped_field_is_refused(real_reports, data) -> None:
    """Removing any field of a struct (not a key of an open map) makes the document invalid."""
    document = json.loads(real_reports["public"])
    candidates = [p for p in _paths(document) if not _OPEN & {str(x) for x in p[:-1]}]
    # Optional by design: ``covered`` is present only when some but not all attempts
    # have the figure (absent, the coverage is complete or zero).
    candidates = [p for p in candidates if p[-1] != "covered"]
    where = data.draw(st.sampled_from(candidates))
    broken = copy.deepcopy(document)
    node: Any = broken
    for key in where[:-1]:
        node = node[key]
    del node[where[-1]]
    assert list(_validator().iter_errors(broken)), where
    with pytest.raises(UsageError):
        from_plain(broken)


def test_to_plain_is_the_json_document(real_reports) -> None:
    report = from_json(real_reports["gold"])
    assert to_plain(report) == json.loads(real_reports["gold"])


def test_a_struct_built_out_of_its_schema_is_refused_where_it_is_encoded(real_reports) -> None:
    """The folds build the schema's structs directly (nothing checks a field then): the
    report's bytes are checked once, by to_json, and a count below 0 is named there."""
    report = from_json(real_reports["public"])
    section = report.sections[0]
    run = section.runs[0]
    assert isinstance(run, schema.RunEntry)
    bad_run = msgspec.structs.replace(run, quality=msgspec.structs.replace(run.quality, wrong=-1))
    bad = msgspec.structs.replace(
        report,
        sections=[
            msgspec.structs.replace(section, runs=[bad_run, *section.runs[1:]]),
            *report.sections[1:],
        ],
    )
    with pytest.raises(InternalError) as caught:
        to_json(bad)
    message = str(caught.value)
    assert "Expected `int` >= 0 - at `$.sections[0].runs[0].quality.wrong`" in message
    assert "a report does not match Report" in message


# ----------------------------------------------------------------- docs/reports.md


def _documented() -> dict[str, list[str]]:
    fields = DOC.split("## Fields (JSON)")[1].split("\n## ")[0]
    out: dict[str, list[str]] = {}
    current = None
    for line in fields.splitlines():
        heading = re.fullmatch(r"### `(\w+)`", line)
        if heading:
            current = heading.group(1)
            out[current] = []
        elif current and line.startswith("| `"):
            out[current].append(line.split("|")[1].strip().strip("`"))
    return out


def _structs() -> dict[str, list[str]]:
    """Every public struct of schema.py with its JSON field names (the tag included)."""
    out = {}
    for name in dir(schema):
        kind = getattr(schema, name)
        if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
            continue
        if kind.__module__ != schema.__name__ or name.startswith("_"):
            continue
        info = msgspec.inspect.type_info(kind)
        names = [f.encode_name for f in info.fields]
        if info.tag_field:
            names.insert(0, info.tag_field)
        out[name] = names
    return out


def test_every_struct_field_is_documented_and_every_documented_field_exists() -> None:
    documented, structs = _documented(), _structs()
    # SelfTestRunEntry only changes the tag: documented with RunEntry.
    structs.pop("SelfTestRunEntry")
    problems = [f"{s} has no table in docs/reports.md" for s in structs if s not in documented]
    problems += [f"docs/reports.md documents {s}, which schema.py does not declare" for s in
                 documented if s not in structs]  # fmt: skip
    for name in sorted(set(documented) & set(structs)):
        problems += [f"{name}.{f} is not documented" for f in structs[name]
                     if f not in documented[name]]  # fmt: skip
        problems += [f"{name}.{f} is documented but not a field" for f in documented[name]
                     if f not in structs[name]]  # fmt: skip
    assert problems == []


def test_metric_paths_are_fields_of_the_run_entry(real_reports) -> None:
    """Every metric and denominator path resolves on a built RunEntry (attributes, then the
    keys of its dict fields), so a renamed field cannot silently make a metric absent."""
    entry = from_json(real_reports["public"]).sections[0].runs[0]
    assert isinstance(entry, schema.RunEntry)
    assert [m.name for m in metrics.METRICS if not m.present(entry)] == []
    # 7 cases x 3 attempts; one never recorded (cancelled, not judged); the renamed column
    # and the fence still return the right rows, the DROP TABLE and the timeout do not.
    assert metrics.read_denominators(entry) == {"n": 21, "judged": 20, "correct": 18}
