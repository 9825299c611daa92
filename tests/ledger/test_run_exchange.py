"""Signed runs exported from one machine and imported into another ledger (issue 18).

Three "machines" (three folders, each with its own SQLite ledger and its own
Ed25519 operator key made by ``caseledger init``) run the recorded demo profiles
at the same time, one profile each (northwind-sql-pro, harbor-coder-14b,
lumen-mini: the three model profiles of ``caseledger demo``, 54 attempts each),
in real ``caseledger`` processes; machines 2 and 3 also run the reference
self-test on retail under the same run id (two different runs claiming one id: a
fork), and machine 1 a self-test on the sales-fixture bank (a bank the central
ledger never publishes). Their runs are exported and imported into one PostgreSQL
ledger on a throwaway cluster (tests/pgcluster.py). Expected values come from the
machines' own files (key files, rows, reports), never from the import code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import store_kit
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import COPIED_WITHOUT_BANKS
from pgcluster import PgCluster
from store_kit import WRITER, Store, drop_pg_store, fresh_pg_store
from support import made_once

from ledger.app.exchange import import_run
from ledger.errors import LedgerError
from ledger.keys import Signer
from ledger.store import Ledger

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "ledger" / "demo"
MACHINES = {"m1": "northwind-sql-pro", "m2": "harbor-coder-14b", "m3": "lumen-mini"}
FORK = "self-retail"  # the run id machines 2 and 3 both use


def caseledger(
    location: str | Path, *args: str, home: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``caseledger --ledger LOCATION ARGS`` in a real process, keys and cwd in ``home``."""
    return store_kit.caseledger(location, *args, cwd=home, home=home, timeout=timeout)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


@dataclass(frozen=True)
class Machine:
    name: str
    home: Path
    db: Path
    key_name: str
    key_id: str  # worked out from the key file below, not by caseledger
    bundles: dict[str, Path]

    def run_events(self, run: str) -> list[bytes]:
        """The bodies of a run's stream as stored on this machine, in seq order."""
        with sqlite3.connect(self.db) as con:
            rows = con.execute("SELECT body FROM events WHERE stream = ? ORDER BY seq", (run,))
            return [bytes(r[0]) for r in rows]


def key_of(home: Path) -> tuple[str, str]:
    """(name, C2SP key id) of the operator key file, computed by hand:
    SHA-256(name || 0x0A || 0x01 || public key)[:4]."""
    text = (home / "keys" / "operator.key").read_text("ascii").strip()
    _, _, name, _, encoded = text.split("+", 4)
    seed = base64.b64decode(encoded)[1:]
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    return name, hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4].hex()


def run_machine(root: Path, name: str, profile: str) -> Machine:
    """One machine: init (a new key), publish, run, export; every step its own process."""
    home = root / name
    home.mkdir()
    db = home / "ledger.db"
    ok(caseledger(db, "init", "--name", f"{name}-operator", home=home))  # a name of its own
    ok(caseledger(db, "bank", "publish", "retail", home=home))
    replay = ["--adapter", "replay", "--replay-file", str(DEMO / f"{profile}.jsonl")]
    runs = [(f"{name}-{profile}", "retail", [*replay, "--tools", "off", "--profile", profile])]
    if name == "m1":
        ok(caseledger(db, "bank", "publish", "sales-fixture", home=home))
        runs.append(("m1-fixture", "sales-fixture", ["--adapter", "reference"]))
    else:
        runs.append((FORK, "retail", ["--adapter", "reference"]))
    bundles = {}
    for run, bank, args in runs:
        ok(caseledger(db, "run", "--bank", bank, *args, "--run-id", run, home=home))
        bundles[run] = home / f"{run}.bundle.json"
        ok(caseledger(db, "export", "run", run, "-o", str(bundles[run]), home=home))
    key_name, key_id = key_of(home)
    return Machine(name, home, db, key_name, key_id, bundles)


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Machine]:
    """The three machines, made once per test session (tests/support.made_once: under
    pytest-xdist the first worker makes them and the others wait and reuse them; they
    are only read afterwards)."""

    def build(folder: Path) -> None:
        made = make_machines(folder / "machines")
        done = folder / "machines.json"
        done.write_text(json.dumps({n: asdict(m) for n, m in made.items()}, default=str))

    done = made_once(tmp_path_factory, "run-exchange", build) / "machines.json"
    found = json.loads(done.read_text())
    return {
        n: Machine(
            **{
                **m,
                "home": Path(m["home"]),
                "db": Path(m["db"]),
                "bundles": {r: Path(b) for r, b in m["bundles"].items()},
            }
        )
        for n, m in found.items()
    }


def make_machines(root: Path) -> dict[str, Machine]:
    root.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(len(MACHINES)) as pool:
        made = [pool.submit(run_machine, root, n, p) for n, p in MACHINES.items()]
        return {m.name: m for m in (f.result() for f in made)}


@dataclass
class Central:
    store: Store
    home: Path

    @property
    def url(self) -> str:
        return str(self.store.location)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return caseledger(self.url, *args, home=self.home)

    def size(self) -> int:
        with Ledger.open(self.store.location, readonly=True) as ledger:
            return ledger.size()


def verifier_key(home: Path) -> str:
    """The C2SP verifier key of a machine's operator key file, made by hand."""
    text = (home / "keys" / "operator.key").read_text("ascii").strip()
    _, _, name, key_id, encoded = text.split("+", 4)
    seed = base64.b64decode(encoded)[1:]
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    return f"{name}+{key_id}+" + base64.b64encode(b"\x01" + public).decode()


@pytest.fixture(scope="module")
def central(
    pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory, machines: dict[str, Machine]
) -> Any:
    """One PostgreSQL ledger (created by the owner role, written by the writer role)
    with the retail bank published, the three machines' keys trusted (issue 29) and
    nothing imported yet, shared by the module's tests."""
    yield from new_central(pg_cluster, tmp_path_factory, machines)


@pytest.fixture
def own_central(
    pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory, machines: dict[str, Machine]
) -> Any:
    """A ledger made as ``central`` is, for one test that appends to it what the others
    do not expect (under --dist worksteal a test file's order is not kept)."""
    yield from new_central(pg_cluster, tmp_path_factory, machines)


def new_central(
    pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory, machines: dict[str, Machine]
) -> Iterator[Central]:
    store = fresh_pg_store(pg_cluster)
    home = tmp_path_factory.mktemp("central")
    ok(caseledger(store.owner_location, "init", "--grant-writer", WRITER, home=home))
    ok(caseledger(store.location, "bank", "publish", "retail", home=home))
    for m in machines.values():
        pub = home / f"{m.name}.pub"
        pub.write_text(verifier_key(m.home) + "\n")
        ok(caseledger(store.location, "signers", "trust", str(pub), "--name", m.key_name,
                      home=home))  # fmt: skip
    try:
        yield Central(store, home)
    finally:
        drop_pg_store(store)


def signer_of(m: Machine, run: str) -> dict[str, Any]:
    """The report's ``signer`` of an imported run: the home key, the origin its bundle
    attests, and the seq of its trust (genesis 0, retail 1, then m1, m2, m3 trusted in
    that order by the ``central`` fixture)."""
    trusted = 2 + sorted(MACHINES).index(m.name)
    origin = bundle_of(m, run)["origin"]
    return {"name": m.key_name, "key_id": m.key_id, "origin": origin, "trusted_since": trusted}


def unseq(caserun: dict[str, Any]) -> dict[str, Any]:
    """A report CaseRun without the seqs of its events (positions in one ledger)."""
    events = [{k: v for k, v in e.items() if k != "seq"} for e in caserun["events"]]
    return {**caserun, "events": events}


def bundle_of(machine: Machine, run: str) -> dict[str, Any]:
    return json.loads(machine.bundles[run].read_bytes())


def write(tmp: Path, name: str, bundle: dict[str, Any]) -> Path:
    path = tmp / name
    path.write_text(json.dumps(bundle), "utf-8")
    return path


def test_bundle_holds_the_events_as_signed_at_home(machines: dict[str, Machine]) -> None:
    m = machines["m3"]
    run = "m3-lumen-mini"
    bundle = bundle_of(m, run)
    assert bundle["format"] == "caseledger-run-bundle/v1"
    assert [s["key_id"] for s in bundle["signers"]] == [m.key_id]
    assert bundle["signers"][0]["name"] == m.key_name
    with sqlite3.connect(m.db) as con:
        rows = con.execute(
            "SELECT seq, body, leaf_hash, key_id, sig FROM events WHERE stream = ? ORDER BY seq",
            (run,),
        ).fetchall()
        chains = dict(con.execute("SELECT seq, chain FROM events").fetchall())
        genesis = con.execute("SELECT leaf_hash FROM events WHERE seq = 0").fetchone()[0]
    assert bundle["origin"] == "caseledger/" + bytes(genesis).hex()[:16]
    assert len(bundle["events"]) == len(rows) > 54
    for ev, (seq, body, leaf, key_id, sig) in zip(bundle["events"], rows, strict=True):
        assert ev["seq"] == seq
        assert base64.b64decode(ev["body"]) == bytes(body)
        assert ev["leaf_hash"] == "sha256:" + hashlib.sha256(b"\x00" + bytes(body)).hexdigest()
        assert ev["leaf_hash"] == "sha256:" + bytes(leaf).hex()
        assert ev["key_id"] == key_id == m.key_id
        assert base64.b64decode(ev["sig"]) == bytes(sig)
        assert ev["prev_chain"] == bytes(chains[seq - 1]).hex()  # what rule event/v2 signs
    # deterministic: the same run exported again is the same bytes
    again = m.home / "again.json"
    ok(caseledger(m.db, "export", "run", run, "-o", str(again), home=m.home))
    assert again.read_bytes() == m.bundles[run].read_bytes()


@COPIED_WITHOUT_BANKS
def test_runs_of_three_machines_in_one_postgresql_ledger(
    machines: dict[str, Machine], central: Central, tmp_path: Path
) -> None:
    """The must-show: import, verify, the report names every run's signer, and the
    report is byte-identical to the one built from a SQLite copy of the ledger."""
    imported = {f"{n}-{p}": machines[n] for n, p in MACHINES.items()} | {FORK: machines["m2"]}
    central_name, central_id = key_of(central.home)
    total = 0
    for run, m in imported.items():
        before = central.size()
        out = ok(central.cli("import", "run", str(m.bundles[run])))
        count = len(m.run_events(run))
        assert f"imported run {run} from caseledger/" in out
        assert f": {count} events, original signatures checked" in out
        # machine 2's key is accepted with its first run, not again with its second
        accepted = f"accepted foreign signer {m.key_name} ({m.key_id})"
        first_of_machine = run != FORK
        assert (accepted in out) == first_of_machine
        if first_of_machine:
            assert f"by {central_name} ({central_id})" in out
        assert central.size() == before + count + first_of_machine
        # a signed checkpoint over the log with the run is stored with it (verify checks it)
        with Ledger.open(central.store.location, readonly=True) as ledger:
            assert ledger.stored_checkpoints()[-1][0] == ledger.size()
        total += count
    assert total > 3 * 54
    verified = ok(central.cli("verify"))
    assert f"{total} imported events, original signatures checked" in verified
    # each foreign key was accepted once, by the central operator, in stream ledger
    with Ledger.open(central.store.location, readonly=True) as ledger:
        accepted = [e.event() for e in ledger.stream_events("ledger")]
    foreign = [e for e in accepted if type(e).__name__ == "ForeignSignerRegistered"]
    assert sorted(f.key_id for f in foreign) == sorted(m.key_id for m in machines.values())
    assert {f.accepted_by for f in foreign} == {central_id}

    # --detail full (caseledger-report/1): every event of each CaseRun, to compare seqs.
    report = json.loads(ok(central.cli("report", "--format", "json", "--detail", "full")))
    held: dict[str, list[tuple[int, str]]] = {}
    entries = {r["run"]: r for s in report["sections"] for r in s["runs"]}
    assert sorted(entries) == sorted(imported)
    for run, m in imported.items():
        assert entries[run]["signer"] == signer_of(m, run)
        # the run reports exactly as on its home machine (its entry and every CaseRun)
        home = json.loads(ok(caseledger(m.db, "report", "--run", run, "--format", "json",
                                        "--detail", "full", home=m.home)))  # fmt: skip
        (home_entry,) = [r for s in home["sections"] for r in s["runs"]]
        assert "signer" not in home_entry  # recorded there, by its own operator
        # the same entry but the rank, which is among the runs of the section it is in
        mine = {k: v for k, v in entries[run].items() if k not in ("signer", "rank")}
        assert mine == {k: v for k, v in home_entry.items() if k != "rank"}
        ours = [c for s in report["sections"] for c in s["caseruns"] if c["run"] == run]
        theirs = [c for s in home["sections"] for c in s["caseruns"]]
        assert len(ours) >= 18
        # the same CaseRuns; each event keeps its id (leaf hash) and is listed at the seq
        # of the row that holds it here
        assert [unseq(c) for c in ours] == [unseq(c) for c in theirs]
        held[run] = [(e["seq"], e["leaf_hash"]) for c in ours for e in c["events"]]
    with Ledger.open(central.store.location, readonly=True) as ledger:
        for pairs in held.values():
            for seq, leaf in pairs:
                row = ledger.get(seq)
                assert row is not None
                wrapper = json.loads(row.body)
                assert wrapper["type"] == "event.imported.v1"
                inner = base64.b64decode(wrapper["body"])
                assert "sha256:" + hashlib.sha256(b"\x00" + inner).hexdigest() == leaf
    ranks = sorted(entries[f"{n}-{p}"]["rank"] for n, p in MACHINES.items())
    assert ranks == [1, 2, 3]
    assert entries[FORK]["rank"] is None  # the self-test is never ranked
    md = ok(central.cli("report", "--format", "md"))
    for run, m in imported.items():
        said = signer_of(m, run)
        assert (
            f"{run} (signed by {m.key_name} {m.key_id} of {said['origin']}, trusted since seq "
            f"{said['trusted_since']})"
        ) in md

    # a SQLite copy of the PostgreSQL ledger builds the same report, byte for byte
    copy = tmp_path / "copy.db"
    ok(caseledger(central.url, "ledger", "copy", central.url, str(copy), home=central.home))
    for fmt in ("json", "md", "html"):
        at = str(report["checkpoint"]["tree_size"])
        server = ok(central.cli("report", "--format", fmt, "--at-size", at))
        local = ok(caseledger(copy, "report", "--format", fmt, "--at-size", at, home=tmp_path))
        assert server == local, fmt
    # the copy (a file, read through its tree index) lists and reports the imported runs
    listed = ok(caseledger(copy, "runs", home=tmp_path))
    for run in imported:
        assert run in listed
    one = ok(caseledger(copy, "report", "--run", FORK, "--format", "json", home=tmp_path))
    (entry,) = [r for s in json.loads(one)["sections"] for r in s["runs"]]
    assert entry["signer"] == signer_of(machines["m2"], FORK)

    # importing a bundle again changes nothing and says so (exit 0)
    size = central.size()
    again = central.cli("import", "run", str(machines["m1"].bundles["m1-northwind-sql-pro"]))
    assert again.returncode == 0, again.stderr
    assert "run m1-northwind-sql-pro from caseledger/" in again.stdout
    assert "is already imported" in again.stdout
    assert "nothing to do" in again.stdout
    assert central.size() == size

    # a fork: machine 3's run with the same id and other events is refused
    fork = central.cli("import", "run", str(machines["m3"].bundles[FORK]))
    assert fork.returncode == 1
    first = bundle_of(machines["m3"], FORK)["events"][0]
    assert f"event 0 (seq {first['seq']} on its home ledger, event id {first['leaf_hash']})" in (
        fork.stderr
    )
    assert "(a fork)" in fork.stderr
    assert "nothing was imported" in fork.stderr
    assert central.size() == size

    # a run on a bank this ledger never published: refused with exit 2, publish first
    other = central.cli("import", "run", str(machines["m1"].bundles["m1-fixture"]))
    assert other.returncode == 2
    fixture_hash = bundle_of(machines["m1"], "m1-fixture")["bank_hash"]
    assert f"was made on bank {fixture_hash}, which is not published" in other.stderr
    assert "publish that bank here first" in other.stderr
    assert central.size() == size
    ok(central.cli("verify"))


def _central_signer(central: Central) -> Signer:
    return Signer.load(central.home / "keys" / "operator.key")


def _import(central: Central, bundle: dict[str, Any]) -> LedgerError:
    """Import in process against the PostgreSQL ledger; the error it raised."""
    data = json.dumps(bundle).encode()
    with Ledger.open(central.store.location) as ledger:
        size = ledger.size()
        with pytest.raises(LedgerError) as caught:
            import_run(ledger, _central_signer(central), data, "b.json")
        assert ledger.size() == size  # nothing appended
    return caught.value


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_changed_byte_in_any_event_is_refused_naming_it(
    machines: dict[str, Machine], central: Central, data: st.DataObject
) -> None:
    bundle = bundle_of(machines["m3"], "m3-lumen-mini")
    index = data.draw(st.integers(0, len(bundle["events"]) - 1), label="event")
    ev = bundle["events"][index]
    body = bytearray(base64.b64decode(ev["body"]))
    at = data.draw(st.integers(0, len(body) - 1), label="byte")
    body[at] ^= data.draw(st.integers(1, 255), label="xor")
    ev["body"] = base64.b64encode(bytes(body)).decode()
    error = _import(central, bundle)
    assert error.exit_code == 1
    assert f"event {index} (seq {ev['seq']} on its home ledger, event id {ev['leaf_hash']})" in (
        error.message
    )
    assert "not to its event id" in error.message


def test_a_changed_byte_through_the_command_line(
    machines: dict[str, Machine], central: Central, tmp_path: Path
) -> None:
    bundle = bundle_of(machines["m2"], "m2-harbor-coder-14b")
    ev = bundle["events"][7]
    body = bytearray(base64.b64decode(ev["body"]))
    body[10] ^= 1
    ev["body"] = base64.b64encode(bytes(body)).decode()
    size = central.size()
    done = central.cli("import", "run", str(write(tmp_path, "t.json", bundle)))
    assert done.returncode == 1
    assert f"event 7 (seq {ev['seq']} on its home ledger, event id {ev['leaf_hash']})" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert central.size() == size


def test_a_forged_signature_is_refused(machines: dict[str, Machine], central: Central) -> None:
    bundle = bundle_of(machines["m1"], "m1-northwind-sql-pro")
    ev = bundle["events"][3]
    sig = bytearray(base64.b64decode(ev["sig"]))
    sig[0] ^= 1
    ev["sig"] = base64.b64encode(bytes(sig)).decode()
    error = _import(central, bundle)
    assert error.exit_code == 1
    assert f"event 3 (seq {ev['seq']}" in error.message
    assert "original signature does not verify" in error.message


def test_partial_runs_are_refused(machines: dict[str, Machine], central: Central) -> None:
    whole = bundle_of(machines["m3"], "m3-lumen-mini")
    # RunFinished removed (it is the last event of this run)
    last = json.loads(base64.b64decode(whole["events"][-1]["body"]))
    assert last["type"] == "run.finished.v1"
    cut = {**whole, "events": whole["events"][:-1]}
    error = _import(central, cut)
    assert error.exit_code == 1
    assert "has no RunFinished (a partial run" in error.message
    # a middle event removed: the next one is named, with the gap
    middle = len(whole["events"]) // 2
    gap = {**whole, "events": whole["events"][:middle] + whole["events"][middle + 1 :]}
    error = _import(central, gap)
    nxt = whole["events"][middle + 1]
    assert error.exit_code == 1
    assert f"event {middle} (seq {nxt['seq']} on its home ledger" in error.message
    assert f"stream_seq {middle + 1} after" in error.message
    assert f"expected stream_seq {middle} after" in error.message
    assert "is missing (a partial run)" in error.message


def test_a_run_recorded_here_is_not_overwritten_by_an_import(
    machines: dict[str, Machine], tmp_path: Path
) -> None:
    m = machines["m1"]
    copy_home = tmp_path / "m1copy"
    shutil.copytree(m.home, copy_home)
    db = copy_home / "ledger.db"
    size = len(sqlite3.connect(db).execute("SELECT seq FROM events").fetchall())
    done = caseledger(db, "import", "run", str(m.bundles["m1-northwind-sql-pro"]), home=copy_home)
    assert done.returncode == 1
    assert "run m1-northwind-sql-pro already exists" in done.stderr
    assert "recorded there" in done.stderr
    assert "not imported" in done.stderr
    assert len(sqlite3.connect(db).execute("SELECT seq FROM events").fetchall()) == size


def test_a_ledger_without_the_bank_refuses_with_exit_2(
    machines: dict[str, Machine], tmp_path: Path
) -> None:
    home = tmp_path / "empty"
    home.mkdir()
    db = home / "ledger.db"
    ok(caseledger(db, "init", home=home))
    done = caseledger(db, "import", "run", str(machines["m2"].bundles[FORK]), home=home)
    assert done.returncode == 2
    assert "which is not published" in done.stderr
    assert "hint: publish that bank here first" in done.stderr


def test_a_file_that_is_not_a_bundle(central: Central, tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"format": "something-else"}')
    done = central.cli("import", "run", str(path))
    assert done.returncode == 2
    assert "not a caseledger-run-bundle/v1 bundle (format is 'something-else')" in done.stderr


def test_an_imported_run_is_sliced_and_rescored_like_a_native_one(
    machines: dict[str, Machine], own_central: Central
) -> None:
    """On a ledger of its own: it appends native events to an imported run's stream."""
    central = own_central
    m, run = machines["m3"], "m3-lumen-mini"
    ok(central.cli("import", "run", str(m.bundles[run])))
    before = central.size()
    ok(central.cli("slices", "--run", run))
    done = ok(central.cli("rescore", "--run", run, "--scorer", "2.0.0", "--reexecute"))
    # the recording answers 18 cases x 3 attempts; every one is judged again
    assert done.startswith("rescored 54 attempts of 1 runs under scorer 2.0.0")
    assert central.size() > before
    verified = ok(central.cli("verify"))
    assert "imported events, original signatures checked" in verified
    one = json.loads(ok(central.cli("report", "--run", run, "--format", "json")))
    (entry,) = [r for s in one["sections"] for r in s["runs"]]
    assert "slices" in entry
    home = json.loads(ok(caseledger(m.db, "report", "--run", run, "--format", "json", home=m.home)))
    (home_entry,) = [r for s in home["sections"] for r in s["runs"]]
    # re-executing the same SQL on the same bank gives the verdicts recorded at home
    assert entry["quality"] == home_entry["quality"]
    assert entry["scores"] == home_entry["scores"]
