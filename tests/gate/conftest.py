"""Fixtures for gate tests: one real ledger per session, report files, a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gatekit import build_gate_ledger, report_of


@pytest.fixture(scope="session")
def gate_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gatekit ledger (read-only for tests: never append to it)."""
    return build_gate_ledger(tmp_path_factory.mktemp("gate") / "home")


@pytest.fixture(scope="session")
def gate_report(gate_ledger: Path) -> dict[str, Any]:
    """The canonical report of every run of the gate ledger (copy before editing)."""
    return report_of(gate_ledger)


@pytest.fixture
def write_json(tmp_path: Path):
    """``write_json(name, data)`` -> path of a JSON file in the test's folder."""

    def write(name: str, data: Any) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(data), "utf-8")
        return path

    return write
