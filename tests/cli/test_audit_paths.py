"""``caseledger export audit`` run in this process (issue 14 item 6): the export with and
without published reports, and every way it refuses, each with its exit code and message.

tests/cli/test_export_audit.py walks the export through as an auditor does, in real
processes; here the same command runs through click's runner so each branch of
ledger/app/audit.py is measured. The operator's folder is small and built once: a new
ledger, sales-fixture published, one checkpoint (3 events: genesis, BankPublished and the
CheckpointIssued of a size-2 checkpoint), and the report at size 3 in three formats.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from ledger.app.audit import ReportSpec, audit_commands, check_bank_files, export_audit
from ledger.bank.registry import BUILTIN_DIR
from ledger.cli import main
from ledger.errors import UsageError, VerificationError
from ledger.events import BankPublished
from ledger.store import Ledger

FORMATS = ("json", "md", "html")
VERIFY = (
    "caseledger --ledger ledger.db verify --key operator.pub --checkpoint checkpoint.note "
    "--banks banks --recompute"
)


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


class Operator:
    """The operator's folder: ledger, bank store, checkpoint note, published reports."""

    def __init__(self, home: Path, verifier_key: str, content: str) -> None:
        self.home, self.verifier_key, self.content = home, verifier_key, content
        self.ledger = home / "ledger.db"
        self.reports = home / "published"

    def export(self, out: Path, *extra: str) -> tuple[int, str, str]:
        return cli("--ledger", str(self.ledger), "export", "audit", "-o", str(out), *extra)


@pytest.fixture(scope="module")
def operator_home(tmp_path_factory: pytest.TempPathFactory) -> Operator:
    home = tmp_path_factory.mktemp("audit") / "home"
    ledger = str(home / "ledger.db")
    code, out, err = cli("--ledger", ledger, "init")
    assert code == 0, err
    verifier_key = out.splitlines()[-1]  # the line init asks the operator to publish
    code, out, err = cli("--ledger", ledger, "bank", "publish", str(BUILTIN_DIR / "sales-fixture"))
    assert code == 0, err
    content = out.split()[2]  # published: sales-fixture@v1 sha256:... at seq 1
    code, _, err = cli("--ledger", ledger, "checkpoint", "-o", str(home / "cp.note"))
    assert code == 0, err
    (home / "published").mkdir()
    for fmt in FORMATS:
        out_file = str(home / "published" / f"report.{fmt}")
        code, _, err = cli("--ledger", ledger, "report", "--format", fmt, "-o", out_file)
        assert code == 0, err
    return Operator(home, verifier_key, content)


@pytest.fixture
def op(operator_home: Operator, tmp_path: Path) -> Operator:
    """A private copy of the operator's folder."""
    home = tmp_path / "operator"
    shutil.copytree(operator_home.home, home)
    return Operator(home, operator_home.verifier_key, operator_home.content)


def test_the_fixture_is_what_the_module_doc_says(op: Operator) -> None:
    assert op.verifier_key.startswith("caseledger-operator+")
    assert op.content.startswith("sha256:")
    with Ledger.open(op.ledger, readonly=True) as ledger:
        assert ledger.size() == 3
    note = (op.home / "cp.note").read_text("utf-8")
    assert note.splitlines()[1] == "3"  # seq 0..2: its own CheckpointIssued is seq 2
    report = json.loads((op.reports / "report.json").read_bytes())
    # what the rebuild command is made from: size 3, no scorer, no run, the public view
    assert report["checkpoint"]["tree_size"] == 3
    assert (report["scorer"]["requested"], report["selection"]["runs"], report["view"]) == (
        None,
        None,
        "public",
    )


def test_export_with_the_published_reports(op: Operator, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = op.export(out, "--reports", str(op.reports))
    assert (code, stderr) == (0, "")
    rebuilds = [
        f"caseledger --ledger ledger.db report --at-size 3 --format {fmt} | cmp - "
        f"reports/report.{fmt}"
        for fmt in FORMATS
    ]
    assert stdout.splitlines() == [
        f"wrote {out}/: ledger.db (3 events), checkpoint.note (size 3), operator.pub, banks "
        "sales-fixture@v1, reports/report.json, reports/report.md, reports/report.html, "
        "README.md",
        "No private key is in it. The auditor runs, inside that folder:",
        f"  {VERIFY}",
        *(f"  {line}" for line in rebuilds),
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "banks",
        "checkpoint.note",
        "ledger.db",
        "operator.pub",
        "reports",
    ]
    assert (out / "operator.pub").read_text("utf-8") == op.verifier_key + "\n"
    assert (out / "checkpoint.note").read_bytes() == (op.home / "cp.note").read_bytes()
    for fmt in FORMATS:
        copy = out / "reports" / f"report.{fmt}"
        assert copy.read_bytes() == (op.reports / f"report.{fmt}").read_bytes()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o444
    bank = out / "banks" / "sales-fixture@v1"
    assert sorted(p.name for p in bank.iterdir()) == [
        "calibration.yaml",
        "cases.yaml",
        "prompt.md",
        "schema.sql",
        "seed.sql",
        "semantic.json",
    ]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in bank.iterdir())
    readme = (out / "README.md").read_text("utf-8").splitlines()
    assert "- `ledger.db`: a snapshot of the ledger, 3 events." in readme
    assert "- `checkpoint.note`: the newest signed checkpoint, over the first 3 events." in readme
    assert f"      {op.verifier_key}" in readme
    assert f"  - `banks/sales-fixture@v1/`: content `{op.content}`" in readme
    assert "- `reports/`: the published reports, built at tree size 3." in readme
    start = readme.index("```sh") + 1
    assert readme[start : readme.index("```", start)] == [VERIFY, *rebuilds]
    assert "The others rebuild each published report from the ledger; `cmp` prints" in readme
    # nothing else beside it: the staging folder was renamed into place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["operator", "out"]


def test_export_without_reports_rebuilds_at_the_checkpoint_into_an_empty_folder(
    op: Operator, tmp_path: Path
) -> None:
    out = tmp_path / "empty"
    out.mkdir()  # an empty folder is fine
    code, stdout, _ = op.export(out)
    assert code == 0
    commands = [
        f"caseledger --ledger ledger.db report --at-size 3 --format {fmt} -o report.{fmt}"
        for fmt in FORMATS
    ]
    assert stdout.splitlines()[0] == (
        f"wrote {out}/: ledger.db (3 events), checkpoint.note (size 3), operator.pub, banks "
        "sales-fixture@v1, README.md"
    )
    assert stdout.splitlines()[2:] == [f"  {VERIFY}", *(f"  {c}" for c in commands)]
    assert not (out / "reports").exists()
    readme = (out / "README.md").read_text("utf-8")
    assert "The others rebuild the reports at the checkpoint's size;" in readme
    assert "`reports/`" not in readme


def test_an_output_folder_that_is_not_empty_exits_2(op: Operator, tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("x", "utf-8")
    code, stdout, stderr = op.export(out)
    assert (code, stdout) == (2, "")
    assert stderr == (
        f"error: {out} already exists and is not an empty folder\n"
        "  hint: pick a new folder for the export (nothing was written)\n"
    )
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_an_output_that_is_a_file_is_refused(op: Operator, tmp_path: Path) -> None:
    out = tmp_path / "a-file"
    out.write_text("x", "utf-8")
    # the command line refuses it before the library is called ...
    code, _, stderr = op.export(out)
    assert code == 2
    assert stderr.startswith(
        f"error: Invalid value for '-o' / '--output': Directory '{out}' is a file."
    )
    # ... and the library refuses it too, for any other caller
    with pytest.raises(UsageError) as info:
        export_audit(op.ledger, out, banks_dir=op.home / "banks")
    assert info.value.message == f"{out} already exists and is not an empty folder"
    assert out.read_text("utf-8") == "x"


def test_missing_bank_files_exit_2_and_leave_nothing(op: Operator, tmp_path: Path) -> None:
    empty = tmp_path / "no-banks"
    empty.mkdir()
    out = tmp_path / "out"
    code, _, stderr = op.export(out, "--banks", str(empty))
    assert code == 2
    assert stderr == (
        f"error: the files of bank sales-fixture@v1 (seq 1) are not in {empty}\n"
        "  hint: pass --banks DIR with the folder `bank publish` stored them in, or restore "
        "them there with `caseledger bank publish FOLDER`\n"
    )
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_a_ledger_without_a_checkpoint_exits_2(tmp_path: Path) -> None:
    ledger = tmp_path / "l" / "ledger.db"
    assert cli("--ledger", str(ledger), "init")[0] == 0
    out = tmp_path / "out"
    code, _, stderr = cli("--ledger", str(ledger), "export", "audit", "-o", str(out))
    assert code == 2
    assert stderr == (
        f"error: {ledger} holds no signed checkpoint to give the auditor\n"
        "  hint: sign one first: caseledger checkpoint\n"
    )
    assert not out.exists()


# ----------------------------------------------------------------- the published reports


def test_a_reports_folder_without_report_json_exits_2(op: Operator, tmp_path: Path) -> None:
    (op.reports / "report.json").unlink()
    code, _, stderr = op.export(tmp_path / "out", "--reports", str(op.reports))
    assert code == 2
    assert stderr == (
        f"error: {op.reports} holds no report.json\n"
        "  hint: pass the folder the published reports are in (report.json, and report.md / "
        "report.html when they were published)\n"
    )


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not json", "(Expecting value: line 1 column 1 (char 0))"),
        (b"{}", "('checkpoint')"),  # the first key looked up
        (b'{"checkpoint": []}', "(list indices must be integers or slices, not str)"),
    ],
    ids=["not-json", "no-checkpoint", "checkpoint-a-list"],
)
def test_a_report_json_that_is_no_report_exits_2(
    op: Operator, tmp_path: Path, content: bytes, why: str
) -> None:
    (op.reports / "report.json").write_bytes(content)
    code, _, stderr = op.export(tmp_path / "out", "--reports", str(op.reports))
    assert code == 2
    assert stderr == f"error: {op.reports / 'report.json'}: not a caseledger report {why}\n"


@pytest.mark.parametrize(
    "change",
    [
        {"checkpoint": {"tree_size": "3"}},  # a string, not an integer
        {"scorer": {"requested": 2}},
        {"selection": {"runs": ["a", 1]}},
        {"view": "secret"},
    ],
    ids=["size-text", "scorer-number", "run-number", "view"],
)
def test_a_report_json_with_fields_of_the_wrong_kind_exits_2(
    op: Operator, tmp_path: Path, change: dict[str, object]
) -> None:
    path = op.reports / "report.json"
    report = json.loads(path.read_bytes())
    for key, value in change.items():
        if isinstance(value, dict):
            report[key].update(value)
        else:
            report[key] = value
    path.write_text(json.dumps(report), "utf-8")
    code, _, stderr = op.export(tmp_path / "out", "--reports", str(op.reports))
    assert code == 2
    assert stderr == (
        f"error: {path}: not a caseledger report (unexpected checkpoint/scorer/view)\n"
    )


def test_a_report_built_past_the_ledger_exits_2(op: Operator, tmp_path: Path) -> None:
    path = op.reports / "report.json"
    report = json.loads(path.read_bytes())
    report["checkpoint"]["tree_size"] = 4
    path.write_text(json.dumps(report), "utf-8")
    code, _, stderr = op.export(tmp_path / "out", "--reports", str(op.reports))
    assert code == 2
    assert stderr == (
        f"error: {path} was built at tree size 4, but the ledger has 3 events\n"
        "  hint: export from the ledger the reports were built from\n"
    )


def test_a_report_the_ledger_does_not_rebuild_exits_1_and_leaves_nothing(
    op: Operator, tmp_path: Path
) -> None:
    md = op.reports / "report.md"
    size = len(md.read_bytes())
    md.write_bytes(md.read_bytes() + b"\n")  # one byte more than the ledger rebuilds
    out = tmp_path / "out"
    code, _, stderr = op.export(out, "--reports", str(op.reports))
    assert code == 1
    assert stderr == (
        f"error: {md} is not what this ledger rebuilds at tree size 3 ({size + 1} bytes "
        f"given, {size} rebuilt)\n"
        "  hint: export the reports that were built from this ledger, or leave --reports out\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["operator"]


def test_report_options_name_scorer_runs_and_gold() -> None:
    spec = ReportSpec(at_size=5, scorer="2", runs=("a", "b c"), with_gold=True, formats=("md",))
    assert spec.options() == [
        "--at-size", "5", "--scorer", "2", "--run", "a", "--run", "b c", "--with-gold",
    ]  # fmt: skip
    # Issue 32: a report published under caseledger-report/1 (detail full, the default of
    # a spec) or /2 is rebuilt with the --detail naming its contract in every format (their
    # Markdown and HTML carry no statistics); a /3 report with the default.
    assert audit_commands(9, spec) == [
        VERIFY,
        "caseledger --ledger ledger.db report --at-size 5 --scorer 2 --run a --run 'b c' "
        "--with-gold --detail full --format md | cmp - reports/report.md",
    ]
    compact = ReportSpec(at_size=5, scorer=None, runs=None, with_gold=False,
                         formats=("json", "html"), detail="compact")  # fmt: skip
    assert audit_commands(9, compact)[1:] == [
        "caseledger --ledger ledger.db report --at-size 5 --detail compact --format json "
        "| cmp - reports/report.json",
        "caseledger --ledger ledger.db report --at-size 5 --detail compact --format html "
        "| cmp - reports/report.html",
    ]
    stats = ReportSpec(at_size=5, scorer=None, runs=None, with_gold=False, formats=("md",),
                       detail="stats")  # fmt: skip
    assert audit_commands(9, stats)[1:] == [
        "caseledger --ledger ledger.db report --at-size 5 --format md | cmp - reports/report.md"
    ]


# ----------------------------------------------------------------- bank files


def test_files_that_hash_to_another_content_than_recorded_exit_1(op: Operator) -> None:
    with Ledger.open(op.ledger, readonly=True) as ledger:
        row = next(ledger.events_of_type(BankPublished))
        event = row.event()
    assert isinstance(event, BankPublished)
    folder = op.home / "banks" / op.content.removeprefix("sha256:")
    assert check_bank_files(folder, event, row.seq).content_sha256 == op.content
    # every file as recorded, but the event names another content hash
    forged = msgspec.structs.replace(event, content_sha256="sha256:" + "0" * 64)
    with pytest.raises(VerificationError) as info:
        check_bank_files(folder, forged, row.seq)
    assert info.value.message == (
        f"seq 1: bank sales-fixture@v1: the per-file hashes of BankPublished give "
        f"{op.content}, but it records content sha256:{'0' * 64}"
    )
    assert (info.value.seq, info.value.exit_code) == (1, 1)


def test_a_calibration_file_never_published_is_left_out(tmp_path: Path) -> None:
    # tiny-bank is published without calibration.yaml; one that loads, added to the
    # operator's store later, is not part of what was published, so it is not exported.
    ledger = str(tmp_path / "home" / "ledger.db")
    assert cli("--ledger", ledger, "init")[0] == 0
    tiny = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tiny-bank"
    code, out, err = cli("--ledger", ledger, "bank", "publish", str(tiny))
    assert code == 0, err
    stored = tmp_path / "home" / "banks" / out.split()[2].removeprefix("sha256:")
    assert cli("--ledger", ledger, "checkpoint", "-o", str(tmp_path / "cp.note"))[0] == 0
    (stored / "calibration.yaml").write_text("variants: []\n", "utf-8")
    code, _, err = cli("--ledger", ledger, "export", "audit", "-o", str(tmp_path / "out"))
    assert code == 0, err
    exported = tmp_path / "out" / "banks" / "tiny@v1"
    assert sorted(p.name for p in exported.iterdir()) == [
        "cases.yaml",
        "prompt.md",
        "schema.sql",
        "seed.sql",
        "semantic.json",
    ]
