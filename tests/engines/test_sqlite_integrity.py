"""Foreign keys a SQLite file's data breaks (issue 16): counted per key, one example each,
the file never written.

Expected numbers are worked out by hand for the small files built here, and by
plain SQL (a LEFT JOIN per declared key, not the function under test) for
gravity_books, whose total (1,872) the benchmark README states.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import BENCHMARKS

from ledger.engines.sqlite_integrity import (
    foreign_key_violations,
    format_violations,
    sql_literal,
)
from ledger.errors import BankError
from ledger.events import ForeignKeyViolation

GRAVITY = BENCHMARKS / "sample-databases" / "gravity_books.sqlite"


def _make(path: Path, script: str) -> Path:
    con = sqlite3.connect(path)
    try:
        con.executescript(script)
    finally:
        con.close()
    return path


def _fingerprint(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_mtime_ns, stat.st_size


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _left_join_counts(path: Path) -> dict[tuple[str, tuple[str, ...]], int]:
    """Per declared key, child rows with every key column set and no parent row (plain SQL)."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        counts = {}
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
            )
        ]
        for table in tables:
            keys: dict[int, list[tuple[str, str, str]]] = {}
            for key_id, _seq, parent, col, parent_col, *_ in con.execute(
                f"PRAGMA foreign_key_list({_quote(table)})"
            ):
                keys.setdefault(key_id, []).append((parent, col, parent_col))
            for pairs in keys.values():
                parent = pairs[0][0]
                on = " AND ".join(f"p.{_quote(pc)} = c.{_quote(c)}" for _, c, pc in pairs)
                set_all = " AND ".join(f"c.{_quote(c)} IS NOT NULL" for _, c, _ in pairs)
                # Names from the file's own catalog, quoted as identifiers.
                sql = (
                    f"SELECT count(*) FROM {_quote(table)} c "  # noqa: S608
                    f"LEFT JOIN {_quote(parent)} p "
                    f"ON {on} WHERE p.{_quote(pairs[0][2])} IS NULL AND {set_all}"
                )
                counts[(table, tuple(c for _, c, _ in pairs))] = con.execute(sql).fetchone()[0]
        return counts
    finally:
        con.close()


@pytest.mark.benchmark_data
def test_gravity_books_breaks_1872_keys_counted_per_key_by_plain_sql() -> None:
    before = _fingerprint(GRAVITY)
    found = foreign_key_violations(GRAVITY)
    assert _fingerprint(GRAVITY) == before

    assert sum(v.count for v in found) == 1872  # the benchmark README's figure
    expected = {key: n for key, n in _left_join_counts(GRAVITY).items() if n}
    assert {(v.table, v.columns): v.count for v in found} == expected
    # The file declares 14 keys over 7 tables (counted from its DDL); all but one hold.
    assert len(_left_join_counts(GRAVITY)) == 14

    (broken,) = found
    assert broken.parent_table == "shipping_method"
    assert broken.parent_columns == ("method_id",)
    con = sqlite3.connect(f"file:{GRAVITY}?mode=ro&immutable=1", uri=True)
    try:
        rowid, value = con.execute(
            "SELECT c.rowid, c.shipping_method_id FROM cust_order c "
            "LEFT JOIN shipping_method p ON p.method_id = c.shipping_method_id "
            "WHERE p.method_id IS NULL ORDER BY c.rowid LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    assert broken.example == f"rowid {rowid}: shipping_method_id={value}"
    assert format_violations(found) == [
        f"cust_order(shipping_method_id) -> shipping_method(method_id): 1,872 rows, "
        f"e.g. rowid {rowid}: shipping_method_id={value}",
        "1,872 rows break 1 foreign key",
    ]


_SHOP = """
CREATE TABLE author(id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO author VALUES (1, 'Ann'), (2, 'Bo'), (3, 'Ann');
-- author_id has no type, so '2' stays text; the parent's INTEGER affinity still finds 2.
CREATE TABLE book(id INTEGER PRIMARY KEY, author_id REFERENCES author(id), title TEXT);
INSERT INTO book VALUES (10, 1, 'a'), (11, 7, 'b'), (12, NULL, 'c'), (13, 5, 'd'), (14, '2', 'e');
CREATE TABLE translation(book_id INTEGER, lang TEXT, UNIQUE (book_id, lang));
INSERT INTO translation VALUES (10, 'en'), (11, 'fr');
CREATE TABLE edition(
  book_id INTEGER, lang TEXT, isbn TEXT,
  FOREIGN KEY (book_id, lang) REFERENCES translation(book_id, lang)
);
INSERT INTO edition VALUES
  (10, 'en', 'x1'), (10, 'fr', 'x2'), (11, NULL, 'x3'), (99, 'it''s', 'x4'), (11, 'fr', 'x5');
-- Names the parent's primary key implicitly.
CREATE TABLE review(stars INTEGER, book REFERENCES book);
INSERT INTO review VALUES (5, 10), (1, 99), (3, 14);
-- Every row has its parent.
CREATE TABLE publisher_book(book_id INTEGER REFERENCES book(id));
INSERT INTO publisher_book VALUES (10), (11), (NULL);
-- A table whose rows are numbered from 1 holds rowid order apart from insert order.
CREATE TABLE award(id INTEGER PRIMARY KEY, book_id REFERENCES book(id));
INSERT INTO award VALUES (9, 50), (4, 51), (6, 10);
"""


def test_hand_made_file_known_counts_examples_and_order(tmp_path: Path) -> None:
    path = _make(tmp_path / "shop.sqlite", _SHOP)
    before = _fingerprint(path)
    found = foreign_key_violations(path)
    assert _fingerprint(path) == before
    assert found == (
        ForeignKeyViolation(
            table="award",
            columns=("book_id",),
            parent_table="book",
            parent_columns=("id",),
            count=2,
            example="rowid 4: book_id=51",
        ),
        ForeignKeyViolation(
            table="book",
            columns=("author_id",),
            parent_table="author",
            parent_columns=("id",),
            count=2,
            example="rowid 11: author_id=7",
        ),
        ForeignKeyViolation(
            table="edition",
            columns=("book_id", "lang"),
            parent_table="translation",
            parent_columns=("book_id", "lang"),
            count=2,
            example="rowid 2: book_id=10, lang='fr'",
        ),
        ForeignKeyViolation(
            table="review",
            columns=("book",),
            parent_table="book",
            parent_columns=(),
            count=1,
            example="rowid 2: book=99",
        ),
    )
    assert format_violations(found) == [
        "award(book_id) -> book(id): 2 rows, e.g. rowid 4: book_id=51",
        "book(author_id) -> author(id): 2 rows, e.g. rowid 11: author_id=7",
        "edition(book_id, lang) -> translation(book_id, lang): 2 rows, "
        "e.g. rowid 2: book_id=10, lang='fr'",
        "review(book) -> book (primary key): 1 row, e.g. rowid 2: book=99",
        "7 rows break 4 foreign keys",
    ]


def test_keys_sorted_by_columns_within_a_table(tmp_path: Path) -> None:
    path = _make(
        tmp_path / "two.sqlite",
        """
        CREATE TABLE p(id INTEGER PRIMARY KEY);
        CREATE TABLE c(zeta REFERENCES p(id), alpha REFERENCES p(id));
        INSERT INTO c VALUES (1, 2), (3, NULL);
        """,
    )
    found = foreign_key_violations(path)
    assert [(v.columns, v.count, v.example) for v in found] == [
        (("alpha",), 1, "rowid 1: alpha=2"),
        (("zeta",), 2, "rowid 1: zeta=1"),
    ]


def test_keys_sqlite_refuses_to_check_are_checked_by_join(tmp_path: Path) -> None:
    # "foreign key mismatch": a non-unique parent column, a parent column that does not
    # exist, a missing parent table; each key of such a table is still counted.
    path = _make(
        tmp_path / "odd.sqlite",
        """
        CREATE TABLE author(id INTEGER PRIMARY KEY, name TEXT);
        INSERT INTO author VALUES (1, 'Ann'), (2, 'Ann'), (3, 'Bo');
        CREATE TABLE tag(
          by_name REFERENCES author(name),
          by_id REFERENCES author(id),
          by_ghost REFERENCES author(ghost),
          by_void REFERENCES nowhere(id)
        );
        INSERT INTO tag VALUES ('Ann', 1, 'g', 1), ('Zed', 4, NULL, NULL), ('Bo', 3, 'h', 2);
        """,
    )
    found = foreign_key_violations(path)
    assert [(v.columns, v.parent_table, v.count, v.example) for v in found] == [
        (("by_ghost",), "author", 2, "rowid 1: by_ghost='g'"),
        (("by_id",), "author", 1, "rowid 2: by_id=4"),
        (("by_name",), "author", 1, "rowid 2: by_name='Zed'"),
        (("by_void",), "nowhere", 2, "rowid 1: by_void=1"),
    ]


def test_without_rowid_child_is_named_by_its_primary_key(tmp_path: Path) -> None:
    path = _make(
        tmp_path / "norowid.sqlite",
        """
        CREATE TABLE p(id INTEGER PRIMARY KEY);
        INSERT INTO p VALUES (1);
        CREATE TABLE note(k TEXT PRIMARY KEY, p_id INTEGER REFERENCES p(id)) WITHOUT ROWID;
        INSERT INTO note VALUES ('b', 7), ('a', 8), ('c', 1);
        """,
    )
    (found,) = foreign_key_violations(path)
    assert (found.count, found.example) == (2, "primary key (k='a'): p_id=8")


def test_a_column_named_rowid_does_not_hide_the_rowid(tmp_path: Path) -> None:
    path = _make(
        tmp_path / "shadow.sqlite",
        """
        CREATE TABLE p(id INTEGER PRIMARY KEY);
        CREATE TABLE c(rowid TEXT, p_id REFERENCES p(id));
        INSERT INTO c VALUES ('first', 5), ('second', 6);
        """,
    )
    (found,) = foreign_key_violations(path)
    assert (found.count, found.example) == (2, "rowid 1: p_id=5")


def test_no_keys_or_no_violations_give_nothing(tmp_path: Path) -> None:
    path = _make(
        tmp_path / "clean.sqlite",
        """
        CREATE TABLE p(id INTEGER PRIMARY KEY);
        CREATE TABLE c(p_id REFERENCES p(id));
        CREATE TABLE plain(x);
        INSERT INTO p VALUES (1);
        INSERT INTO c VALUES (1), (NULL);
        """,
    )
    assert foreign_key_violations(path) == ()
    assert format_violations(()) == []


def test_missing_or_foreign_file_is_a_bank_error(tmp_path: Path) -> None:
    with pytest.raises(BankError, match="missing"):
        foreign_key_violations(tmp_path / "absent.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database, just some bytes " * 64)
    with pytest.raises(BankError, match="cannot check the foreign keys"):
        foreign_key_violations(junk)


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (None, "NULL"),
        (7, "7"),
        (-2, "-2"),
        (1.5, "1.5"),
        ("it's", "'it''s'"),
        ("", "''"),
        (b"\x00\xff", "X'00ff'"),
        ("a\nb", "'a' || char(10) || 'b'"),
        ("\t", "char(9)"),
        ("x" * 61, "'" + "x" * 60 + "'…"),
        (bytes(31), "X'" + "00" * 30 + "'…"),
    ],
)
def test_sql_literal(value: object, literal: str) -> None:
    assert sql_literal(value) == literal


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parents=st.sets(st.integers(0, 20), max_size=10),
    children=st.lists(st.none() | st.integers(0, 20), max_size=30),
)
def test_count_and_example_agree_with_a_set_difference(
    tmp_path: Path, parents: set[int], children: list[int | None]
) -> None:
    path = tmp_path / "prop.sqlite"
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE TABLE p(id INTEGER PRIMARY KEY)")
        con.execute("CREATE TABLE c(p_id INTEGER REFERENCES p(id))")
        con.executemany("INSERT INTO p VALUES (?)", [(p,) for p in parents])
        con.executemany("INSERT INTO c(rowid, p_id) VALUES (?, ?)", enumerate(children, 1))
        con.commit()
    finally:
        con.close()
    orphans = [(i, v) for i, v in enumerate(children, 1) if v is not None and v not in parents]
    found = foreign_key_violations(path)
    if not orphans:
        assert found == ()
    else:
        (v,) = found
        assert v.count == len(orphans)
        assert v.example == f"rowid {orphans[0][0]}: p_id={orphans[0][1]}"
