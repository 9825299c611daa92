"""Issue 30: every free text of a run event is cut to ``max_text_bytes``; secrets are
scrubbed from results and errors before they are scored (``ledger.harness.limits``,
``ledger.harness.pipeline.stored_result``). Hand-worked cases and properties."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events
from ledger.engines.duckdb_worker import ExecResult
from ledger.harness import limits, pipeline
from ledger.secrets import SecretSet

KEY = "sk-proj-Q7vX2mN9pL4kR8tY1wZ5bC3dF6gH0jK"


def stored(text: str) -> int:
    """Bytes of ``text`` as a JSON string without its quotes (the standard library's)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


# Characters whose JSON form is the same in every encoder (no U+2028/2029, no DEL).
_CHARS = st.characters(
    codec="utf-8", exclude_categories=("Cs",), exclude_characters="\u2028\u2029\x7f"
)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=_CHARS, max_size=300), cap=st.integers(1, 200))
def test_cut_text_is_the_longest_prefix_within_the_cap(text: str, cap: int) -> None:
    out, whole = limits.cut_text(text, cap)
    assert text.startswith(out)
    assert stored(out) <= cap
    if whole is None:
        assert out == text
    else:
        assert whole == len(text.encode("utf-8"))
        assert stored(text[: len(out) + 1]) > cap  # one character more is over the cap
    assert limits.cut_text(text, cap) == (out, whole)  # the same cut every time


def test_cut_text_by_hand() -> None:
    assert limits.cut_text("x" * 10, 10) == ("x" * 10, None)
    assert limits.cut_text("x" * 11, 10) == ("x" * 10, 11)
    # "é" is 2 bytes: 5 fit in 10; a tab is 2 bytes as stored (\t).
    assert limits.cut_text("é" * 6, 10) == ("é" * 5, 12)
    assert limits.cut_text("\t" * 6, 10) == ("\t" * 5, 6)
    # Scrubbed first (the key becomes the 10-character marker), then cut.
    secrets = SecretSet([KEY])
    assert limits.cut_text(f"key {KEY} end", 20, secrets) == ("key [redacted] end", None)
    text = f"key {KEY} " + "z" * 100
    assert limits.cut_text(text, 20, secrets) == ("key [redacted] zzzzz", len(text))


def test_text_policy_cuts_every_free_text_and_lists_it() -> None:
    policy = limits.TextPolicy(cap=16, secrets=SecretSet([KEY]))
    invocation = events.Invocation(
        harness_kind="h", response_mode="text", single_call=True, tools="off", retries=1,
        prompt_contract_digest="d", system_prompt_digest=None, wire_protocol="w",
        client_version="1",
    )  # fmt: skip
    tries = (
        events.CallTry(outcome="server_error", at="t", duration_us=1, message="m" * 40),
        events.CallTry(outcome="server_error", at="t", duration_us=1, message=f"echo {KEY}"),
    )
    fields = {
        "case_id": "c" * 40,  # an id, not free text: left alone
        "attempt": 1,
        "kind": "server_error",
        "message": "e" * 20,
        "invocation": invocation,
        "raw_output": "r" * 100,  # its own cap (max_output_bytes): left alone
        "usage": events.Usage(raw_json='{"k": "' + "u" * 30 + '"}'),
        "tries": tries,
    }
    out = policy.fields(fields)
    assert out["case_id"] == "c" * 40
    assert out["raw_output"] == "r" * 100
    assert out["message"] == "e" * 16
    # 16 bytes as stored: { 1, three quotes 2 each, k, colon, space 1 each: 10; six u's
    assert out["usage"].raw_json == '{"k": "uuuuuu'
    assert [t.message for t in out["tries"]] == ["m" * 16, "echo [redacted]"]
    assert out["texts_cut"] == (
        events.TextCut(field="message", bytes=20),
        events.TextCut(field="usage.raw_json", bytes=39),
        events.TextCut(field="tries.0.message", bytes=40),
    )
    event = events.ProviderFailed(stream="r", stream_seq=1, stream_prev=None, at="t", **out)
    assert msgspec.json.decode(msgspec.json.encode(event), type=events.ProviderFailed) == event
    # Nothing to cut: no texts_cut at all (the event keeps the bytes it always had).
    assert "texts_cut" not in policy.fields({"message": "short"})


def _result(**fields: object) -> ExecResult:
    base: dict[str, object] = {
        "ok": True, "error_kind": None, "error_message": None, "columns": (), "rows": (),
        "row_count": 0, "truncated": False, "sql_us": 1,
    }  # fmt: skip
    return ExecResult(**{**base, **fields})  # type: ignore[arg-type]


def test_stored_result_cuts_the_error_and_scrubs_the_result() -> None:
    caps = msgspec.structs.replace(limits.DEFAULT_LIMITS, max_text_bytes=256)
    failed = _result(ok=False, error_kind="sql_runtime", error_message="Error: " + "9x" * 1000)
    cut = pipeline.stored_result(failed, caps)
    assert cut.error_message == ("Error: " + "9x" * 1000)[:256]
    assert cut.texts_cut == (events.TextCut(field="error_message", bytes=2007),)
    secrets = SecretSet([KEY])
    rows = ((f"x{KEY}", 1, "sk-proj-"), ([KEY[::-1]], None, "plain"))
    columns = (events.Column(name=KEY, type="VARCHAR"), events.Column(name="n", type="INTEGER"),
               events.Column(name="p", type="VARCHAR"))  # fmt: skip
    clean = pipeline.stored_result(_result(columns=columns, rows=rows, row_count=2), caps, secrets)
    # The reversed key's body goes; its reversed public prefix ("-jorp-ks") is no secret.
    assert clean.rows == (("x[redacted]", 1, "sk-proj-"), (["[redacted]-jorp-ks"], None, "plain"))
    assert [c.name for c in clean.columns] == ["[redacted]", "n", "p"]
    assert clean.scrubbed == 3
    assert clean.texts_cut is msgspec.UNSET
    # Without a secret in it, the result is the worker's, untouched.
    plain = _result(columns=columns[1:], rows=((1, "sk-proj-"),), row_count=1)
    assert pipeline.stored_result(plain, caps, secrets) is plain


def _recorded(rows: tuple[tuple[object, ...], ...], scrubbed: int | None) -> events.SqlExecuted:
    extra = {} if scrubbed is None else {"scrubbed": scrubbed}
    return events.SqlExecuted(
        stream="r", stream_seq=1, stream_prev=None, at="t", case_id="c", attempt=1, ok=True,
        error_kind=None, error_message=None, columns=(events.Column(name="x", type="VARCHAR"),),
        rows=rows, row_count=len(rows), truncated=False, sql_us=1, **extra,
    )  # fmt: skip


def test_re_execution_matches_a_scrubbed_result_with_the_marker_standing_for_text() -> None:
    def rerun(value: str) -> ExecResult:
        return _result(columns=(events.Column(name="x", type="VARCHAR"),), rows=((value,),),
                       row_count=1)  # fmt: skip

    recorded = _recorded((("key [redacted] end",),), scrubbed=1)
    assert pipeline.execution_differences(recorded, rerun(f"key {KEY} end")) == []
    assert pipeline.execution_differences(recorded, rerun("key  end")) == ["rows"]  # not empty
    assert pipeline.execution_differences(recorded, rerun(f"KEY {KEY} end")) == ["rows"]
    # Without ``scrubbed`` the marker is plain text: compared byte for byte, as before.
    unscrubbed = _recorded((("key [redacted] end",),), scrubbed=None)
    assert pipeline.execution_differences(unscrubbed, rerun(f"key {KEY} end")) == ["rows"]
    assert pipeline.execution_differences(unscrubbed, rerun("key [redacted] end")) == []


def test_an_output_contract_error_is_cut_and_the_extracted_fields_are_not() -> None:
    policy = limits.TextPolicy(cap=64)
    extra = ", ".join(f"k{i}" for i in range(100))  # "extra fields k0, k1, ..." by the protocol
    fields = {"sql": "S" * 200, "summary": "s" * 200, "error": f"extra fields {extra}"}
    out = policy.fields(fields)
    assert (out["sql"], out["summary"]) == ("S" * 200, "s" * 200)
    assert out["error"] == f"extra fields {extra}"[:64]
    # 13 + 10 x "kN, " (4) + 90 x "kNN, " (5) - the last ", " (2) = 501 bytes
    assert out["texts_cut"] == (events.TextCut(field="error", bytes=501),)


_TEXTS = st.text(alphabet=st.sampled_from(["a", "é", '"', "\\", "\n", "\x00", "😀", "\ud800"]))
_VALUES = st.recursive(
    st.none() | st.integers(-5, 5) | _TEXTS,
    lambda inner: (
        st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
        | st.builds(events.Violation, check=_TEXTS, message=_TEXTS)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(["error", "message", "detail", "sql", "summary", "extra"]),
        _VALUES,
        max_size=4,
    ),
    cap=st.integers(1, 120),
)
def test_fields_within_the_cap_are_kept_exactly_as_the_walk_keeps_them(
    fields: dict[str, object], cap: int
) -> None:
    # ``fields`` skips the walk when the fields' JSON is within the cap; whatever it
    # returns is what walking every value returns (texts, texts_cut and all).
    policy = limits.TextPolicy(cap=cap)
    assert policy.fields(fields) == policy.walked(fields)
