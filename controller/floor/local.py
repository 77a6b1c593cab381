"""The table's local journal as the floor reads it: the live file and its closed segments.

A journal split by gaming day (docs/journal.md) keeps the live file at its configured path and
renames each closed segment beside it (`STEM-DAY-FIRSTSEQ.sqlite`). Rows are looked up by seq
in whichever file holds them, and the live file is reopened when it was replaced (a roll-over
renames it away under an open connection). Every column of every row is read (`SELECT *`),
so a column the journal adds later is shipped without a change here. Read-only throughout.
"""

from __future__ import annotations

import datetime
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.controller.floor.schema import CHAIN_COLUMNS
from tablectl.controller.record.journal import closed_segment_first_seq

#: a journal row, every column by name (row["seq"]) and in order; made by sqlite3 itself, in
#: C (a shipper reads every row it sends: a dict a row cost it a third of its time)
Row = sqlite3.Row


#: the length of a recorded_at in the journal's standard form, YYYY-MM-DDTHH:MM:SS.ffffff+00:00
_STANDARD_TIME_LENGTH = 32


def _is_standard_text(text: str) -> bool:
    """Whether a recorded_at that fromisoformat read is in the journal's standard form
    (YYYY-MM-DDTHH:MM:SS.ffffff+00:00): its separators in place (fromisoformat checked the
    digits between them), read without formatting the time back (a shipper does this for
    every row it sends)."""
    return (
        len(text) == _STANDARD_TIME_LENGTH
        and text.endswith("+00:00")
        and text[4] == "-"
        and text[7] == "-"
        and text[10] == "T"
        and text[13] == ":"
        and text[16] == ":"
        and text[19] == "."
    )


def floor_time(recorded_at: str) -> tuple[datetime.datetime, str | None]:
    """The journal's recorded_at as the floor keeps it: a UTC time, and the journal's text
    only when it is not that time's standard form (schema.RECORDED_AT_SQL rebuilds it)."""
    try:
        moment = datetime.datetime.fromisoformat(recorded_at)
    except ValueError:
        return datetime.datetime.now(datetime.UTC), recorded_at  # kept as written
    if _is_standard_text(recorded_at):
        return moment, None  # the journal's own form (the fast path: no formatting back)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    moment = moment.astimezone(datetime.UTC)
    standard = moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
    return moment, (None if standard == recorded_at else recorded_at)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, check_same_thread=False)
    db.execute("SELECT 1 FROM journal LIMIT 1")
    return db


def _rows_after(db: sqlite3.Connection, seq: int, limit: int) -> list[Row]:
    cursor = db.cursor()
    cursor.row_factory = sqlite3.Row
    return cursor.execute(
        "SELECT * FROM journal WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
    ).fetchall()


def _hash_at(db: sqlite3.Connection, seq: int) -> str | None:
    row = db.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    return str(row[0]) if row is not None else None


def _min_seq(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT min(seq) FROM journal").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _max_seq(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT max(seq) FROM journal").fetchone()
    return int(row[0]) if row and row[0] is not None else None


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

    def _segment_holding(self, seq: int) -> Path | None:
        """The closed segment whose rows begin at or before `seq` and latest: the one that holds
        it, told by its name (`STEM-DAY-FIRSTSEQ`) without opening any (None: no name says)."""
        best: tuple[int, Path] | None = None
        for segment in self.closed_segments():
            first = closed_segment_first_seq(segment)
            if first is not None and first <= seq and (best is None or first > best[0]):
                best = (first, segment)
        return best[1] if best is not None else None

    def _files(self) -> Iterator[sqlite3.Connection]:
        """The live file first (where the newest rows are), then closed segments, newest first:
        the slow walk, for what the names and the live file's range do not settle (a gap)."""
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

        Only the file that can hold row `seq + 1` is read: the live file when it begins at or
        before it (then, with nothing after `seq` there, nothing newer exists anywhere: the
        idle poll of a caught-up shipper opens no file), else the closed segment its name
        says. When no file continues right after `seq` (rows cut locally), every file is
        looked at and the earliest rows after it are returned all the same: the floor refuses
        the gap, loudly, rather than wait forever.
        """
        live = self._live_db()
        live_first: int | None = None
        if live is not None:
            rows = _rows_after(live, seq, limit)
            if rows and rows[0]["seq"] == seq + 1:
                return rows
            live_first = _min_seq(live)
            if live_first is not None and live_first <= seq + 1:
                if not rows:
                    return []  # caught up: closed segments hold only rows before the live one
                return rows  # a hole inside the live file: its earliest rows after `seq`
        segment = self._segment_holding(seq + 1)
        if segment is not None:
            db = _connect(segment)
            try:
                rows = _rows_after(db, seq, limit)
            finally:
                db.close()
            if rows and rows[0]["seq"] == seq + 1:
                return rows
            newer = self._a_segment_begins_after(seq + 1)
            if not rows and live_first is None and not newer:
                return []  # caught up in the instant of a roll-over (no live rows yet)
        return self._earliest_rows_after(seq, limit)

    def _a_segment_begins_after(self, seq: int) -> bool:
        """Whether a closed segment's name says it begins after `seq`."""
        for segment in self.closed_segments():
            first = closed_segment_first_seq(segment)
            if first is None or first > seq:
                return True
        return False

    def _earliest_rows_after(self, seq: int, limit: int) -> list[Row]:
        """Every file looked at: the rows right after `seq`, else the earliest after it."""
        earliest: list[Row] = []
        for db in self._files():
            rows = _rows_after(db, seq, limit)
            if rows and rows[0]["seq"] == seq + 1:
                return rows
            if rows and (not earliest or rows[0]["seq"] < earliest[0]["seq"]):
                earliest = rows
        return earliest

    def hash_at(self, seq: int) -> str | None:
        """The hash of row `seq`: from the live file when it begins at or before `seq`, else
        from the closed segment its name says; every file only when those do not hold it."""
        live = self._live_db()
        if live is not None:
            found = _hash_at(live, seq)
            if found is not None:
                return found
            first = _min_seq(live)
            if first is not None and first <= seq:
                return None  # not in the live file, and no older file holds rows past it: cut
        segment = self._segment_holding(seq)
        if segment is not None:
            db = _connect(segment)
            try:
                found = _hash_at(db, seq)
            finally:
                db.close()
            if found is not None:
                return found
        for db in self._files():
            found = _hash_at(db, seq)
            if found is not None:
                return found
        return None

    def last_seq(self) -> int:
        live = self._live_db()
        last = _max_seq(live) if live is not None else None
        if last is not None:
            return last
        for segment in reversed(self.closed_segments()):
            db = _connect(segment)
            try:
                last = _max_seq(db)
            finally:
                db.close()
            if last is not None:
                return last
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
