"""Helpers of the floor tests: a database on the session's server, tables provisioned on it."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tablectl.controller.common.config import FloorConfig
from tablectl.controller.floor.schema import RECORDED_AT_SQL, add_table, writer_role
from tablectl.controller.record.journal import GENESIS_HASH, row_hash
from tablectl.controller.record.merkle import stored_index
from tablectl.simulators.pgserver import ThrowawayPostgres
from tests.journal.sealed import rewrite_log


def unique_table_id(prefix: str = "t") -> str:
    """Roles are cluster-wide: every test's tables get ids of their own."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@dataclass
class FloorDb:
    server: ThrowawayPostgres
    name: str
    passfile: Path

    @property
    def admin_dsn(self) -> str:
        return self.server.admin_dsn(self.name)

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.admin_dsn, autocommit=True)

    def provision(self, table_id: str) -> FloorConfig:
        """Register the table and its INSERT-only role; its password into the passfile."""
        with self.admin() as conn:
            add_table(conn, table_id, passfile=self.passfile, dbname=self.name)
        return self.config(table_id)

    def config(self, table_id: str, **extra: Any) -> FloorConfig:
        return FloorConfig(
            dsn=self.server.table_dsn(self.name, writer_role(table_id)),
            passfile=self.passfile,
            **extra,
        )

    def as_writer(self, table_id: str) -> psycopg.Connection[Any]:
        """A real login as the table's role, over TCP, the password from the passfile."""
        return psycopg.connect(
            self.server.table_dsn(self.name, writer_role(table_id)),
            passfile=str(self.passfile),
            autocommit=True,
        )

    def floor_rows(self, table_id: str) -> list[tuple[Any, ...]]:
        with self.admin() as conn:
            return list(
                conn.execute(
                    f"SELECT seq, kind, round, {RECORDED_AT_SQL}, body, prev_hash, hash"
                    " FROM floor.journal_rows WHERE table_id = %s ORDER BY seq",
                    (table_id,),
                )
            )


def local_rows(path: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return list(
            db.execute(
                "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
                " ORDER BY seq"
            )
        )
    finally:
        db.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def truncate_journal(path: Path, keep: int) -> None:
    """What an intruder does around the triggers: drop them, cut the tail."""
    db = sqlite3.connect(path)
    try:
        db.execute("DROP TRIGGER journal_no_delete")
        db.execute("DELETE FROM journal WHERE seq > ?", (keep,))
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'merkle'").fetchone():
            db.execute("DROP TRIGGER IF EXISTS merkle_no_delete")  # and the log's nodes past it
            db.execute("DELETE FROM merkle WHERE idx >= ?", (stored_index(0, keep),))
        db.commit()
    finally:
        db.close()


def rewrite_journal(path: Path, seq: int, new_body: str) -> None:
    """A consistent rewrite: one body changed and every hash from there recomputed."""
    db = sqlite3.connect(path)
    try:
        db.execute("DROP TRIGGER journal_no_update")
        rows = list(
            db.execute(
                "SELECT seq, kind, round, recorded_at, body FROM journal WHERE seq >= ?"
                " ORDER BY seq",
                (seq,),
            )
        )
        prev_row = db.execute("SELECT hash FROM journal WHERE seq = ?", (seq - 1,)).fetchone()
        prev = prev_row[0] if prev_row else GENESIS_HASH
        for number, kind, rnd, at, body in rows:
            body = new_body if number == seq else body
            digest = row_hash(prev, number, kind, rnd, at, body)
            db.execute(
                "UPDATE journal SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                (body, prev, digest, number),
            )
            prev = digest
        # a careful intruder recomputes the Merkle log too (`journal verify` checks it)
        rewrite_log(
            db,
            [
                list(r)
                for r in db.execute(
                    "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
                    " ORDER BY seq"
                )
            ],
        )
        db.commit()
    finally:
        db.close()


def append_chain(path: Path, count: int, *, kind: str = "event") -> tuple[int, str]:
    """Append `count` rows continuing the chain across `path`'s segments (as a journal split
    by gaming day continues it); creates the live file when missing. Returns its head."""
    from tablectl.controller.floor.local import LocalJournal
    from tablectl.controller.record.journal import Journal

    local = LocalJournal(path)
    last = local.last_seq()
    prev = (local.hash_at(last) or GENESIS_HASH) if last else GENESIS_HASH
    local.close()
    if not path.exists():
        Journal(path).close()
    db = sqlite3.connect(path)
    try:
        for seq in range(last + 1, last + count + 1):
            body = f'{{"seq_note":{seq},"type":"card_drawn"}}'
            at = f"2026-11-23T10:00:00.{seq:06d}+00:00"
            digest = row_hash(prev, seq, kind, 1, at, body)
            db.execute(
                "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash)"
                " VALUES (?, ?, 1, ?, ?, ?, ?)",
                (seq, kind, at, body, prev, digest),
            )
            prev = digest
        db.commit()
    finally:
        db.close()
    return last + count, prev


def roll_over(path: Path, day: str) -> Path:
    """Close the live file as a segment beside it (`STEM-DAY-FIRSTSEQ.sqlite`), as the
    journal's gaming-day roll-over does; the next rows go to a new live file."""
    db = sqlite3.connect(path)
    first = db.execute("SELECT min(seq) FROM journal").fetchone()[0]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    closed = path.with_name(f"{path.stem}-{day}-{first:012d}{path.suffix}")
    path.replace(closed)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return closed


def ship_until_caught_up(table_id: str, journal: Path, config: FloorConfig) -> None:
    """A shipper on the journal until the floor holds every row, then stopped."""
    from tablectl.controller.floor.shipper import FloorShipper

    shipper = FloorShipper(table_id, journal, config, publish_metrics=False)
    shipper.start()
    try:
        wait_for(lambda: shipper.head_known and shipper.rows_behind == 0, 20, "the rows shipped")
    finally:
        shipper.stop()


def shipped_journal(floor_db: FloorDb, directory: Path, rows: int, game: str) -> tuple[str, Path]:
    """A new table whose journal of `rows` rows (a table row, then events) is on the floor."""
    from tablectl.controller.record.journal import Journal

    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = Journal(directory / f"{table_id}.sqlite")
    journal.append("table", {"type": "table", "game": game}, durable=True)
    for index in range(rows - 1):
        journal.append("event", {"type": "card_drawn", "index": index}, round_number=index // 10)
    journal.close()
    ship_until_caught_up(table_id, journal.path, config)
    return table_id, journal.path
