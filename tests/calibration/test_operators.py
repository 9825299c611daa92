"""Mutation operators on small hand-written queries: each site, its mutated SQL, its id."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ledger.calibration.operators import ANSWER_NOT_CHECKED, OPERATOR_NAMES, OPERATORS, mutants_for

SCHEMA = {
    "sales": {
        "sale_id": "string",
        "region": "string",
        "store_id": "numeric",
        "store_name": "string",
        "deal_time": "timestamp",
        "created_at": "timestamp",
        "amount": "numeric",
        "valid": "string",
    },
    "stores": {"store_id": "numeric", "store_name": "string", "region": "string"},
    "sale_tags": {"sale_id": "string", "tag": "string"},
}


def flat(sql: str | None) -> str:
    assert sql is not None  # mutants are pretty-printed: compare them on one line
    return " ".join(sql.split()).replace("( ", "(").replace(" )", ")")


def candidates(sql: str, operator: str) -> dict[str, str]:
    return {
        m.id: flat(m.sql)
        for m in mutants_for("c", sql, SCHEMA)
        if m.operator == operator and m.status == "candidate"
    }


def test_operator_list_covers_the_eight_patterns_and_the_additions() -> None:
    assert sorted({op.pattern for op in OPERATORS} - {"extra"}) == list("12345678")
    for name in ("one_to_many_join", "join_type_swap", "remove_distinct", "reverse_order",
                 "drop_tie_breaker", "change_limit"):  # fmt: skip
        assert name in OPERATOR_NAMES
    assert all(op.description for op in OPERATORS)


def test_creation_time_swaps_every_use_of_the_time_column() -> None:
    sql = (
        "SELECT COUNT(*) FROM sales WHERE deal_time >= TIMESTAMP '2026-09-01' "
        "AND deal_time < TIMESTAMP '2026-10-01'"
    )
    assert candidates(sql, "time_column_swap") == {
        "time_column_swap#0": "SELECT COUNT(*) FROM sales WHERE created_at >= CAST('2026-09-01' AS "
        "TIMESTAMP) AND created_at < CAST('2026-10-01' AS TIMESTAMP)"
    }


def test_count_distinct_becomes_count_star_and_count_column() -> None:
    got = candidates("SELECT COUNT(DISTINCT s.sale_id) FROM sales AS s", "count_distinct_dropped")
    assert got == {
        "count_distinct_dropped#0": "SELECT COUNT(*) FROM sales AS s",
        "count_distinct_dropped#1": "SELECT COUNT(s.sale_id) FROM sales AS s",
    }


def test_validity_and_scope_predicates_are_dropped_one_at_a_time() -> None:
    sql = "SELECT SUM(amount) FROM sales WHERE region = '区域甲' AND valid = 'Y' AND amount > 0"
    assert candidates(sql, "drop_validity_predicate") == {
        "drop_validity_predicate#0": "SELECT SUM(amount) FROM sales "
        "WHERE region = '区域甲' AND amount > 0"
    }
    assert candidates(sql, "drop_scope_predicate") == {
        "drop_scope_predicate#0": "SELECT SUM(amount) FROM sales WHERE valid = 'Y' AND amount > 0"
    }


def test_range_endpoints_move_and_between_becomes_half_open() -> None:
    got = candidates("SELECT 1 FROM sales WHERE amount < 10", "move_range_endpoint")
    assert got == {"move_range_endpoint#0": "SELECT 1 FROM sales WHERE amount <= 10"}
    got = candidates("SELECT 1 FROM sales WHERE amount BETWEEN 5 AND 10", "move_range_endpoint")
    assert got == {
        "move_range_endpoint#0": "SELECT 1 FROM sales WHERE (amount > 5 AND amount <= 10)",
        "move_range_endpoint#1": "SELECT 1 FROM sales WHERE (amount >= 5 AND amount < 10)",
    }


def test_timezone_conversions_and_literal_offsets_are_dropped() -> None:
    sql = (
        "SELECT 1 FROM sales WHERE deal_time AT TIME ZONE 'Asia/Shanghai' >= TIMESTAMP '2026-09-01'"
        " AND deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00'"
    )
    assert candidates(sql, "drop_timezone") == {
        "drop_timezone#0": "SELECT 1 FROM sales WHERE deal_time >= CAST('2026-09-01' AS TIMESTAMP) "
        "AND deal_time < CAST('2026-10-01 00:00:00+08:00' AS TIMESTAMPTZ)",
        "drop_timezone#1": "SELECT 1 FROM sales WHERE deal_time AT TIME ZONE 'Asia/Shanghai' >= "
        "CAST('2026-09-01' AS TIMESTAMP) AND deal_time < "
        "CAST('2026-10-01 00:00:00' AS TIMESTAMPTZ)",
    }


def test_join_by_name_instead_of_id() -> None:
    sql = "SELECT st.region FROM sales AS s JOIN stores AS st ON st.store_id = s.store_id"
    got = candidates(sql, "join_key_swap")
    assert got == {
        "join_key_swap#0": "SELECT st.region FROM sales AS s JOIN stores AS st "
        "ON st.store_name = s.store_name",
        "join_key_swap#1": "SELECT st.region FROM sales AS s JOIN stores AS st "
        "ON st.region = s.region",
    }


def test_exists_becomes_a_plain_join() -> None:
    sql = (
        "SELECT COUNT(*) FROM sales AS s WHERE s.valid = 'Y' "
        "AND EXISTS (SELECT 1 FROM sale_tags AS t WHERE t.sale_id = s.sale_id)"
    )
    assert candidates(sql, "one_to_many_join") == {
        "one_to_many_join#0": "SELECT COUNT(*) FROM sales AS s JOIN sale_tags AS t "
        "ON t.sale_id = s.sale_id WHERE s.valid = 'Y'"
    }


def test_pre_aggregation_removed() -> None:
    sql = (
        "WITH q AS (SELECT sale_id, SUM(amount) AS a FROM sales GROUP BY sale_id) "
        "SELECT t.tag, q.a FROM sale_tags AS t JOIN q ON q.sale_id = t.sale_id"
    )
    assert candidates(sql, "one_to_many_join") == {
        "one_to_many_join#0": "WITH q AS (SELECT sale_id, amount AS a FROM sales) "
        "SELECT t.tag, q.a FROM sale_tags AS t JOIN q ON q.sale_id = t.sale_id"
    }


def test_join_types_distinct_order_and_limit() -> None:
    sql = (
        "SELECT DISTINCT st.store_name FROM stores AS st LEFT JOIN sales AS s "
        "ON s.store_id = st.store_id ORDER BY st.store_name DESC, st.store_id LIMIT 3"
    )
    assert candidates(sql, "join_type_swap") == {
        "join_type_swap#0": "SELECT DISTINCT st.store_name FROM stores AS st JOIN sales AS s "
        "ON s.store_id = st.store_id ORDER BY st.store_name DESC, st.store_id LIMIT 3"
    }
    assert list(candidates(sql, "remove_distinct").values()) == [
        "SELECT st.store_name FROM stores AS st LEFT JOIN sales AS s ON s.store_id = st.store_id "
        "ORDER BY st.store_name DESC, st.store_id LIMIT 3"
    ]
    orders = candidates(sql, "reverse_order")
    assert orders["reverse_order#0"].endswith("ORDER BY st.store_name, st.store_id LIMIT 3")
    assert orders["reverse_order#1"].endswith(
        "ORDER BY st.store_name DESC, st.store_id DESC LIMIT 3"
    )
    assert next(iter(candidates(sql, "drop_tie_breaker").values())).endswith(
        "ORDER BY st.store_name DESC LIMIT 3"
    )
    limits = candidates(sql, "change_limit")
    assert [v[-7:] for v in limits.values()] == ["LIMIT 4", "LIMIT 2"]


def test_not_applicable_unsupported_and_answer_pattern() -> None:
    records = mutants_for("c", "SELECT region FROM sales", SCHEMA)
    by_op = {m.operator: m for m in records}
    assert by_op["count_distinct_dropped"].status == "not_applicable"
    assert by_op["count_distinct_dropped"].id == "count_distinct_dropped"
    assert by_op["changed_answer_number"].status == "not_applicable"
    assert by_op["changed_answer_number"].reason == ANSWER_NOT_CHECKED
    assert by_op["stale_snapshot"].status == "not_applicable"
    broken = mutants_for("c", "SELEC region FROM", SCHEMA)
    assert {m.status for m in broken if m.operator == "drop_scope_predicate"} == {"unsupported"}


def test_stale_snapshot_mutant_per_stale_variant() -> None:
    records = [
        m for m in mutants_for("c", "SELECT 1", SCHEMA, ("old",)) if m.operator == "stale_snapshot"
    ]
    assert [(m.id, m.status, m.variant, m.sql) for m in records] == [
        ("stale_snapshot#0", "candidate", "old", "SELECT 1")
    ]


STABLE_SQL = (
    "SELECT s.region, COUNT(DISTINCT s.sale_id) FROM sales AS s JOIN stores AS st "
    "ON st.store_id = s.store_id WHERE s.valid = 'Y' AND s.region = 'A' "
    "AND s.deal_time < TIMESTAMPTZ '2026-10-01 00:00:00+08:00' GROUP BY s.region "
    "ORDER BY 1, 2 LIMIT 5"
)
_CHILD = """
import json, sys
from ledger.calibration.operators import mutants_for
sql, schema = json.loads(sys.argv[1])
print(json.dumps([[m.id, m.operator, m.sql] for m in mutants_for("c", sql, schema)]))
"""


def test_mutant_ids_are_stable_across_processes_and_hash_seeds() -> None:
    # A calibration record names a mutant by id: the same query must give the same ids
    # (and the same SQL behind each) in another process with another string-hash seed.
    here = [[m.id, m.operator, m.sql] for m in mutants_for("c", STABLE_SQL, SCHEMA)]
    assert {m[1] for m in here} == set(OPERATOR_NAMES)  # every operator applies here
    assert len({m[0] for m in here}) == len(here)  # and no id is given twice
    for seed in ("0", "12345"):
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps([STABLE_SQL, SCHEMA])],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=False,
        )
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout) == here, seed
