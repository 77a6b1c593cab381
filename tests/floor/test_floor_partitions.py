"""A floor for years: partitions by gaming day, retention only after proof, an old floor moved.

On the session's real PostgreSQL: rows land in their gaming day's partition across the 06:00
boundary (a far-off clock's in the default one); `floor retire` refuses a day whose rows no
verify has proved and, once proved, archives it (the copy read back and every hash
recomputed), then drops it; `floor verify` then starts from its mark; an earlier unpartitioned
floor is refused by `floor init` with what to run, and `floor migrate` moves it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sqlite3
import uuid
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.floor.retention import (
    RetireRefused,
    ensure_days,
    migrate_from,
    retire_day,
)
from tablectl.controller.floor.schema import FloorSetupError, create_schema
from tablectl.controller.floor.store import verify_table
from tablectl.controller.record.journal import GENESIS_HASH, Journal, row_hash
from tablectl.simulators.pgserver import ThrowawayPostgres
from tests.floor.floorkit import FloorDb, ship_until_caught_up, unique_table_id

DAY = datetime.date(2026, 3, 14)


def _journal_at(path: Path, times: list[str]) -> None:
    """A journal whose rows carry these recorded times (a table row first)."""
    Journal(path).close()
    db = sqlite3.connect(path)
    prev = GENESIS_HASH
    try:
        for seq, at in enumerate(times, start=1):
            kind, body = (
                ("table", '{"game":"three_card_21","type":"table"}')
                if seq == 1
                else (
                    "event",
                    f'{{"index":{seq},"type":"card_drawn"}}',
                )
            )
            rnd = None if seq == 1 else 1
            digest = row_hash(prev, seq, kind, rnd, at, body)
            db.execute(
                "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, kind, rnd, at, body, prev, digest),
            )
            prev = digest
        db.commit()
    finally:
        db.close()


def _where(floor_db: FloorDb, table_id: str) -> dict[int, str]:
    with floor_db.admin() as conn:
        return {
            int(seq): str(part)
            for seq, part in conn.execute(
                "SELECT seq, tableoid::regclass::text FROM floor.journal_rows WHERE table_id = %s",
                (table_id,),
            )
        }


def test_partitions_are_made_ahead_and_rows_land_in_their_gaming_day(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    with floor_db.admin() as conn:
        # the current gaming day (06:00 UTC, the floor's default) and three after it
        today = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=6)).date()
        made = {
            row[0]
            for row in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'floor.journal_rows'::regclass"
            )
        }
        for ahead in range(-1, 4):
            assert f"journal_rows_{today + datetime.timedelta(days=ahead):%Y%m%d}" in made
        assert ensure_days(conn, DAY - datetime.timedelta(days=1), 3) == 3
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = tmp_path / "j.sqlite"
    _journal_at(
        journal,
        [
            "2026-03-14T05:59:58.000001+00:00",
            "2026-03-14T05:59:59.999999+00:00",  # the gaming day of the 13th
            "2026-03-14T06:00:00+00:00",  # the 14th's first instant (no microseconds)
            "2026-03-15T05:59:59.5+00:00",
            "1999-01-01T00:00:00.000000+00:00",  # a clock far off: the default partition
        ],
    )
    ship_until_caught_up(table_id, journal, config)
    assert _where(floor_db, table_id) == {
        1: "floor.journal_rows_20260313",
        2: "floor.journal_rows_20260313",
        3: "floor.journal_rows_20260314",
        4: "floor.journal_rows_20260314",
        5: "floor.journal_rows_default",
    }
    # the hashed text comes back exactly, the non-standard forms included
    with psycopg.connect(floor_db.admin_dsn, autocommit=True) as conn:
        assert verify_table(conn, table_id).ok


def test_retire_refuses_an_unverified_day_then_archives_it_proved(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = tmp_path / "j.sqlite"
    times = [f"2026-03-14T07:00:{n:02d}.000000+00:00" for n in range(20)]
    times += [f"2026-03-15T07:00:{n:02d}.000000+00:00" for n in range(10)]
    with floor_db.admin() as conn:
        ensure_days(conn, DAY, 2)
    _journal_at(journal, times)
    ship_until_caught_up(table_id, journal, config)
    archive = tmp_path / "archive"
    with psycopg.connect(floor_db.admin_dsn, autocommit=True) as conn:
        with pytest.raises(RetireRefused, match=f"not verified for {table_id}"):
            retire_day(conn, DAY, archive)
        assert not archive.exists()
        assert len(_where(floor_db, table_id)) == 30  # nothing changed
        assert verify_table(conn, table_id, record=True).ok
        done = retire_day(conn, DAY, archive)
        assert done.rows == 20
        data = done.archive.read_bytes()
        manifest = json.loads(done.manifest.read_text())
        assert manifest["sha256"] == hashlib.sha256(data).hexdigest() == done.sha256
        assert manifest["tables"][table_id]["last_seq"] == 20
        assert set(_where(floor_db, table_id)) == set(range(21, 31))
        gone = conn.execute("SELECT to_regclass('floor.journal_rows_20260314')").fetchone()
        assert gone == (None,)
        assert ensure_days(conn, DAY, 1) == 0  # a retired day is not made again
        # verify starts from its mark: the rows after it, not from row 1 (retired)
        again = verify_table(conn, table_id)
        assert again.ok and "0 rows after row 30 (verified before)" in again.message
        assert not verify_table(conn, table_id, from_start=True).ok  # rows 1-20 retired


def test_an_old_unpartitioned_floor_is_refused_then_migrated(postgres: ThrowawayPostgres) -> None:
    name = f"floor_{uuid.uuid4().hex[:10]}"
    postgres.create_database(name)
    table_id = unique_table_id()
    prev = GENESIS_HASH
    rows = []
    for seq in range(1, 6):
        at = f"2026-03-14T08:00:0{seq}.000000+00:00"
        digest = row_hash(prev, seq, "event", 1, at, "{}")
        rows.append((table_id, seq, "event", 1, at, "{}", prev, digest))
        prev = digest
    with psycopg.connect(postgres.admin_dsn(name), autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA floor; CREATE TABLE floor.tables (table_id text PRIMARY KEY,"
            " writer_role name NOT NULL UNIQUE, registered_at timestamptz DEFAULT now());"
            " CREATE TABLE floor.journal_rows (table_id text, seq bigint, kind text,"
            " round bigint, recorded_at text, body text, prev_hash text, hash text,"
            " columns jsonb NOT NULL DEFAULT '{}', shipped_at timestamptz DEFAULT now(),"
            " PRIMARY KEY (table_id, seq))"
        )
        conn.execute(
            "INSERT INTO floor.tables VALUES (%s, %s)", (table_id, f"tablectl_table_{table_id}")
        )
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO floor.journal_rows (table_id, seq, kind, round, recorded_at, body,"
                " prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
        with pytest.raises(FloorSetupError, match="ALTER SCHEMA floor RENAME TO floor_v1"):
            create_schema(conn)
        conn.execute("ALTER SCHEMA floor RENAME TO floor_v1")
        create_schema(conn)
        assert migrate_from(conn, "floor_v1") == {table_id: 5}
        result = verify_table(conn, table_id, from_start=True)
        assert result.ok, result.message
        assert migrate_from(conn, "floor_v1") == {table_id: 0}  # again: nothing twice
