"""C2SP signed notes, keys, checkpoints, cosignatures and tile paths against public vectors."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from hypothesis import given, settings
from hypothesis import strategies as st
from support import VECTORS

from ledger.checkpoint import (
    Checkpoint,
    KeyFormatError,
    NoteError,
    NoteVerifier,
    SumdbTile,
    TilePathError,
    cosignature_message,
    entries_path,
    format_checkpoint,
    format_sumdb_tile_path,
    key_hash,
    key_id,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_cosignature,
    parse_signer_key,
    parse_sumdb_tile_path,
    parse_verifier_key,
    sign_cosignature,
    sign_note,
    signer_key_string,
    split_note,
    tile_index_path,
    tile_path,
    tile_widths,
    verifier_key_string,
    verify_cosignature,
)
from ledger.codec import leaf_hash
from ledger.errors import ProofError
from ledger.merkle import EMPTY_ROOT, root_hash, verify_consistency

PETER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
# A fixed test key: seed bytes 0x00..0x1f.
TEST_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def _load(vectors_dir: Path, name: str) -> Any:
    return json.loads((vectors_dir / name).read_text(encoding="utf-8"))


def _notes(kind: str) -> list[Any]:
    data = _load(VECTORS, "signed_notes.json") if VECTORS.is_dir() else {}
    return [pytest.param(v, id=v["name"]) for v in data.get(kind, [])]


def _note_of(v: dict[str, Any]) -> str | bytes:
    if "note_hex" in v:
        return bytes.fromhex(v["note_hex"])
    if "construct" in v:  # "want_text + '\n' + peter_sig_line * 101"
        assert v["construct"] == "want_text + '\\n' + peter_sig_line * 101"
        return v["want_text"] + "\n" + v["peter_sig_line"] * 101
    return str(v["note"])


# ------------------------------------------------------------ keys


def test_key_id_vectors(vectors_dir: Path) -> None:
    vectors = _load(vectors_dir, "key_ids.json")["vectors"]
    assert len(vectors) == 10
    for v in vectors:
        pub = base64.b64decode(v["pubkey_b64"])
        if "private_key_pem_pkcs8" in v:
            private = load_pem_private_key(v["private_key_pem_pkcs8"].encode(), password=None)
            assert isinstance(private, Ed25519PrivateKey)
            assert private.public_key().public_bytes_raw() == pub
            full = key_hash(v["key_name"], pub, v["sig_type"])
            assert full.hex() == v["want_full_sha256_hex"]
            assert int.from_bytes(full[:4], "big") == v["want_key_id_uint32"]
        assert key_id(v["key_name"], pub, v["sig_type"]).hex() == v["want_key_id_hex"]


def test_zero_padded_key_id_is_kept_as_eight_digits() -> None:
    pub = base64.b64decode("xOueRtQD5NTiF5jeGSOJIRL8NJCeIGoh5D9imkBS0ro=")
    assert verifier_key_string("localhost.localdev/sumdb", pub).split("+")[1] == "00000c67"


def test_signer_and_verifier_key_pairs(vectors_dir: Path) -> None:
    pairs = _load(vectors_dir, "key_ids.json")["keypairs"]
    assert len(pairs) == 6
    for pair in pairs:
        name, seed = parse_signer_key(pair["signer_key"])
        verifier = parse_verifier_key(pair["verifier_key"])
        derived = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
        assert (verifier.name, verifier.public_key) == (name, derived)
        assert signer_key_string(name, seed) == pair["signer_key"]
        assert verifier_key_string(name, derived) == pair["verifier_key"]
        signer = Ed25519PrivateKey.from_private_bytes(seed)
        assert NoteVerifier.from_private_key(name, signer).key_string == pair["verifier_key"]


def test_verifier_key_vectors(vectors_dir: Path) -> None:
    data = _load(vectors_dir, "verifier_keys.json")
    assert len(data["valid"]) == 9
    for vkey in data["valid"]:
        verifier = parse_verifier_key(vkey)
        assert verifier.key_string == vkey
        assert verifier.key_id.hex() == vkey.split("+")[1]
    assert len(data["invalid"]) == 5
    for bad in data["invalid"]:
        with pytest.raises(KeyFormatError):
            parse_verifier_key(bad["vkey"])


def test_every_substring_and_increment_of_a_verifier_key_is_rejected() -> None:
    """As golang.org/x/mod TestNewVerifier does for the PeterNeumann key."""
    for start in range(len(PETER)):
        for end in range(start, len(PETER) + 1):
            if (start, end) != (0, len(PETER)):
                with pytest.raises(KeyFormatError):
                    parse_verifier_key(PETER[start:end])
    for i, char in enumerate(PETER):
        with pytest.raises(KeyFormatError):
            parse_verifier_key(PETER[:i] + chr(ord(char) + 1) + PETER[i + 1 :])


def test_bad_signer_keys_are_rejected_without_echoing_the_secret() -> None:
    good = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
    for bad in [good.replace("c74f20a3", "c74f20a4"), good[:-4], good[8:], "PeterNeumann"]:
        with pytest.raises(KeyFormatError) as info:
            parse_signer_key(bad)
        assert "AYEKFALV" not in str(info.value)


# ------------------------------------------------------------ signed notes


@pytest.mark.parametrize("v", _notes("accept"))
def test_accept_vector(v: dict[str, Any], vectors_dir: Path) -> None:
    verifiers = [parse_verifier_key(k) for k in v["verifier_keys"]]
    note = open_note(_note_of(v), verifiers)
    assert note.text == v["want_text"]
    assert note.verified_names == v["want_verified_key_names"]
    _, sigs = split_note(_note_of(v))
    assert len(note.verified) + len(note.unverified) == len(sigs)


@pytest.mark.parametrize("v", _notes("reject"))
def test_reject_vector(v: dict[str, Any], vectors_dir: Path) -> None:
    verifiers = [parse_verifier_key(k) for k in v["verifier_keys"]]
    with pytest.raises(NoteError, match=re.escape(v["want_error"])):
        open_note(_note_of(v), verifiers)


def test_unknown_signatures_are_ignored_and_kept_apart(vectors_dir: Path) -> None:
    accept = {v["name"]: v for v in _load(vectors_dir, "signed_notes.json")["accept"]}
    two = accept["golang/mod two sigs, only Peter known (Enoch ignored, stays unverified)"]
    note = open_note(two["note"], [parse_verifier_key(PETER)])
    assert [s.name for s in note.unverified] == ["EnochRoot"]
    many = accept[
        "sum.golang.org checkpoint + 3 Ed25519 witness sigs + 2 sigs from unknown names (ignored)"
    ]
    note = open_note(many["note"], [parse_verifier_key(k) for k in many["verifier_keys"]])
    assert [s.name for s in note.unverified] == ["random1", "random2"]
    # random1 reuses witness's key id under another name: still unknown, still ignored.
    assert note.unverified[0].key_id.hex() == "f13a86db"


def test_resigning_peter_reproduces_the_note_byte_for_byte(vectors_dir: Path) -> None:
    accept = {v["name"]: v for v in _load(vectors_dir, "signed_notes.json")["accept"]}
    peter = accept["golang/mod PeterNeumann"]
    name, seed = parse_signer_key(peter["signer_key"])
    note = sign_note(peter["want_text"], name, Ed25519PrivateKey.from_private_bytes(seed))
    assert note.encode() == peter["note"].encode()


def test_rekor_entry_is_the_root_of_its_size_one_checkpoint(vectors_dir: Path) -> None:
    accept = {v["name"]: v for v in _load(vectors_dir, "signed_notes.json")["accept"]}
    (rekor,) = [v for name, v in accept.items() if name.startswith("rekor-tiles")]
    verifier = parse_verifier_key(rekor["verifier_keys"][0])
    checkpoint, _ = open_checkpoint(rekor["note"], [verifier], expected_origin="rekor-local")
    entry = base64.b64decode(rekor["entry_canonicalized_body_b64"])
    assert checkpoint.size == 1
    assert checkpoint.root_hash == leaf_hash(entry) == root_hash([leaf_hash(entry)])
    full = key_hash("rekor-local", verifier.public_key)
    assert base64.b64encode(full).decode() == rekor["log_id_full_key_id_b64"]


def test_sumdb_fork_is_two_valid_heads_and_no_consistency(vectors_dir: Path) -> None:
    accept = {v["name"]: v for v in _load(vectors_dir, "signed_notes.json")["accept"]}
    old_v = accept["sumdb test fork: OLD signed tree head (size 5)"]
    new_v = accept["sumdb test fork: NEW signed tree head (size 6)"]
    verifiers = [parse_verifier_key(old_v["verifier_keys"][0])]
    old, _ = open_checkpoint(old_v["note"], verifiers, "go.sum database tree")
    new, _ = open_checkpoint(new_v["note"], verifiers, "go.sum database tree")
    check = new_v["split_view_check"]
    assert (old.size, new.size) == (check["size1"], check["size2"]) == (5, 6)
    proof = [base64.b64decode(p) for p in check["proof_b64"]]
    with pytest.raises(ProofError):
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
    # Not a length accident: no 3-element choice from it (the right length) verifies either.
    for skip in range(4):
        with pytest.raises(ProofError, match="does not reproduce"):
            verify_consistency(5, 6, old.root_hash, new.root_hash, proof[:skip] + proof[skip + 1 :])


def test_note_limits_and_format_errors() -> None:
    text = "hello\n"
    verifier = NoteVerifier.from_private_key("test.example/log", TEST_KEY)
    line = split_note(sign_note(text, "test.example/log", TEST_KEY))[1][0].line
    assert open_note(text + "\n" + line * 100, [verifier]).verified_names == ["test.example/log"]
    with pytest.raises(NoteError, match="101 signatures, at most 100"):
        open_note(text + "\n" + line * 101, [verifier])
    for bad in ["hello", "hello\x07\n", "", "\udc80\n"]:
        with pytest.raises(NoteError):
            sign_note(bad, "test.example/log", TEST_KEY)
    with pytest.raises(KeyFormatError):
        sign_note(text, "bad+name", TEST_KEY)
    with pytest.raises(NoteError, match="signature line 1 is too short"):
        open_note(text + "\n— test.example/log AAAAAA==\n", [verifier])
    with pytest.raises(NoteError, match="not valid UTF-8"):
        open_note("\ud800" + text + "\n" + line, [verifier])
    assert repr(verifier) == f"NoteVerifier('{verifier.key_string}')"
    with pytest.raises(KeyFormatError, match="seed has 32 bytes, got 31"):
        signer_key_string("x", bytes(31))
    # A signature line whose base64 is not canonical is malformed, not silently accepted.
    encoded = line.split(" ")[2].strip()
    assert encoded.endswith("=")
    twisted = encoded[:-2] + chr(ord(encoded[-2]) + 1) + "="
    with pytest.raises(NoteError, match="malformed note"):
        open_note(text + "\n" + line.replace(encoded, twisted), [verifier])


def test_a_known_bad_signature_rejects_even_with_a_good_one() -> None:
    good = sign_note("text\n", "log", TEST_KEY)
    other = Ed25519PrivateKey.from_private_bytes(bytes(32))
    forged = split_note(sign_note("other\n", "log", other))[1][0]
    # Same name and key id as the trusted key, wrong signature bytes.
    bad_line = forged.line.replace(
        base64.b64encode(forged.key_id + forged.signature).decode(),
        base64.b64encode(key_id("log", verifier_pub()) + forged.signature).decode(),
    )
    with pytest.raises(NoteError, match="invalid signature for key log"):
        open_note(good + bad_line, [NoteVerifier("log", verifier_pub())])


def verifier_pub() -> bytes:
    return TEST_KEY.public_key().public_bytes_raw()


def _plain_verify(note: str, name: str, public_key: bytes) -> str:
    """A signed-note check written from the C2SP text alone, sharing no ledger code."""
    text, _, sigs = note.rpartition("\n\n")
    want_id = hashlib.sha256(name.encode() + b"\n\x01" + public_key).digest()[:4]
    for line in sigs.splitlines():
        dash, signer, encoded = line.split(" ")
        raw = base64.b64decode(encoded, validate=True)
        if dash == "\u2014" and signer == name and raw[:4] == want_id:
            Ed25519PublicKey.from_public_bytes(public_key).verify(raw[4:], (text + "\n").encode())
            return text + "\n"
    raise AssertionError("no signature by the key")


def test_a_caseledger_checkpoint_verifies_with_a_plain_signed_note_verifier() -> None:
    root = hashlib.sha256(b"\x00hello world").digest()
    text = format_checkpoint("caseledger.example/ledger", 1, root)
    note = sign_note(text, "caseledger.example/ledger", TEST_KEY)
    assert _plain_verify(note, "caseledger.example/ledger", verifier_pub()) == text
    checkpoint, opened = open_checkpoint(
        note, [NoteVerifier("caseledger.example/ledger", verifier_pub())]
    )
    assert checkpoint == Checkpoint("caseledger.example/ledger", 1, root)
    assert checkpoint.text() == text == opened.text


note_texts = st.lists(
    st.text(
        st.characters(min_codepoint=0x20, blacklist_categories=("Cs",)), min_size=0, max_size=30
    ),
    min_size=1,
    max_size=5,
).map(lambda lines: "\n".join(lines) + "\n")


@settings(max_examples=100, deadline=None)
@given(text=note_texts, data=st.data())
def test_sign_open_round_trip_and_any_text_change_is_rejected(
    text: str, data: st.DataObject
) -> None:
    note = sign_note(text, "prop.example", TEST_KEY)
    verifier = NoteVerifier("prop.example", verifier_pub())
    assert open_note(note, [verifier]).text == text
    pos = data.draw(st.integers(0, len(text) - 1), label="position")
    changed = text[:pos] + ("x" if text[pos] != "x" else "y") + text[pos + 1 :]
    with pytest.raises(NoteError):
        open_note(changed + note[len(text) :], [verifier])


# ------------------------------------------------------------ checkpoints


def test_checkpoint_format_vectors(vectors_dir: Path) -> None:
    data = _load(vectors_dir, "checkpoints.json")
    first, other_origin, hex_size, bad_root, sofa = data["format_vectors"]
    parsed = parse_checkpoint(first["body"], "go.sum database tree")
    assert first["want"]["root"] == "RFC6962 leaf hash of 'hello world'"
    assert parsed == Checkpoint("go.sum database tree", 123456789012, leaf_hash(b"hello world"))
    assert format_checkpoint(parsed.origin, parsed.size, parsed.root_hash) == first["body"]
    with pytest.raises(NoteError, match=re.escape("expected 'go.sum database tree'")):
        parse_checkpoint(other_origin["body"], "go.sum database tree")
    assert parse_checkpoint(other_origin["body"]).origin == "not-go.sum database tree"
    with pytest.raises(NoteError, match="not a plain decimal"):
        parse_checkpoint(hex_size["body"])
    with pytest.raises(NoteError, match="not a base64 32-byte hash"):
        parse_checkpoint(bad_root["body"])
    sofa_cp = parse_checkpoint(sofa["body"])
    assert (sofa_cp.origin, sofa_cp.size) == (sofa["want"]["origin"], sofa["want"]["size"])
    text, (sig,) = split_note(sofa["body"] + "\n" + sofa["sig_line"] + "\n")
    assert text == sofa["body"]
    assert (sig.name, sig.key_id.hex()) == (sofa["want"]["origin"], "033de0ae")


def test_checkpoint_origin_check(vectors_dir: Path) -> None:
    check = _load(vectors_dir, "checkpoints.json")["origin_check"]
    verifiers = [parse_verifier_key(k) for k in check["verifier_keys"]]
    checkpoint, _ = open_checkpoint(check["note"], verifiers, check["expected_origin_ok"])
    assert checkpoint.size == 6476701
    with pytest.raises(NoteError, match=re.escape("checkpoint origin is 'go.sum database tree'")):
        open_checkpoint(check["note"], verifiers, check["expected_origin_bad"])


@pytest.mark.parametrize(
    "body",
    [
        "log\n5\n",  # no root line
        "log\n05\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",  # leading zero
        "log\n-1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
        "log\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  # no final newline
        "log\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n",  # empty extension
        "\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",  # empty origin
        "log\n\u0665\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",  # non-ASCII digit
    ],
    ids=["no-root", "leading-zero", "negative", "no-newline", "empty-ext", "no-origin", "digit"],
)
def test_malformed_checkpoints_are_rejected(body: str) -> None:
    with pytest.raises(NoteError):
        parse_checkpoint(body)


def test_checkpoint_with_extensions_round_trips() -> None:
    text = format_checkpoint("log", 0, EMPTY_ROOT, ["ext one", "ext two"])
    assert text == "log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next one\next two\n"
    assert parse_checkpoint(text).extensions == ("ext one", "ext two")
    with pytest.raises(NoteError):
        format_checkpoint("two\nlines", 0, EMPTY_ROOT)
    with pytest.raises(NoteError, match="32-byte root"):
        format_checkpoint("log", 1, EMPTY_ROOT[:31])


# ------------------------------------------------------------ cosignatures


def test_cosignature_vectors(vectors_dir: Path) -> None:
    works, plain, spec = _load(vectors_dir, "cosignatures.json")["vectors"]
    for v in (works, spec):
        raw = base64.b64decode(v["sig_b64"])
        assert len(raw) == v["want_len"] == 76
        cosig = parse_cosignature(raw)
        assert (cosig.key_id.hex(), cosig.timestamp) == (v["want_key_id_hex"], v["want_timestamp"])
    with pytest.raises(NoteError, match="68 bytes, expected 76"):
        parse_cosignature(base64.b64decode(plain["sig_b64"]))
    body = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    assert cosignature_message(body, spec["want_timestamp"]) == spec["want_signed_message"].encode()


def test_cosignature_round_trip_and_note_ignores_it() -> None:
    text = format_checkpoint("log.example", 3, EMPTY_ROOT.replace(b"\xe3", b"\x00", 1))
    note = sign_note(text, "log.example", TEST_KEY)
    witness = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    witness_pub = witness.public_key().public_bytes_raw()
    line = sign_cosignature(text, "witness.example", witness, 1679315147)
    raw = base64.b64decode(line.split(" ")[2])
    assert verify_cosignature(text, "witness.example", witness_pub, raw) == 1679315147
    with pytest.raises(NoteError, match="invalid cosignature"):
        verify_cosignature(text.replace("3", "4", 1), "witness.example", witness_pub, raw)
    with pytest.raises(NoteError, match="is not other's"):
        verify_cosignature(text, "other", witness_pub, raw)
    opened = open_note(note + line, [NoteVerifier("log.example", verifier_pub())])
    assert [s.name for s in opened.unverified] == ["witness.example"]
    with pytest.raises(NoteError, match="exceeds"):
        parse_cosignature(bytes(4) + (1 << 63).to_bytes(8, "big") + bytes(64))


# ------------------------------------------------------------ tiles


def test_c2sp_tile_vectors(vectors_dir: Path) -> None:
    index, big, exact = _load(vectors_dir, "tiles.json")["c2sp_examples"]
    assert tile_index_path(index["index"]) == index["want_path_elem"]
    assert tile_widths(big["tree_size"]) == [(273, 112), (1, 17), (0, 1)]
    want = big["want"]
    assert (want["level0_full_tiles"], want["level0_partial_width"]) == (273, 112)
    assert (want["level1_full_tiles"], want["level1_partial_width"]) == (1, 17)
    assert want["level2_partial_width"] == 1
    assert tile_widths(exact["tree_size"]) == [(1, 0), (0, 1)]
    assert (exact["want"]["level0_full_tiles"], exact["want"]["level1_partial_width"]) == (1, 1)
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(1, 0, 17) == "tile/1/000.p/17"
    assert entries_path(273, 112) == "tile/entries/273.p/112"
    assert tile_widths(0) == []
    for bad in [(64, 0, 256), (0, -1, 256), (0, 0, 0), (0, 0, 257)]:
        with pytest.raises(TilePathError):
            tile_path(*bad)


def test_sumdb_tile_vectors(vectors_dir: Path) -> None:
    vectors = _load(vectors_dir, "tiles.json")["sumdb_tile_paths"]
    assert len(vectors) == 8
    for v in vectors:
        if "tile" in v:
            t = v["tile"]
            tile = SumdbTile(t["H"], t["L"], t["N"], t["W"])
            assert parse_sumdb_tile_path(v["path"]) == tile
            assert format_sumdb_tile_path(tile) == v["path"]
        else:
            with pytest.raises(TilePathError):
                parse_sumdb_tile_path(v["path"])
    for bad in [
        "tile/4/0/001.p/16",  # a partial tile narrower than 2^H only
        "tile/4/0/001.p/0",
        "tile/0/0/001",  # height 0
        "tiles/4/0/001",
        "tile/4/-1/001",  # level -1 is spelled "data"
        "tile/4/0/x000/001",  # not the shortest index spelling
    ]:
        with pytest.raises(TilePathError):
            parse_sumdb_tile_path(bad)
    with pytest.raises(TilePathError):
        format_sumdb_tile_path(SumdbTile(31, 0, 0, 1))


# ------------------------------------------------------------ docs


def test_worked_example_in_formats_md_verifies() -> None:
    """The example note, keys and hashes in docs/formats.md are real and agree."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text("utf-8")
    vkey = re.search(r"verifier key: (\S+)", doc)
    skey = re.search(r"signer key: +(\S+)", doc)
    note = re.search(r"```\n(example\.com/caseledger\n3\n.*?\n\n— .*?\n)```", doc, re.S)
    assert vkey
    assert skey
    assert note
    verifier = parse_verifier_key(vkey.group(1))
    checkpoint, _ = open_checkpoint(note.group(1), [verifier], "example.com/caseledger")
    leaves = [hashlib.sha256(b"\x00" + x).digest() for x in (b"a", b"b", b"c")]
    h01 = hashlib.sha256(b"\x01" + leaves[0] + leaves[1]).digest()
    assert checkpoint.root_hash == hashlib.sha256(b"\x01" + h01 + leaves[2]).digest()
    for value in [*leaves, h01, checkpoint.root_hash]:
        assert value.hex() in doc
    name, seed = parse_signer_key(skey.group(1))
    assert seed == bytes(range(32))
    assert sign_note(checkpoint.text(), name, TEST_KEY) == note.group(1)
