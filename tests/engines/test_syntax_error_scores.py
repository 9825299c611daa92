"""Issue 31: one classification of parse failures. The same syntax error scores the same on
DuckDB, SQLite and PostgreSQL (a real cluster): a text the engine cannot read as a
statement ran nowhere, so it is a guard-stage failure everywhere, never an execution
failure on one engine only.

By docs/scoring.md: an attempt stopped at the guard keeps only its protocol points, 5
for a strict answer (the reference adapter's), so 5.00 with failure kind ``guard``. An
execution failure would keep protocol 5 + guard 5 + AST 15 = 25.00 (SQLite's score for
these texts before, while DuckDB and PostgreSQL gave 5.00).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from test_numeric_by_value import ANSWERS, _bank, answered

from ledger import events

# sqlglot reads these (so the guard passes them) but no engine does: the engine's parser
# refuses each. Plus two the guard's own parse refuses already.
SYNTAX_ERRORS = {
    "t1": "SELECT grp, SUM(x) AS total FROM items GROUP BY grp WHERE x > 1",
    "t2": "SELECT SUM(x) AS total FROM items GROUP BY",
    "t3": "SELECT SUM(x) AS total FROM items WHERE",
    "t4": "SELEC SUM(x) FROM items",
}


def _scores(home: Path, folder: Path, engine: str) -> dict[str, tuple[Decimal, str, str | None]]:
    answers = {case_id: sql for case_id, _, sql, _ in ANSWERS} | SYNTAX_ERRORS
    kinds: dict[str, str | None] = {}
    out = {}
    for e in answered(home, folder, engine, answers):
        if isinstance(e, events.SqlExecuted) and e.case_id in SYNTAX_ERRORS:
            kinds[e.case_id] = e.error_kind
        if isinstance(e, events.ScoreComputed) and e.case_id in SYNTAX_ERRORS:
            out[e.case_id] = (e.total, e.failure_kind, kinds.get(e.case_id))
    return out


@pytest.mark.slow
def test_the_same_syntax_error_scores_the_same_on_every_engine(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASELEDGER_PG_DSN", pg_dsn)
    folder = _bank(tmp_path / "numbers")
    found = {e: _scores(tmp_path / e, folder, e) for e in ("duckdb", "sqlite", "postgres")}
    for engine, scores in found.items():
        assert {c: (total, kind) for c, (total, kind, _) in scores.items()} == {
            c: (Decimal("5.00"), "guard") for c in SYNTAX_ERRORS
        }, engine
    # t1 and t2 pass sqlglot and reach each engine's own parser, which refuses them.
    assert found["sqlite"]["t1"][2] == found["sqlite"]["t2"][2] == "refused"
    assert found["postgres"]["t1"][2] == found["duckdb"]["t1"][2] == "refused"
