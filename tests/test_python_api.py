"""Issue 17, the Python API: docs/python-api.md's example runs verbatim and appends runs.

The program is read from the page (its one ```python block) and run in an empty folder
in a real process, so the docs cannot drift from the API. Expected values by hand:
the reference adapter answers with each case's reference SQL, so all 7 cases of
sales-fixture are correct (100.00); the example's own adapter answers ``{}``, valid
JSON but not a query-plan-v1 object, so every attempt is a protocol failure (0.00).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from ledger.api import open_ledger
from ledger.errors import UsageError

CASELEDGER = str(Path(sys.executable).parent / "caseledger")


def _example() -> str:
    text = (REPO / "docs" / "python-api.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/python-api.md should hold exactly one python example"
    return blocks[0]


@pytest.mark.slow
def test_the_docs_example_runs_verbatim_and_appends_two_runs(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_example(), "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "self-test completed 7/7",
        "nothing-1 completed 0/7 {'protocol': 7}",
        "{'nothing-1': '0.00', 'self-test': '100.00'}",
    ]
    ledger = tmp_path / "evals" / "ledger.db"
    verified = subprocess.run(
        [CASELEDGER, "--ledger", str(ledger), "verify"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    runs = subprocess.run(
        [CASELEDGER, "--ledger", str(ledger), "runs", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert runs.returncode == 0, runs.stderr
    assert '"say-nothing"' in runs.stdout
    assert '"self-test"' in runs.stdout
    # Opening it again (no create) finds the bank published by the example.
    with open_ledger(ledger) as ws:
        assert ws.resolve_bank("sales-fixture").ref == "sales-fixture@v1"


def test_open_ledger_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        open_ledger(tmp_path / "none" / "ledger.db")
    assert err.value.message == f"no ledger at {tmp_path / 'none' / 'ledger.db'}"
    with pytest.raises(UsageError) as err:
        open_ledger("postgresql://u@127.0.0.1:1/db")
    assert err.value.message.startswith("a ledger on a server needs home=")
    with open_ledger(tmp_path / "l" / "ledger.db", create=True) as ws:
        assert (tmp_path / "l" / "keys" / "operator.key").is_file()
        with pytest.raises(UsageError) as err:
            ws.build_adapter("reference")
        assert err.value.message.startswith("the reference adapter needs bank=")
        with pytest.raises(UsageError) as err:
            ws.evaluate(None, object())  # type: ignore[arg-type]
        assert err.value.message == "object is not an adapter"
