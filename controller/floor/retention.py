"""Retention on the floor: a gaming day's partition leaves the database only archived and proved.

`tablectl floor retire` takes one gaming day: every table's rows in its partition must be at or
behind the last row a `floor verify` proved (floor.tables.verified_seq), else it refuses and
names the table; then the partition is copied out (`COPY ... TO STDOUT`, the journal's seven
columns and the table id, as CSV) to a file beside a manifest with the file's SHA-256 and each
table's first and last rows; the copy is read back and every row's hash recomputed and linked
(the journal's own `row_hash`); only then is the partition detached and dropped, and the day
recorded in floor.retired (so no shipper makes it again). Files are written, fsynced,
renamed and their directory fsynced: a crash leaves either no archive or a whole one, and the
partition is still there until the archive is.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.floor.schema import RECORDED_AT_SQL, SCHEMA
from tablectl.controller.record.durable import write_private_file
from tablectl.controller.record.journal import row_hash


class RetireRefused(RuntimeError):
    """The day cannot leave the floor yet; the message says why and what to run."""


@dataclass(frozen=True)
class Retired:
    gaming_day: datetime.date
    partition: str
    rows: int
    archive: Path
    manifest: Path
    sha256: str


def partition_name(day: datetime.date) -> str:
    return f"journal_rows_{day:%Y%m%d}"


def _check_archive(data: bytes) -> dict[str, dict[str, Any]]:
    """Every row's hash recomputed and each table's rows linked; per table its first and last
    rows. Raises RetireRefused at the first row that does not hold."""
    tables: dict[str, dict[str, Any]] = {}
    for line in csv.reader(io.StringIO(data.decode("utf-8"))):
        table_id, seq_text, kind, round_text, at, body, prev, digest = line
        seq = int(seq_text)
        rnd = int(round_text) if round_text != "" else None
        if row_hash(prev, seq, kind, rnd, at, body) != digest:
            raise RetireRefused(f"table {table_id} row {seq}: its hash does not hold")
        seen = tables.get(table_id)
        if seen is not None and (seen["last_seq"] + 1 != seq or seen["last_hash"] != prev):
            raise RetireRefused(f"table {table_id} row {seq}: it does not follow row {seq - 1}")
        if seen is None:
            seen = tables[table_id] = {"first_seq": seq, "first_prev_hash": prev, "rows": 0}
        seen.update(last_seq=seq, last_hash=digest, rows=seen["rows"] + 1)
    return tables


def retire_day(conn: Any, day: datetime.date, archive_dir: Path) -> Retired:
    """Archive, prove and drop one gaming day's partition (the DBA's connection)."""
    name = partition_name(day)
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.{name}",)).fetchone()
    if not exists or not exists[0]:
        raise RetireRefused(f"gaming day {day}: no partition {SCHEMA}.{name} on the floor")
    unproved = conn.execute(
        f"SELECT p.table_id, max(p.seq), t.verified_seq FROM {SCHEMA}.{name} AS p"
        f" JOIN {SCHEMA}.tables AS t USING (table_id)"
        " GROUP BY p.table_id, t.verified_seq HAVING max(p.seq) > t.verified_seq"
        " ORDER BY 1"
    ).fetchall()
    if unproved:
        named = ", ".join(f"{t} (rows to {m}, proved to {v})" for t, m, v in unproved)
        raise RetireRefused(
            f"gaming day {day} is not verified for {named}: run `tablectl floor verify` "
            "(as the DBA or the auditor) first; nothing was changed"
        )
    buffer = io.BytesIO()
    query = (
        f"COPY (SELECT table_id, seq, kind, round, {RECORDED_AT_SQL}, body, prev_hash, hash"
        f" FROM {SCHEMA}.{name} ORDER BY table_id, seq) TO STDOUT WITH (FORMAT csv)"
    )
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        for chunk in copy:
            buffer.write(bytes(chunk))
    data = buffer.getvalue()
    tables = _check_archive(data)
    rows = sum(t["rows"] for t in tables.values())
    digest = hashlib.sha256(data).hexdigest()
    archive_dir.mkdir(parents=True, exist_ok=True)
    archive = archive_dir / f"floor-{day.isoformat()}.csv"
    manifest = archive_dir / f"floor-{day.isoformat()}.json"
    write_private_file(archive, data)
    if hashlib.sha256(archive.read_bytes()).hexdigest() != digest:
        raise RetireRefused(f"{archive}: the copy written does not read back the same")
    write_private_file(
        manifest,
        (
            json.dumps(
                {
                    "gaming_day": day.isoformat(),
                    "partition": f"{SCHEMA}.{name}",
                    "rows": rows,
                    "file": archive.name,
                    "sha256": digest,
                    "columns": [
                        "table_id",
                        "seq",
                        "kind",
                        "round",
                        "recorded_at",
                        "body",
                        "prev_hash",
                        "hash",
                    ],
                    "tables": tables,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        ).encode(),
    )
    with conn.transaction():
        conn.execute(
            f"INSERT INTO {SCHEMA}.retired (partition, gaming_day, rows, archive, sha256)"
            " VALUES (%s, %s, %s, %s, %s)",
            (name, day, rows, str(archive), digest),
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows DETACH PARTITION {SCHEMA}.{name}")
        conn.execute(f"DROP TABLE {SCHEMA}.{name}")
    return Retired(day, f"{SCHEMA}.{name}", rows, archive, manifest, digest)


def ensure_days(conn: Any, first: datetime.date, days: int) -> int:
    """The partitions of `days` gaming days from `first` (floor maintain)."""
    row = conn.execute(f"SELECT {SCHEMA}.ensure_partitions(%s, %s)", (first, days)).fetchone()
    return int(row[0]) if row else 0


def migrate_from(conn: Any, old_schema: str) -> dict[str, int]:
    """Every table's rows of an earlier, unpartitioned floor (renamed to `old_schema`) into
    this one, in seq order, through the new floor's chain check (one statement per table)."""
    from psycopg import sql

    from tablectl.controller.floor.schema import add_table

    copied: dict[str, int] = {}
    old = sql.Identifier(old_schema)
    tables = conn.execute(
        sql.SQL("SELECT table_id FROM {}.tables ORDER BY 1").format(old)
    ).fetchall()
    for (table_id,) in tables:
        add_table(conn, table_id, passfile=None, dbname="")
        days = conn.execute(
            sql.SQL(
                "SELECT min(recorded_at::timestamptz), max(recorded_at::timestamptz)"
                " FROM {}.journal_rows WHERE table_id = %s"
            ).format(old),
            (table_id,),
        ).fetchone()
        if days and days[0] is not None:
            first = days[0].date() - datetime.timedelta(days=1)
            ensure_days(conn, first, (days[1].date() - first).days + 2)
        with conn.transaction():
            done = conn.execute(
                sql.SQL(
                    "INSERT INTO {floor}.journal_rows (table_id, seq, kind, round, recorded_at,"
                    " recorded_at_text, body, prev_hash, hash, columns)"
                    " SELECT table_id, seq, kind, round, recorded_at::timestamptz,"
                    " nullif(recorded_at, to_char(recorded_at::timestamptz AT TIME ZONE 'UTC',"
                    " 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+00:00'),"
                    " body, prev_hash, hash, columns FROM {old}.journal_rows"
                    " WHERE table_id = %s AND seq > (SELECT head_seq FROM {floor}.tables"
                    " WHERE table_id = %s) ORDER BY seq"
                ).format(floor=sql.Identifier(SCHEMA), old=old),
                (table_id, table_id),
            )
            copied[table_id] = done.rowcount
    return copied
