"""Fixtures of the ledger tests: every store a ledger can live in (test_store_contract.py).

``store`` is parametrised over the SQLite file and a PostgreSQL database on a
throwaway cluster (tests/pgcluster.py, started once per test process and stopped at
the end; see tests/ledger/store_kit.py for the roles). A missing PostgreSQL server is
a failure, never a skip. Every test gets a fresh database; writers connect as the
writer role, which may only INSERT and SELECT (and take the append lock).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgcluster import PgCluster
from store_kit import Store, drop_pg_store, fresh_pg_store, setup_roles


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A running throwaway cluster with the owner and writer roles."""
    cluster = PgCluster.start()
    try:
        setup_roles(cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty place for a ledger: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        made = Store("sqlite", path, path)
    else:
        made = fresh_pg_store(request.getfixturevalue("pg_cluster"))
    try:
        yield made
    finally:
        for ledger in made.opened:
            with contextlib.suppress(Exception):
                ledger.close()
        if made.kind == "postgresql":
            drop_pg_store(made)
