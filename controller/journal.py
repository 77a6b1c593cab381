"""The tamper-evident journal: every event and decision, append-only, hash-chained, in SQLite.

Each row's hash is SHA-256 over the previous row's hash and the canonical JSON of the row
(seq, kind, round, recorded_at, body), so editing, deleting or reordering any row breaks the
chain at that row; `verify_journal` names the first such row. Triggers refuse UPDATE and
DELETE through SQLite itself. A row that precedes a device command is appended with
`durable=True`: committed with synchronous=FULL (fsync) before `append` returns. Other rows are
group-committed: batched and flushed by a short timer on the running asyncio loop, when the
batch is full, on `flush()`, and by the next durable append. The file and its -wal/-shm are
mode 0600: the journal holds face-down cards and is for the service user only (docs/rules.md H7).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import json
import os
import sqlite3
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tablectl.controller import metrics
from tablectl.controller.engine import Engine
from tablectl.controller.logs import get_logger
from tablectl.controller.table import TableSpec

GENESIS_HASH = "0" * 64
ROW_KINDS = ("table", "event", "decision", "note")
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    round INTEGER,
    recorded_at TEXT NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only: DELETE refused'); END;
"""


_INSERT = (
    "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


# SQLite's -wal layout (sqlite.org/fileformat2.html#walformat): a 32-byte header, then one
# 24-byte frame header and one page per frame; a commit may run past the checkpoint threshold.
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER = 24
WAL_SLACK_FRAMES = 128
#: Free space the -wal preallocation leaves untouched; below it the -wal is not preallocated.
WAL_PREALLOCATION_RESERVE = 32 * 1024 * 1024


class JournalError(RuntimeError):
    """The journal cannot be opened or written; the message says which file and why."""


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


# json's own string encoder (the C one when available): what canonical_json writes for a str.
_json_string: Callable[[str], str] = json.encoder.encode_basestring


def row_hash(
    prev_hash: str, seq: int, kind: str, round_number: int | None, recorded_at: str, body: str
) -> str:
    """SHA-256 (hex) of the previous hash followed by the row's canonical JSON."""
    if type(seq) is int and (round_number is None or type(round_number) is int):
        # The canonical JSON of the row, written out in sorted key order (it runs for every
        # row appended and verified); tests/unit/test_hot_path.py holds it to
        # canonical_json of the same dict for any content.
        content = "".join(
            (
                '{"body":',
                _json_string(body),
                ',"kind":',
                _json_string(kind),
                ',"recorded_at":',
                _json_string(recorded_at),
                ',"round":',
                "null" if round_number is None else int.__repr__(round_number),
                ',"seq":',
                int.__repr__(seq),
                "}",
            )
        )
    else:
        content = canonical_json(
            {
                "seq": seq,
                "kind": kind,
                "round": round_number,
                "recorded_at": recorded_at,
                "body": body,
            }
        )
    return hashlib.sha256((prev_hash + content).encode()).hexdigest()


@dataclass(frozen=True)
class JournalRow:
    seq: int
    kind: str
    round: int | None
    recorded_at: str
    body: dict[str, Any]
    prev_hash: str
    hash: str


def _make_private(path: Path) -> None:
    if path.exists() and stat.S_IMODE(path.stat().st_mode) != 0o600:
        os.chmod(path, 0o600)


class Journal:
    """An open journal; one writer (the table service, on its event loop thread)."""

    def __init__(
        self, path: str | Path, *, flush_interval: float = 0.005, max_batch: int = 512
    ) -> None:
        self.path = Path(path)
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._log = get_logger("journal", path=str(self.path))
        #: Why a commit failed; from then on every append and flush is refused (fail-stop: the
        #: rows of a failed commit must never be written later as if they had been acted on).
        self.failure: JournalError | None = None
        #: Told once of the first failed commit (the daemon stops dealing), whoever committed:
        #: a durable append, the group-commit timer, or close().
        self.on_failure: Callable[[JournalError], None] | None = None
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            # Create the file 0600 before SQLite opens it; SQLite gives -wal and -shm the same mode.
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(descriptor)
            _make_private(self.path)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except (OSError, sqlite3.Error) as error:
            raise JournalError(f"{self.path}: cannot open the journal: {error}") from error
        for suffix in ("-wal", "-shm"):
            _make_private(Path(f"{self.path}{suffix}"))
        self._preallocate_wal()
        last = self._db.execute(
            "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        self._last_seq: int = last[0] if last else 0
        self._last_hash: str = last[1] if last else GENESIS_HASH
        self._pending: list[tuple[int, str, int | None, str, str, str, str]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._side_files_checked = False
        # Told the last committed seq after each commit (the floor shipper wakes on it; it
        # reads the rows from the file itself, so a listener never holds the table up).
        self.commit_listeners: list[Callable[[int], None]] = []
        # The head (last seq and hash) goes to the system log at open and close: an anchor
        # outside the file, against which a truncated or wholly rewritten chain shows.
        self._log.info("journal_opened", last_seq=self._last_seq, head=self._last_hash)

    def _preallocate_wal(self) -> None:
        """Give the -wal file, once, the size it reaches before SQLite checkpoints it.

        A commit that appends to the -wal grows the file, and the fsync of a grown file must
        also commit its new size through the filesystem's own journal: on ext4 that is about
        1.7x the cost of a commit that overwrites blocks already there (measured: ~350 vs ~205
        us). SQLite reuses the -wal from its start after each checkpoint and never shrinks it
        (journal_size_limit is -1), so after the first checkpoint every commit overwrites;
        zero-filling it up front puts the first thousand commits after a start in that regime
        too. Safe by SQLite's design: a -wal is read only up to its last frame whose salt and
        checksum are valid, and zeroes are neither. Durability is unchanged (synchronous=FULL).
        """
        wal = Path(f"{self.path}-wal")
        try:
            page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
            frames = int(self._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            target = WAL_HEADER_BYTES + (frames + WAL_SLACK_FRAMES) * (page_size + WAL_FRAME_HEADER)
            descriptor = os.open(wal, os.O_WRONLY)
        except (OSError, sqlite3.Error, TypeError, ValueError):
            return  # no -wal yet, or SQLite says nothing usable: commits simply grow it
        size_before = 0
        try:
            size = size_before = os.fstat(descriptor).st_size
            if size >= target or frames <= 0:
                return
            filesystem = os.statvfs(descriptor)
            free = filesystem.f_bavail * filesystem.f_frsize
            if free < (target - size) + WAL_PREALLOCATION_RESERVE:
                # Never fill the disk preparing files: commits simply grow the -wal instead.
                self._log.warning(
                    "wal_preallocation_skipped",
                    free_bytes=free,
                    needed_bytes=target - size + WAL_PREALLOCATION_RESERVE,
                )
                return
            chunk = bytes(min(1 << 20, target - size))
            while size < target:
                size += os.pwrite(descriptor, chunk[: target - size], size)
            os.fsync(descriptor)
        except OSError as error:
            self._log.warning("wal_preallocation_failed", error=str(error))
            # Give back what was written: a failed preallocation must not leave the disk full.
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, size_before)
        finally:
            os.close(descriptor)

    @property
    def last_seq(self) -> int:
        """The sequence number of the last row appended (committed or pending)."""
        return self._last_seq

    def size_on_disk(self) -> int:
        """Bytes the journal takes on disk: the database, its -wal (preallocated) and -shm."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_blocks * 512
        return total

    def logical_size(self) -> int:
        """Bytes of the database's pages, committed rows in the -wal included (0 if unknown)."""
        try:
            pages = int(self._db.execute("PRAGMA page_count").fetchone()[0])
            page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        except (sqlite3.Error, TypeError, ValueError):
            return 0
        return pages * page_size

    @property
    def pending(self) -> int:
        """Rows appended but not yet committed."""
        return len(self._pending)

    def append(
        self,
        kind: str,
        body: Mapping[str, Any],
        *,
        round_number: int | None = None,
        durable: bool = False,
    ) -> int:
        """Append one row and return its seq; with durable=True it is fsynced before returning."""
        if self.failure is not None:
            raise JournalError(f"{self.path}: the journal failed earlier: {self.failure}")
        if kind not in ROW_KINDS:
            raise ValueError(f"journal row kind {kind!r} is not one of {ROW_KINDS}")
        seq = self._last_seq + 1
        recorded_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
        body_text = canonical_json(dict(body))
        digest = row_hash(self._last_hash, seq, kind, round_number, recorded_at, body_text)
        self._pending.append(
            (seq, kind, round_number, recorded_at, body_text, self._last_hash, digest)
        )
        self._last_seq, self._last_hash = seq, digest
        if durable or len(self._pending) >= self.max_batch:
            self.flush()
        elif self._timer is None:
            self._schedule_flush()
        return seq

    def _schedule_flush(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: rows wait for max_batch, flush() or close()
        self._timer = loop.call_later(self.flush_interval, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        with contextlib.suppress(JournalError):  # on_failure was told; nothing to raise it to
            self.flush()

    def flush(self) -> None:
        """Commit every pending row in one transaction (synchronous=FULL: fsync on commit).

        An armed timer is left to fire (it finds nothing, or rows appended since, which it
        commits sooner than flush_interval): cancelling and re-arming it around every durable
        commit cost more than the commit's own Python work.
        """
        if self.failure is not None:
            raise JournalError(f"{self.path}: the journal failed earlier: {self.failure}")
        if not self._pending:
            return
        started = time.perf_counter()
        try:
            if len(self._pending) == 1:
                # one row: one statement, its own transaction (autocommit), fsynced alike
                self._db.execute(_INSERT, self._pending[0])
            else:
                self._db.execute("BEGIN")
                self._db.executemany(_INSERT, self._pending)
                self._db.execute("COMMIT")
        except sqlite3.Error as error:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            self._fail(JournalError(f"{self.path}: journal write failed: {error}"))
            assert self.failure is not None
            raise self.failure from error
        self._pending.clear()
        metrics.JOURNAL_WRITE_SECONDS.observe(time.perf_counter() - started)
        for listener in self.commit_listeners:
            listener(self._last_seq)
        if not self._side_files_checked:
            # The -wal appears with the first commit and lives as long as this connection.
            for suffix in ("-wal", "-shm"):
                _make_private(Path(f"{self.path}{suffix}"))
            self._side_files_checked = True

    def _fail(self, error: JournalError) -> None:
        """The first failed commit: refuse everything from now on; tell the owner once."""
        self.failure = error
        lost = len(self._pending)
        self._pending.clear()  # never committed later as if nothing had happened
        metrics.JOURNAL_WRITE_ERRORS.inc()
        self._log.error("journal_write_failed", error=str(error), rows_not_written=lost)
        if self.on_failure is not None:
            self.on_failure(error)

    def close(self) -> None:
        """Flush pending rows and close the file (after a failure: close without writing)."""
        with contextlib.suppress(JournalError):
            self.flush()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._db.close()
        self._log.info("journal_closed", last_seq=self._last_seq, head=self._last_hash)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_rows(path: str | Path) -> Iterator[JournalRow]:
    """Every committed row in seq order (read-only; the file must exist)."""
    yield from (_to_row(raw) for raw in _raw_rows(path))


def _connect_read_only(path: str | Path) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise JournalError(f"{path}: no such journal file")
    try:
        db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
        db.execute("SELECT 1 FROM journal LIMIT 1")
    except sqlite3.Error as error:
        raise JournalError(f"{path}: not a tablectl journal: {error}") from error
    return db


_RawRow = tuple[int, str, int | None, str, str, str, str]


def _raw_rows(path: str | Path) -> Iterator[_RawRow]:
    db = _connect_read_only(path)
    try:
        yield from db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash"
            " FROM journal ORDER BY rowid"
        )
    finally:
        db.close()


def _to_row(raw: _RawRow) -> JournalRow:
    seq, kind, round_number, recorded_at, body, prev_hash, digest = raw
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {"unparseable": body}
    return JournalRow(seq, kind, round_number, recorded_at, parsed, prev_hash, digest)


# The floor store (controller/floor) reads the same rows back from PostgreSQL.
RawRow = _RawRow
parse_row = _to_row


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    rows: int
    message: str
    first_bad_seq: int | None = None


def verify_journal(path: str | Path) -> VerifyResult:
    """Walk the chain from the start; report the first row edited, deleted or reordered.

    Rows are read in physical (rowid = seq) order; a seq out of order, a gap, a row whose
    stored hash does not match its content, or a row whose prev_hash does not match the row
    before it each stop the walk with a message naming the row.
    """
    db = _connect_read_only(path)
    try:
        highest = int(db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    finally:
        db.close()
    return verify_chain(_raw_rows(path), highest)


def verify_chain(rows: Iterable[RawRow], highest: int) -> VerifyResult:
    """The chain check over stored rows in storage order, wherever they are stored.

    One implementation for the local journal and the floor's copy (`tablectl floor verify`):
    `highest` is the largest seq held, used to name where a moved row came from.
    """
    expected_seq = 1
    prev_hash = GENESIS_HASH
    count = 0
    for seq, kind, round_number, recorded_at, body, stored_prev, stored_hash in rows:
        if seq > expected_seq:
            missing = (
                f"row {expected_seq}"
                if seq == expected_seq + 1
                else f"rows {expected_seq}-{seq - 1}"
            )
            return VerifyResult(
                False,
                count,
                f"{missing} deleted: the chain jumps from {expected_seq - 1} to {seq}",
                expected_seq,
            )
        if seq < expected_seq:
            return VerifyResult(
                False, count, f"row {seq} reordered: found after row {expected_seq - 1}", seq
            )
        recomputed = row_hash(stored_prev, seq, kind, round_number, recorded_at, body)
        if recomputed != stored_hash:
            original = _original_seq(
                highest, stored_prev, kind, round_number, recorded_at, body, stored_hash
            )
            if original is not None:
                return VerifyResult(
                    False, count, f"row {seq} reordered: it holds row {original}'s content", seq
                )
            return VerifyResult(
                False, count, f"row {seq} edited: its content does not match its hash", seq
            )
        if stored_prev != prev_hash:
            return VerifyResult(
                False,
                count,
                f"row {seq} does not follow row {seq - 1}: a row before it was deleted, "
                "replaced or reordered (the chain is broken here)",
                seq,
            )
        prev_hash = stored_hash
        expected_seq += 1
        count += 1
    return VerifyResult(True, count, f"intact: {count} rows, last hash {prev_hash}")


def _original_seq(
    highest: int,
    prev_hash: str,
    kind: str,
    round_number: int | None,
    recorded_at: str,
    body: str,
    digest: str,
) -> int | None:
    """The seq under which this unedited content was hashed, when it was moved (renumbered)."""
    for candidate in range(1, highest + 1):
        if row_hash(prev_hash, candidate, kind, round_number, recorded_at, body) == digest:
            return candidate
    return None


# --- dispute reconstruction (2C.6(m), 40.10(g)) -----------------------------------------------

# A "note" row the table service journals for every draw of the engine's random source (AP's
# computer-drawn starting position, A1), so that a replay draws the same numbers:
# {"type": "random_draw", "bound": n, "value": v}
RANDOM_DRAW = "random_draw"


class EngineLike(Protocol):
    """What reconstruction needs of `controller.engine.Engine` (engine-api.md)."""

    @property
    def round_number(self) -> int: ...

    def handle(self, event: Mapping[str, Any], at: int) -> list[Any]: ...

    def dealt_cards(self) -> list[dict[str, Any]]: ...


EngineFactory = Callable[[Mapping[str, Any], Callable[[int], int]], EngineLike]


def engine_from_table_row(table: Mapping[str, Any], random_source: Callable[[int], int]) -> Engine:
    """A fresh engine for the journal's table row (`{"type": "table", "game", "options"}`)."""
    spec = TableSpec.from_dict({"game": table["game"], "options": dict(table.get("options", {}))})
    return Engine(spec, random_source=random_source)


class ReplayedDraws:
    """Feeds the journaled random draws back to the engine, in order, each for its bound."""

    def __init__(self, draws: Sequence[Mapping[str, Any]]) -> None:
        self._draws = deque(draws)  # taken from the front: a deque, not list.pop(0)

    def __len__(self) -> int:
        return len(self._draws)

    def __call__(self, bound: int) -> int:
        if not self._draws:
            raise JournalError("the engine asked for a random draw the journal does not hold")
        draw = self._draws.popleft()
        if draw.get("bound") != bound:
            raise JournalError(
                f"journaled random draw was for bound {draw.get('bound')}, the engine asks {bound}"
            )
        return int(draw["value"])


def round_cards(
    path: str | Path, round_number: int, engine_factory: EngineFactory = engine_from_table_row
) -> list[dict[str, Any]]:
    """The round's cards in the order dealt, rebuilt by replaying the journaled events.

    Each card is `{"card", "to", "face_up"}` (Engine.dealt_cards()). Face-down cards are
    included: this reads the access-controlled journal for a dispute, never a log or status.
    """
    return replay_round(read_rows(path), round_number, engine_factory, where=str(path))


def replay_round(
    journal_rows: Iterable[JournalRow],
    round_number: int,
    engine_factory: EngineFactory = engine_from_table_row,
    *,
    where: str = "the journal",
) -> list[dict[str, Any]]:
    """`round_cards` over rows from any store (the local file or the floor's copy)."""
    path = where
    rows = list(journal_rows)
    tables = [row for row in rows if row.kind == "table"]
    if not tables:
        raise JournalError(f"{path}: no table row: the journal does not say which game it holds")
    draws = [r.body for r in rows if r.kind == "note" and r.body.get("type") == RANDOM_DRAW]
    engine = engine_factory(tables[0].body, ReplayedDraws(draws))
    snapshot: list[dict[str, Any]] | None = None
    for row in rows:
        if row.kind != "event":
            continue
        engine.handle(row.body, row.seq)
        if engine.round_number == round_number:
            cards = [dict(card) for card in engine.dealt_cards()]
            # The engine clears its dealt cards when the round ends (hands_collected) while
            # round_number stays until the next deal: keep the last non-empty view.
            if snapshot is None or cards:
                snapshot = cards
        elif engine.round_number > round_number:
            break
    if snapshot is None:
        raise JournalError(
            f"{path}: round {round_number} is not in the journal "
            f"(it holds rounds 1-{engine.round_number})"
        )
    return snapshot


def hands_in_deal_order(cards: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Group the dealt cards by recipient, hands in the order each first received a card."""
    hands: dict[str, list[dict[str, Any]]] = {}
    for card in cards:
        hands.setdefault(recipient_name(card.get("to")), []).append(card)
    return list(hands.items())


def recipient_name(recipient: object) -> str:
    """`1` -> "position 1"; "dealer", "community", "burn", "discard" as they are."""
    if isinstance(recipient, int) or (isinstance(recipient, str) and recipient.isdigit()):
        return f"position {recipient}"
    return str(recipient)
