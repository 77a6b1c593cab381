"""Reading the floor store back: rows per table, the chain check, and local-vs-floor comparison.

Every read streams (a server-side cursor, a few thousand rows at a time), so a table's whole
history never sits in memory; the chain check is the journal's own (`journal.verify_chain`),
run over the floor's rows exactly as over the local file's.
"""

from __future__ import annotations

import dataclasses
import datetime
import sqlite3
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tablectl.controller.floor.local import journal_chain_rows
from tablectl.controller.floor.schema import (
    AUDITOR_GROUP,
    CHAIN_COLUMNS,
    ENDED_ROUNDS,
    RECORDED_AT_SQL,
    RELEASED_ROWS,
    SCHEMA,
)
from tablectl.controller.record.journal import (
    GENESIS_HASH,
    JournalError,
    JournalRow,
    RawRow,
    VerifyResult,
    parse_row,
    verify_chain,
)

FETCH_ROWS = 2000
#: the chain's columns as the journal hashed them, of a row aliased `r`
_COLUMNS = ", ".join(RECORDED_AT_SQL if c == "recorded_at" else f"r.{c}" for c in CHAIN_COLUMNS)
CHAIN_SELECT = _COLUMNS
_READERS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
#: one microsecond: a round's last row's time, as an exclusive bound
_MICROSECOND = datetime.timedelta(microseconds=1)


class FloorError(RuntimeError):
    """The floor cannot be read as asked (unreachable, no such table); the message says which."""


def connect(dsn: str, *, passfile: str | Path | None = None) -> Any:
    """A psycopg connection (autocommit: reads only) or FloorError naming the DSN's problem."""
    import psycopg

    options: dict[str, Any] = {"autocommit": True, "connect_timeout": 10}
    if passfile is not None:
        options["passfile"] = str(passfile)
    try:
        return psycopg.connect(dsn, **options)
    except psycopg.Error as error:
        raise FloorError(f"cannot reach the floor store: {str(error).strip()}") from error


def reader_only(conn: Any) -> bool:
    """Whether this login is a reader (released state only, H7) rather than the DBA or the
    auditor (every row). Asked once per connection."""
    cached = _READERS.get(conn)
    if cached is not None:
        return cached
    row = conn.execute(
        "SELECT r.rolsuper OR r.rolbypassrls OR pg_has_role(current_user, t.tableowner, 'USAGE')"
        " OR pg_has_role(current_user, %s, 'USAGE')"
        " FROM pg_roles AS r, pg_tables AS t WHERE r.rolname = current_user"
        " AND t.schemaname = %s AND t.tablename = 'journal_rows'",
        (AUDITOR_GROUP, SCHEMA),
    ).fetchone()
    reader = not (row and row[0])
    _READERS[conn] = reader
    return reader


def rows_relation(conn: Any) -> str:
    """What this login reads rows from: the rows table for the DBA and the auditor, the
    released-rows function (ended rounds only, H7) for a reader (see table_rows_sql)."""
    return f"{SCHEMA}.{RELEASED_ROWS}" if reader_only(conn) else f"{SCHEMA}.journal_rows"


def table_rows_sql(
    conn: Any,
    table_id: str,
    *,
    after: int = 0,
    upto: int | None = None,
    low: datetime.datetime | None = None,
    high: datetime.datetime | None = None,
    kind: str | None = None,
) -> tuple[str, str, list[Any]]:
    """One table's rows as this login may read them, aliased `r`: (from, where, params) for
    `SELECT ... FROM {from} WHERE {where} ...`: seq in (after, upto], recorded_at in
    [low, high), of `kind`. The DBA and the auditor read the rows table; a reader calls the
    released-rows function with the same bounds (its rows of ended rounds only; the bounds
    go into its index scan, where the reader's EXPLAIN cannot see)."""
    if reader_only(conn):
        return (
            f"{SCHEMA}.{RELEASED_ROWS}(%s::text, %s::bigint, %s::bigint, %s::timestamptz,"
            " %s::timestamptz, %s::text) AS r",
            "true",
            [table_id, after, upto, low, high, kind],
        )
    where, params = ["r.table_id = %s", "r.seq > %s"], [table_id, after]
    for clause, value in (
        ("r.seq <= %s", upto),
        ("r.recorded_at >= %s", low),
        ("r.recorded_at < %s", high),
        ("r.kind = %s", kind),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    return f"{SCHEMA}.journal_rows AS r", " AND ".join(where), params


def table_ids(conn: Any) -> list[str]:
    """Every table registered on the floor."""
    return [row[0] for row in conn.execute(f"SELECT table_id FROM {SCHEMA}.tables ORDER BY 1")]


def head(conn: Any, table_id: str) -> tuple[int, str | None]:
    """The last row this login may read: the floor's head for the DBA and the auditor, the
    released head for a reader (the table row alone before any round ended)."""
    if reader_only(conn):
        released = conn.execute(
            f"SELECT released_seq, released_hash FROM {SCHEMA}.tables WHERE table_id = %s",
            (table_id,),
        ).fetchone()
        if released is not None and released[0]:
            return int(released[0]), str(released[1])
    source, where, params = table_rows_sql(conn, table_id)
    row = conn.execute(
        f"SELECT r.seq, r.hash FROM {source} WHERE {where} ORDER BY r.seq DESC LIMIT 1", params
    ).fetchone()
    return (int(row[0]), str(row[1])) if row else (0, None)


def require_table(conn: Any, table_id: str) -> None:
    known = table_ids(conn)
    if table_id not in known:
        raise FloorError(
            f"table {table_id!r} is not on the floor (tables: {', '.join(known) or 'none'})"
        )


def round_span_rows(conn: Any, table_id: str, round_number: int) -> list[RawRow]:
    """A dispute's lookup: the rows of one table's round, by the primary key (table, seq,
    time) over the round's seqs and times (floor.rounds), in the partitions of its time span
    only, not every gaming day's index."""
    spans = f"{SCHEMA}.{ENDED_ROUNDS}" if reader_only(conn) else f"{SCHEMA}.rounds"
    span = conn.execute(
        f"SELECT first_seq, last_seq, first_at, last_at FROM {spans}"
        " WHERE table_id = %s AND round = %s",
        (table_id, round_number),
    ).fetchone()
    if span is None:
        return []
    source, where, params = table_rows_sql(
        conn,
        table_id,
        after=span[0] - 1,
        upto=span[1],
        low=span[2],
        high=span[3] + _MICROSECOND,
    )
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM {source} WHERE {where} AND r.round = %s ORDER BY r.seq",
        (*params, round_number),
    ).fetchall()
    return [cast(RawRow, tuple(row)) for row in rows]


def floor_raw_rows(conn: Any, table_id: str, *, after: int = 0) -> Iterator[RawRow]:
    """The table's rows in seq order, as the local journal stores them (body as text)."""
    source, where, params = table_rows_sql(conn, table_id, after=after)
    with conn.transaction(), conn.cursor(name=f"floor_rows_{table_id}") as cursor:
        cursor.itersize = FETCH_ROWS
        cursor.execute(f"SELECT {_COLUMNS} FROM {source} WHERE {where} ORDER BY r.seq", params)
        for seq, kind, rnd, at, body, prev, digest in cursor:
            yield (int(seq), kind, None if rnd is None else int(rnd), at, body, prev, digest)


def floor_rows(conn: Any, table_id: str) -> Iterator[JournalRow]:
    return (parse_row(raw) for raw in floor_raw_rows(conn, table_id))


def round_rows(conn: Any, table_id: str, round_number: int) -> Iterator[JournalRow]:
    """What a replay of one round needs, not the table's history: the table row (kept in
    floor.tables, whatever was retired), then the rows from the last engine checkpoint before
    the round (a journal writes one at each gaming day's start and at each clean stop; found
    by the landmarks index) or from row 1 when there is none."""
    table = conn.execute(
        f"SELECT table_row FROM {SCHEMA}.tables WHERE table_id = %s", (table_id,)
    ).fetchone()
    source, where, params = table_rows_sql(conn, table_id, kind="checkpoint")
    mark = conn.execute(
        f"SELECT r.seq FROM {source} WHERE {where} AND r.round < %s ORDER BY r.seq DESC LIMIT 1",
        (*params, round_number),
    ).fetchone()
    start = int(mark[0]) - 1 if mark else 0
    if start and table and table[0] is not None:
        yield parse_row((1, "table", None, "", table[0], GENESIS_HASH, ""))
    yield from (parse_row(raw) for raw in floor_raw_rows(conn, table_id, after=start))


def verified_mark(conn: Any, table_id: str) -> tuple[int, str]:
    """The last row a `floor verify` proved: (seq, hash), (0, genesis) before any; for a
    reader, the last such row within the released rows."""
    columns = "verified_seq, verified_hash"
    if reader_only(conn):
        columns = "released_verified_seq, released_verified_hash"
    row = conn.execute(
        f"SELECT {columns} FROM {SCHEMA}.tables WHERE table_id = %s", (table_id,)
    ).fetchone()
    return (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)


def verify_table(
    conn: Any, table_id: str, *, from_start: bool = False, record: bool = False
) -> VerifyResult:
    """The journal's chain check over the floor's copy of one table: from the last row a
    verify proved (rows before it may be retired) or, `from_start`, from row 1; `record`
    moves the mark to the last row proved now (the DBA's or the auditor's verify)."""
    highest, _ = head(conn, table_id)
    mark = (0, GENESIS_HASH) if from_start else verified_mark(conn, table_id)
    rows = _tracking_last(floor_raw_rows(conn, table_id, after=mark[0]))
    result = verify_chain(rows, highest, after=mark)
    last = rows.last
    if result.ok and record and last is not None and last[0] > mark[0]:
        conn.execute(f"SELECT {SCHEMA}.record_verified(%s, %s, %s)", (table_id, *last))
    if result.ok and mark[0] and not from_start:
        return dataclasses.replace(
            result,
            message=f"intact: {rows.count} rows after row {mark[0]} (verified before), "
            f"last hash {last[1] if last else mark[1]}",
        )
    return result


class _tracking_last:
    """Rows passed through, remembering the last (seq, hash) and the count."""

    def __init__(self, rows: Iterator[RawRow]) -> None:
        self._rows = rows
        self.last: tuple[int, str] | None = None
        self.count = 0

    def __iter__(self) -> Iterator[RawRow]:
        for raw in self._rows:
            self.last = (raw[0], raw[6])
            self.count += 1
            yield raw


@dataclass(frozen=True)
class Comparison:
    """The local journal against the floor's copy of one table."""

    table_id: str
    same: bool  # everything the floor holds is in the local journal, unchanged
    verdict: str  # identical | local_ahead | truncated | rewritten
    message: str
    first_differing_seq: int | None = None


def _local_rows(journal: str | Path) -> Iterator[RawRow]:
    """The local journal's rows (live file and closed segments, or a directory of them)."""
    try:
        for raw in journal_chain_rows(Path(journal)):
            yield cast(RawRow, tuple(raw))
    except (OSError, sqlite3.Error) as error:
        raise JournalError(f"{journal}: not a readable journal: {error}") from error


def identify_table(conn: Any, journal: str | Path) -> str:
    """The floor table whose first row is this journal's first row (row 1's hash is unique)."""
    first = next(iter(_local_rows(journal)), None)
    if first is None:
        raise FloorError(f"{journal}: the journal is empty: name the table with --table")
    if reader_only(conn):
        found = [
            table_id
            for table_id in table_ids(conn)
            if conn.execute(
                f"SELECT 1 FROM {SCHEMA}.{RELEASED_ROWS}(%s, %s, %s) WHERE hash = %s",
                (table_id, first[0] - 1, first[0], first[6]),
            ).fetchone()
        ]
    else:
        found = [
            row[0]
            for row in conn.execute(
                f"SELECT table_id FROM {SCHEMA}.journal_rows WHERE seq = %s AND hash = %s",
                (first[0], first[6]),
            )
        ]
    if len(found) != 1:
        raise FloorError(
            f"{journal}: its first row is on {'no' if not found else 'more than one'} floor "
            "table: name the table with --table"
        )
    return str(found[0])


def compare(conn: Any, table_id: str, journal: str | Path) -> Comparison:
    """Walk both in seq order; name the first seq where the local journal leaves the floor's."""
    require_table(conn, table_id)
    floor_head, _ = head(conn, table_id)
    local = _local_rows(journal)
    floor = floor_raw_rows(conn, table_id)
    count = 0
    last_local = 0
    for floor_row in floor:
        local_row = next(local, None)
        if local_row is None:
            return Comparison(
                table_id,
                False,
                "truncated",
                f"the local journal is truncated: it ends at row {last_local}, the floor holds "
                f"rows up to {floor_head} (rows {last_local + 1}-{floor_head} missing locally)",
                last_local + 1,
            )
        last_local = local_row[0]
        if local_row != floor_row:
            seq = floor_row[0]
            changed = [
                name
                for name, mine, theirs in zip(CHAIN_COLUMNS, local_row, floor_row, strict=True)
                if mine != theirs
            ]
            if local_row[0] != floor_row[0]:
                where = f"local row {local_row[0]} stands where the floor has row {seq}"
            else:
                where = f"row {seq} differs from the floor's copy ({', '.join(changed)})"
            return Comparison(
                table_id,
                False,
                "rewritten",
                f"the local journal was rewritten or diverged: {where}",
                seq,
            )
        count += 1
    ahead = sum(1 for _ in local)
    if ahead:
        return Comparison(
            table_id,
            True,
            "local_ahead",
            f"the {count} rows on the floor match; {ahead} newer local rows are not shipped yet",
        )
    return Comparison(table_id, True, "identical", f"identical: {count} rows, head {floor_head}")


__all__ = [
    "Comparison",
    "FloorError",
    "JournalError",
    "compare",
    "connect",
    "floor_raw_rows",
    "floor_rows",
    "head",
    "identify_table",
    "reader_only",
    "round_rows",
    "round_span_rows",
    "rows_relation",
    "table_ids",
    "table_rows_sql",
    "verify_table",
]
