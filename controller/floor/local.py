"""The table's local journal as the floor reads it: the live file and its closed segments.

A journal split by gaming day (docs/journal.md) keeps the live file at its configured path and
renames each closed segment beside it (`STEM-DAY-FIRSTSEQ.sqlite`). Rows are looked up by seq
in whichever file holds them, and the live file is reopened when it was replaced (a roll-over
renames it away under an open connection). Every column of every row is read (`SELECT *`),
so a column the journal adds later is shipped without a change here. Read-only throughout.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.controller.floor.schema import CHAIN_COLUMNS

Row = dict[str, Any]


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, check_same_thread=False)
    db.execute("SELECT 1 FROM journal LIMIT 1")
    return db


class LocalJournal:
    """Read-only access by seq to a table's journal files; one thread at a time."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._live: sqlite3.Connection | None = None
        self._live_inode: int | None = None

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    def _live_db(self) -> sqlite3.Connection | None:
        """The live file, reopened when it was replaced; None in the instant of a roll-over
        when it was renamed away and its successor is not there yet."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            self.close()
            return None
        if self._live is None or inode != self._live_inode:
            self.close()
            self._live = _connect(self.path)
            self._live_inode = inode
        return self._live

    def closed_segments(self) -> list[Path]:
        """Closed segments beside the live file, oldest first (their names sort by day, seq)."""
        return sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"))

    def _files(self) -> Iterator[sqlite3.Connection]:
        """The live file first (where the newest rows are), then closed segments, newest first."""
        live = self._live_db()
        if live is not None:
            yield live
        for segment in reversed(self.closed_segments()):
            db = _connect(segment)
            try:
                yield db
            finally:
                db.close()

    def rows_after(self, seq: int, limit: int) -> list[Row]:
        """Up to `limit` rows after `seq`, every column by name, from the file that has them.

        When no file continues right after `seq` (rows cut locally), the earliest rows after it
        are returned all the same: the floor refuses the gap, loudly, rather than wait forever.
        """
        earliest: list[Row] = []
        for db in self._files():
            cursor = db.execute(
                "SELECT * FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
            )
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, raw, strict=True)) for raw in cursor]
            if rows and rows[0]["seq"] == seq + 1:
                return rows
            if rows and (not earliest or rows[0]["seq"] < earliest[0]["seq"]):
                earliest = rows
        return earliest

    def hash_at(self, seq: int) -> str | None:
        for db in self._files():
            row = db.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
            if row is not None:
                return str(row[0])
        return None

    def last_seq(self) -> int:
        live = self._live_db()
        row = live.execute("SELECT max(seq) FROM journal").fetchone() if live else None
        if row and row[0] is not None:
            return int(row[0])
        for segment in reversed(self.closed_segments()):
            db = _connect(segment)
            try:
                found = db.execute("SELECT max(seq) FROM journal").fetchone()
            finally:
                db.close()
            if found and found[0] is not None:
                return int(found[0])
        return 0

    def chain_rows(self) -> Iterator[tuple[Any, ...]]:
        """Every row's chain columns in seq order, across segments (streamed)."""
        columns = ", ".join(CHAIN_COLUMNS)
        for path in [*self.closed_segments(), *([self.path] if self.path.exists() else [])]:
            db = _connect(path)
            try:
                yield from db.execute(f"SELECT {columns} FROM journal ORDER BY seq")
            finally:
                db.close()


def journal_chain_rows(path: Path) -> Iterator[tuple[Any, ...]]:
    """Chain columns in seq order from a live journal (with its closed segments beside it) or
    from a directory of segments (a backup, an archive): what `floor compare` walks."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such journal file or directory")
    if not path.is_dir():
        yield from LocalJournal(path).chain_rows()
        return
    files = []
    for file in sorted(path.glob("*.sqlite")):
        db = _connect(file)
        try:
            first = db.execute("SELECT min(seq) FROM journal").fetchone()[0]
        finally:
            db.close()
        files.append((first if first is not None else 0, file))
    columns = ", ".join(CHAIN_COLUMNS)
    for _, file in sorted(files):
        db = _connect(file)
        try:
            yield from db.execute(f"SELECT {columns} FROM journal ORDER BY seq")
        finally:
            db.close()
