"""Ships a table's committed journal rows to the floor store, on a thread of its own.

The local journal stays the truth and the table never waits for the floor: the journal only
tells the shipper the last committed seq (`notify`, a few hundred nanoseconds on the table's
thread); the shipper reads the rows back from the SQLite file with its own read-only
connection, at most `batch_rows` at a time (bounded memory, whatever the backlog), and sends
each batch as one binary COPY in one transaction. It resumes from the floor's own head (the
last row the floor acknowledged, read back at every connection), so an outage of PostgreSQL,
of the network or of the daemon (kill -9 included) loses nothing and duplicates nothing: it
sends only the rows after that head, and a row the floor holds, or one that differs under the
same seq, is refused by the floor's check, which stops the shipping and names the divergence
(a rewritten or cut local journal).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from tablectl.controller.common import metrics
from tablectl.controller.common.config import FloorConfig
from tablectl.controller.common.logs import get_logger
from tablectl.controller.floor.local import LocalJournal, Row, floor_time
from tablectl.controller.floor.schema import (
    ADD_SUMMARIES,
    CHAIN_COLUMNS,
    DAYS_AHEAD,
    OWN_TABLE_CHECK,
    SCHEMA,
    SHIP_CHECKPOINT,
    SQLSTATE_CHAIN,
    SQLSTATE_DIVERGED,
    STATEMENT_TIMEOUT_MS,
    SUMMARIES_PER_CALL,
)
from tablectl.controller.floor.summary import (
    PENDING_MAX,
    HandedSummary,
    RoundSummary,
    ShipperSummaries,
    TableSummaries,
)
from tablectl.controller.record.journal import parse_row
from tablectl.controller.record.witnessed import WITNESSED_SUFFIX, witnessed_dir

#: seconds between attempts after a failure: doubling from RETRY_MIN up to RETRY_MAX
RETRY_MIN = 0.25
RETRY_MAX = 10.0
#: ... but a connection that failed (the floor away, or failing over) is tried again within
#: this long: a replicated floor's failover is over in seconds (Patroni promotes the
#: synchronous standby ~3 s after the primary dies, measured: docs/floor.md), and the shipper
#: should find the new primary then, not up to RETRY_MAX later. Each wait is drawn between
#: half and all of the back-off, so 400 tables do not log in to the new primary in step.
RETRY_CONNECTION_MAX = 2.0
#: after a commit wakes it, the shipper waits this long for more rows before it reads: a
#: table's burst goes as one INSERT transaction, not one per event (fewer wake-ups and
#: round trips taken from the table PC's CPU); far below the 2 s a floor may trail a burst
LINGER_SECONDS = 0.1
#: how long a clean stop keeps shipping what is left before it gives up (the rest goes next start)
DRAIN_SECONDS = 2.0
CONNECT_TIMEOUT = 5
#: while caught up the thread sleeps until the journal commits; this wakes it now and then
#: even if a notification was somehow missed
IDLE_WAKE_SECONDS = 30.0
#: how often the daemon's loop recomputes rows and seconds behind from its own side (the
#: journal's head and the last acknowledged row), whatever the thread is doing: well inside
#: one scrape interval (15 s)
GAUGE_SECONDS = 1.0
#: a statement the floor has not answered for this long is abandoned from the daemon's side
#: (its socket shut down): a backend that is stopped or hung cannot time itself out
STUCK_SECONDS = STATEMENT_TIMEOUT_MS / 1000 + 5
#: beside the journal: the last seq the floor acknowledged, as last seen (a hint for the
#: gauges after a restart while the floor is away; shipping always resumes from the floor's
#: own head). Fixed width, rewritten in place: no rename, nothing to fsync.
ACK_HINT_SUFFIX = ".floor-acked"
#: how often the shipper asks the floor which rows it holds durable on two machines
#: (floor.durable_elsewhere: a synchronous standby flushed them, or the WAL archive holds
#: them): what retention without an archive may remove locally
DURABLE_CHECK_SECONDS = 5.0

#: cosigned checkpoints waiting for the floor's release mark to pass their tree (the newest
#: kept when more wait: a larger tree proves every round a smaller one does)
MAX_PENDING_CHECKPOINTS = 256
#: of a witness's history (every checkpoint it cosigned, ~300 bytes a line), what a shipper
#: reads at its start: the last few hundred (the newest covers every earlier round anyway)
HISTORY_TAIL_BYTES = 128 * 1024
#: a checkpoint the floor held (its tree past the release mark) is offered again only after
#: more rows were shipped (the mark moves with them alone), and while a backlog or a round's
#: rows stream, after this long at the soonest: not one more statement per batch
HELD_CHECKPOINT_RETRY_SECONDS = 1.0


class CosignedFeed:
    """The cosigned checkpoints the table's witness client keeps beside the journal
    (`JOURNAL.witnessed/`: each witness's newest, `*.checkpoint`, and every one it cosigned,
    `*.history`, a JSON line each), read by the shipper as they come: at its start the
    newest of each witness (it covers every earlier one) and the last HISTORY_TAIL_BYTES of
    its history, then each line appended to a history: `new()` reads only what was appended
    since (a note offered twice is 'known' to the floor)."""

    def __init__(self, journal_path: Path) -> None:
        self.directory = witnessed_dir(journal_path)
        self._offsets: dict[Path, int] = {}

    def new(self) -> list[str]:
        notes: list[str] = []
        try:
            paths = sorted(self.directory.glob("*.history"))
        except OSError:
            return notes
        for path in paths:
            offset = self._offsets.get(path)
            try:
                size = path.stat().st_size
                first_read = offset is None
                if offset is None:  # first seen: its last HISTORY_TAIL_BYTES, and the newest
                    offset = max(0, size - HISTORY_TAIL_BYTES)
                    newest = path.with_suffix(".checkpoint")
                    with contextlib.suppress(OSError, UnicodeError):
                        notes.append(newest.read_text())
                if size <= offset:
                    self._offsets[path] = offset
                    continue
                with path.open("rb") as stream:
                    stream.seek(offset)
                    chunk = stream.read(size - offset)
            except OSError:
                continue
            if first_read and offset:  # begun inside a line: from the next one
                start = chunk.find(b"\n") + 1
                offset, chunk = offset + start, chunk[start:]
            complete = chunk.rfind(b"\n") + 1  # a line still being written waits
            self._offsets[path] = offset + complete
            for line in chunk[:complete].splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError, UnicodeError):
                    note = json.loads(line)["note"]
                    if isinstance(note, str):
                        notes.append(note)
        return list(dict.fromkeys(notes))


def note_tree_size(note: str) -> int | None:
    """A checkpoint note's tree size (its second line), None when it has none."""
    lines = note.split("\n", 2)
    return int(lines[1]) if len(lines) > 2 and lines[1].isdigit() else None


#: One COPY per batch, binary (no escaping of bodies, and the server's multi-row insert path:
#: an INSERT of the same rows, even as arrays unnested by the server, ran at half a COPY's
#: rate), checked as one statement by the floor's trigger (the table's own rows, continuing
#: its head, one run, linked). The shipper sends only rows after the floor's head, which it
#: verified on connecting; a row the floor holds already is refused by the trigger.
#: the chain's columns as the shipper's COPY names them (the bench's COPY floors name the same)
COPY_COLUMNS = "table_id, seq, kind, round, recorded_at, recorded_at_text, body, prev_hash, hash"
_COPY = f"COPY {SCHEMA}.journal_rows ({COPY_COLUMNS}, columns) FROM STDIN (FORMAT BINARY)"
_COPY_TYPES = [
    "text",
    "int8",
    "text",
    "int8",
    "timestamptz",
    "text",
    "text",
    "text",
    "text",
    "jsonb",
]
#: a batch whose rows have no column beyond the chain's (the journal as it is today): the
#: floor's `columns` keeps its default, {}
_COPY_CHAIN_ONLY = f"COPY {SCHEMA}.journal_rows ({COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)"
_CHAIN_ONLY_TYPES = _COPY_TYPES[:-1]


def _raw(row: LocalRow) -> tuple[Any, ...]:
    values = row.values
    return (
        row.seq,
        values["kind"],
        values["round"],
        values["recorded_at"],
        values["body"],
        values["prev_hash"],
        values["hash"],
    )


class FloorDiverged(RuntimeError):
    """The floor holds rows the local journal does not hold the same: shipping stops."""


class LocalRow(NamedTuple):
    """A local row as read: its seq, and every column by name (a tuple, not a dataclass: a
    shipper makes one for every row it sends)."""

    seq: int
    values: Row
    #: its recorded_at as the floor keeps it (floor_time), once read: the summaries and the
    #: COPY both need it
    at: tuple[datetime.datetime, str | None] | None = None

    @property
    def recorded_at(self) -> str:
        return str(self.values["recorded_at"])  # a chain column: every journal row has it

    def floor_time(self) -> tuple[datetime.datetime, str | None]:
        return self.at if self.at is not None else floor_time(self.recorded_at)


def _unix_time(recorded_at: str) -> float | None:
    try:
        moment = datetime.datetime.fromisoformat(recorded_at)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _json_value(value: Any) -> Any:
    """A local column's value as JSON holds it: a BLOB as {"hex": ...}, the rest as it is."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    return value


def copy_fields(table_id: str, row: LocalRow, chain_only: bool) -> tuple[Any, ...]:
    """A local row as the shipper's COPY writes it (_COPY's columns; the chain's alone when
    `chain_only`): one place, so the per-row CPU bench times what the shipper does."""
    values = row.values
    moment, text = row.floor_time()
    fields: tuple[Any, ...] = (
        table_id,
        row.seq,
        values["kind"],
        values["round"],
        moment,
        text,
        values["body"],
        values["prev_hash"],
        values["hash"],
    )
    if chain_only:
        return fields
    extra = {
        k: _json_value(v)
        for k, v in zip(values.keys(), values, strict=True)
        if k not in CHAIN_COLUMNS
    }
    return (*fields, extra)


#: the call that ships a table's summaries (the floor keeps those its release mark passed)
ADD_SUMMARIES_CALL = f"SELECT {SCHEMA}.add_round_summaries(%s, %s, %s, %s, %s, %s, %s::jsonb[])"


def summary_arguments(table_id: str, offered: list[RoundSummary]) -> tuple[Any, ...]:
    """ADD_SUMMARIES_CALL's arguments for these spans, in their order: one place, so the
    bench's floor side (tests/bench/floor_scale.py) sends what a shipper sends."""
    return (
        table_id,
        [s.from_seq for s in offered],
        [s.to_seq for s in offered],
        [s.first_at for s in offered],
        [s.last_at for s in offered],
        [s.ended_at for s in offered],
        [s.text() for s in offered],
    )


#: Every word error_kind() gives: each label set starts at 0, so increase() sees a first error.
ERROR_KINDS = (
    "diverged",
    "local_journal",
    "refused",
    "authentication",
    "connection",
    "database",
    "other",
)


def error_kind(error: BaseException) -> str:
    """A bounded word for the metric label: what went wrong, not the message."""
    import psycopg

    if isinstance(error, FloorDiverged):
        return "diverged"
    if isinstance(error, sqlite3.Error):
        return "local_journal"
    if isinstance(error, psycopg.Error):
        state = getattr(error, "sqlstate", None)
        if state in (SQLSTATE_DIVERGED, SQLSTATE_CHAIN):
            return "diverged"
        if isinstance(error, psycopg.errors.InsufficientPrivilege) or (
            isinstance(error, psycopg.errors.CheckViolation) and OWN_TABLE_CHECK in str(error)
        ):
            return "refused"
        if "authentication" in str(error) or "password" in str(error):
            return "authentication"
        if isinstance(error, psycopg.OperationalError):
            return "connection"
        return "database"
    return "other"


class FloorShipper:
    """One table's shipping thread: start it, `notify` it on commit, stop it at shutdown."""

    def __init__(
        self,
        table_id: str,
        journal_path: Path,
        floor: FloorConfig,
        *,
        clock: Callable[[], float] = time.time,
        publish_metrics: bool = True,
        retry_min: float = RETRY_MIN,
        retry_max: float = RETRY_MAX,
        retry_connection_max: float = RETRY_CONNECTION_MAX,
        linger: float = LINGER_SECONDS,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
        connect_timeout: int = CONNECT_TIMEOUT,
        stuck_seconds: float = STUCK_SECONDS,
        summaries: bool = True,
    ) -> None:
        self.table_id = table_id
        self.journal_path = Path(journal_path)
        self.floor = floor
        self.clock = clock
        self.publish_metrics = publish_metrics
        if publish_metrics:
            metrics.register_floor_metrics()
            for kind in ERROR_KINDS:
                metrics.FLOOR_SHIP_ERRORS_TOTAL.labels(error=kind)
            metrics.FLOOR_DIVERGED.set(0)
        self.retry_min = retry_min
        self.retry_max = retry_max
        self.retry_connection_max = retry_connection_max
        self.linger = linger
        self.statement_timeout_ms = statement_timeout_ms
        self.connect_timeout = connect_timeout
        self.stuck_seconds = stuck_seconds
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._drain_until = 0.0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._log = get_logger("floor", table=table_id)
        #: told once per divergence (on the shipper's thread), with why: the daemon alarms,
        #: journals it and, as configured, holds dealing; again only after the floor and the
        #: journal matched once more
        self.on_diverged: Callable[[str], None] | None = None
        self._divergence_told = False
        # what the status reports (written by the thread, read by anyone)
        self.committed_seq = 0
        self.acknowledged_seq = 0
        self.head_known = False
        self.state = "starting"
        self.shipped_rows = 0
        #: the last row the floor said it holds on two machines (0: none, or a floor that
        #: cannot tell: then retention without an archive removes nothing)
        self.durable_elsewhere_seq = 0
        self._durable_checked = -DURABLE_CHECK_SECONDS
        self._durable_unknown = False
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        # the oldest row not acknowledged: (its seq, its recorded time), read by whichever
        # side needs it first; valid while its seq is acknowledged_seq + 1
        self._oldest_waiting: tuple[int, float | None] | None = None
        # the statement in flight: (its connection, since when, monotonic)
        self._in_flight: tuple[Any, float] | None = None
        self._gauge_journal: LocalJournal | None = None
        self._ack_hint = self.journal_path.with_name(self.journal_path.name + ACK_HINT_SUFFIX)
        self.acknowledged_seq = self._read_ack_hint()
        #: per-round summaries (floor/summary.py) computed as the rows ship; False ships rows
        #: only (as a table of an earlier tablectl: the report replays its rounds)
        self.summaries = summaries
        self._summarizer: ShipperSummaries | None = None
        self._pending: list[RoundSummary] = []
        self._summary_failure_told: str | None = None
        self.summaries_shipped = 0
        #: the spans its table counts as it appends the rows (hand_over_summaries): None, a
        #: standalone shipper replays the engine over the rows for its summaries
        self.table_summaries: TableSummaries | None = None
        self._unverified_told = False
        self._replayed_retired = 0  # summary_events_replayed of the summarizers before
        #: cosigned checkpoints read from beside the journal, not yet on the floor: by note,
        #: its tree size (shipped once the floor's release mark passes it: `floor prove`)
        self._cosigned = CosignedFeed(self.journal_path)
        self._pending_checkpoints: dict[str, int] = {}
        self._checkpoints_unsupported = False
        self._held_until = 0.0
        self._held_at_seq = -1
        self.shipped_checkpoints = 0

    # -- the table's side ---------------------------------------------------------------------

    def notify(self, seq: int) -> None:
        """The journal committed up to `seq` (called on the table's thread: stays tiny)."""
        self.committed_seq = seq
        self._wake.set()

    def hand_over_summaries(self, first_seq: int) -> TableSummaries | None:
        """From row `first_seq` on, the table counts the spans itself (TableSummaries: fed by
        its journal and its engine, on the table's thread) and this shipper only ships them;
        the rows before it are replayed here. None: no summaries shipped."""
        if not self.summaries:
            return None
        self.table_summaries = TableSummaries(first_seq)
        return self.table_summaries

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"floor-shipper:{self.table_id}", daemon=True
        )
        self._thread.start()

    def stop(self, drain_seconds: float = DRAIN_SECONDS) -> None:
        """Ship what is left for at most `drain_seconds`, then end the thread."""
        self._drain_until = time.monotonic() + drain_seconds
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(drain_seconds + self.connect_timeout + 1)
            self._thread = None
        if self._gauge_journal is not None:
            self._gauge_journal.close()
            self._gauge_journal = None

    def confirmed_seq(self) -> int:
        """The last row the floor store holds for sure on two machines (0 when unknown): what
        retention may remove without an archive. The shipper checked, when it connected, that
        the floor's last row has the local row's hash, and ships in order, each batch
        committed there; a commit on one server is not enough (its disk is one disk), so this
        is bounded by what the floor says is durable elsewhere (floor.durable_elsewhere)."""
        with self._lock:
            if not self.head_known or self.state == "diverged":
                return 0
            return min(self.acknowledged_seq, self.durable_elsewhere_seq)

    @property
    def rows_behind(self) -> int:
        return max(0, self.committed_seq - self.acknowledged_seq)

    def seconds_behind(self) -> float:
        oldest = self._oldest_waiting
        if self.rows_behind == 0 or oldest is None or oldest[0] != self.acknowledged_seq + 1:
            return 0.0
        if oldest[1] is None:
            return 0.0
        return max(0.0, self.clock() - oldest[1])

    def refresh(self) -> None:
        """On the daemon's loop, every GAUGE_SECONDS: rows and seconds behind from the table's
        side (the journal's head against the last row the floor acknowledged, and the recorded
        time of the oldest row not acknowledged, read from the local journal), published
        whatever the thread is doing: a floor that hangs, crawls or is away moves the gauges.
        A statement unanswered for `stuck_seconds` is abandoned (its socket shut down) so the
        thread reconnects rather than wait on a stopped backend."""
        waiting = self.acknowledged_seq + 1
        known = self._oldest_waiting
        if self.rows_behind and (known is None or known[0] != waiting):
            self._oldest_waiting = (waiting, self._recorded_time(waiting))
        self._publish()
        flight = self._in_flight
        if flight is not None and time.monotonic() - flight[1] > self.stuck_seconds:
            self._in_flight = None
            self._abandon(flight[0])

    def _recorded_time(self, seq: int) -> float | None:
        try:
            if self._gauge_journal is None:
                self._gauge_journal = LocalJournal(self.journal_path)
            rows = self._gauge_journal.rows_after(seq - 1, 1)
        except (sqlite3.Error, OSError):
            if self._gauge_journal is not None:
                self._gauge_journal.close()
                self._gauge_journal = None
            return None
        return _unix_time(str(rows[0]["recorded_at"])) if rows else None

    def _abandon(self, conn: Any) -> None:
        """Shut the stuck connection's socket down under the thread's blocked read: it fails
        at once with a connection error and the thread starts over on a new connection."""
        try:
            duplicate = socket.socket(fileno=os.dup(conn.fileno()))
        except (OSError, ValueError, AttributeError):
            return
        with contextlib.suppress(OSError):
            duplicate.shutdown(socket.SHUT_RDWR)
        duplicate.close()
        self._log.warning("floor_statement_abandoned", after_seconds=self.stuck_seconds)

    def _read_ack_hint(self) -> int:
        try:
            return max(0, int(self._ack_hint.read_text().strip() or 0))
        except (OSError, ValueError):
            return 0

    def _write_ack_hint(self, seq: int) -> None:
        with contextlib.suppress(OSError):
            descriptor = os.open(self._ack_hint, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.pwrite(descriptor, f"{seq:>20}\n".encode(), 0)
            finally:
                os.close(descriptor)

    def status(self) -> dict[str, Any]:
        """For `tablectl status`: the ship state in plain words and figures (no row content)."""
        with self._lock:
            status: dict[str, Any] = {
                "state": self.state,
                "acknowledged_seq": self.acknowledged_seq if self.head_known else None,
                "committed_seq": self.committed_seq,
                "rows_behind": self.rows_behind,
                "seconds_behind": round(self.seconds_behind(), 1),
                "shipped_rows": self.shipped_rows,
                "durable_elsewhere_seq": self.durable_elsewhere_seq,
                "last_error": self.last_error,
            }
            if self.last_error_at is not None:
                status["last_error_at"] = datetime.datetime.fromtimestamp(
                    self.last_error_at, datetime.UTC
                ).isoformat(timespec="seconds")
        return status

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        local: LocalJournal | None = None
        conn: Any = None
        delay = self.retry_min
        try:
            while True:
                if self._stopping.is_set() and (
                    conn is None or time.monotonic() >= self._drain_until
                ):
                    break  # a stop does not wait for a floor that is away: next start resumes
                try:
                    if local is None:
                        local = LocalJournal(self.journal_path)
                        self.committed_seq = max(self.committed_seq, local.last_seq())
                    if conn is None:
                        conn = self._connect()
                        self._resume(conn, local)
                        delay = self.retry_min
                    self._wake.clear()
                    batch = self._read_batch(local)
                    if not batch:
                        self._set_state("caught_up")
                        self._ship_checkpoints(conn, caught_up=True)
                        self._check_durable(conn)
                        self._publish()
                        if self._stopping.is_set():
                            break
                        if self._idle(conn) and self.linger:
                            self._stopping.wait(self.linger)  # let the burst gather
                        continue
                    self._note_waiting(batch[0])
                    self._set_state("shipping")
                    self._summarize(batch)
                    self._insert(conn, batch)
                    with self._lock:
                        self.acknowledged_seq = batch[-1].seq
                        self.committed_seq = max(self.committed_seq, self.acknowledged_seq)
                        self.shipped_rows += len(batch)
                    self._write_ack_hint(self.acknowledged_seq)
                    self._ship_checkpoints(conn)
                    self._check_durable(conn)
                    self._publish()
                    if len(batch) < self.floor.batch_rows and self.linger:
                        # not a backlog: the table is playing; gather its next rows a while
                        self._stopping.wait(self.linger)
                except Exception as error:  # the thread must outlive any one failure
                    conn = self._close(conn)
                    if isinstance(error, sqlite3.Error | OSError) and local is not None:
                        local.close()
                        local = None
                    self._failed(error)
                    if local is not None:
                        self._refresh_waiting(local)
                    self._publish()
                    if self._stopping.is_set():
                        break
                    # commits do not cut the back-off short (they come every few ms in
                    # play); only a stop does
                    self._stopping.wait(random.uniform(delay / 2, delay))
                    kind = error_kind(error)
                    if isinstance(error, FloorDiverged) or kind == "diverged":
                        delay = self.retry_max
                    elif kind == "connection":
                        delay = min(self.retry_max, self.retry_connection_max, delay * 2)
                    else:
                        delay = min(self.retry_max, delay * 2)
        finally:
            self._close(conn)
            if local is not None:
                local.close()
            self._retire_summarizer()
            self._set_state("stopped")
            self._in_flight = None

    def _set_state(self, state: str) -> None:
        with self._lock:
            self.state = state

    def _connect(self) -> Any:
        import psycopg

        self._set_state("connecting")
        options: dict[str, Any] = {
            "connect_timeout": self.connect_timeout,
            "application_name": f"tablectl {self.table_id}",
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            # a floor that accepts the connection but never answers fails the batch, which is
            # tried again, rather than hang the shipper with its gauges frozen
            "options": f"-c statement_timeout={self.statement_timeout_ms}",
        }
        if self.floor.passfile is not None:
            options["passfile"] = str(self.floor.passfile)
        conn = psycopg.connect(self.floor.dsn, **options)
        # no server-side prepared statements: a pooler in transaction mode (PgBouncer before
        # 1.21) may hand the next transaction to another server connection
        conn.prepare_threshold = None
        return conn

    def _resume(self, conn: Any, local: LocalJournal) -> None:
        """Read the floor's head for this table; the local row there must be the same row."""
        self._in_flight = (conn, time.monotonic())
        conn.execute(f"SELECT {SCHEMA}.ensure_partitions_ahead(%s)", (DAYS_AHEAD,))
        row = conn.execute(
            f"SELECT head_seq, head_hash FROM {SCHEMA}.tables WHERE table_id = %s",
            (self.table_id,),
        ).fetchone()
        conn.commit()
        if row is None:
            raise RuntimeError(
                f"table {self.table_id} is not registered on the floor "
                "(tablectl floor init --table)"
            )
        row = row if row[0] else None
        self._in_flight = None
        head_seq, head_hash = (int(row[0]), str(row[1])) if row else (0, None)
        if head_seq:
            mine = local.hash_at(head_seq)
            if mine is None:
                raise FloorDiverged(
                    f"the floor holds table {self.table_id} up to row {head_seq}, the local "
                    f"journal only to row {local.last_seq()}: it was cut "
                    f"(tablectl floor compare names the rows)"
                )
            if mine != head_hash:
                raise FloorDiverged(
                    f"row {head_seq} of the local journal differs from the floor's copy: the "
                    "journal was rewritten (tablectl floor compare names the first such row)"
                )
        with self._lock:
            self.acknowledged_seq = head_seq
            self.head_known = True
        self._begin_summaries(conn, head_seq)
        self._divergence_told = False
        self._write_ack_hint(head_seq)
        self._log.info("floor_connected", acknowledged_seq=head_seq)

    def _begin_summaries(self, conn: Any, head_seq: int) -> None:
        """At every connection: the replayed summaries begin again from the floor's head (at
        row 1, or at the next checkpoint row shipped; the table row read back from the
        floor); the spans the table counted and not yet on the floor wait on (the floor
        skips any it holds). A floor made before summaries (no add_round_summaries) gets
        rows only."""
        self._retire_summarizer()
        table = self.table_summaries
        self._pending = [
            s for s in self._pending if table is not None and s.from_seq >= table.first_seq
        ]
        if not self.summaries:
            return
        found = conn.execute(
            "SELECT to_regprocedure(%s) IS NOT NULL", (f"{SCHEMA}.{ADD_SUMMARIES}",)
        ).fetchone()
        conn.commit()
        if not found or not found[0]:
            self._log.warning(
                "floor_summaries_unavailable",
                reason="the floor has no add_round_summaries() (run tablectl floor init"
                " again): the day's report replays this table's rounds",
            )
            return
        summarizer = ShipperSummaries()
        if head_seq:  # its own row only (a policy): the table row the floor took from row 1
            row = conn.execute(
                f"SELECT table_row FROM {SCHEMA}.tables WHERE table_id = %s", (self.table_id,)
            ).fetchone()
            conn.commit()
            if row and row[0]:
                table_row = json.loads(row[0])
                summarizer.set_table_row(table_row)
                if table is not None:
                    table.set_table_row(table_row)
        self._summarizer = summarizer

    @property
    def summary_events_replayed(self) -> int:
        """Events the summaries replayed through an engine (none for the rows its table
        counted itself: a replay is ~15 times the rest of shipping a row)."""
        summarizer = self._summarizer
        return self._replayed_retired + (0 if summarizer is None else summarizer.replayed_events)

    def _retire_summarizer(self) -> None:
        summarizer = self._summarizer
        if summarizer is not None:
            self._replayed_retired += summarizer.replayed_events
            self._summarizer = None

    def _summarize(self, batch: list[LocalRow]) -> None:
        """The batch's summaries, before its transaction: the spans its table counted as it
        appended the rows (taken once their closing row is in the batch, and checked against
        it), and for rows its table did not count (written before it started, or a
        standalone shipper), the engine replayed over them here."""
        summarizer, table, pending = self._summarizer, self.table_summaries, self._pending
        first_counted = table.first_seq if table is not None else batch[-1].seq + 1
        if summarizer is not None and batch[0].seq < first_counted:
            feed = summarizer.feed
            for row in batch:
                if row.seq >= first_counted:
                    break
                parsed = parse_row(_raw(row))
                if row.seq == 1 and table is not None:
                    table.set_table_row(parsed.body)
                closed = feed(parsed, row.floor_time()[0])
                if closed is not None:
                    pending.append(closed)
            pending.sort(key=lambda s: s.to_seq)  # after any of the table's waiting (rare)
            self._tell_summaries_stopped(summarizer.failure)
        if table is not None and batch[-1].seq > first_counted:
            taken = table.take(batch[-1].seq)
            if summarizer is not None:  # else a floor without summaries: dropped
                pending.extend(s.summary for s in taken if self._closes(s, batch))
            self._tell_summaries_stopped(table.failure)
        if len(pending) > PENDING_MAX:
            del pending[: len(pending) - PENDING_MAX]

    def _closes(self, handed: HandedSummary, batch: list[LocalRow]) -> bool:
        """Whether the batch's row right after the span links to the span's last row as the
        table counted it (then every row of the span is the one on disk: the chain)."""
        closing = handed.summary.to_seq + 1
        index = closing - batch[0].seq
        if not (0 <= index < len(batch) and batch[index].seq == closing):
            index = next((i for i, row in enumerate(batch) if row.seq == closing), -1)
        if index >= 0 and batch[index].values["prev_hash"] == handed.closing_prev_hash:
            return True
        if not self._unverified_told:
            self._unverified_told = True
            self._log.warning(
                "floor_summary_unverified",
                to_seq=handed.summary.to_seq,
                reason="the span the table counted does not end at the row the journal"
                " holds: not shipped; the day's report replays its rows",
            )
        return False

    def _tell_summaries_stopped(self, failure: str | None) -> None:
        if failure and failure != self._summary_failure_told:
            self._summary_failure_told = failure
            self._log.warning(
                "floor_summaries_stopped",
                reason=f"the rows could not be counted ({failure}): no summaries until the"
                " next checkpoint row; the day's report replays those",
            )

    def _ship_summaries(self, conn: Any) -> None:
        """In the batch's transaction, after its COPY: the summaries whose rows the floor now
        releases (it keeps the others out: they wait here for the next batch)."""
        pending = self._pending
        if not pending:
            return
        offered = pending[:SUMMARIES_PER_CALL]
        handled = conn.execute(
            ADD_SUMMARIES_CALL, summary_arguments(self.table_id, offered)
        ).fetchone()
        upto = int(handled[0]) if handled and handled[0] is not None else 0
        taken = sum(1 for s in offered if s.to_seq <= upto)
        if taken:
            del pending[:taken]
            self.summaries_shipped += taken

    def _idle(self, conn: Any) -> bool:
        """Caught up: wait for the journal's next commit (True) or IDLE_WAKE_SECONDS (False).
        Meanwhile, while rows are acknowledged but not yet durable elsewhere, the floor is
        asked again every DURABLE_CHECK_SECONDS (the journal is not read for that)."""
        until = time.monotonic() + IDLE_WAKE_SECONDS
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            proving = (
                not self._durable_unknown and self.durable_elsewhere_seq < self.acknowledged_seq
            )
            if self._wake.wait(min(left, DURABLE_CHECK_SECONDS) if proving else left):
                return True
            if self._stopping.is_set():
                return False
            if proving:
                self._check_durable(conn)

    def _check_durable(self, conn: Any) -> None:
        """Every DURABLE_CHECK_SECONDS: the floor's durable_elsewhere for this table. A floor
        made before it (no such function) is said once and counts as holding nothing
        elsewhere."""
        import psycopg

        now = time.monotonic()
        if self._durable_unknown or now - self._durable_checked < DURABLE_CHECK_SECONDS:
            return
        self._durable_checked = now
        self._in_flight = (conn, now)
        try:
            with conn.transaction():
                row = conn.execute(
                    f"SELECT {SCHEMA}.durable_elsewhere(%s)", (self.table_id,)
                ).fetchone()
        except psycopg.errors.UndefinedFunction:
            self._durable_unknown = True
            self._log.warning(
                "floor_durability_unknown",
                reason="the floor has no durable_elsewhere() (run tablectl floor init again):"
                " retention without an archive removes nothing",
            )
            return
        finally:
            self._in_flight = None
        with self._lock:
            self.durable_elsewhere_seq = int(row[0]) if row and row[0] is not None else 0

    def _ship_checkpoints(self, conn: Any, *, caught_up: bool = False) -> None:
        """The cosigned checkpoints the witnesses returned, to the floor (ship_checkpoint),
        smallest tree first, each once the floor's release mark passes its tree ('held'
        before: offered again after the next rows). A floor made before floor.checkpoints
        is said once and gets none; a note the floor refuses as malformed (a file edited on
        the box) is said and dropped."""
        import psycopg

        if self._checkpoints_unsupported:
            return
        fresh = self._cosigned.new()
        for note in fresh:
            size = note_tree_size(note)
            if size is not None:
                self._pending_checkpoints[note] = size
        if not self._pending_checkpoints:
            return
        if not fresh and (
            self.acknowledged_seq == self._held_at_seq
            or (not caught_up and time.monotonic() < self._held_until)
        ):
            return
        if len(self._pending_checkpoints) > MAX_PENDING_CHECKPOINTS:
            kept = sorted(self._pending_checkpoints.items(), key=lambda item: item[1])
            self._pending_checkpoints = dict(kept[-MAX_PENDING_CHECKPOINTS:])
        for note, size in sorted(self._pending_checkpoints.items(), key=lambda item: item[1]):
            self._in_flight = (conn, time.monotonic())
            try:
                with conn.transaction():
                    row = conn.execute(
                        f"SELECT {SCHEMA}.{SHIP_CHECKPOINT}(%s, %s)", (self.table_id, note)
                    ).fetchone()
            except psycopg.errors.UndefinedFunction:
                self._checkpoints_unsupported = True
                self._log.warning(
                    "floor_checkpoints_unsupported",
                    reason="the floor has no ship_checkpoint() (run tablectl floor init "
                    "again): floor prove has no cosigned checkpoint of this table",
                )
                return
            except psycopg.errors.InvalidParameterValue as error:
                del self._pending_checkpoints[note]
                self._log.warning(
                    "floor_checkpoint_refused",
                    tree_size=size,
                    directory=f"{self.journal_path.name}{WITNESSED_SUFFIX}",
                    message=str(error).strip(),
                )
                continue
            finally:
                self._in_flight = None
            if row is None or row[0] == "held":
                # its rows are not all released yet; the larger ones neither
                self._held_until = time.monotonic() + HELD_CHECKPOINT_RETRY_SECONDS
                self._held_at_seq = self.acknowledged_seq
                return
            del self._pending_checkpoints[note]
            if row[0] == "stored":
                self.shipped_checkpoints += 1
                self._log.info("floor_checkpoint_shipped", tree_size=size)

    def _read_batch(self, local: LocalJournal) -> list[LocalRow]:
        batch = [
            LocalRow(int(values["seq"]), values, floor_time(values["recorded_at"]))
            for values in local.rows_after(self.acknowledged_seq, self.floor.batch_rows)
        ]
        if batch:
            self.committed_seq = max(self.committed_seq, batch[-1].seq)
        return batch

    def _insert(self, conn: Any, batch: list[LocalRow]) -> None:
        table_id = self.table_id
        chain_only = all(len(row.values) == len(CHAIN_COLUMNS) for row in batch)
        self._in_flight = (conn, time.monotonic())
        try:
            with conn.transaction():
                with (
                    conn.cursor() as cursor,
                    cursor.copy(_COPY_CHAIN_ONLY if chain_only else _COPY) as copy,
                ):
                    copy.set_types(_CHAIN_ONLY_TYPES if chain_only else _COPY_TYPES)
                    write_row = copy.write_row
                    for row in batch:
                        write_row(copy_fields(table_id, row, chain_only))
                if self._pending:  # after the COPY: its rows' release is what they need
                    self._ship_summaries(conn)
        finally:
            self._in_flight = None

    def _note_waiting(self, first: LocalRow) -> None:
        if self._oldest_waiting is None or self._oldest_waiting[0] != first.seq:
            self._oldest_waiting = (first.seq, _unix_time(first.recorded_at))

    def _refresh_waiting(self, local: LocalJournal) -> None:
        """While the floor is away: the oldest row waiting, for seconds behind."""
        with contextlib.suppress(sqlite3.Error, OSError):
            rows = local.rows_after(self.acknowledged_seq, 1)
            self.committed_seq = max(self.committed_seq, local.last_seq())
            if rows:
                self._note_waiting(LocalRow(int(rows[0]["seq"]), rows[0]))

    def _failed(self, error: BaseException) -> None:
        kind = error_kind(error)
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        with self._lock:
            self.state = "diverged" if kind == "diverged" else "disconnected"
            self.last_error = f"{kind}: {message}"
            self.last_error_at = self.clock()
        if self.publish_metrics:
            metrics.FLOOR_SHIP_ERRORS_TOTAL.labels(error=kind).inc()
            metrics.FLOOR_LAST_ERROR_TIMESTAMP.set(self.last_error_at or 0)
            metrics.FLOOR_DIVERGED.set(1 if kind == "diverged" else 0)
        self._log.warning("floor_ship_failed", error=kind, message=message)
        if kind == "diverged" and not self._divergence_told:
            self._divergence_told = True
            self._log.critical("floor_diverged", message=message)
            if self.on_diverged is not None:
                self.on_diverged(message)

    def _publish(self) -> None:
        if self.publish_metrics:
            metrics.FLOOR_ROWS_BEHIND.set(self.rows_behind)
            metrics.FLOOR_SECONDS_BEHIND.set(self.seconds_behind())
            metrics.FLOOR_DIVERGED.set(1 if self.state == "diverged" else 0)

    @staticmethod
    def _close(conn: Any) -> None:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
