"""Fixtures of the engine tests: a throwaway PostgreSQL cluster for the whole session.

``pg_cluster`` starts the Debian package's server once per test process (each
xdist worker has its own) and stops it at the end, also when a test failed;
``pg_dsn`` is its admin DSN (CREATEDB CREATEROLE, not a superuser), what a user
gives as CASELEDGER_PG_DSN. A missing server is a failure, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pgcluster import PgCluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A running throwaway cluster (tests/pgcluster.py), stopped with ``-m immediate``."""
    cluster = PgCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_dsn(pg_cluster: PgCluster) -> str:
    """The admin DSN of the session's cluster."""
    return pg_cluster.admin_dsn
