"""A site whose edit cannot be made is recorded as unsupported, not raised."""

from __future__ import annotations

from ledger.calibration.operators import mutants_for

SCHEMA = {
    "sales": {"store_id": "numeric", "amount": "numeric"},
    "stores": {"store_id": "numeric", "valid": "string"},
}


def test_sole_join_condition_on_a_validity_column_is_unsupported() -> None:
    # The only ON condition cannot be dropped (that would change the join kind).
    sql = "SELECT SUM(amount) FROM sales JOIN stores ON stores.valid = 'Y'"
    found = [
        (m.id, m.status, m.reason, m.sql)
        for m in mutants_for("c", sql, SCHEMA)
        if m.operator == "drop_validity_predicate"
    ]
    assert found == [
        (
            "drop_validity_predicate#0",
            "unsupported",
            "cannot be generated: the condition cannot be dropped",
            None,
        )
    ]
