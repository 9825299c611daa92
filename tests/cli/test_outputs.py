"""``-o`` never replaces a device (issue 30 item 5): every command that writes a file.

``-o -`` writes to standard output the very bytes ``-o FILE`` writes; ``-o`` onto a
character device or a FIFO writes into it, leaving it what it was; a regular file is
replaced whole through a temporary name; a folder is refused (2). Each command that
takes ``-o FILE`` goes through the one helper, ``ledger.app.output``; these tests run
the commands against a real ledger with a real run.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger import codec
from ledger.app.output import output_file, write_output
from ledger.cli import main
from ledger.errors import UsageError
from ledger.events import CheckpointIssued
from ledger.store import Ledger

CASELEDGER = str(Path(sys.executable).parent / "caseledger")
RUN_ID = "out-run"


def invoke(folder: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--ledger", str(folder / "ledger.db"), *args])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ledger with sales-fixture published and one finished reference run."""
    folder = tmp_path_factory.mktemp("outputs")
    run = ["run", "--bank", "sales-fixture", "--adapter", "reference", "--no-variants"]
    for args in (["init"], ["bank", "publish", "sales-fixture"], [*run, "--run-id", RUN_ID]):
        result = invoke(folder, *args)
        assert result.exit_code == 0, result.output
    return folder


#: Every command that takes ``-o FILE`` (a file, not a folder), with each format it writes.
#: ``checkpoint`` appends a CheckpointIssued, so each of its writes runs on its own copy
#: of the ledger (the same log, the same key: the same signed note).
COMMANDS = {
    "report-json": ["report", "--format", "json"],
    "report-md": ["report", "--format", "md"],
    "report-html": ["report", "--format", "html"],
    "report-full": ["report", "--detail", "full"],
    "export-run": ["export", "run", RUN_ID],
    "export-caseruns-parquet": ["export", "caseruns", "--format", "parquet"],
    "export-caseruns-csv": ["export", "caseruns", "--format", "csv"],
    "checkpoint": ["checkpoint"],
}
APPENDS = {"checkpoint"}


def _ledger_for(home: Path, name: str, tmp_path: Path, label: str) -> Path:
    """``home`` itself, or a fresh copy of it for a command that appends."""
    if name not in APPENDS:
        return home
    copy = tmp_path / f"copy-{label}"
    shutil.copytree(home, copy)
    return copy


def _recorded_notes(folder: Path) -> set[bytes]:
    """Every signed note the ledger in ``folder`` holds: CheckpointIssued's and the
    checkpoints stored beside the events."""
    with Ledger.open(folder / "ledger.db", readonly=True) as ledger:
        notes = {note for _, note in ledger.stored_checkpoints()}
        notes |= {codec.decode(row.body).note for row in ledger.events_of_type(CheckpointIssued)}
    return {note.encode("utf-8") for note in notes}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_dash_writes_to_stdout_the_bytes_of_o_file(home: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / "out.bin"
    file_ledger = _ledger_for(home, name, tmp_path, "file")
    to_file = invoke(file_ledger, *COMMANDS[name], "-o", str(out))
    assert to_file.exit_code == 0, to_file.output
    dash_ledger = _ledger_for(home, name, tmp_path, "dash")
    to_stdout = invoke(dash_ledger, *COMMANDS[name], "-o", "-")
    assert to_stdout.exit_code == 0, to_stdout.output
    written = out.read_bytes()
    assert len(written) > 100
    if name in APPENDS:
        # Each checkpoint signs a log that includes its own CheckpointIssued (with the
        # time it was appended): each output is the note its own ledger recorded.
        assert written in _recorded_notes(file_ledger)
        assert to_stdout.stdout_bytes in _recorded_notes(dash_ledger)
    else:
        assert to_stdout.stdout_bytes == written
    assert not (Path.cwd() / "-").exists()
    # What the command says about the write goes to stderr with -o -, to stdout otherwise.
    assert f"wrote {out}" in to_file.stdout or name.startswith("report")
    assert "wrote -" in to_stdout.stderr or name.startswith("report")


def _null_device(path: Path) -> None:
    """A character device with /dev/null's numbers (1, 3), made here (we run as root)."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))


def _is_null_device(path: Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 3)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_o_onto_a_character_device_leaves_it_a_device(
    home: Path, tmp_path: Path, name: str
) -> None:
    device = tmp_path / "null"
    _null_device(device)
    result = invoke(_ledger_for(home, name, tmp_path, "dev"), *COMMANDS[name], "-o", str(device))
    assert result.exit_code == 0, result.output
    assert _is_null_device(device)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_report_onto_a_device_in_a_real_process(home: Path, tmp_path: Path) -> None:
    device = tmp_path / "null"
    _null_device(device)
    done = subprocess.run(
        [CASELEDGER, "--ledger", str(home / "ledger.db"), "report", "-o", str(device)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _is_null_device(device)
    assert os.listdir(tmp_path) == ["null"]


def _read_fifo(path: Path, into: list[bytes]) -> None:
    with path.open("rb") as f:
        into.append(f.read())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_o_onto_a_fifo_writes_into_it(home: Path, tmp_path: Path, name: str) -> None:
    expected = tmp_path / "expected.bin"
    first = invoke(_ledger_for(home, name, tmp_path, "file"), *COMMANDS[name], "-o", str(expected))
    assert first.exit_code == 0, first.output
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=_read_fifo, args=(fifo, got))
    reader.start()
    fifo_ledger = _ledger_for(home, name, tmp_path, "fifo")
    result = invoke(fifo_ledger, *COMMANDS[name], "-o", str(fifo))
    reader.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert len(got) == 1
    if name in APPENDS:  # its own note (see the stdout test)
        assert got[0] in _recorded_notes(fifo_ledger)
    else:
        assert got == [expected.read_bytes()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_o_onto_a_folder_is_refused(home: Path, tmp_path: Path, name: str) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    result = invoke(_ledger_for(home, name, tmp_path, "dir"), *COMMANDS[name], "-o", str(folder))
    assert result.exit_code == 2
    assert "is a directory" in result.output
    assert "Traceback" not in result.output
    assert list(folder.iterdir()) == []


def test_a_regular_file_is_replaced_whole_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_output(target, [b"new ", b"bytes"])
    assert target.read_bytes() == b"new bytes"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["report.json"]


def test_an_error_midway_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")

    def pieces():  # type: ignore[no-untyped-def]
        yield b"half"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_output(target, pieces())
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["report.json"]


def test_a_link_stays_a_link_and_its_file_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    write_output(link, [b"new"])
    assert link.is_symlink()
    assert real.read_bytes() == b"new"


def test_a_link_to_a_device_writes_into_the_device(tmp_path: Path) -> None:
    device = tmp_path / "null"
    _null_device(device)
    link = tmp_path / "link"
    link.symlink_to(device)
    write_output(link, [b"x" * 1000])
    assert link.is_symlink()
    assert _is_null_device(device)


def test_output_file_onto_a_device_copies_what_was_written_there(tmp_path: Path) -> None:
    device = tmp_path / "null"
    _null_device(device)
    with output_file(device) as scratch:
        assert scratch.parent != tmp_path
        scratch.write_bytes(b"rows")
    assert _is_null_device(device)
    assert os.listdir(tmp_path) == ["null"]


def test_helper_refuses_a_folder_with_exit_2(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(UsageError, match=r"cannot write .*a-folder: it is a folder") as err:
        write_output(folder, [b"x"])
    assert err.value.exit_code == 2
    assert list(folder.iterdir()) == []


def test_a_missing_folder_names_the_path_given(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "report.json"
    result = invoke(home, "report", "-o", str(target))
    assert result.exit_code == 2
    assert f"error: No such file or directory: {target}" in result.output


#: Commands whose ``-o`` is a folder: a device or a file there is refused before any work.
FOLDER_COMMANDS = {
    "demo": ["demo"],
    "export-audit": ["export", "audit"],
    "baseline-freeze": ["baseline", "freeze", RUN_ID],
    "bank-import": ["bank", "import", "bird", "dev.json", "--databases", "dbs"],
}


@pytest.mark.parametrize("kind", ["device", "file"])
@pytest.mark.parametrize("name", sorted(FOLDER_COMMANDS))
def test_a_folder_output_that_is_not_a_folder_is_refused_first(
    home: Path, tmp_path: Path, name: str, kind: str
) -> None:
    target = tmp_path / "target"
    if kind == "device":
        _null_device(target)
    else:
        target.write_bytes(b"keep me")
    result = invoke(home, *FOLDER_COMMANDS[name], "-o", str(target))
    assert result.exit_code == 2
    if kind == "device" or name == "bank-import":
        assert result.output.splitlines() == [
            f"error: cannot write into {target}: it is not a folder",
            "  hint: pass a new or existing folder to -o (nothing was written)",
        ]
    else:  # click's own check of a folder option (file_okay=False) refuses a file first
        assert result.output.startswith(
            f"error: Invalid value for '-o' / '--output': Directory '{target}' is a file."
        )
    assert _is_null_device(target) if kind == "device" else target.read_bytes() == b"keep me"
    assert os.listdir(tmp_path) == ["target"]
