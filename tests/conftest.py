"""Shared test fixtures: repository paths, the public vectors, a fixed clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import VECTORS


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """``../shared/vectors``: CI lays ``shared/`` beside the clone, so a missing folder fails."""
    assert VECTORS.is_dir(), f"public test vectors not found at {VECTORS}"
    return VECTORS
