"""A run from elsewhere counts only through a key the operator trusts (issue 29).

A home machine (its own SQLite ledger and operator key ``home-op``, made by
``caseledger init``) runs the recorded lumen-mini profile on retail and exports
the run. A forger holds the exported bundle and nothing else: every forgery is
re-signed with a freshly generated key (same name as the honest key, a new name,
a second key under the trusted name with the same claimed origin, an edited
origin, an attempt removed). The central ledger trusts ``home-op`` and refuses
each forgery, naming the key, with nothing appended. The honest key itself can
still sign raised scores: the import succeeds (the signature is genuine), and the
auditor's ``verify --recompute`` on the audit export fails naming the first
wrong score; the honest run passes it with its SQL re-executed.

Forged bundles are made here with the test's own code: canonical JSON bodies
(sorted keys, no spaces), SHA-256 leaf hashes with the 0x00 prefix, C2SP key ids
(SHA-256(name || 0x0A || 0x01 || key)[:4]) and Ed25519 signatures over
``caseledger/event/v2\\n || previous chain || leaf`` (docs/formats.md), never the
project's signing code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import store_kit
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ledger_audit import TAMPERED

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "ledger" / "demo"
RUN = "home-lumen"


def cli(db: Path, *args: str, home: Path) -> Any:
    return store_kit.caseledger(db, *args, cwd=home, home=home, timeout=600)


def ok(done: Any) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return str(done.stdout)


def key_id(name: str, public: bytes) -> str:
    return hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4].hex()


def verifier_key(name: str, public: bytes) -> str:
    return f"{name}+{key_id(name, public)}+" + base64.b64encode(b"\x01" + public).decode()


def seed_of(home: Path) -> tuple[str, bytes]:
    """(name, seed) of the operator key file: PRIVATE+KEY+name+id+base64(0x01 || seed)."""
    text = (home / "keys" / "operator.key").read_text("ascii").strip()
    _, _, name, _, encoded = text.split("+", 4)
    return name, base64.b64decode(encoded)[1:]


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def leaf_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(b"\x00" + body).hexdigest()


@dataclass(frozen=True)
class Home:
    home: Path
    db: Path
    bundle: dict[str, Any]
    name: str
    seed: bytes

    @property
    def public(self) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes_raw()

    @property
    def pub(self) -> str:
        return verifier_key(self.name, self.public)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    root = tmp_path_factory.mktemp("home")
    db = root / "ledger.db"
    ok(cli(db, "init", "--name", "home-op", home=root))
    ok(cli(db, "bank", "publish", "retail", home=root))
    replay = ["--adapter", "replay", "--replay-file", str(DEMO / "lumen-mini.jsonl")]
    ok(cli(db, "run", "--bank", "retail", *replay, "--tools", "off", "--run-id", RUN, home=root))
    out = root / "run.bundle.json"
    ok(cli(db, "export", "run", RUN, "-o", str(out), home=root))
    name, seed = seed_of(root)
    assert name == "home-op"
    return Home(root, db, json.loads(out.read_bytes()), name, seed)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger (operator key central-op) with retail published, made once per module:
    each test works on its own copy (:func:`copy_of`)."""
    root = tmp_path_factory.mktemp("plain") / "central"
    root.mkdir()
    db = root / "ledger.db"
    ok(cli(db, "init", "--name", "central-op", home=root))
    ok(cli(db, "bank", "publish", "retail", home=root))
    return db


@pytest.fixture(scope="module")
def trusting(tmp_path_factory: pytest.TempPathFactory, plain: Path, home: Home) -> Path:
    """``plain`` with home-op trusted (through a .pub file), made once per module."""
    db = copy_of(plain, tmp_path_factory.mktemp("trusting") / "central")
    root = db.parent
    pub = root / "home-op.pub"
    pub.write_text(home.pub + "\n")
    out = ok(cli(db, "signers", "trust", str(pub), "--name", "home-op", home=root))
    assert f"trusted home-op ({key_id('home-op', home.public)})" in out
    return db


@pytest.fixture
def central(tmp_path: Path, trusting: Path) -> Path:
    """This test's own copy of a ledger with retail published and home-op trusted."""
    return copy_of(trusting, tmp_path / "central")


def copy_of(db: Path, root: Path) -> Path:
    """A copy of ``db``'s whole folder (ledger, side files, keys, banks) at ``root``: the
    same ledger, as ``init`` and ``bank publish`` (and any trust) made it there."""
    shutil.copytree(db.parent, root)
    return root / db.name


def size_of(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return int(con.execute("SELECT count(*) FROM events").fetchone()[0])


def forge(
    bundle: dict[str, Any],
    name: str,
    seed: bytes,
    edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda events: events,
    origin: str | None = None,
    run: str | None = None,
) -> dict[str, Any]:
    """The bundle with its run events decoded, edited, relinked and re-signed by the key
    (name, seed); the origin attested by the same key (the forger can do all of that)."""
    private = Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key().public_bytes_raw()
    kid = key_id(name, public)
    decoded = [json.loads(base64.b64decode(ev["body"])) for ev in bundle["events"]]
    for ev, body in zip(bundle["events"], decoded, strict=True):
        assert canonical(body) == base64.b64decode(ev["body"])  # the encoding is the same
    for body, ev in zip(decoded, bundle["events"], strict=True):
        body["_leaf"] = ev["leaf_hash"]
    kept = edit(decoded)
    events, prev_leaf, renamed = [], None, {}
    for i, (body, ev) in enumerate(zip(kept, bundle["events"], strict=False)):
        old_leaf = body.pop("_leaf")
        body = {**body, "stream_seq": i, "stream_prev": prev_leaf}
        if run is not None:
            body["stream"] = run
            if "run_id" in body:
                body["run_id"] = run
        if "evidence" in body:  # a score names its evidence by leaf hash: follow the renames
            body["evidence"] = [renamed.get(link, link) for link in body["evidence"]]
        raw = canonical(body)
        leaf = leaf_of(raw)
        renamed[old_leaf] = leaf
        prev = bytes.fromhex(ev["prev_chain"])
        sig = private.sign(b"caseledger/event/v2\n" + prev + bytes.fromhex(leaf[7:]))
        events.append(
            {
                "seq": ev["seq"],
                "leaf_hash": leaf,
                "body": base64.b64encode(raw).decode(),
                "prev_chain": ev["prev_chain"],
                "key_id": kid,
                "sig": base64.b64encode(sig).decode(),
            }
        )
        prev_leaf = leaf
    claimed = bundle["origin"] if origin is None else origin
    run_id = bundle["run"] if run is None else run
    message = (
        f"caseledger/run-origin/v1\n{claimed}\n{run_id}\n"
        f"{events[0]['leaf_hash']}\n{events[-1]['leaf_hash']}\n"
    ).encode()
    signer = {
        "key_id": kid,
        "name": name,
        "public_key": base64.b64encode(public).decode(),
        "verifier_key": verifier_key(name, public),
    }
    others = [s for s in bundle["signers"] if s["key_id"] == bundle["bank"]["key_id"] != kid]
    return {
        **bundle,
        "run": run_id,
        "origin": claimed,
        "events": events,
        "signers": sorted([signer, *others], key=lambda s: s["key_id"]),
        "origin_proof": {"key_id": kid, "sig": base64.b64encode(private.sign(message)).decode()},
    }


def raise_scores(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for body in events:
        if body["type"] == "score.computed.v1" and body["total"] != "100.00":
            body = {**body, "total": "100.00"}
        out.append(body)
    return out


def drop_attempt(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every event of the first attempt of the first case removed."""
    first = next(e for e in events if e.get("attempt") is not None)
    gone = (first["case_id"], first["attempt"])
    return [e for e in events if (e.get("case_id"), e.get("attempt")) != gone]


def write(tmp: Path, bundle: dict[str, Any]) -> Path:
    path = tmp / "forged.bundle.json"
    path.write_text(json.dumps(bundle))
    return path


FRESH = [
    pytest.param("home-op", {}, id="same-name"),
    pytest.param("mallory", {}, id="new-name"),
    # home-op's honest run is imported first, then a second key claims home-op and the
    # same origin for another run id
    pytest.param(
        "home-op",
        {"origin": None, "run": "second-run", "accepted_first": True},
        id="second-key-same-name-same-origin",
    ),
    pytest.param("mallory", {"origin": "caseledger/0123456789abcdef"}, id="edited-origin"),
    pytest.param("home-op", {"edit": drop_attempt}, id="attempt-removed"),
    pytest.param("home-op", {"edit": raise_scores}, id="scores-raised"),
]


@pytest.mark.parametrize(("name", "how"), FRESH)
def test_a_bundle_forged_with_a_fresh_key_is_refused(
    home: Home, central: Path, tmp_path: Path, name: str, how: dict[str, Any]
) -> None:
    how = dict(how)
    accepted_first = how.pop("accepted_first", False)
    if accepted_first:
        out = ok(cli(central, "import", "run", str(write(tmp_path, home.bundle)),
                     home=central.parent))  # fmt: skip
        assert f"imported run {RUN} from {home.bundle['origin']}" in out
    fresh = Ed25519PrivateKey.generate().private_bytes_raw()
    forged = forge(home.bundle, name, fresh, **how)
    if accepted_first:  # the same name and the same claimed origin, another key
        assert (forged["origin"], forged["run"]) == (home.bundle["origin"], "second-run")
    kid = forged["origin_proof"]["key_id"]
    before = size_of(central)
    done = cli(central, "import", "run", str(write(tmp_path, forged)), home=central.parent)
    assert done.returncode == 1, done.stderr
    assert f"run signed by {name} (key id {kid})" in done.stderr
    if name == "home-op":
        trusted = key_id("home-op", home.public)
        assert f"the key differs from the one trusted under that name ({trusted}" in done.stderr
    else:
        assert "the key is not trusted here (no trust on first use)" in done.stderr
    assert "nothing was imported" in done.stderr
    assert "Traceback" not in done.stderr
    assert size_of(central) == before


def test_a_fresh_key_is_refused_on_a_ledger_that_trusts_nobody(
    home: Home, plain: Path, tmp_path: Path
) -> None:
    """No trust on first use: the honest bundle itself needs its key trusted first."""
    db = copy_of(plain, tmp_path / "c")
    root = db.parent
    before = size_of(db)
    path = write(tmp_path, home.bundle)
    done = cli(db, "import", "run", str(path), home=root)
    assert done.returncode == 1
    assert f"run signed by home-op (key id {key_id('home-op', home.public)})" in done.stderr
    assert "caseledger signers trust KEY.pub --name home-op" in done.stderr
    assert size_of(db) == before
    # the explicit one-step form trusts the key and imports in one append
    pub = tmp_path / "home.pub"
    pub.write_text(home.pub)
    out = ok(cli(db, "import", "run", str(path), "--trust", str(pub), home=root))
    assert f"trusted home-op ({key_id('home-op', home.public)})" in out
    assert f"signed by home-op ({key_id('home-op', home.public)}), trusted since seq {before}" in (
        out
    )
    assert size_of(db) == before + 1 + 1 + len(home.bundle["events"])


def test_an_edited_origin_of_an_honest_bundle_is_refused(
    home: Home, central: Path, tmp_path: Path
) -> None:
    edited = {**home.bundle, "origin": "caseledger/0123456789abcdef"}
    before = size_of(central)
    done = cli(central, "import", "run", str(write(tmp_path, edited)), home=central.parent)
    assert done.returncode == 1
    assert "the origin caseledger/0123456789abcdef is not what key home-op" in done.stderr
    assert size_of(central) == before


def test_an_origin_without_attestation_is_dropped(
    home: Home, central: Path, tmp_path: Path
) -> None:
    """No origin proof: the claimed origin is not recorded; the run's origin is
    'unattested', and reports say so."""
    bare = {k: v for k, v in home.bundle.items() if k != "origin_proof"}
    bare["origin"] = "caseledger/0123456789abcdef"
    out = ok(cli(central, "import", "run", str(write(tmp_path, bare)), home=central.parent))
    assert f"imported run {RUN} from unattested:" in out
    md = ok(cli(central, "report", "--format", "md", home=central.parent))
    kid = key_id("home-op", home.public)
    assert f"{RUN} (signed by home-op {kid} of unattested, trusted since seq 2)" in md
    assert "0123456789abcdef" not in md


def test_a_key_trusted_for_one_origin_only(home: Home, plain: Path, tmp_path: Path) -> None:
    db = copy_of(plain, tmp_path / "c")
    root = db.parent
    pub = root / "k.pub"
    pub.write_text(home.pub)
    other = "caseledger/00000000000000aa"
    ok(cli(db, "signers", "trust", str(pub), "--name", "home-op", "--origin", other, home=root))
    before = size_of(db)
    done = cli(db, "import", "run", str(write(tmp_path, home.bundle)), home=root)
    assert done.returncode == 1
    assert f"the key is trusted only for runs of {other}" in done.stderr
    assert size_of(db) == before


def test_a_name_names_one_key(home: Home, central: Path, tmp_path: Path) -> None:
    """Trusting a second key under a trusted name, or under the operator's own name, is
    refused (exit 2); so is a key file whose name differs from --name."""
    fresh = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    for name in ("home-op", "central-op"):
        pub = tmp_path / f"{name}.pub"
        pub.write_text(verifier_key(name, fresh))
        before = size_of(central)
        done = cli(central, "signers", "trust", str(pub), "--name", name, home=central.parent)
        assert done.returncode == 2, done.stderr
        assert f"signer name {name} is bound in this ledger to key id" in done.stderr
        assert size_of(central) == before
    pub = tmp_path / "x.pub"
    pub.write_text(verifier_key("alice", fresh))
    done = cli(central, "signers", "trust", str(pub), "--name", "bob", home=central.parent)
    assert done.returncode == 2
    assert "the key is named alice, not bob" in done.stderr


def test_revocation_keeps_past_imports_and_refuses_new_ones(
    home: Home, central: Path, tmp_path: Path
) -> None:
    path = write(tmp_path, home.bundle)
    ok(cli(central, "import", "run", str(path), home=central.parent))
    trusted_at = 2  # genesis 0, retail 1, the trust 2
    out = ok(cli(central, "signers", "revoke", "home-op", home=central.parent))
    revoked_at = size_of(central) - 1
    assert f"revoked trust in home-op ({key_id('home-op', home.public)}) at seq {revoked_at}" in out
    listed = ok(cli(central, "signers", "list", home=central.parent))
    assert f"trusted since seq {trusted_at}  revoked at seq {revoked_at}" in listed
    verified = cli(central, "verify", home=central.parent)
    assert verified.returncode == 0, verified.stderr
    md = ok(cli(central, "report", "--format", "md", home=central.parent))
    assert f"trusted since seq {trusted_at}, trust revoked at seq {revoked_at})" in md
    report = json.loads(ok(cli(central, "report", "--format", "json", home=central.parent)))
    (entry,) = [r for s in report["sections"] for r in s["runs"]]
    assert entry["signer"] == {
        "name": "home-op",
        "key_id": key_id("home-op", home.public),
        "origin": home.bundle["origin"],
        "trusted_since": trusted_at,
        "revoked_at": revoked_at,
    }
    # another run signed by the revoked key (a genuine signature): refused
    forged = forge(home.bundle, "home-op", home.seed, run="another")
    before = size_of(central)
    done = cli(central, "import", "run", str(write(tmp_path, forged)), home=central.parent)
    assert done.returncode == 1
    assert f"whose trust was revoked at seq {revoked_at}" in done.stderr
    assert size_of(central) == before


def audit(central: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """``export audit`` of the central ledger and the auditor's command, as it prints it."""
    out = tmp_path / "audit"
    banks = central.parent / "banks"
    printed = ok(cli(central, "export", "audit", "-o", str(out), "--banks", str(banks),
                     home=central.parent))  # fmt: skip
    line = next(x.strip() for x in printed.splitlines() if "--recompute" in x)
    words = line.split()
    assert words[:3] == ["caseledger", "--ledger", "ledger.db"]
    return out, words[3:]


@TAMPERED
def test_raised_scores_signed_by_the_trusted_key_fail_the_auditor(
    home: Home, central: Path, tmp_path: Path
) -> None:
    raised = forge(home.bundle, "home-op", home.seed, edit=raise_scores)
    # the first score that was raised, found in the home ledger's own rows
    with sqlite3.connect(home.db) as con:
        rows = con.execute(
            "SELECT body FROM events WHERE stream = ? AND type = 'score.computed.v1' ORDER BY seq",
            (RUN,),
        ).fetchall()
    first = next(json.loads(r[0]) for r in rows if json.loads(r[0])["total"] != "100.00")
    path = write(tmp_path, raised)
    ok(cli(central, "import", "run", str(path), home=central.parent))  # the signature is genuine
    folder, args = audit(central, tmp_path)
    done = store_kit.caseledger(folder / "ledger.db", *args, cwd=folder, home=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"recorded score of {RUN} (imported from {home.bundle['origin']}) case "
        f"{first['case_id']} attempt {first['attempt']}"
    ) in done.stderr
    assert f"recorded '100.00', recomputed '{first['total']}'" in done.stderr


def test_an_honest_imported_run_passes_the_auditor(
    home: Home, central: Path, tmp_path: Path
) -> None:
    ok(cli(central, "import", "run", str(write(tmp_path, home.bundle)), home=central.parent))
    folder, args = audit(central, tmp_path)
    done = store_kit.caseledger(folder / "ledger.db", *args, cwd=folder, home=tmp_path)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(home.db) as con:
        scores = con.execute(
            "SELECT count(*) FROM events WHERE stream = ? AND type = 'score.computed.v1'", (RUN,)
        ).fetchone()[0]
        executed = con.execute(
            "SELECT count(*) FROM events WHERE stream = ? AND type = 'sql.executed.v1'", (RUN,)
        ).fetchone()[0]
    assert scores == 54
    assert f"{home.bundle['origin']}: {scores} scores re-derived, {executed} executions re-run" in (
        done.stdout
    )


def test_a_ledger_that_imported_before_trust_existed(
    home: Home, plain: Path, tmp_path: Path
) -> None:
    """Rows as the code before issue 29 appended them (a signer.foreign.v1 and the
    wrappers, no signer.trusted.v1): verify names the first imported event of the
    untrusted key (exit 1); once the operator trusts the key, it verifies."""
    from ledger.events import LEDGER_STREAM, EventImported, ForeignSignerRegistered
    from ledger.keys import Signer
    from ledger.store import Draft, Ledger

    db = copy_of(plain, tmp_path / "old")
    root = db.parent
    operator = Signer.load(root / "keys" / "operator.key")
    (who,) = home.bundle["signers"]
    fields = {k: who[k] for k in ("key_id", "name", "public_key")}
    accepted = {**fields, "origin": home.bundle["origin"], "accepted_by": operator.key_id}
    wrappers = [
        Draft(
            EventImported,
            RUN,
            {
                "origin": home.bundle["origin"],
                "origin_seq": ev["seq"],
                "body": ev["body"],
                "prev_chain": ev["prev_chain"],
                "key_id": ev["key_id"],
                "sig": ev["sig"],
            },
        )
        for ev in home.bundle["events"]
    ]
    with Ledger.open(db) as ledger:
        seqs = ledger.append(
            [Draft(ForeignSignerRegistered, LEDGER_STREAM, accepted), *wrappers], operator
        )
    done = cli(db, "verify", home=root)
    assert done.returncode == 1
    assert f"seq {seqs[1]}: imported event signed by foreign key home-op ({who['key_id']})" in (
        done.stderr
    )
    assert "which no signer.trusted.v1 in this log trusts" in done.stderr
    pub = root / "k.pub"
    pub.write_text(home.pub)
    ok(cli(db, "signers", "trust", str(pub), "--name", "home-op", home=root))
    ok(cli(db, "verify", home=root))
