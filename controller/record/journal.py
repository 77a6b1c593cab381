"""The tamper-evident journal: every event and decision, append-only, hash-chained, in SQLite.

Each row's hash is SHA-256 over the previous row's hash and the canonical JSON of the row
(seq, kind, round, recorded_at, body), so editing, deleting or reordering any row breaks the
chain at that row; `verify_journal` names the first such row. Triggers refuse UPDATE and
DELETE through SQLite itself. A row that precedes a device command is appended with
`durable=True`: committed with synchronous=FULL (fsync) before `append` returns. Other rows are
group-committed: batched and flushed by a short timer on the running asyncio loop, when the
batch is full, on `flush()`, and by the next durable append. The file and its -wal/-shm are
mode 0600: the journal holds face-down cards and is for the service user only (docs/rules.md H7).

Format 2 (`PRAGMA user_version` per segment; format-1 segments keep verifying as written):
every row but a seal carries a secret `nonce` (128 bits from `secrets`) inside its body, so its
hash, the chain's head and the Merkle log hide the row (a hash of a card is the card otherwise:
H7); `JournalRow.nonce` holds it and `JournalRow.body` does not. The rows are the leaves of an
RFC 9162 Merkle tree for the table's whole life (leaf seq-1 = leaf_hash(the row's 32-byte
hash)); each segment's `merkle` table holds the interior nodes its rows completed (and, in a
new segment, the tree's frontier at its start, so a retired segment leaves its subtree hashes
behind), written in the same transaction as the rows (controller/record/merkle_log.py reads
them for proofs).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import sqlite3
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tablectl.controller.common import metrics
from tablectl.controller.common.faults import fault_point
from tablectl.controller.common.logs import get_logger
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.record.durable import (
    _fsync_file,
    chmod_durably,
    fsync_directory,
    sweep_temporaries,
    temporary_path,
    write_private_file,
)
from tablectl.controller.record.merkle import (
    CompactTree,
    StoredNodeCheck,
    leaf_hash,
    stored_index,
)

GENESIS_HASH = "0" * 64
ROW_KINDS = ("table", "event", "decision", "note", "segment", "checkpoint", "seal")
# Rows the start-up and `verify` look up by kind: a partial index holds only these.
INDEXED_KINDS = ("segment", "checkpoint", "seal")
#: 1: rows without a nonce; 2: rows carry a nonce in their body, and the `merkle` table.
SCHEMA_VERSION = 2
#: The body key of a row's secret nonce (docs/journal.md, "Hiding").
NONCE_KEY = "nonce"
#: A leaf for a seq the journal skipped (`continue_after`, a cut tail): no row hash is empty.
GAP_LEAF = leaf_hash(b"")


def row_leaf(row_hash_hex: str) -> bytes:
    """The Merkle log's leaf of a row: the leaf hash of its 32-byte chain hash (the one rule
    the journal, `journal prove`, `floor prove` and `proof verify` all use); ValueError when
    the hash is not hex."""
    return leaf_hash(bytes.fromhex(row_hash_hex))


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
CREATE INDEX IF NOT EXISTS journal_landmarks ON journal(kind, seq)
    WHERE kind IN ('segment', 'checkpoint', 'seal');
CREATE TABLE IF NOT EXISTS merkle (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS merkle_no_update BEFORE UPDATE ON merkle
BEGIN SELECT RAISE(ABORT, 'the Merkle log is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS merkle_no_delete BEFORE DELETE ON merkle
BEGIN SELECT RAISE(ABORT, 'the Merkle log is append-only: DELETE refused'); END;
"""
_INSERT_NODE = "INSERT OR IGNORE INTO merkle (idx, hash) VALUES (?, ?)"


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


class SegmentBusy(JournalError):
    """The live segment cannot be closed now: a reader (the floor's shipper, the background
    walk, `journal verify`) holds a snapshot of it, so its WAL cannot be checkpointed whole
    into the file, and a closed file without its WAL would lose every row not yet copied in.
    Nothing was changed: the roll-over is tried again a moment later."""


# json.dumps builds an encoder per call with these options; one, built once, says the same.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


# JSONEncoder.encode builds its C encoder (c_make_encoder) afresh on every call; the journal
# encodes every row, so the same C encoder is built once here. No circular check (markers
# None): a row body is data from an event or a decision, never a structure that holds itself.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_canonical_chunks: Callable[[Any, int], Any] | None = (
    _c_make_encoder(
        None,
        _CANONICAL.default,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        True,
        False,
        False,
    )
    if _c_make_encoder is not None
    else None
)


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8, no NaN."""
    if _canonical_chunks is None or isinstance(value, str):
        return _CANONICAL.encode(value)
    return "".join(_canonical_chunks(value, 0))


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


class LocalTimestamp:
    """`datetime.now().isoformat(timespec="microseconds")` (local, naive), kept per second.

    The service stamps every event with it, the journal every row (UtcTimestamp): formatting
    a datetime costs several times the string work (an aware one calls back into Python for
    its offset, ~3 us), while the date and time to the second change once a second (with
    the zone's offset, looked up again then); so they are formatted then and kept, and the
    microseconds appended.
    """

    suffix = ""  # after the microseconds

    def __init__(self, zone: datetime.tzinfo | None = None) -> None:
        self._second = -1
        self._prefix = ""
        #: the table's zone (`[table] timezone`); None: this machine's
        self.zone = zone

    def second_text(self, second: int) -> str:
        """The date and time to the second, `second` after the epoch, in the table's zone."""
        if self.zone is None:
            return datetime.datetime.fromtimestamp(second).isoformat(timespec="seconds")
        moment = datetime.datetime.fromtimestamp(second, self.zone)
        return moment.replace(tzinfo=None).isoformat(timespec="seconds")

    def __call__(self, nanoseconds: int | None = None) -> str:
        """The time `nanoseconds` after the epoch (default: now), in ISO 8601."""
        micros = (time.time_ns() if nanoseconds is None else nanoseconds) // 1000
        second, fraction = divmod(micros, 1_000_000)
        if second != self._second:
            self._prefix = self.second_text(second)
            self._second = second
        return f"{self._prefix}.{fraction:06d}{self.suffix}"


class UtcTimestamp(LocalTimestamp):
    """`datetime.now(UTC).isoformat(timespec="microseconds")`, kept per second likewise."""

    suffix = "+00:00"

    def second_text(self, second: int) -> str:
        moment = datetime.datetime.fromtimestamp(second, datetime.UTC)
        return moment.isoformat(timespec="seconds")[:-6]  # without "+00:00"


@dataclass(frozen=True)
class JournalRow:
    seq: int
    kind: str
    round: int | None
    recorded_at: str
    body: dict[str, Any]
    prev_hash: str
    hash: str
    #: The row's secret nonce (format 2), kept out of `body`; None for a seal or a format-1 row.
    nonce: str | None = None


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
        self._pending: list[tuple[int, str, int | None, str, str, str, str]] = []
        # Told the last committed seq after each commit (the floor shipper wakes on it; it
        # reads the rows from the file itself, so a listener never holds the table up).
        self.commit_listeners: list[Callable[[int], None]] = []
        # Told each row as it is appended, in seq order, on the writer's thread, as the row
        # reads back (parse_row's JournalRow, its body the dict the journal wrote): the
        # floor's per-round summaries are counted here, where the body needs no parsing.
        # A listener must be quick and must not raise.
        self.row_listeners: list[Callable[[JournalRow], None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._open()
        last = self._db.execute(
            "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        self._last_seq: int = last[0] if last else 0
        self._last_hash: str = last[1] if last else GENESIS_HASH
        # The Merkle log's right edge, and its nodes not yet committed (stored_index, hash).
        self._pending_nodes: list[tuple[int, bytes]] = []
        self._tree = self._load_tree()
        # The head (last seq and hash) goes to the system log at open and close: an anchor
        # outside the file, against which a truncated or wholly rewritten chain shows.
        self._log.info("journal_opened", last_seq=self._last_seq, head=self._last_hash)

    def _open(self) -> None:
        try:
            if not self.path.exists():
                create_journal_file(self.path)
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
        self._side_files_checked = False
        self._utc_now = UtcTimestamp()

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

    @property
    def tree(self) -> CompactTree:
        """The Merkle log's frontier over every row appended (leaf seq-1 is row seq); after a
        flush, over the committed rows: a checkpoint signs its `size` and `root()`."""
        return self._tree

    def _load_tree(self) -> CompactTree:
        """The frontier at the last row, from the live segment alone (a segment holds the
        frontier at its start); rebuilt from every segment's rows when it is missing (a
        journal written before the log, or rows written by another program)."""
        size = self._last_seq
        wanted = CompactTree.frontier_nodes(size)
        found: list[bytes] = []
        try:
            for level, index in wanted:
                raw = self._db.execute(
                    "SELECT hash FROM merkle WHERE idx = ?", (stored_index(level, index),)
                ).fetchone()
                if raw is None and level == 0:
                    row = self._db.execute(
                        "SELECT hash FROM journal WHERE seq = ?", (index + 1,)
                    ).fetchone()
                    raw = (row_leaf(row[0]),) if row else None
                if raw is None or not isinstance(raw[0], bytes):
                    return self._rebuild_tree()
                found.append(raw[0])
        except (sqlite3.Error, ValueError) as error:
            raise JournalError(f"{self.path}: cannot read the Merkle log: {error}") from error
        return CompactTree(size, found)

    def _rebuild_tree(self) -> CompactTree:
        """Every row of every segment beside the live one, as leaves; the nodes written into
        the live segment (one transaction). A seq no segment holds (retired before the log
        existed, or cut) is a GAP_LEAF."""
        tree = CompactTree()
        nodes: list[tuple[int, bytes]] = []

        def add(leaf: bytes, stored_leaf: bool) -> None:
            for level, index, digest in tree.append(leaf):
                if level > 0 or stored_leaf:
                    nodes.append((stored_index(level, index), digest))

        for path in live_segments(self.path):
            db = self._db if path == self.path else _connect_read_only(path)
            try:
                for seq, digest in db.execute("SELECT seq, hash FROM journal ORDER BY seq"):
                    if seq <= tree.size:
                        continue
                    while tree.size < seq - 1:
                        add(GAP_LEAF, True)
                    add(row_leaf(digest), False)  # read from its row
            finally:
                if db is not self._db:
                    db.close()
        while tree.size < self._last_seq:
            add(GAP_LEAF, True)
        try:
            self._db.execute("BEGIN")
            self._db.executemany(_INSERT_NODE, nodes)
            self._db.execute("COMMIT")
        except sqlite3.Error as error:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise JournalError(f"{self.path}: cannot write the Merkle log: {error}") from error
        self._log.info("merkle_log_rebuilt", leaves=tree.size, nodes=len(nodes))
        return tree

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
    def last_hash(self) -> str:
        """The hash of the last row appended (committed or pending): the chain's head."""
        return self._last_hash

    def continue_after(self, seq: int) -> None:
        """Number the next row `seq + 1`: sequence numbers cut from the tail are never reused.

        The chain goes on from the last row the file holds, so `verify` shows the gap.
        """
        if seq > self._last_seq:
            self.flush()
            while self._tree.size < seq:
                self._append_leaf(GAP_LEAF, stored_leaf=True)
            self._last_seq = seq

    def last_of_kind(self, kind: str) -> JournalRow | None:
        """The last committed row of an indexed kind (segment, checkpoint, seal)."""
        if kind not in INDEXED_KINDS:
            raise ValueError(f"{kind!r} is not an indexed row kind ({INDEXED_KINDS})")
        self.flush()
        raw = self._db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " WHERE kind = ? AND kind IN ('segment', 'checkpoint', 'seal')"
            " ORDER BY seq DESC LIMIT 1",
            (kind,),
        ).fetchone()
        return _to_row(raw) if raw else None

    def last_seal(self) -> JournalRow | None:
        """The journal's last seal row: the live segment's, else the one that closed the
        previous segment (a roll-over seals the closing segment to its end)."""
        found = self.last_of_kind("seal")
        if found is not None:
            return found
        first = self.first_row()
        if first is None or first.kind != "segment":
            return None
        name = first.body.get("previous", {}).get("file") if isinstance(first.body, dict) else None
        if not isinstance(name, str):
            return None
        try:
            db = _connect_read_only(self.path.parent / Path(name).name)
        except JournalError:
            return None
        try:
            raw = db.execute(
                "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
                " WHERE kind = 'seal' AND kind IN ('segment', 'checkpoint', 'seal')"
                " ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error:
            return None
        finally:
            db.close()
        return _to_row(raw) if raw else None

    def round_without_nonces_in_play(self, after_seq: int = 0) -> tuple[int, int] | None:
        """(round, seq) of the live segment's last row without a nonce (written in format 1,
        before the upgrade), when no row of a later round follows it: that round may still be
        in play, and its rows' hashes are guessable (docs/journal.md, "Hiding"). None when
        every row carries a nonce or the round is over. `after_seq`: a row found earlier, to
        ask only whether a later round has begun since (cheap, by seq)."""
        try:
            if after_seq:
                found = self._db.execute(
                    "SELECT round, seq FROM journal WHERE seq = ?", (after_seq,)
                ).fetchone()
            else:
                # rows without a nonce are only ever a prefix (format 2 gives every row one),
                # so a live segment whose first row has one has none without (no scan)
                first = self._db.execute(
                    "SELECT body FROM journal WHERE kind != 'seal' ORDER BY seq LIMIT 1"
                ).fetchone()
                if first is None or '"nonce":' in first[0]:
                    return None
                found = self._db.execute(
                    "SELECT round, seq FROM journal WHERE kind != 'seal' AND round IS NOT NULL"
                    " AND instr(body, '\"nonce\":') = 0 ORDER BY seq DESC LIMIT 1"
                ).fetchone()
            if found is None:
                return None
            later = self._db.execute(
                "SELECT 1 FROM journal WHERE seq > ? AND round > ? LIMIT 1", found[::-1]
            ).fetchone()
        except sqlite3.Error as error:
            raise JournalError(f"{self.path}: cannot read the journal: {error}") from error
        return None if later is not None else (int(found[0]), int(found[1]))

    def first_row(self) -> JournalRow | None:
        raw = self._db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " ORDER BY seq LIMIT 1"
        ).fetchone()
        return _to_row(raw) if raw else None

    def first_of_kind(self, kind: str, *, within: int) -> JournalRow | None:
        """The first row of `kind` among the segment's first `within` rows."""
        first = self.first_row()
        if first is None:
            return None
        raw = self._db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " WHERE seq >= ? AND seq < ? AND kind = ? ORDER BY seq LIMIT 1",
            (first.seq, first.seq + within, kind),
        ).fetchone()
        return _to_row(raw) if raw else None

    def tail_rows(self, limit: int) -> list[JournalRow]:
        """The segment's last `limit` committed rows, in seq order."""
        self.flush()
        raws = self._db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " ORDER BY seq DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [_to_row(raw) for raw in reversed(raws)]

    def raw_rows_from(self, seq: int) -> Iterator[_RawRow]:
        """Committed rows from `seq` on, streamed (one row in memory at a time)."""
        self.flush()
        cursor = self._db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " WHERE seq >= ? ORDER BY seq",
            (seq,),
        )
        cursor.arraysize = 256
        while batch := cursor.fetchmany():
            yield from batch

    def write_head(self) -> None:
        """Record the head outside the file (`PATH.head`): a later start finds a cut tail.

        Fail-stop like a commit: a head file that cannot be written (a full disk) fails the
        journal, so the daemon stops dealing rather than deal on with a head it cannot record.
        """
        self.flush()
        try:
            write_head_file(self.path, self._last_seq, self._last_hash)
        except OSError as error:
            self.fail(JournalError(f"{head_file(self.path)}: cannot record the head: {error}"))
            assert self.failure is not None
            raise self.failure from error

    def wal_not_checkpointed(self, wait_ms: int = 100) -> str | None:
        """Checkpoint the WAL whole into the file and empty it (waiting at most `wait_ms` for
        readers); None when done, else why not. Until it is done the WAL holds rows the file
        does not: it must never be deleted then (it was, once: a reader's snapshot at 06:00
        left a closed segment of no rows)."""
        db = self._db
        try:
            previous = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
            try:
                db.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
                busy, log, done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                db.execute(f"PRAGMA busy_timeout={previous}")
        except sqlite3.Error as error:  # a full disk, an I/O error: the record fails (fail-stop)
            self.fail(JournalError(f"{self.path}: cannot close the segment: {error}"))
            assert self.failure is not None
            raise self.failure from error
        if busy:
            return f"a reader holds it ({max(done, 0)} of {log} WAL frames in the file)"
        if log != done:  # not a reader: the file could not take them
            self.fail(
                JournalError(
                    f"{self.path}: cannot close the segment: its WAL's checkpoint copied "
                    f"{max(done, 0)} of {log} frames into the file"
                )
            )
            assert self.failure is not None
            raise self.failure
        return None

    def roll_over(
        self,
        closed_path: Path,
        segment: Mapping[str, Any],
        then: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> None:
        """Close this segment read-only as `closed_path`; begin a new one at `path`.

        The new segment's first row is a `segment` row (`segment` plus `previous`: the closed
        file's name, last seq and head, which is also the row's prev_hash), then `then` (the
        table row and a checkpoint): each segment describes itself and starts from a state.

        Crash-safe as a sequence of steps (docs/journal.md, "The roll-over, step by step"):
        close (WAL checkpointed into the file, fsynced), rename to the closed name and fsync
        the directory, create the new live file whole (schema built under a temporary name,
        renamed), then its first rows in one commit, then the head file. A crash after the
        rename and before the rows is undone at the next start (`recover_roll_over`): the
        closed file goes back to being the live one. Any failure here fails the journal
        (fail-stop: the daemon stops dealing), except SegmentBusy, raised before anything is
        changed while a reader keeps the WAL from being checkpointed whole.
        """
        self.flush()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        previous = {"file": closed_path.name, "last_seq": self._last_seq, "head": self._last_hash}
        # The head file names the closing segment's last row before anything is closed: a
        # crash between the rename and the new segment's first rows is undone at the next
        # start by that name (`recover_at_start`), sealed or not (only a seal wrote it here).
        self.write_head()
        why = self.wal_not_checkpointed()
        if why is not None:
            raise SegmentBusy(f"{self.path}: not closed now: {why}")
        try:
            # A closed segment is one self-contained file: out of WAL mode, a reader (verify,
            # retention, backup) opening it read-only leaves no -wal or -shm beside it. Not
            # possible while another connection reads it (the floor shipper): it stays in WAL
            # mode then, which changes nothing of its rows.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA busy_timeout=0")  # never wait on the reader for it
                self._db.execute("PRAGMA journal_mode=DELETE")
            self._db.close()
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            chmod_durably(self.path, 0o400)
            fault_point("rollover.after_close")
            os.replace(self.path, closed_path)
            fsync_directory(self.path.parent)
        except (OSError, sqlite3.Error) as error:
            self._closed = True
            self.fail(JournalError(f"{self.path}: cannot close the segment: {error}"))
            assert self.failure is not None
            raise self.failure from error
        fault_point("rollover.after_rename")
        self._log.info("segment_closed", file=str(closed_path), last_seq=self._last_seq)
        try:
            self._open()
        except JournalError as error:
            self._closed = True
            self.fail(error)
            raise
        fault_point("rollover.after_create")
        # The new segment holds the log's frontier at its start, committed with its first
        # rows: the segments before it may be retired and the log still proves what follows.
        start = self._tree.size
        self._pending_nodes.extend(
            (stored_index(level, index), digest)
            for (level, index), digest in zip(
                CompactTree.frontier_nodes(start), self._tree.frontier, strict=True
            )
        )
        self.append("segment", {**segment, "type": "segment", "previous": previous})
        for kind, body in then:
            self.append(kind, body)
        self.flush()
        fault_point("rollover.after_rows")
        self.write_head()

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
        recorded_at = self._utc_now()
        if kind != "seal":  # a seal's content is public by design (its MAC covers the head)
            body = {**body, NONCE_KEY: secrets.token_hex(16)}
        body_text = canonical_json(body if type(body) is dict else dict(body))
        digest = row_hash(self._last_hash, seq, kind, round_number, recorded_at, body_text)
        self._pending.append(
            (seq, kind, round_number, recorded_at, body_text, self._last_hash, digest)
        )
        self._append_leaf(leaf_hash(bytes.fromhex(digest)))
        if self.row_listeners:
            # the journal's own copy (its text is written above), or a copy of a seal's mapping
            written = dict(body) if kind == "seal" or type(body) is not dict else body
            nonce = written.pop(NONCE_KEY, None)
            row = JournalRow(
                seq, kind, round_number, recorded_at, written, self._last_hash, digest, nonce
            )
            for listener in self.row_listeners:
                listener(row)
        self._last_seq, self._last_hash = seq, digest
        if durable or len(self._pending) >= self.max_batch:
            self.flush()
        elif self._timer is None:
            self._schedule_flush()
        return seq

    def _append_leaf(self, leaf: bytes, *, stored_leaf: bool = False) -> None:
        """The next leaf of the log; the nodes it completes wait for the rows' commit (a leaf
        itself is its row's hash, stored only for a gap)."""
        if stored_leaf:
            self._pending_nodes.append((stored_index(0, self._tree.size), leaf))
        completed = self._tree.append(leaf)
        if len(completed) > 1:
            self._pending_nodes.extend(
                (stored_index(level, index), digest) for level, index, digest in completed[1:]
            )

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
        if not self._pending and not self._pending_nodes:
            return
        started = time.perf_counter()
        try:
            if len(self._pending) == 1 and not self._pending_nodes:
                # one row: one statement, its own transaction (autocommit), fsynced alike
                self._db.execute(_INSERT, self._pending[0])
            else:
                # the rows and the log's nodes they complete: one transaction
                self._db.execute("BEGIN")
                self._db.executemany(_INSERT, self._pending)
                if self._pending_nodes:
                    self._db.executemany(_INSERT_NODE, self._pending_nodes)
                self._db.execute("COMMIT")
        except sqlite3.Error as error:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            self._fail(JournalError(f"{self.path}: journal write failed: {error}"))
            assert self.failure is not None
            raise self.failure from error
        self._pending.clear()
        self._pending_nodes.clear()
        metrics.JOURNAL_WRITE_SECONDS.observe(time.perf_counter() - started)
        for listener in self.commit_listeners:
            listener(self._last_seq)
        if not self._side_files_checked:
            # The -wal appears with the first commit and lives as long as this connection.
            for suffix in ("-wal", "-shm"):
                _make_private(Path(f"{self.path}{suffix}"))
            self._side_files_checked = True

    def fail(self, error: JournalError) -> None:
        """A write of the record failed outside a commit (the head file, the sealing key, a
        roll-over): fail-stop as for a commit, once (later failures are only logged)."""
        if self.failure is not None:
            self._log.error("journal_write_failed_again", error=str(error))
            return
        self._fail(error)

    def _fail(self, error: JournalError) -> None:
        """The first failed commit: refuse everything from now on; tell the owner once."""
        self.failure = error
        lost = len(self._pending)
        self._pending.clear()  # never committed later as if nothing had happened
        self._pending_nodes.clear()
        metrics.JOURNAL_WRITE_ERRORS.inc()
        self._log.error("journal_write_failed", error=str(error), rows_not_written=lost)
        if self.on_failure is not None:
            self.on_failure(error)

    def discard(self) -> None:
        """Close without recording the head (the daemon refused this journal at start)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(sqlite3.Error):
                self._db.close()

    def close(self) -> None:
        """Flush pending rows and close the file (after a failure: close without writing)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(JournalError):
            self.flush()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if self.failure is None:  # after a failed commit the head is not what the file holds
            with contextlib.suppress(OSError):
                write_head_file(self.path, self._last_seq, self._last_hash)
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


def _raw_rows(path: str | Path, db: sqlite3.Connection | None = None) -> Iterator[_RawRow]:
    own = db is None
    db = _connect_read_only(path) if db is None else db
    try:
        yield from db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash"
            " FROM journal ORDER BY rowid"
        )
    finally:
        if own:
            db.close()


def _to_row(raw: _RawRow) -> JournalRow:
    seq, kind, round_number, recorded_at, body, prev_hash, digest = raw
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {"unparseable": body}
    nonce = parsed.pop(NONCE_KEY, None) if type(parsed) is dict else None
    return JournalRow(
        seq,
        kind,
        round_number,
        recorded_at,
        parsed,
        prev_hash,
        digest,
        nonce if isinstance(nonce, str) else None,
    )


# The floor store (controller/floor) reads the same rows back from PostgreSQL.
RawRow = _RawRow
parse_row = _to_row


# --- the head outside the file, segments ------------------------------------------------------


def head_file(path: str | Path) -> Path:
    """`journal.sqlite` -> `journal.sqlite.head`: the last seq and hash the daemon wrote."""
    return Path(f"{path}.head")


def write_head_file(path: str | Path, seq: int, digest: str) -> None:
    """Record (seq, head); never lowers a recorded seq (a cut tail must stay visible)."""
    recorded = read_head_file(path)
    if recorded is not None and recorded[0] > seq:
        return
    write_private_file(
        head_file(path),
        canonical_json({"seq": seq, "head": digest}) + "\n",
        fault="head.before_rename",
    )


def create_journal_file(path: Path) -> None:
    """A new journal file, whole or not at all: the schema is built under a temporary name in
    one transaction, the file fsynced, then renamed into place and the directory fsynced. A
    crash leaves no file or a file with its table, never a file without it.

    The build itself needs no rollback journal and no fsync of its own (`journal_mode=MEMORY`,
    `synchronous=OFF`): nothing reads the temporary before its one fsync and its rename, and a
    crash before them leaves a temporary the start sweeps. Built statement by statement with
    `synchronous=FULL`, each of its eleven statements cost a rollback journal and three fsyncs:
    135-225 ms on a loaded machine, under the event lock at every roll-over."""
    temporary = temporary_path(path, "build")
    for stale in (temporary, Path(f"{temporary}-journal")):
        stale.unlink(missing_ok=True)
    try:
        descriptor = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(descriptor)
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=MEMORY")
            db.execute("PRAGMA synchronous=OFF")
            db.executescript(f"BEGIN;\n{_SCHEMA}\nPRAGMA user_version={SCHEMA_VERSION};\nCOMMIT;")
        finally:
            db.close()
        _fsync_file(temporary)
        fault_point("journal.create.before_rename")
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except (OSError, sqlite3.Error) as error:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise JournalError(f"{path}: cannot create the journal: {error}") from error


def read_head_file(path: str | Path) -> tuple[int, str] | None:
    """(seq, head) recorded for the journal at `path`, or None when there is none (or garbled)."""
    try:
        data = json.loads(head_file(path).read_text())
        return int(data["seq"]), str(data["head"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def segment_files(directory: str | Path) -> list[Path]:
    """The journal files of a directory of segments (`*.sqlite`), in no particular order."""
    return sorted(p for p in Path(directory).iterdir() if p.suffix == ".sqlite" and p.is_file())


def ordered_segment_files(directory: str | Path) -> list[Path]:
    """A directory's segments in the order of their rows (the live one, from its first seq,
    last); JournalError when it holds none."""
    files = segment_files(directory)
    if not files:
        raise JournalError(f"{directory}: no journal segments (*.sqlite) here")
    return sorted(files, key=lambda f: (_first_seq(f) is None, _first_seq(f) or 0))


def closed_segment_name(live: Path, gaming_day: str, first_seq: int) -> Path:
    """`journal.sqlite` closed (day 2026-11-23, from seq 41): `journal-2026-11-23-…041.sqlite`."""
    return live.with_name(f"{live.stem}-{gaming_day}-{first_seq:012d}{live.suffix}")


def closed_segment_first_seq(path: Path) -> int | None:
    """The first seq a closed segment's name gives (`closed_segment_name`'s FIRSTSEQ); None
    for a name that is not one."""
    match = re.search(r"-\d{4}-\d{2}-\d{2}-(\d+)$", path.stem)
    return int(match.group(1)) if match is not None else None


def live_segments(live: Path) -> list[Path]:
    """The live journal file and its closed segments (`STEM-*.sqlite` beside it)."""
    closed = sorted(live.parent.glob(f"{live.stem}-*{live.suffix}"))
    return [*closed, live] if live.is_file() else closed


# --- at start: what a crash can leave behind -------------------------------------------------


def _last_row(path: Path) -> tuple[int, str] | None:
    """(seq, hash) of a file's last row; None when it holds none or cannot be read."""
    try:
        db = _connect_read_only(path)
    except JournalError:
        return None
    try:
        row = db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else None
    except (sqlite3.Error, TypeError, ValueError):
        return None
    finally:
        db.close()


def _journal_file_state(path: Path) -> str:
    """ "journal" (has its table), "empty" (no row can be in it: zero bytes, all zeroes, or a
    SQLite file with no table at all), or why it is neither."""
    try:
        size = path.stat().st_size
        if size == 0:
            return "empty"
        if size <= 1 << 20 and not path.read_bytes().strip(b"\0"):
            return "empty"
    except OSError as error:
        return f"cannot be read: {error.strerror}"
    try:
        with path.open("rb") as file:
            header = file.read(16)
    except OSError as error:
        return f"cannot be read: {error.strerror}"
    if header != b"SQLite format 3\x00":
        return f"not a SQLite file ({size} bytes)"
    try:
        # read-write, as the journal itself opens it: a WAL left by a power cut without its
        # -shm cannot be read by a read-only connection ("attempt to write a readonly
        # database"), and SQLite's own recovery of the WAL is what the open would do anyway
        db = sqlite3.connect(path)
    except sqlite3.Error as error:
        return f"not a SQLite file ({error})"
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.Error as error:
        return f"not a SQLite file ({size} bytes: {error})"
    finally:
        db.close()
    if "journal" in names:
        return "journal"
    if not names:
        return "empty"
    return f"a SQLite file with tables {names} but no journal table"


#: The files beside a journal that SQLite opens with it.
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def _service_user() -> str:
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    return str(os.geteuid())


def unrepairable_file(path: Path, why: str) -> str:
    """Why the start cannot use a file and will not repair it itself, and what to run."""
    user = _service_user()
    try:
        found = path.stat()
        owner = f"owner uid {found.st_uid}, mode {stat.S_IMODE(found.st_mode):04o}"
    except OSError:
        owner = "unreadable"
    return (
        f"{path} ({owner}) {why} for the service user {user}: run "
        f"`chown {user}: {path} && chmod 0600 {path}` as root (keep the file), then start again"
    )


def private_file_problem(path: Path) -> str | None:
    """None when the start can use `path` (a journal file, the head, the sealing key) or
    repair it (this user owns it: a wrong mode is made 0600 again, `recover_at_start`);
    else why not and the command that mends it."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    except OSError as error:
        return unrepairable_file(path, f"cannot be looked at ({error.strerror})")
    if found.st_uid == os.geteuid() or os.access(path, os.R_OK | os.W_OK):
        return None
    return unrepairable_file(path, "cannot be read and written")


def _unrepairable(path: Path, why: str) -> JournalError:
    return JournalError(unrepairable_file(path, why))


def _restore_private_modes(live: Path, extra: Iterable[Path] = ()) -> list[str]:
    """Before any file is opened: the live journal, its side files, its head file and `extra`
    (the sealing key) made mode 0600 and checked readable and writable by this user.

    A crash inside the roll-over's close can leave the live file 0400 beside a hot rollback
    journal: as the service user (not root) SQLite would open it read-only, could not roll
    the journal back, and call the file damaged. Raises JournalError naming the file and the
    command for a file this user cannot repair (another owner)."""
    done: list[str] = []
    candidates = [live, *(Path(f"{live}{suffix}") for suffix in SIDE_SUFFIXES)]
    for path in [*candidates, head_file(live), *extra]:
        try:
            found = path.lstat()
        except FileNotFoundError:
            continue
        except OSError as error:
            raise _unrepairable(path, f"cannot be looked at ({error.strerror})") from error
        if not stat.S_ISREG(found.st_mode):
            continue
        mode = stat.S_IMODE(found.st_mode)
        if mode != 0o600:
            try:
                os.chmod(path, 0o600)
            except OSError as error:
                raise _unrepairable(path, f"cannot be made 0600 ({error.strerror})") from error
            done.append(f"made {path} mode 0600 again (it was {mode:04o})")
        if not os.access(path, os.R_OK | os.W_OK):
            raise _unrepairable(path, "cannot be read and written")
    return done


def _holds_row(path: Path, seq: int, digest: str) -> bool:
    """Whether the file's row `seq` has the hash `digest`."""
    try:
        db = _connect_read_only(path)
    except JournalError:
        return False
    try:
        row = db.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
        return row is not None and row[0] == digest
    except sqlite3.Error:
        return False
    finally:
        db.close()


def highest_seq_written(live: Path) -> int:
    """The highest seq any segment of this journal holds (closed ones included) or its head
    file records: the next row of a journal started on damage on purpose goes after it."""
    highest = 0
    recorded = read_head_file(live)
    if recorded is not None:
        highest = recorded[0]
    for segment in live_segments(live):
        last = _last_row(segment)
        if last is not None:
            highest = max(highest, last[0])
    return highest


def recover_at_start(
    live: Path, sealing_key: Path | None = None, *, also_sweep: Iterable[Path] = ()
) -> list[str]:
    """Before the journal is opened: finish or undo what a crash interrupted; what was done.

    - every temporary of a durable write path (durable.TEMPORARY_PATTERNS) in the journal's
      directory, the sealing key's and `also_sweep` (the archive, the passfile's) is wiped:
      overwritten, then unlinked (a key's holds a seed or the key of an epoch since erased);
    - the live file, its side files, the head file and the sealing key are made mode 0600
      before anything opens them (a crash inside the roll-over's close leaves the live file
      0400); one this user cannot repair is refused, naming it and the command to run;
    - a live file that holds no row (zero bytes, zeroes, a SQLite file without its table: a
      crash during its creation) is removed, to be created whole;
    - a roll-over cut between closing the live segment and committing the new one's first rows
      is undone: the latest closed file, when it holds the row the head file records, becomes
      the live one again (and is rolled over again at the next moment between rounds). No
      seal is needed: the roll-over writes the head file before it closes anything.
    Raises JournalError, naming the file, for a live file that is not a journal and may hold
    rows (not SQLite, or another database): it is never removed.
    """
    done: list[str] = []
    directories = {live.parent, *(Path(d) for d in also_sweep)}
    if sealing_key is not None:
        directories.add(sealing_key.parent)
    for directory in sorted(directories):
        for entry in sweep_temporaries(directory):
            done.append(f"removed the stale temporary {entry} (overwritten, then unlinked)")
    done += _restore_private_modes(live, [sealing_key] if sealing_key is not None else [])
    if live.exists():
        state = _journal_file_state(live)
        if state == "empty":
            for suffix in ("", *SIDE_SUFFIXES):
                Path(f"{live}{suffix}").unlink(missing_ok=True)
            fsync_directory(live.parent)
            done.append(f"removed {live}: it held no row (a crash during its creation)")
        elif state != "journal":
            raise JournalError(
                f"{live} is {state}: not a journal this daemon wrote, and it may hold rows, so it "
                "is not replaced; move it away (keep it) to begin a new journal there"
            )
    recorded = read_head_file(live)
    closed = sorted(
        (p for p in live_segments(live) if p != live and closed_segment_first_seq(p) is not None),
        key=lambda p: closed_segment_first_seq(p) or 0,
    )
    if closed and recorded is not None and (not live.exists() or _last_row(live) is None):
        latest = closed[-1]
        last = _last_row(latest)
        # the latest closed file holds the recorded head (its last row, or before it: a head
        # file an older version left behind a checkpoint): nothing after it was ever written
        if last is not None and last[0] >= recorded[0] and _holds_row(latest, *recorded):
            for suffix in ("", *SIDE_SUFFIXES):
                Path(f"{live}{suffix}").unlink(missing_ok=True)
            # the mode durable before the name: a cut after the rename must not bring the
            # live file back 0400 (the directory's fsync carries the name, not the mode)
            chmod_durably(latest, 0o600)
            os.replace(latest, live)
            fsync_directory(live.parent)
            done.append(
                f"undid an interrupted roll-over: {latest.name} (it holds the recorded head, "
                f"row {recorded[0]}, and ends at row {last[0]}) is the live segment "
                f"{live.name} again"
            )
    return done


def backup_journal(live: Path, dest: Path) -> tuple[list[Path], VerifyResult]:
    """Copy every segment into `dest` (the live one with SQLite's online backup API) and verify.

    A closed segment is read-only and copied as a file; the live one is copied page by page
    through a read transaction, so the copy is one consistent state of it even while the daemon
    appends (a plain `cp` of a WAL database is not).
    """
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    copied: list[Path] = []
    for segment in live_segments(live):
        target = dest / segment.name
        target.unlink(missing_ok=True)  # an earlier copy (closed segments are 0400)
        if segment != live:
            shutil.copyfile(segment, target)
            os.chmod(target, 0o400)
        else:
            descriptor = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(descriptor)
            source = _connect_read_only(segment)
            try:
                copy = sqlite3.connect(target)
                try:
                    source.backup(copy)
                finally:
                    copy.close()
            except sqlite3.Error as error:
                raise JournalError(f"{segment}: online backup failed: {error}") from error
            finally:
                source.close()
        copied.append(target)
    if not copied:
        raise JournalError(f"{live}: no such journal file")
    return copied, verify_journal(dest)


# --- verification -----------------------------------------------------------------------------

EXIT_INTACT = 0
EXIT_TAMPERED = 1
EXIT_UNREADABLE = 2


@dataclass(frozen=True)
class VerifyResult:
    """A verdict: intact, tampered or damaged at a row, or not a readable journal."""

    ok: bool
    rows: int
    message: str
    first_bad_seq: int | None = None
    readable: bool = True
    first_seq: int | None = None
    last_seq: int = 0
    head: str = GENESIS_HASH
    seals: int = 0
    sealed_until: str | None = None
    last_seal_seq: int | None = None
    seals_verified: bool = False
    #: With a key: the first row's stamp (where the proven history begins) and the epochs of
    #: the first and the last seal; every row up to the last seal lies inside its seal's span.
    proven_from: str | None = None
    first_seal_epoch: int | None = None
    last_seal_epoch: int | None = None

    @property
    def exit_code(self) -> int:
        if self.ok:
            return EXIT_INTACT
        return EXIT_TAMPERED if self.readable else EXIT_UNREADABLE

    @property
    def unsealed_rows(self) -> int:
        """Rows after the last seal (all of them when there is no seal)."""
        if self.last_seal_seq is None:
            return self.rows
        return max(0, self.last_seq - self.last_seal_seq)


class _Tampered(Exception):
    def __init__(self, seq: int | None, message: str) -> None:
        super().__init__(message)
        self.seq = seq
        self.message = message


class ChainWalk:
    """Walks rows in order and checks each against the chain (and the seals, with a key).

    A walk may begin at row 1 (the genesis hash) or at a `segment` row, whose prev_hash is the
    previous segment's head (earlier segments archived or removed by retention).
    """

    def __init__(self, seal_check: Any = None, *, seal_links: bool = True) -> None:
        """`seal_check`: a sealing.SealCheck with the verification key (MACs and spans);
        without one, `seal_links` still checks what needs no key: each seal names the row
        right before it and the seal before it (a rewrite that recomputed the hashes but not
        the seals shows at the first seal after the edit)."""
        if seal_check is None and seal_links:
            from tablectl.controller.record.sealing import SealCheck

            seal_check = SealCheck(None)
        self.seal_check = seal_check
        # with a key: every row's stamp is noted for its seal's span check
        self._stamps: Callable[[int, str, str, str], str | None] | None = (
            seal_check.row if getattr(seal_check, "deriver", None) is not None else None
        )
        self.expected_seq: int | None = None
        self.prev_hash = GENESIS_HASH
        self.first_seq: int | None = None
        self.count = 0
        self.seals = 0
        self.last_sealed_at: str | None = None
        self.last_seal_seq: int | None = None
        self.continued = False

    def start_at(self, seq: int, prev_hash: str) -> None:
        """Begin after a row already verified (the daemon's start: from the last checkpoint)."""
        self.expected_seq, self.prev_hash = seq, prev_hash
        self.continued = True
        if self.seal_check is not None:
            self.seal_check.continued = True  # the seals before `seq` are not walked

    def feed(self, raw: Sequence[Any], original: Callable[..., int | None] | None = None) -> None:
        """Check one row; raises _Tampered naming it."""
        if len(raw) != 7:
            raise _Tampered(self.expected_seq, "a row without the journal's seven columns")
        seq, kind, round_number, recorded_at, body, stored_prev, stored_hash = raw
        if type(seq) is not int:
            raise _Tampered(
                self.expected_seq, f"row after {self._after()}: its seq is not a number"
            )
        if not all(
            isinstance(v, str) for v in (kind, recorded_at, body, stored_prev, stored_hash)
        ) or (round_number is not None and type(round_number) is not int):
            raise _Tampered(seq, f"row {seq} damaged: a column holds a value of the wrong type")
        if self.expected_seq is None:
            if seq == 1 and stored_prev == GENESIS_HASH:
                self.expected_seq = 1
            elif kind == "segment":
                self.expected_seq, self.prev_hash = seq, stored_prev
                self.continued = True
                if self.seal_check is not None:
                    self.seal_check.continued = True
            else:
                raise _Tampered(
                    1,
                    f"the journal starts at row {seq}, which is neither row 1 nor a segment's "
                    "first row: the rows before it were deleted",
                )
            self.first_seq = seq
        expected = self.expected_seq
        if seq > expected:
            missing = f"row {expected}" if seq == expected + 1 else f"rows {expected}-{seq - 1}"
            raise _Tampered(
                expected, f"{missing} deleted: the chain jumps from {expected - 1} to {seq}"
            )
        if seq < expected:
            raise _Tampered(seq, f"row {seq} reordered: found after row {expected - 1}")
        recomputed = row_hash(stored_prev, seq, kind, round_number, recorded_at, body)
        if recomputed != stored_hash:
            moved = (
                original(stored_prev, kind, round_number, recorded_at, body, stored_hash)
                if original
                else None
            )
            if moved is not None:
                raise _Tampered(seq, f"row {seq} reordered: it holds row {moved}'s content")
            raise _Tampered(seq, f"row {seq} edited: its content does not match its hash")
        if stored_prev != self.prev_hash:
            raise _Tampered(
                seq,
                f"row {seq} does not follow row {seq - 1}: a row before it was deleted, "
                "replaced or reordered (the chain is broken here)",
            )
        if kind == "seal":
            self._seal(seq, body)
        elif self._stamps is not None:
            problem = self._stamps(seq, recorded_at, kind, body)
            if problem is not None:
                raise _Tampered(seq, problem)
        self.prev_hash = stored_hash
        self.expected_seq = seq + 1
        self.count += 1

    def _after(self) -> str:
        return "the start" if self.expected_seq is None else f"row {self.expected_seq - 1}"

    def _seal(self, seq: int, body_text: str) -> None:
        try:
            body = json.loads(body_text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise _Tampered(seq, f"seal row {seq} is malformed")
        self.seals += 1
        self.last_seal_seq = seq
        sealed_at = body.get("sealed_at")
        self.last_sealed_at = sealed_at if isinstance(sealed_at, str) else None
        if self.seal_check is not None:
            problem = self.seal_check.check(seq, body, seq - 1, self.prev_hash)
            if problem is not None:
                raise _Tampered(seq, problem)

    def result(
        self, ok: bool, message: str, bad: int | None = None, readable: bool = True
    ) -> VerifyResult:
        last = (self.expected_seq or 1) - 1
        check = self.seal_check
        keyed = getattr(check, "deriver", None) is not None
        return VerifyResult(
            ok,
            self.count,
            message,
            bad,
            readable,
            self.first_seq,
            last,
            self.prev_hash,
            self.seals,
            self.last_sealed_at,
            self.last_seal_seq,
            keyed,
            proven_from=check.first_stamp if keyed else None,
            first_seal_epoch=check.first_epoch if keyed else None,
            last_seal_epoch=check.last_epoch if keyed else None,
        )


def _original_finder(db: sqlite3.Connection) -> Callable[..., int | None]:
    """Finds the seq under which moved, unedited content was hashed (a renumbered row)."""

    def find(
        prev_hash: str,
        kind: str,
        round_number: int | None,
        recorded_at: str,
        body: str,
        digest: str,
    ) -> int | None:
        try:
            low, high = db.execute("SELECT min(seq), max(seq) FROM journal").fetchone()
            low, high = int(low), int(high)
        except (sqlite3.Error, TypeError, ValueError):
            return None
        for candidate in range(max(1, low - 1), high + 2):
            if row_hash(prev_hash, candidate, kind, round_number, recorded_at, body) == digest:
                return candidate
        return None

    return find


def _first_seq(path: Path) -> int | None:
    try:
        db = _connect_read_only(path)
    except JournalError:
        return None
    try:
        row = db.execute("SELECT min(seq) FROM journal").fetchone()
        return int(row[0]) if row and isinstance(row[0], int) else None
    except sqlite3.Error:
        return None
    finally:
        db.close()


def _at(problem: str | None, seq: int) -> tuple[str, int] | None:
    return None if problem is None else (problem, seq)


def _stored_nodes(db: sqlite3.Connection) -> dict[int, bytes]:
    """A segment's `merkle` table (none in a format-1 journal: {})."""
    try:
        nodes: dict[int, bytes] = {}
        for idx, value in db.execute("SELECT idx, hash FROM merkle"):
            if type(idx) is not int or not isinstance(value, bytes):
                # damage (a fuzzed file gave a NULL hash): a verdict, never an exception
                raise ValueError(f"a stored Merkle node is malformed: index {idx!r}")
            nodes[idx] = value
        return nodes
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return {}
        raise


def _copied_node_indexes(first_seqs: Sequence[int | None]) -> list[int]:
    """The frontier each later segment copied at its start (the nodes of the rows before it
    that its proofs need once those segments are retired): recomputed from those rows when
    the walk passes them, and compared there. (Other copies, the log an upgrade from format 1
    rebuilt with gap leaves for rows it no longer had, are not compared.)"""
    wanted: list[int] = []
    for first in first_seqs:
        if first is not None and first > 1:
            wanted += [stored_index(lv, i) for lv, i in CompactTree.frontier_nodes(first - 1)]
    return wanted


def verify_journal(
    path: str | Path,
    *,
    verification_key: Any = None,
    expect_until: datetime.datetime | None = None,
    archive: str | Path | None = None,
) -> VerifyResult:
    """The verdict on a journal file or a directory of segments; never raises for bad input.

    `archive`: a directory holding the segments retention moved away; its segments and the
    directory's are verified together as one chain (a segment in both is read once, here).

    Rows are read in physical (rowid = seq) order; a seq out of order, a gap, a row whose
    stored hash does not match its content, a row whose prev_hash does not match the row before
    it, a segment not linked to the one before, and (with `verification_key`) a seal that does
    not prove the rows before it each stop the walk with a message naming the row.
    """
    from tablectl.controller.record.sealing import KeyDeriver, SealCheck

    seal_check = SealCheck(KeyDeriver(verification_key)) if verification_key is not None else None
    walk = ChainWalk(seal_check)
    target = Path(path)
    if target.is_dir():
        files = segment_files(target)
        if archive is not None and Path(archive).is_dir():
            here = {f.name for f in files}
            files += [f for f in segment_files(archive) if f.name not in here]
        if not files:
            return walk.result(
                False, f"{target}: no journal segments (*.sqlite) here", readable=False
            )
        firsts = {f: _first_seq(f) for f in files}  # each file opened once for its first row
        ordered = sorted(files, key=lambda f: (firsts[f] is None, firsts[f] or 0))
    else:
        ordered = [target]
        firsts = {target: _first_seq(target)}
    # the stored log nodes recomputed from the rows: a node problem is said after the walk,
    # so a row the chain or a seal refuses is named as such first
    nodes = StoredNodeCheck()
    nodes.want(_copied_node_indexes([firsts[f] for f in ordered[1:]]))
    node_problem: tuple[str, int] | None = None
    previous_name: str | None = None
    for file in ordered:
        try:
            db = _connect_read_only(file)
        except JournalError as error:
            readable = walk.count > 0
            return walk.result(False, str(error), walk.expected_seq, readable=readable)
        try:
            first = True
            last_seq = 0
            for raw in _raw_rows(file, db):
                if first and previous_name is not None:
                    seq = raw[0] if raw else None
                    if seq != walk.expected_seq:
                        return walk.result(
                            False,
                            f"{file.name} starts at row {seq}, but {previous_name} ended at row "
                            f"{(walk.expected_seq or 1) - 1}: a segment between them is missing",
                            walk.expected_seq,
                        )
                walk.feed(raw, _original_finder(db))  # the row's seq and hash checked first
                if first:
                    node_problem = node_problem or _at(
                        nodes.begin_segment(file.name, raw[0], _stored_nodes(db)), raw[0]
                    )
                first = False
                if node_problem is None:
                    node_problem = _at(nodes.row(raw[0], bytes.fromhex(raw[6])), raw[0])
                last_seq = raw[0]
            if not first:
                node_problem = node_problem or _at(nodes.end_segment(last_seq), last_seq)
            elif closed_segment_first_seq(file) is not None:
                # a roll-over closes a segment after its rows (its WAL copied into it): an
                # empty closed file lost them (a WAL deleted before its checkpoint did, once)
                return walk.result(
                    False,
                    f"{file.name} is a closed segment that holds no rows: its rows from row "
                    f"{closed_segment_first_seq(file)} on were lost or deleted",
                    closed_segment_first_seq(file),
                )
        except _Tampered as tampered:
            return walk.result(False, tampered.message, tampered.seq)
        except (sqlite3.Error, ValueError, OverflowError, MemoryError, UnicodeError) as error:
            where = walk.expected_seq or 1
            readable = walk.count > 0
            return walk.result(
                False,
                f"{file.name} is damaged at row {where}: {error}"
                if readable
                else f"{file}: not a readable journal: {error}",
                where,
                readable=readable,
            )
        finally:
            db.close()
        previous_name = file.name
    if walk.count == 0:
        return walk.result(True, "intact: an empty journal")
    if seal_check is not None and expect_until is not None:
        until = _parse_time(walk.last_sealed_at)
        if until is None or until < expect_until:
            sealed = walk.last_sealed_at or "never"
            return walk.result(
                False,
                f"sealed until {sealed}, but the table ran until {expect_until.isoformat()}: "
                f"the rows after row {walk.last_seal_seq or 0} are unproven and later seals "
                "are missing (a cut tail)",
                (walk.last_seal_seq or 0) + 1,
            )
    if node_problem is not None:
        return walk.result(False, *node_problem)
    origin = (
        "" if not walk.continued else f" (from row {walk.first_seq}: earlier segments archived)"
    )
    return walk.result(True, f"intact: {walk.count} rows{origin}, last hash {walk.prev_hash}")


def verify_chain(
    rows: Iterable[RawRow],
    highest: int,
    *,
    verification_key: Any = None,
    after: tuple[int, str] | None = None,
) -> VerifyResult:
    """The chain (and, with a key, seal) check over stored rows from any store.

    One implementation, ChainWalk's, for the local files and the floor's copy (`tablectl floor
    verify`): `highest` is the largest seq held, used to name where a moved row came from;
    `after` (seq, hash) begins after a row verified before.
    """
    from tablectl.controller.record.sealing import KeyDeriver, SealCheck

    seal_check = SealCheck(KeyDeriver(verification_key)) if verification_key is not None else None
    walk = ChainWalk(seal_check, seal_links=False)
    if after is not None and after[0] > 0:  # from a row verified before (the floor's mark)
        walk.start_at(after[0] + 1, after[1])
        if seal_check is not None:
            seal_check.continued = True

    def original(
        prev_hash: str, kind: str, rnd: int | None, at: str, body: str, digest: str
    ) -> int | None:
        for candidate in range(1, highest + 2):
            if row_hash(prev_hash, candidate, kind, rnd, at, body) == digest:
                return candidate
        return None

    try:
        for raw in rows:
            walk.feed(raw, original)
    except _Tampered as tampered:
        return walk.result(False, tampered.message, tampered.seq)
    if walk.count == 0:
        return walk.result(True, "intact: an empty journal")
    return walk.result(True, f"intact: {walk.count} rows, last hash {walk.prev_hash}")


def _parse_time(text: str | None) -> datetime.datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


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


def engine_from_checkpoint(
    table: Mapping[str, Any], snapshot: Mapping[str, Any], random_source: Callable[[int], int]
) -> Engine:
    """The engine as it was at a checkpoint row: the table row's spec and its snapshot."""
    spec = TableSpec.from_dict({"game": table["game"], "options": dict(table.get("options", {}))})
    return Engine.restore(spec, snapshot, random_source=random_source)


class ReplayedDraws:
    """Feeds the journaled random draws back to the engine, in order, each for its bound."""

    def __init__(self, draws: Sequence[Mapping[str, Any]]) -> None:
        self._draws = deque(draws)  # taken from the front: a deque, not list.pop(0)

    def __len__(self) -> int:
        return len(self._draws)

    def extend(self, draws: Iterable[Mapping[str, Any]]) -> None:
        """More draws, read further on in a streamed replay (they follow their event's row)."""
        self._draws.extend(draws)

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
    path: str | Path,
    round_number: int,
    engine_factory: EngineFactory = engine_from_table_row,
    *,
    over_only: bool = False,
) -> list[dict[str, Any]]:
    """The round's cards in the order dealt, rebuilt by replaying the journaled events.

    The replay starts from the last checkpoint before the round (or the file's table row when
    there is none), so a round of any segment is rebuilt from that segment alone. Each card is
    `{"card", "to", "face_up"}` (Engine.dealt_cards()). Face-down cards are included: this
    reads the access-controlled journal for a dispute, never a log or status.
    """
    db = _connect_read_only(path)
    try:
        table = next((_to_row(r) for r in _raw_rows(path, db) if r[1] == "table"), None)
        if table is None:
            raise JournalError(
                f"{path}: no table row: the journal does not say which game it holds"
            )
        found = db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            # the partial index's own condition, so SQLite searches it instead of the table
            " WHERE kind = 'checkpoint' AND kind IN ('segment', 'checkpoint', 'seal')"
            " AND round < ? ORDER BY seq DESC LIMIT 1",
            (round_number,),
        ).fetchone()
        draws = ReplayedDraws(())
        engine: EngineLike
        if found is not None:
            checkpoint = _to_row(found)
            engine = engine_from_checkpoint(table.body, checkpoint.body["engine"], draws)
            start = checkpoint.seq + 1
        else:
            engine = engine_factory(table.body, draws)
            start = table.seq
        cursor = db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " WHERE seq >= ? ORDER BY seq",
            (start,),
        )
        found = _replay_round(engine, draws, (_to_row(r) for r in cursor), round_number)
    except sqlite3.Error as error:
        raise JournalError(f"{path}: cannot read the journal: {error}") from error
    finally:
        db.close()
    return _cards_shown(found, round_number, engine.round_number, str(path), over_only)


def _replay_round(
    engine: EngineLike, draws: ReplayedDraws, rows: Iterator[JournalRow], round_number: int
) -> tuple[list[dict[str, Any]] | None, bool]:
    """Replay events (each with the draws journaled after it) until `round_number` is over.

    Its cards, and whether it is over: collected (the engine forgot its cards) or followed by
    the next round. A round still in play is not (its face-down cards are still face down).
    """
    snapshot: list[dict[str, Any]] | None = None
    over = False
    pending: JournalRow | None = None
    for row in itertools.chain(rows, [None]):
        if row is not None and row.kind == "note" and row.body.get("type") == RANDOM_DRAW:
            draws.extend([row.body])
            continue
        if row is not None and row.kind != "event":
            continue
        if pending is not None:
            engine.handle(pending.body, pending.seq)
            if engine.round_number == round_number:
                cards = [dict(card) for card in engine.dealt_cards()]
                # The engine clears its dealt cards when the round ends (hands_collected)
                # while round_number stays until the next deal: keep the last non-empty view.
                if snapshot is None or cards:
                    snapshot = cards
                elif snapshot:
                    over = True  # collected
            elif engine.round_number > round_number:
                over = True
                break
        pending = row
    return snapshot, over


def _cards_shown(
    found: tuple[list[dict[str, Any]] | None, bool],
    round_number: int,
    reached: int,
    where: str,
    over_only: bool,
) -> list[dict[str, Any]]:
    snapshot, over = found
    if snapshot is None:
        raise JournalError(
            f"{where}: round {round_number} is not in the journal (it holds rounds up to {reached})"
        )
    if over_only and not over:
        raise JournalError(
            f"{where}: round {round_number} is still in play: its cards are shown once it is "
            "over (collected, or the next round begun), never while face down (H7)"
        )
    return snapshot


def replay_round(
    journal_rows: Iterable[JournalRow],
    round_number: int,
    engine_factory: EngineFactory = engine_from_table_row,
    *,
    where: str = "the journal",
    over_only: bool = False,
) -> list[dict[str, Any]]:
    """`round_cards` over rows from any store (the floor's copy): from the last checkpoint
    before the round, or the table row."""
    rows = list(journal_rows)
    table = next((row for row in rows if row.kind == "table"), None)
    if table is None:
        raise JournalError(f"{where}: no table row: the journal does not say which game it holds")
    checkpoint = None
    for row in rows:
        if row.kind == "checkpoint" and row.round is not None and row.round < round_number:
            checkpoint = row
    draws = ReplayedDraws(())
    engine: EngineLike
    if checkpoint is not None:
        engine = engine_from_checkpoint(table.body, checkpoint.body["engine"], draws)
        start = checkpoint.seq + 1
    else:
        engine = engine_factory(table.body, draws)
        start = table.seq
    found = _replay_round(engine, draws, (r for r in rows if r.seq >= start), round_number)
    return _cards_shown(found, round_number, engine.round_number, where, over_only)


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
