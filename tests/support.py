"""Paths every test may need (a uniquely named module: several conftest.py files exist)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VECTORS = SHARED / "vectors"
