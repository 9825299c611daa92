"""Foreign keys that a SQLite file's data breaks (issue 16).

SQLite enforces foreign keys only when a connection asks for it, so real files
often break the keys their own DDL declares (gravity_books breaks 1,872). An
importer keeps the data as it is and reports, per declared key, how many child
rows have no parent row and one of them.

:func:`foreign_key_violations` asks SQLite itself (``PRAGMA
foreign_key_check``, one pass over each child table, parent rows found by
their index), so affinity, collation and NULL rules are SQLite's own. Where
SQLite refuses to check a table ("foreign key mismatch": the parent key is not
unique, names a column the parent lacks, or has a different number of
columns), each key of that table is checked with one ``LEFT JOIN`` instead;
a key whose parent columns cannot be paired with its own is broken by every
row that sets all its columns, as SQLite treats a key to a missing table.
The file is opened read-only and immutable: it is never written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.engines.sqlite_sandbox import readonly_uri
from ledger.errors import BankError
from ledger.events import ForeignKeyViolation

__all__ = ["foreign_key_violations", "format_violations", "sql_literal"]

# A value in an example longer than this is cut (an example is one line of a report).
_MAX_LITERAL = 60


@dataclass
class _Key:
    """One declared foreign key of a child table (PRAGMA foreign_key_list, by id)."""

    id: int
    parent: str
    columns: list[str] = field(default_factory=list)
    parent_columns: list[str | None] = field(default_factory=list)


def foreign_key_violations(path: Path) -> tuple[ForeignKeyViolation, ...]:
    """Every declared foreign key that rows of the SQLite file at ``path`` break.

    One :class:`ForeignKeyViolation` per broken key (keys without violations give
    nothing): the child table and columns, the parent table and columns (empty
    when the key names the parent's primary key implicitly), how many child rows
    have no parent row, and the one with the smallest rowid as
    ``rowid <n>: <column>=<value>, ...`` (values as SQL literals). Sorted by
    table, then key columns. The file is opened read-only; a file that is
    missing or not a SQLite database is a :class:`BankError`.
    """
    path = Path(path)
    if not path.is_file():
        raise BankError(f"SQLite database {path} is missing", hint="check the path")
    con = sqlite3.connect(readonly_uri(path), uri=True, isolation_level=None)
    try:
        found: list[ForeignKeyViolation] = []
        for table in _tables(con):
            keys = _keys(con, table)
            if keys:
                found.extend(_table_violations(con, table, keys))
    except sqlite3.DatabaseError as exc:
        raise BankError(
            f"cannot check the foreign keys of {path}: {exc}",
            hint="check that the file is a SQLite database",
        ) from exc
    finally:
        con.close()
    return tuple(sorted(found, key=lambda v: (v.table, v.columns, v.parent_table)))


def format_violations(violations: Sequence[ForeignKeyViolation]) -> list[str]:
    """Lines for a user: one per broken key, then the total of rows.

    ``table(col) -> parent(col): N rows, e.g. rowid 7: col=4``; a key that names
    the parent's primary key implicitly shows ``parent (primary key)``. No
    violations give no lines (an import that breaks nothing says nothing).
    """
    if not violations:
        return []
    lines = []
    for v in violations:
        parent = (
            f"{v.parent_table}({', '.join(v.parent_columns)})"
            if v.parent_columns
            else f"{v.parent_table} (primary key)"
        )
        rows = "row" if v.count == 1 else "rows"
        lines.append(
            f"{v.table}({', '.join(v.columns)}) -> {parent}: {v.count:,} {rows}, e.g. {v.example}"
        )
    total = sum(v.count for v in violations)
    keys = "key" if len(violations) == 1 else "keys"
    lines.append(f"{total:,} rows break {len(violations)} foreign {keys}")
    return lines


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(con: sqlite3.Connection) -> list[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _keys(con: sqlite3.Connection, table: str) -> dict[int, _Key]:
    keys: dict[int, _Key] = {}
    # Columns: id, seq, table, from, to, on_update, on_delete, match.
    rows = con.execute(f"PRAGMA foreign_key_list({_quote(table)})").fetchall()
    for key_id, _seq, parent, column, parent_column, *_ in sorted(rows, key=lambda r: (r[0], r[1])):
        key = keys.setdefault(int(key_id), _Key(int(key_id), str(parent)))
        key.columns.append(str(column))
        key.parent_columns.append(None if parent_column is None else str(parent_column))
    return keys


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in con.execute(f"PRAGMA table_xinfo({_quote(table)})")]


def _rowid_name(con: sqlite3.Connection, table: str) -> str | None:
    """The name that reaches ``table``'s rowid (a column may shadow ``rowid``), or None
    for a WITHOUT ROWID table."""
    names = {c.lower() for c in _columns(con, table)}
    for alias in ("rowid", "_rowid_", "oid"):
        if alias not in names:
            try:
                con.execute(f"SELECT {alias} FROM {_quote(table)} LIMIT 0")  # noqa: S608
            except sqlite3.OperationalError:
                return None
            return alias
    return None


def _table_violations(
    con: sqlite3.Connection, table: str, keys: dict[int, _Key]
) -> list[ForeignKeyViolation]:
    rowid = _rowid_name(con, table)
    if rowid is None:
        return [_joined(con, table, key, None) for key in keys.values()]
    try:
        # Columns: table, rowid, parent, fkid. One pass over the table for all its keys.
        cursor = con.execute(f"PRAGMA foreign_key_check({_quote(table)})")
        counts: dict[int, int] = {}
        smallest: dict[int, int] = {}
        for _table, row, _parent, key_id in cursor:
            counts[key_id] = counts.get(key_id, 0) + 1
            if key_id not in smallest or row < smallest[key_id]:
                smallest[key_id] = row
    except sqlite3.OperationalError as exc:
        if "foreign key mismatch" not in str(exc):
            raise
        found = [_joined(con, table, key, rowid) for key in keys.values()]
        return [v for v in found if v.count]
    return [
        _violation(
            table,
            keys[key_id],
            counts[key_id],
            _example(con, table, keys[key_id].columns, rowid, smallest[key_id]),
        )
        for key_id in sorted(counts)
    ]


def _violation(table: str, key: _Key, count: int, example: str) -> ForeignKeyViolation:
    implicit = any(c is None for c in key.parent_columns)
    return ForeignKeyViolation(
        table=table,
        columns=tuple(key.columns),
        parent_table=key.parent,
        parent_columns=() if implicit else tuple(str(c) for c in key.parent_columns),
        count=count,
        example=example,
    )


def _example(con: sqlite3.Connection, table: str, columns: list[str], rowid: str, row: int) -> str:
    selected = ", ".join(_quote(c) for c in columns)
    values = con.execute(
        f"SELECT {selected} FROM {_quote(table)} WHERE {rowid} = ?",  # noqa: S608
        (row,),
    ).fetchone()
    return f"rowid {row}: " + _assignments(columns, values)


def _assignments(columns: Iterable[str], values: Iterable[object]) -> str:
    return ", ".join(f"{c}={sql_literal(v)}" for c, v in zip(columns, values, strict=True))


def _parent_key(con: sqlite3.Connection, key: _Key) -> list[str] | None:
    """The parent columns paired with the key's own, or None when they cannot be paired
    (parent table or column missing, or a different number of columns)."""
    parent_columns = _columns(con, key.parent)
    if not parent_columns:
        return None
    if all(c is not None for c in key.parent_columns):
        wanted = [str(c) for c in key.parent_columns]
    else:
        wanted = _primary_key(con, key.parent)
        if not wanted:
            return None  # No declared primary key: nothing the key can name.
    known = {c.lower() for c in parent_columns}
    if len(wanted) != len(key.columns) or any(c.lower() not in known for c in wanted):
        return None
    return wanted


def _joined(
    con: sqlite3.Connection, table: str, key: _Key, rowid: str | None
) -> ForeignKeyViolation:
    """Check one key with a LEFT JOIN (where PRAGMA foreign_key_check refuses the table).

    A row with a NULL in any key column breaks nothing (SQLite's MATCH SIMPLE). The
    parent column is the left operand, so its collation decides, as in SQLite's
    own check.
    """
    child = [f"c.{_quote(c)}" for c in key.columns]
    set_all = " AND ".join(f"{c} IS NOT NULL" for c in child)
    parent = _parent_key(con, key)
    if parent is None:
        source = f"{_quote(table)} AS c WHERE {set_all}"
    else:
        on = " AND ".join(f"p.{_quote(p)} = {c}" for p, c in zip(parent, child, strict=True))
        source = (
            f"{_quote(table)} AS c LEFT JOIN {_quote(key.parent)} AS p ON {on} "
            f"WHERE {set_all} AND p.{_quote(parent[0])} IS NULL"
        )
    primary = [] if rowid else _primary_key(con, table)
    order = f"c.{rowid}" if rowid else ", ".join(f"c.{_quote(c)}" for c in primary) or "1"
    picked = ", ".join(child)
    labels = f", c.{rowid}" if rowid else "".join(f", c.{_quote(c)}" for c in primary)
    count = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]  # noqa: S608
    if not count:
        return _violation(table, key, 0, "")
    first = con.execute(
        f"SELECT {picked}{labels} FROM {source} ORDER BY {order} LIMIT 1"  # noqa: S608
    ).fetchone()
    values, label = first[: len(child)], first[len(child) :]
    if rowid is not None:
        where = f"rowid {label[0]}"
    else:  # WITHOUT ROWID: the row is named by its primary key.
        where = f"primary key ({_assignments(primary, label)})"
    return _violation(table, key, int(count), f"{where}: " + _assignments(key.columns, values))


def _primary_key(con: sqlite3.Connection, table: str) -> list[str]:
    """The primary key columns of ``table`` in key order."""
    info = con.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    return [str(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]


def sql_literal(value: object) -> str:
    """``value`` as a SQLite literal for a message: NULL, 7, 1.5, 'it''s', X'00ff'.

    Control characters in text are written as ``char(n)`` so an example stays on one
    line; a literal longer than 60 characters is cut with ``…``.
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool | int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        hexed = raw[: _MAX_LITERAL // 2].hex()
        return f"X'{hexed}'" + ("…" if len(raw) > _MAX_LITERAL // 2 else "")
    text = str(value)
    cut = len(text) > _MAX_LITERAL
    text = text[:_MAX_LITERAL]
    parts: list[str] = []
    plain = ""
    for ch in text:
        if ord(ch) < 32 or ord(ch) == 127:
            if plain:
                parts.append("'" + plain.replace("'", "''") + "'")
                plain = ""
            parts.append(f"char({ord(ch)})")
        else:
            plain += ch
    if plain or not parts:
        parts.append("'" + plain.replace("'", "''") + "'")
    return " || ".join(parts) + ("…" if cut else "")
