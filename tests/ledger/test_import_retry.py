"""``import run`` checks again and retries when the log moved under it (issue 34).

Two "machines", each a folder with its own SQLite ledger and operator key made by
``caseledger init``: machine A runs the reference self-test on retail and exports
it; machine B publishes retail and trusts A's key. B's import is made in process
(``import_run``) and its ``before_append`` hook starts a real second writer, a
``caseledger`` process on B's ledger, between the checks and the append. Expected
sizes are counted from the ledger files with sqlite3, not by the import code.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.app.exchange import IMPORT_TRIES, ImportResult, import_run
from ledger.errors import StoreConflictError
from ledger.keys import load_default_signer
from ledger.store import Ledger

CASELEDGER = str(Path(sys.executable).parent / "caseledger")
RUN = "a-ref"
DB = Path(".caseledger") / "ledger.db"


def caseledger(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASELEDGER_")}
    done = subprocess.run(
        [CASELEDGER, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def rows(folder: Path, where: str = "1", *args: str) -> int:
    with sqlite3.connect(folder / DB) as con:
        return int(con.execute(f"SELECT count(*) FROM events WHERE {where}", args).fetchone()[0])  # noqa: S608 (the test's own constant clauses)


@dataclass(frozen=True)
class Home:
    folder: Path
    bundle: Path
    events: int  # the run's events on machine A
    verifier: str  # A's verifier key, made by hand from its key file


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory: pytest.TempPathFactory) -> Home:
    folder = tmp_path_factory.mktemp("machine-a")
    caseledger(folder, "init", "--name", "a-operator")
    caseledger(folder, "bank", "publish", "retail")
    caseledger(folder, "run", "--bank", "retail", "--adapter", "reference", "--run-id", RUN)
    bundle = folder / "a-ref.bundle.json"
    caseledger(folder, "export", "run", RUN, "-o", str(bundle))
    text = (folder / DB.parent / "keys" / "operator.key").read_text("ascii").strip()
    _, _, name, key_id, encoded = text.split("+", 4)
    seed = base64.b64decode(encoded)[1:]
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    verifier = f"{name}+{key_id}+" + base64.b64encode(b"\x01" + public).decode()
    return Home(folder, bundle, rows(folder, "stream = ?", RUN), verifier)


@pytest.fixture
def machine_b(tmp_path: Path, machine_a: Home) -> Path:
    caseledger(tmp_path, "init", "--name", "b-operator")
    caseledger(tmp_path, "bank", "publish", "retail")
    (tmp_path / "a.pub").write_text(machine_a.verifier + "\n")
    caseledger(tmp_path, "signers", "trust", "a.pub", "--name", "a-operator")
    return tmp_path


def _import(machine_a: Home, machine_b: Path, hook: Callable[[int], None]) -> ImportResult:
    """B imports A's bundle in this process, ``hook`` called before each append."""
    with Ledger.open(machine_b / DB) as ledger:
        return import_run(
            ledger,
            load_default_signer(machine_b / DB.parent),
            machine_a.bundle.read_bytes(),
            "a.json",
            before_append=hook,
        )


def test_a_checkpoint_between_check_and_append_is_retried(machine_a: Home, machine_b: Path) -> None:
    start = rows(machine_b)
    tries: list[int] = []

    def other_writer(attempt: int) -> None:
        tries.append(attempt)
        if attempt == 1:  # a second writer appends one event (checkpoint.issued.v1)
            caseledger(machine_b, "checkpoint", "-o", "note.txt")

    done = _import(machine_a, machine_b, other_writer)
    assert tries == [1, 2]
    assert not done.already
    assert done.events == machine_a.events
    # after the checkpoint (seq start): one signer.foreign.v1, then the run's events
    assert done.seqs == tuple(range(start + 1, start + 2 + machine_a.events))
    assert rows(machine_b, "type = 'checkpoint.issued.v1'") == 1
    assert rows(machine_b, "stream = ?", RUN) == machine_a.events
    caseledger(machine_b, "verify")


def test_the_same_run_imported_meanwhile_is_found_on_the_retry(
    machine_a: Home, machine_b: Path
) -> None:
    def other_importer(attempt: int) -> None:
        if attempt == 1:
            caseledger(machine_b, "import", "run", str(machine_a.bundle))

    done = _import(machine_a, machine_b, other_importer)
    assert done.already
    assert rows(machine_b, "stream = ?", RUN) == machine_a.events  # imported once
    caseledger(machine_b, "verify")


def test_a_log_that_moves_before_every_try_is_refused(machine_a: Home, machine_b: Path) -> None:
    start = rows(machine_b)

    def busy_writer(attempt: int) -> None:
        caseledger(machine_b, "checkpoint", "-o", "note.txt")

    with pytest.raises(StoreConflictError) as caught:
        _import(machine_a, machine_b, busy_writer)
    assert IMPORT_TRIES == 5
    # the fifth try checked at start + 4 events; the fifth checkpoint made it start + 5
    assert str(caught.value) == (
        f"a.json: the ledger moved under each of 5 tries to import run {RUN} (last: the "
        f"ledger moved: expected tree size {start + 4}, found {start + 5}); nothing was imported"
    )
    assert rows(machine_b) == start + 5  # the five checkpoints, nothing of the run
    assert rows(machine_b, "stream = ?", RUN) == 0
    caseledger(machine_b, "verify")
