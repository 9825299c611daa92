"""The ledger commands through click's CliRunner and one real subprocess: output and exit codes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_audit import TAMPERED

from ledger.cli import main

COMMANDS = [
    ["init"], ["log"], ["verify"], ["checkpoint"], ["prove", "inclusion"],
    ["prove", "consistency"], ["keys", "list"], ["keys", "add"], ["keys", "retire"],
]  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "led"


def run(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def init(home: Path) -> str:
    code, out, _ = run(home, "init")
    assert code == 0
    return out.strip().splitlines()[-1]  # the verifier key


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.stdout


def test_init_makes_ledger_and_private_key(home: Path) -> None:
    vkey = init(home)
    assert (home / "ledger.db").is_file()
    assert oct((home / "keys" / "operator.key").stat().st_mode & 0o777) == "0o600"
    assert vkey.startswith("caseledger-operator+")
    code, _, err = run(home, "init")
    assert code == 2
    assert "a ledger already exists" in err


def test_verify_checkpoint_and_proofs(home: Path, tmp_path: Path) -> None:
    vkey = init(home)
    cp1, cp2 = tmp_path / "cp1.txt", tmp_path / "cp2.txt"
    assert run(home, "checkpoint", "-o", str(cp1))[0] == 0
    assert run(home, "keys", "add", "bot", "--role", "adapter")[0] == 0
    assert run(home, "checkpoint", "-o", str(cp2))[0] == 0
    code, out, _ = run(
        home, "verify", "--checkpoint", str(cp1), "--checkpoint", str(cp2), "--key", vkey
    )
    assert code == 0
    assert out.startswith("verified: 4 events, 1 streams, 2 signers")
    # seq 0 genesis, 1 CheckpointIssued (cp1 covers seq 0..1), 2 bot's SignerRegistered,
    # 3 CheckpointIssued (cp2 covers seq 0..3): each note covers its own event.
    code, out, _ = run(home, "prove", "inclusion", "--seq", "2", "--checkpoint", str(cp2), "--json")
    proof = json.loads(out)
    assert code == 0
    assert (proof["leaf_index"], proof["tree_size"]) == (2, 4)
    code, out, _ = run(
        home, "prove", "consistency", "--old", str(cp1), "--new", str(cp2), "--key", vkey
    )
    assert code == 0
    assert out.startswith(f"verified: {cp2} (size 4) extends {cp1} (size 2)")
    code, _, err = run(home, "prove", "inclusion", "--seq", "5", "--checkpoint", str(cp2))
    assert code == 2
    assert "seq 5 is not in" in err
    code, _, err = run(home, "prove", "consistency", "--old", str(cp2), "--new", str(cp1))
    assert code == 2
    assert "swap --old and --new" in err


@TAMPERED
def test_tampering_exits_1_naming_the_seq(home: Path, tmp_path: Path) -> None:
    init(home)
    run(home, "keys", "add", "bot", "--role", "adapter")
    cp = tmp_path / "cp.txt"
    run(home, "checkpoint", "-o", str(cp))
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute(
        "UPDATE events SET body = CAST(replace(CAST(body AS TEXT), 'bot', 'b0t') AS BLOB) "
        "WHERE seq = 1"
    )
    conn.commit()
    conn.close()
    code, out, err = run(home, "verify")
    assert code == 1
    assert out == ""
    assert err.startswith("verification FAILED: seq 1: body hashes to sha256:")


def test_cut_tail_exits_1_against_checkpoint(home: Path, tmp_path: Path) -> None:
    init(home)
    run(home, "keys", "add", "bot", "--role", "adapter")
    cp = tmp_path / "cp.txt"
    run(home, "checkpoint", "-o", str(cp))  # its CheckpointIssued is seq 2; cp covers 0..2
    cut_tail(home / "ledger.db", 1)
    assert run(home, "verify")[0] == 0
    code, _, err = run(home, "verify", "--checkpoint", str(cp))
    assert code == 1
    assert f"seq 1: the ledger ends at size 1, but {cp} covers 3 events" in err


def test_ledger_upgrade_of_a_file_changes_nothing(home: Path) -> None:
    init(home)
    before = (home / "ledger.db").read_bytes()
    code, out, _ = run(home, "ledger", "upgrade")
    assert (code, out) == (0, f"{home / 'ledger.db'}: a ledger file needs no upgrade\n")
    assert (home / "ledger.db").read_bytes() == before


def cut_tail(path: Path, size: int) -> None:
    """Delete every event from seq ``size`` on and every stored checkpoint over more
    events, past the file's triggers (an attacker holding the file)."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_delete")
    conn.execute("DROP TRIGGER checkpoints_refuse_delete")
    conn.execute("DELETE FROM events WHERE seq >= ?", (size,))
    conn.execute("DELETE FROM checkpoints WHERE size > ?", (size,))
    conn.commit()
    conn.close()


def test_the_printed_checkpoint_covers_its_own_event(home: Path, tmp_path: Path) -> None:
    """Issue 29 item 4: cutting off only the trailing checkpoint.issued row is caught
    against the note `caseledger checkpoint` has just printed."""
    init(home)
    run(home, "keys", "add", "bot", "--role", "adapter")  # seq 1
    code, note, _ = run(home, "checkpoint")  # the note on stdout; CheckpointIssued is seq 2
    assert code == 0
    assert note.splitlines()[1] == "3"  # seq 0..2, the CheckpointIssued included
    cp = tmp_path / "printed.note"
    cp.write_text(note, "utf-8")
    assert run(home, "verify", "--checkpoint", str(cp))[0] == 0
    with sqlite3.connect(home / "ledger.db") as conn:
        (kind,) = conn.execute("SELECT type FROM events WHERE seq = 2").fetchone()
        assert kind == "checkpoint.issued.v1"
        assert conn.execute("SELECT max(seq) FROM events").fetchone() == (2,)
    conn.close()
    cut_tail(home / "ledger.db", 2)  # the CheckpointIssued row and the stored note over it
    assert run(home, "verify")[0] == 0  # nothing else shows the cut
    code, out, err = run(home, "verify", "--checkpoint", str(cp))
    assert (code, out) == (1, "")
    assert err.startswith(
        f"verification FAILED: seq 2: the ledger ends at size 2, but {cp} covers 3 events: "
        "seq 2..2 are missing (tail cut off)"
    )


def test_could_not_check_exits_2(home: Path, tmp_path: Path) -> None:
    code, _, err = run(home, "verify")
    assert code == 2
    assert err.startswith("error: no ledger at")
    init(home)
    bad = tmp_path / "bad.txt"
    bad.write_text("not a checkpoint")
    code, _, err = run(home, "verify", "--checkpoint", str(bad))
    assert code == 2
    assert "not a signed checkpoint note" in err
    code, _, err = run(home, "verify", "--key", "nonsense")
    assert code == 2
    assert "verifier key" in err
    code, _, err = run(home, "verify", "--checkpoint", str(tmp_path / "missing.txt"))
    assert code == 2
    assert "cannot read checkpoint" in err
    code, _, err = run(home, "log", "--type", "bogus")
    assert code == 2
    assert "unknown event type 'bogus'" in err
    code, _, err = run(home, "keys", "add", "../evil", "--role", "adapter")
    assert code == 2
    assert "bad key name" in err


def test_log_and_keys(home: Path) -> None:
    init(home)
    run(home, "keys", "add", "bot", "--role", "adapter")
    code, out, _ = run(home, "keys", "retire", "bot", "--reason", "done")
    assert code == 0
    assert out.strip() == "retired bot at seq 2"
    code, out, _ = run(home, "log", "--json", "--type", "signer.registered")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seq"] for r in rows] == [0, 1]
    assert [r["event"]["name"] for r in rows] == ["caseledger-operator", "bot"]
    code, out, _ = run(home, "log", "--run", "ledger")
    assert code == 0
    assert len(out.splitlines()) == 3
    assert "signer.retired.v1" in out
    code, out, _ = run(home, "keys", "list")
    assert "bot  adapter" in out
    assert "retired" in out
    code, _, err = run(home, "keys", "retire", "caseledger-operator")
    assert code == 2
    assert "would leave no active operator key" in err


def test_console_script_in_a_real_process(home: Path) -> None:
    cli = Path(sys.executable).parent / "caseledger"
    args = [str(cli), "--ledger", str(home / "ledger.db")]
    assert subprocess.run([*args, "init"], capture_output=True, check=False).returncode == 0
    done = subprocess.run([*args, "verify"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.startswith("verified: 1 events")
    done = subprocess.run(
        [*args, "prove", "inclusion"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
