"""Fixtures for calibration tests (the helpers are in ``calkit``)."""

from __future__ import annotations

import pytest
from calkit import FIXTURE, run_calibration

from ledger.calibration.calibrate import CalibrationResult


@pytest.fixture(scope="module")
def fixture_result(tmp_path_factory: pytest.TempPathFactory) -> CalibrationResult:
    """The built-in sales fixture calibrated once per module."""
    return run_calibration(FIXTURE, tmp_path_factory.mktemp("fixture"))[1]
