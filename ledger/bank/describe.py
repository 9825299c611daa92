"""What `bank show`, `bank diff` and `bank list` print: plain data first, then text from it."""

from __future__ import annotations

from dataclasses import fields
from decimal import Decimal
from typing import Any

import msgspec

from ledger.bank.model import Bank, CaseDef
from ledger.bank.registry import PublishedBank
from ledger.events import CaseSpec

__all__ = [
    "describe_bank",
    "describe_published",
    "diff_banks",
    "format_diff",
    "format_show",
    "to_json",
]

_CASE_FIELDS = [f.name for f in fields(CaseDef) if f.name != "line"]


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _case(spec: CaseSpec, reference: str | None) -> dict[str, Any]:
    out = {name: _plain(getattr(spec, name)) for name in spec.__struct_fields__}
    if out.get("benchmark") not in (None, msgspec.UNSET):
        out["benchmark"] = msgspec.to_builtins(out["benchmark"])
    for name in [k for k, v in out.items() if v is msgspec.UNSET]:
        del out[name]  # issue 16: leak_waiver and rows are shown only when a case has them
    if reference is not None:
        out["reference_sql"] = reference
    return out


def describe_bank(bank: Bank, *, with_reference: bool = False) -> dict[str, Any]:
    """An unpublished bank folder's identity and cases (reference SQL only when asked for)."""
    return {
        "bank": bank.bank_id,
        "version": bank.version,
        "description": bank.description,
        "content_sha256": bank.content_sha256,
        "published_seq": None,
        "files": dict(bank.source.file_hashes),
        "calibration_sha256": bank.source.calibration_sha256,
        **_benchmark(bank.benchmark),
        "cases": [_case(c.spec(), c.reference_sql if with_reference else None) for c in bank.cases],
    }


def _benchmark(source: Any) -> dict[str, Any]:
    """``{"benchmark": {...}}`` for a bank imported from a benchmark, else nothing."""
    if source is None or source is msgspec.UNSET:
        return {}
    return {"benchmark": msgspec.to_builtins(source)}


def describe_published(published: PublishedBank, *, with_reference: bool = False) -> dict[str, Any]:
    """A published bank from its event; reference SQL (from the stored files) only when asked."""
    event = published.event
    refs = published.references() if with_reference else {}
    return {
        "bank": event.bank_id,
        "version": event.version,
        "description": event.description,
        "content_sha256": event.content_sha256,
        "published_seq": published.seq,
        "files": dict(event.files),
        "calibration_sha256": event.calibration_sha256,
        **_benchmark(event.benchmark),
        "cases": [_case(c, refs.get(c.id)) for c in event.cases],
    }


def format_show(data: dict[str, Any]) -> str:
    """Text for `bank show`."""
    seq = data["published_seq"]
    where = f"published at seq {seq}" if seq is not None else "not published"
    lines = [f"{data['bank']}@{data['version']}  {data['content_sha256']}  ({where})"]
    if data["description"]:
        lines.append(data["description"])
    if "benchmark" in data:
        b = data["benchmark"]
        lines.append(
            f"imported from {b['name']} ({b['questions']}, {b['questions_sha256']}); the "
            f"benchmark's row contract: {b['rows']}"
        )
    lines.append(f"{len(data['cases'])} cases")
    width = max([2, *(len(c["id"]) for c in data["cases"])])
    lines.append(f"{'id':<{width}}  {'dimension':<19}  {'difficulty':<10}  weight  question")
    for c in data["cases"]:
        lines.append(
            f"{c['id']:<{width}}  {c['dimension']:<19}  {c['difficulty']:<10}  "
            f"{c['weight']:>6}  {_one_line(c['question'])}"
        )
        if "benchmark" in c:
            ref = c["benchmark"]
            extra = [f"{k} {ref[k]}" for k in ("question_id", "difficulty") if ref.get(k)]
            lines.append(f"    benchmark index {ref['index']}" + "".join(f", {e}" for e in extra))
        if "leak_waiver" in c:
            lines.append(f"    leak waiver: {c['leak_waiver']}")
        if "rows" in c:
            lines.append(f"    rows: {c['rows']}")
        if "reference_sql" in c:
            lines += ["    " + ln for ln in c["reference_sql"].rstrip("\n").splitlines()]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """A question on one table line (an imported BIRD question has its evidence on a
    line of its own): line breaks shown as `` / ``."""
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def diff_banks(a: Bank, b: Bank) -> dict[str, Any]:
    """Files and cases that differ between two banks (A is the old side)."""
    header = {
        key: [getattr(a, key), getattr(b, key)]
        for key in ("bank_id", "version", "description")
        if getattr(a, key) != getattr(b, key)
    }
    files = {
        name: [a.source.file_hashes.get(name), b.source.file_hashes.get(name)]
        for name in sorted(set(a.source.file_hashes) | set(b.source.file_hashes))
        if a.source.file_hashes.get(name) != b.source.file_hashes.get(name)
    }
    if a.source.calibration_sha256 != b.source.calibration_sha256:
        files["calibration.yaml"] = [a.source.calibration_sha256, b.source.calibration_sha256]
    old = {c.id: c for c in a.cases}
    new = {c.id: c for c in b.cases}
    changed = {
        cid: [f for f in _CASE_FIELDS if getattr(old[cid], f) != getattr(new[cid], f)]
        for cid in old
        if cid in new
    }
    return {
        "a": {"ref": a.ref, "content_sha256": a.content_sha256},
        "b": {"ref": b.ref, "content_sha256": b.content_sha256},
        "same": a.content_sha256 == b.content_sha256,
        "header": header,
        "files": files,
        "cases": {
            "added": [cid for cid in new if cid not in old],
            "removed": [cid for cid in old if cid not in new],
            "changed": {cid: f for cid, f in changed.items() if f},
        },
    }


def format_diff(data: dict[str, Any]) -> str:
    """Text for `bank diff`."""
    a, b = data["a"], data["b"]
    lines = [f"A {a['ref']}  {a['content_sha256']}", f"B {b['ref']}  {b['content_sha256']}"]
    if data["same"] and not data["files"]:
        return "\n".join([*lines, "same content"])
    for key, (old, new) in data["header"].items():
        lines.append(f"{key}: {old!r} -> {new!r}")
    for name in data["files"]:
        lines.append(f"file changed: {name}")
    cases = data["cases"]
    lines += [f"case added: {cid}" for cid in cases["added"]]
    lines += [f"case removed: {cid}" for cid in cases["removed"]]
    lines += [f"case changed: {cid} ({', '.join(f)})" for cid, f in cases["changed"].items()]
    return "\n".join(lines)


def to_json(data: Any) -> str:
    """Indented JSON (UTF-8 text, sorted keys) for ``--json``."""
    raw = msgspec.json.encode(data, order="sorted")
    return msgspec.json.format(raw, indent=2).decode("utf-8")
