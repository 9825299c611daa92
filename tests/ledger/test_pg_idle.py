"""A PostgreSQL writer stopped inside its batch does not stop the other writers (issue 34).

Each batch sets ``idle_in_transaction_session_timeout``: a writer whose batch sits idle
between two statements longer than that (SIGSTOP, a hung client) loses its session on the
server, and the append lock with it. Real cluster (tests/pgcluster.py), real writers.
"""

from __future__ import annotations

import pytest
from ledger_testkit import operator, prompt
from pgcluster import PgCluster
from store_kit import drop_pg_store, fresh_pg_store

from ledger.errors import StoreError
from ledger.stores.postgres import IDLE_IN_TRANSACTION_S, PostgresBackend


def test_a_writer_idle_inside_its_batch_loses_the_lock_and_the_others_go_on(
    pg_cluster: PgCluster,
) -> None:
    store = fresh_pg_store(pg_cluster)
    try:
        stopped = store.create()
        other = store.open(busy_timeout_s=120)  # waits as long as the machine needs
        backend = stopped._db
        assert isinstance(backend, PostgresBackend)
        assert backend.idle_timeout_s == IDLE_IN_TRANSACTION_S == 60.0
        backend.idle_timeout_s = 1.0
        backend.begin()  # holds the append lock, then does nothing (a stopped writer)
        with backend.conn.cursor() as cur:
            cur.execute("SHOW idle_in_transaction_session_timeout")
            assert cur.fetchone() == ("1s",)
        # the other writer waits for the lock until the server ends the idle session
        assert other.append([prompt("run-b", 0)], operator()) == [1]
        # the stopped writer's session is gone: its batch cannot go on, and says so
        with pytest.raises(StoreError, match="cannot use the ledger at"):
            backend.commit()
        with store.superuser() as con:
            rows = con.execute("SELECT count(*) FROM caseledger.events").fetchone()
        assert rows == (2,)  # genesis and the other writer's event: nothing half-written
    finally:
        drop_pg_store(store)
