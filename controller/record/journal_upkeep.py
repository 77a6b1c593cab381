"""The journal's upkeep while the daemon runs: the start check, seals, segments, retention.

`check_before_start` is what the daemon runs before replaying (docs/journal.md, "Verify at
start"). `JournalUpkeep` ticks on the daemon's loop, under the daemon's event lock (so no event
is half-handled when a seal or a new segment is written): it seals when an epoch has ended,
and at the first moment between rounds on a new gaming day it closes the live segment and
begins the next one. Retention follows off the lock, in a child process
(`python -m tablectl.controller.record.journal_upkeep retire ...`): re-verifying and copying a
busy day's closed segment is seconds of Python, which in a thread would hold the daemon's GIL
in 5 ms slices while events wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import re
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tablectl.controller.common.config import ARCHIVE_SAME_FILESYSTEM_WORDS
from tablectl.controller.common.faults import fault_point
from tablectl.controller.common.logs import get_logger
from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.record.durable import fsync_directory, temporary_path
from tablectl.controller.record.journal import (
    ChainWalk,
    Journal,
    JournalError,
    JournalRow,
    SegmentBusy,
    _Tampered,
    closed_segment_first_seq,
    live_segments,
    parse_row,
    read_head_file,
    read_rows,
    verify_journal,
)
from tablectl.controller.record.journal_verifier import (
    CHILD_HIDDEN_VARIABLES,
    check_segment_links,
)
from tablectl.controller.record.sealing import SealingError

if TYPE_CHECKING:
    from tablectl.controller.common.config import TableConfig
    from tablectl.controller.record.sealing import Sealer


#: A roll-over a reader deferred (SegmentBusy) is tried again after this many seconds (each
#: try waits at most 100 ms for the reader, under the event lock).
ROLL_RETRY_SECONDS = 0.25


class UpkeepHost(Protocol):
    """What upkeep needs of the table it keeps (the daemon's table service provides it): the
    record layer declares it so that it imports nothing of the service."""

    config: TableConfig
    journal: Journal
    sealer: Sealer | None
    seals_held: str | None

    def seal(self, now: datetime.datetime | None = None) -> int | None: ...

    def between_rounds(self) -> bool: ...

    def roll_segment(self, gaming_day: datetime.date, closing_day: str) -> Path: ...


#: Seconds between two looks at the clock (seal due? new gaming day?).
UPKEEP_TICK_SECONDS = 0.5
_CLOSED_DAY = re.compile(r"-(\d{4}-\d{2}-\d{2})-\d{12}$")


@dataclass(frozen=True)
class StartDamage:
    """Why the journal fails its start check; `first_bad_seq` is the row to look at."""

    message: str
    first_bad_seq: int | None
    cut_from: int | None = None  # rows up to `cut_from` were written but are gone (never reused)


#: The start verifies the live segment in full up to this many rows (a busy gaming day is
#: ~31,000: ~0.4 s on a loaded 2-core machine); of a longer one (a journal from before
#: segments) the last this many, the rows before them left to the background walk, so READY
#: stays bounded.
START_VERIFY_ROWS = 40_000


def check_before_start(journal: Journal) -> StartDamage | None:
    """Verify the live segment's chain in full (its last START_VERIFY_ROWS rows at most) and
    the closed segments' links to each other and to it (journal_verifier).

    Also compares the end with the head recorded outside the file (`PATH.head`): a journal
    that ends before a row the daemon already wrote was cut.
    """
    walk = ChainWalk()
    first = journal.first_row()
    start_seq = first.seq if first is not None else 1
    if journal.last_seq - start_seq >= START_VERIFY_ROWS:
        start_seq = journal.last_seq - START_VERIFY_ROWS + 1
        from_row = next(iter(journal.raw_rows_from(start_seq)), None)
        if from_row is not None:
            walk.start_at(from_row[0], from_row[5])
    try:
        for raw in journal.raw_rows_from(start_seq):
            walk.feed(raw)
    except _Tampered as tampered:
        return StartDamage(tampered.message, tampered.seq)
    recorded = read_head_file(journal.path)
    if recorded is not None:
        seq, head = recorded
        if seq > journal.last_seq:
            return StartDamage(
                f"the journal ends at row {journal.last_seq}, but the daemon wrote up to row "
                f"{seq} ({journal.path}.head): rows {journal.last_seq + 1}-{seq} were cut",
                journal.last_seq + 1,
                cut_from=seq,
            )
        if seq == journal.last_seq and seq > 0 and head != journal.last_hash:
            return StartDamage(
                f"row {seq} is not the row the daemon wrote ({journal.path}.head holds another "
                "hash): the journal was rewritten",
                seq,
            )
    linked = check_segment_links(journal.path)
    if linked is not None:
        return StartDamage(*linked)
    return None


def segment_gaming_day(
    journal: Journal,
    day_start: datetime.time,
    now: datetime.datetime,
    zone: datetime.tzinfo | None = None,
) -> datetime.date:
    """The gaming day of the live segment: its segment row's, else its first row's, else now's."""
    first = journal.first_row()
    if first is not None and first.kind == "segment":
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return datetime.date.fromisoformat(str(first.body["gaming_day"]))
    if first is not None:
        with contextlib.suppress(ValueError):
            recorded = datetime.datetime.fromisoformat(first.recorded_at)
            return gaming_day_of(local_wall_clock(recorded, zone), day_start)
    return gaming_day_of(local_wall_clock(now, zone), day_start)


@dataclass(frozen=True)
class RetentionOutcome:
    """What one pass of retention did: segments retired (and how), segments kept (and why)."""

    retired: list[tuple[Path, str]]
    kept: list[tuple[Path, str]]


def _closed_day(path: Path) -> datetime.date | None:
    match = _CLOSED_DAY.search(path.stem)
    if match is None:
        return None
    try:
        return datetime.date.fromisoformat(match.group(1))
    except ValueError:
        return None


def _sealed_and_intact(segment: Path, following: Path | None) -> str | None:
    """None when a closed segment verifies, ends with a seal, and the next segment's first row
    links to its last row; else why not (it must not be retired)."""
    result = verify_journal(segment)
    if not result.ok:
        return f"it does not verify: {result.message}"
    rows = list(read_rows_tail(segment, 1))
    if not rows or rows[-1].kind != "seal":
        return "it is not sealed to its last row"
    if following is not None:
        first = next(iter(read_rows(following)), None)
        previous = first.body.get("previous", {}) if first is not None else {}
        if (
            first is None
            or first.kind != "segment"
            or previous.get("head") != rows[-1].hash
            or previous.get("last_seq") != rows[-1].seq
        ):
            return f"the next segment ({following.name}) does not link to its last row"
    return None


def read_rows_tail(path: Path, limit: int) -> list[JournalRow]:
    """The last `limit` rows of a closed segment (read-only)."""
    db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        raws = db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
            " ORDER BY seq DESC LIMIT ?",
            (limit,),
        ).fetchall()
    finally:
        db.close()
    return [parse_row(raw) for raw in reversed(raws)]


def archive_problem(
    journal_dir: Path, archive_dir: Path, *, same_filesystem_accepted: bool = False
) -> str | None:
    """Why `archive_dir` cannot hold the only other copy of the journal's segments, or None.

    Refused: the journal's own directory, a directory inside it or above it (after symlinks:
    retention would remove what it just copied, or copy into what it removes), and a directory
    on the journal's filesystem unless the configuration says in words that one disk holding
    both copies is meant (`archive_same_filesystem`): a failure of that disk loses both."""
    journal_real = journal_dir.resolve()
    archive_real = archive_dir.resolve()
    if archive_real == journal_real:
        return f"{archive_dir} is the journal's own directory ({journal_real})"
    if archive_real.is_relative_to(journal_real):
        return f"{archive_dir} is inside the journal's directory ({journal_real})"
    if journal_real.is_relative_to(archive_real):
        return f"{archive_dir} holds the journal's directory ({journal_real})"
    if not same_filesystem_accepted:
        try:
            same = (
                os.stat(_existing_ancestor(archive_real)).st_dev
                == os.stat(_existing_ancestor(journal_real)).st_dev
            )
        except OSError as error:
            return f"{archive_dir}: cannot tell its filesystem: {error}"
        if same:
            return (
                f"{archive_dir} is on the journal's own filesystem: one disk would hold both "
                "copies; archive to another disk or machine, or say so in words with "
                f'archive_same_filesystem = "{ARCHIVE_SAME_FILESYSTEM_WORDS}"'
            )
    return None


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


#: bytes read at a time when a segment is copied or compared
_COPY_CHUNK = 1 << 20


def _same_bytes(first: Path, second: Path, *, fault: str | None = None) -> bool:
    with open(first, "rb") as one, open(second, "rb") as other:
        while True:
            left, right = one.read(_COPY_CHUNK), other.read(_COPY_CHUNK)
            if fault is not None:
                fault_point(fault)  # the comparison begun (controller/common/faults.py)
            if left != right:
                return False
            if not left:
                return True


def _copy_verified(segment: Path, archive_dir: Path) -> str | None:
    """Copy a closed segment into the archive durably, byte for byte: None when the archive
    holds a copy that was compared with the segment, else why not (the segment stays).

    The copy goes to a new temporary in the archive (O_EXCL, no symlink followed), is fsynced,
    read back and compared with the segment byte for byte, linked to the segment's name (a
    link never replaces a name that appeared meanwhile) and the directory fsynced. A name
    that already exists counts only as a regular file of its own (not a symlink, not the
    segment's own inode) whose bytes are the segment's: a crash after the link leaves one."""
    archive_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = archive_dir / segment.name
    temporary = temporary_path(target, "copy")
    try:
        existing = os.lstat(target)
    except FileNotFoundError:
        existing = None
    except OSError as error:
        return f"cannot look at {target}: {error}"
    if existing is not None:
        source = os.stat(segment)
        if not stat.S_ISREG(existing.st_mode):
            return f"{target} exists and is not a regular file (a symlink or other): refused"
        if (existing.st_dev, existing.st_ino) == (source.st_dev, source.st_ino):
            return f"{target} is the segment itself (a hard link), not a copy: refused"
        if not _same_bytes(segment, target):
            return f"{target} exists with other content than the segment: refused"
        return None
    try:
        with contextlib.suppress(FileNotFoundError):  # a crash's leftover: a regular file only
            if stat.S_ISREG(os.lstat(temporary).st_mode):
                temporary.unlink()
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
        try:
            with open(segment, "rb") as source_file:
                while chunk := source_file.read(_COPY_CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(descriptor, view) :]
                    fault_point("retention.mid_copy")
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if not _same_bytes(segment, temporary, fault="retention.verifying_copy"):
            return f"the copy written to {temporary} does not read back as the segment"
        os.link(temporary, target)
        fsync_directory(archive_dir)
        fault_point("retention.after_link")
    except OSError as error:
        return f"cannot copy it to {target}: {error}"
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    with contextlib.suppress(OSError):
        fsync_directory(archive_dir)
    return None


def apply_retention(
    live: Path,
    today: datetime.date,
    retain_days: int,
    archive_dir: Path | None,
    *,
    live_day: datetime.date | None = None,
    floor_confirmed_seq: Callable[[], int] | None = None,
    archive_same_filesystem: bool = False,
) -> RetentionOutcome:
    """Retire closed segments past `retain_days` gaming days, never on the wall clock alone.

    A closed segment of gaming day D is retired only when all of these hold:
    - old enough by the clock (D more than `retain_days` days before `today`) AND by the
      journal's own record: the later segments (closed ones and the live one, `live_day`)
      hold at least `retain_days` gaming days after D. A clock stepped 65 days ahead finds
      only the days the journal really holds, so it retires nothing;
    - sealed to its last row, its chain verifies, and the next segment links to its end;
    - held elsewhere: copied into `archive_dir` (not the journal's directory, nor inside or
      above it, nor on its filesystem unless `archive_same_filesystem`: archive_problem) and
      the copy compared with it byte for byte (_copy_verified), then removed here; or, without
      an archive, the floor store says rows up to its last one are durable on two machines
      (`floor_confirmed_seq`: the shipper's acknowledged seq, whose hash it checked at
      connection, bounded by the floor's `durable_elsewhere_seq`). With neither, nothing is
      removed: the segment is the only copy.
    """
    if retain_days <= 0:
        return RetentionOutcome([], [])
    oldest_kept = today - datetime.timedelta(days=retain_days)
    closed = sorted(
        (
            (closed_segment_first_seq(p) or 0, p)
            for p in live_segments(live)
            if p != live and _closed_day(p) is not None
        ),
    )
    days = [_closed_day(p) for _, p in closed]
    refused_archive = (
        None
        if archive_dir is None
        else archive_problem(
            live.parent, archive_dir, same_filesystem_accepted=archive_same_filesystem
        )
    )
    retired: list[tuple[Path, str]] = []
    kept: list[tuple[Path, str]] = []
    for index, (_, segment) in enumerate(closed):
        day = days[index]
        assert day is not None
        if day >= oldest_kept:
            continue
        later = {d for d in days[index + 1 :] if d is not None and d > day}
        if live_day is not None and live_day > day:
            later.add(live_day)
        if len(later) < retain_days:
            kept.append(
                (
                    segment,
                    f"the journal holds {len(later)} gaming day(s) after {day}, fewer than "
                    f"retain_days = {retain_days}: the clock alone says it is old",
                )
            )
            continue
        following = closed[index + 1][1] if index + 1 < len(closed) else live
        problem = _sealed_and_intact(segment, following if following.exists() else None)
        if problem is None:
            if archive_dir is not None and refused_archive is not None:
                problem = f"archive_dir refused: {refused_archive}"
                how = ""
            elif archive_dir is not None:
                problem = _copy_verified(segment, archive_dir)
                how = f"the copy is {archive_dir / segment.name} (compared byte for byte)"
            elif floor_confirmed_seq is not None:
                last = read_rows_tail(segment, 1)[-1].seq
                confirmed = floor_confirmed_seq()
                how = (
                    f"the copy is on the floor store, which holds rows up to {confirmed} "
                    "durable on two machines"
                )
                if confirmed < last:
                    problem = (
                        f"the floor store says rows up to {confirmed} only are durable on two "
                        f"machines, it ends at {last}"
                    )
            else:
                problem = "no archive_dir and no floor store: this is its only copy"
                how = ""
        if problem is not None:
            kept.append((segment, problem))
            continue
        for suffix in ("-wal", "-shm"):
            Path(f"{segment}{suffix}").unlink(missing_ok=True)
        os.unlink(segment)
        fsync_directory(segment.parent)
        retired.append((segment, how))
    return RetentionOutcome(retired, kept)


# --- clock steps ------------------------------------------------------------------------------

#: The wall clock earlier than the journal's last row by more than this, at start: a step back.
BACKWARD_STEP_SECONDS = 300.0
#: While running: the wall clock and the elapsed-time clock disagree by more than this.
RUNNING_STEP_SECONDS = 60.0


def elapsed_clock() -> float:
    """Seconds on a clock no one sets (CLOCK_BOOTTIME: monotonic, counting suspend too)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return time.clock_gettime(boottime)
    return time.monotonic()


@dataclass
class ClockStep:
    """A clock step: when it was seen, which way, and the wall-clock range that would agree."""

    direction: str  # "forward" or "backward"
    detected: str  # "start" or "running"
    wall: float  # the wall clock when it was seen (Unix seconds)
    agree_from: float  # the earliest wall clock that would agree, at `elapsed`
    agree_to: float  # the latest
    elapsed: float  # elapsed_clock() when it was seen
    reference: str  # what the wall clock was compared with

    @property
    def seconds(self) -> float:
        """How far the clock stepped (negative: back)."""
        if self.wall > self.agree_to:
            return self.wall - self.agree_to
        return self.wall - self.agree_from

    def agrees(self, wall: float, elapsed: float) -> bool:
        gone = elapsed - self.elapsed
        return self.agree_from + gone <= wall <= self.agree_to + gone

    def note(self) -> dict[str, Any]:
        """The journal's `clock_step` note."""
        return {
            "type": "clock_step",
            "direction": self.direction,
            "detected": self.detected,
            "wall_clock": _iso(self.wall),
            "expected_from": _iso(self.agree_from),
            "expected_to": _iso(self.agree_to),
            "step_seconds": round(self.seconds, 3),
            "reference": self.reference,
            "held": ["seals", "retention", "roll-over"],
        }

    def reason(self) -> str:
        return (
            f"the clock stepped {self.direction} by {abs(self.seconds):.0f} s "
            f"({_iso(self.wall)}, expected {_iso(self.agree_from)} to {_iso(self.agree_to)}; "
            f"{self.reference}): seals, retention and the roll-over are held until a "
            "supervisor sends clock_step_acknowledged or the clock agrees again"
        )


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="seconds")


class ClockWatch:
    """Watches the wall clock against the journal's last row (at start) and against an
    elapsed-time clock (while running); a step is held until acknowledged or agreed again."""

    def __init__(
        self,
        forward_limit: float,
        *,
        wall: Callable[[], float] = time.time,
        elapsed: Callable[[], float] = elapsed_clock,
    ) -> None:
        self.forward_limit = forward_limit
        self.wall = wall
        self.elapsed = elapsed
        self.step: ClockStep | None = None
        self._reference = (wall(), elapsed())

    def at_start(self, last_row_at: str | None) -> ClockStep | None:
        """The wall clock against the time of the journal's last row: a step, or None."""
        if last_row_at is None:
            return None
        try:
            last = datetime.datetime.fromisoformat(last_row_at).timestamp()
        except ValueError:
            return None
        now, elapsed = self.wall(), self.elapsed()
        self._reference = (now, elapsed)
        direction = None
        if now < last - BACKWARD_STEP_SECONDS:
            direction = "backward"
        elif now > last + self.forward_limit:
            direction = "forward"
        if direction is None:
            return None
        self.step = ClockStep(
            direction,
            "start",
            now,
            last - BACKWARD_STEP_SECONDS,
            last + self.forward_limit,
            elapsed,
            f"the journal's last row was written at {last_row_at}",
        )
        return self.step

    def check(self) -> tuple[str, ClockStep] | None:
        """While running: ("step", step) for a new step, ("agrees", step) when the clock came
        back to the range the held step expects, else None."""
        now, elapsed = self.wall(), self.elapsed()
        if self.step is not None:
            if self.step.agrees(now, elapsed):
                resolved, self.step = self.step, None
                self._reference = (now, elapsed)
                return "agrees", resolved
            return None
        wall0, elapsed0 = self._reference
        expected = wall0 + (elapsed - elapsed0)
        drift = now - expected
        if abs(drift) <= RUNNING_STEP_SECONDS:
            return None
        self.step = ClockStep(
            "forward" if drift > 0 else "backward",
            "running",
            now,
            expected - RUNNING_STEP_SECONDS,
            expected + RUNNING_STEP_SECONDS,
            elapsed,
            "the elapsed time since the daemon last trusted its clock",
        )
        return "step", self.step

    def acknowledge(self) -> ClockStep | None:
        """A supervisor accepted the clock as it is now: the held step ends, the reference moves."""
        resolved, self.step = self.step, None
        self._reference = (self.wall(), self.elapsed())
        return resolved


class JournalUpkeep:
    """Seals at epoch ends and rolls the segment over at the gaming day's start (see module)."""

    def __init__(
        self,
        service: UpkeepHost,
        lock: asyncio.Lock,
        *,
        clock: Callable[[], datetime.datetime] | None = None,
        tick: float = UPKEEP_TICK_SECONDS,
    ) -> None:
        self.service = service
        self.lock = lock
        self.clock = clock or (lambda: datetime.datetime.now().astimezone())
        self.tick = tick
        config = service.config
        self.day_start = config.gaming_day_start
        #: the table's zone (`[table] timezone`; None: this machine's): the day starts at
        #: `day_start` there, whatever zone the PC is kept in
        self.zone = config.zone
        self.segment_day = segment_gaming_day(
            service.journal, self.day_start, self.clock(), self.zone
        )
        self._log = get_logger("journal", table=config.table_id)
        self._task: asyncio.Task[None] | None = None
        #: The clock watch (the daemon's); told of each step and agreement via `on_clock`.
        self.clock_watch: ClockWatch | None = None
        self.on_clock: Callable[[str, ClockStep], None] | None = None
        #: The floor shipper's acknowledged seq, when a floor store is configured (retention).
        self.floor_confirmed_seq: Callable[[], int] | None = None
        self._held_said: str | None = None
        self._roll_deferred_until = 0.0  # time.monotonic(): a reader held the segment
        self._roll_deferred_said = False
        self._wake: asyncio.Event | None = None
        #: A roll-over's retention, left for the upkeep task off the event lock.
        self._retention_due: datetime.date | None = None
        self._retention: asyncio.Future[RetentionOutcome] | None = None
        #: When the last roll-over happened (this clock's), for the bench and status.
        self.rolled_at: datetime.datetime | None = None

    @property
    def retention_under_way(self) -> bool:
        """A roll-over's retention is due or running (in its child)."""
        return self._retention_due is not None or self._retention is not None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="journal:upkeep")

    async def stop(self) -> None:
        if self._retention is not None:  # a retention under way ends its step (never cut)
            with contextlib.suppress(Exception):
                await asyncio.shield(self._retention)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        wake = self._wake = self._wake or asyncio.Event()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self.tick)
            wake.clear()
            async with self.lock:
                if self.service.journal.failure is not None:
                    return  # dealing stopped: nothing more is written
                if not self._step_or_fail_stop(self.clock()):
                    return
            if self._retention_due is not None:
                # Off the event lock, in a child process: retention re-verifies and copies
                # whole closed segments (seconds for a busy day's); it never touches the live
                # one, so events go on meanwhile, and being another process it never holds
                # this one's GIL. Only the roll-over's switch of files is locked.
                today, live_day = self._retention_due, self.segment_day
                self._retention_due = None
                self._retention = asyncio.ensure_future(self.retire_in_child(today, live_day))
                try:
                    await asyncio.shield(self._retention)
                except (JournalError, SealingError, OSError, sqlite3.Error) as error:
                    async with self.lock:
                        self._fail_stop(error)
                    return
                except Exception as error:  # a bug, not the record: said, tried next day
                    self._log.exception("journal_upkeep_failed", error=str(error))
                finally:
                    self._retention = None

    def _step_or_fail_stop(self, now: datetime.datetime) -> bool:
        """`step` under the event lock, retention left for after it; False when it failed the
        record (the journal then stops dealing)."""
        try:
            self.step(now, retention_inline=False)
        except (JournalError, SealingError, OSError, sqlite3.Error) as error:
            self._fail_stop(error)
            return False
        except Exception as error:  # a bug, not the record: said, retried next tick
            self._log.exception("journal_upkeep_failed", error=str(error))
        return True

    def _fail_stop(self, error: BaseException) -> None:
        """A seal, the key, a roll-over or retention failed to write the record: fail-stop
        like a commit (the journal tells the daemon, which stops dealing)."""
        self._log.error("journal_upkeep_failed", error=str(error))
        if self.service.journal.failure is None:
            self.service.journal.fail(JournalError(f"journal upkeep: {error}"))

    def between_events(self) -> None:
        """Right after an event and right before one, under the event lock: the roll-over at
        the first moment between rounds of a new gaming day, not at the next upkeep tick (under
        non-stop dealing a tick rarely falls between two rounds: the roll-over waited 17 s and
        more past 06:00). Before the event too: a round ended at 05:59:59.99 and the next one's
        first event at 06:00:00.001, with nothing between, began in the closed day (CI, loaded).

        A round in play at the gaming day's start is finished in the segment of the day it
        began (docs/journal.md, "Segments by gaming day"): the roll-over comes right after the
        event that ends it. Cheap for every other event: one comparison while a round is open.
        """
        if not self.service.between_rounds() or self.service.seals_held is not None:
            return
        if self.service.journal.failure is not None or self._wake is None:
            return
        now = self.clock()
        today = gaming_day_of(local_wall_clock(now, self.zone), self.day_start)
        if today > self.segment_day:
            self._step_or_fail_stop(now)
            self._wake.set()  # retention, off the lock, in the upkeep task

    def step(self, now: datetime.datetime, *, retention_inline: bool = True) -> None:
        """Whatever is due at `now`: a seal, a new segment (with retention: at once, or with
        `retention_inline=False` left to the upkeep task, off the event lock); nothing of it
        while a clock step is held."""
        if self.clock_watch is not None:
            change = self.clock_watch.check()
            if change is not None and self.on_clock is not None:
                self.on_clock(*change)
        held = self.service.seals_held
        if held is not None:
            if self._held_said != held:
                self._log.warning("journal_upkeep_held", reason=held)
                self._held_said = held
            return
        self._held_said = None
        sealer = self.service.sealer
        if sealer is not None and sealer.due(now):
            self.service.seal(now)
        today = gaming_day_of(local_wall_clock(now, self.zone), self.day_start)
        if today > self.segment_day and self.service.between_rounds():
            if time.monotonic() < self._roll_deferred_until:
                return  # a reader held the segment a moment ago: not every event asks again
            try:
                self.roll(today, retention_inline=retention_inline)
            except SegmentBusy as busy:
                # nothing changed: the next event or tick tries again (ROLL_RETRY_SECONDS on)
                self._roll_deferred_until = time.monotonic() + ROLL_RETRY_SECONDS
                if not self._roll_deferred_said:
                    self._log.warning("segment_roll_deferred", reason=str(busy))
                    self._roll_deferred_said = True
                return
            if self._roll_deferred_said:
                self._log.info("segment_roll_done_after_deferral")
                self._roll_deferred_said = False

    def roll(self, today: datetime.date, *, retention_inline: bool = True) -> None:
        closed = self.service.roll_segment(today, self.segment_day.isoformat())
        self.segment_day = today
        self.rolled_at = self.clock()
        self._log.info("segment_rolled", closed=str(closed), gaming_day=today.isoformat())
        if retention_inline:
            self.retire(today)
        else:
            self._retention_due = today

    def retire(
        self, today: datetime.date, live_day: datetime.date | None = None
    ) -> RetentionOutcome:
        """Retention (`apply_retention`) in this process, each segment retired or kept said in
        the log (`step` called directly: commands and tests; the daemon uses
        `retire_in_child`)."""
        config = self.service.config
        outcome = apply_retention(
            config.journal_path,
            today,
            config.retain_days,
            config.archive_dir,
            live_day=live_day or self.segment_day,
            floor_confirmed_seq=self.floor_confirmed_seq,
            archive_same_filesystem=config.archive_same_filesystem,
        )
        return self._said(outcome)

    async def retire_in_child(
        self, today: datetime.date, live_day: datetime.date
    ) -> RetentionOutcome:
        """Retention in a child process (`main`), off the event lock and off this process's
        GIL; its outcome said in the log here. A failure to read or write the record there
        is raised as JournalError (fail-stop, as in this process); a child that says nothing
        (a crash, a bug) is RuntimeError (logged, tried at the next roll-over)."""
        config = self.service.config
        command = [
            sys.executable,
            "-m",
            "tablectl.controller.record.journal_upkeep",
            "retire",
            str(config.journal_path),
            "--today",
            today.isoformat(),
            "--live-day",
            live_day.isoformat(),
            "--retain-days",
            str(config.retain_days),
        ]
        if config.archive_dir is not None:
            command += ["--archive", str(config.archive_dir)]
        if config.archive_same_filesystem:
            command.append("--archive-same-filesystem")
        if self.floor_confirmed_seq is not None:
            # read now: the shipper's acknowledged seq only grows, so the child's view of it
            # can only be older (it retires less), never newer than the truth
            command += ["--floor-confirmed-seq", str(self.floor_confirmed_seq())]
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={k: v for k, v in os.environ.items() if k not in CHILD_HIDDEN_VARIABLES},
            )
        except OSError as error:  # no child (no memory, no process slot): not the record's
            raise RuntimeError(f"retention's child could not start: {error}") from error
        self._log.info("journal_retention_started", pid=process.pid, today=today.isoformat())
        out, err = await process.communicate()
        answer: dict[str, Any] | None = None
        for line in out.decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                parsed = json.loads(line)
                if isinstance(parsed, dict):
                    answer = parsed
        if answer is not None and "failed" in answer:
            raise JournalError(str(answer["failed"]))
        if answer is None or "retired" not in answer:
            tail = err.decode(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(
                f"retention's child (pid {process.pid}) exited {process.returncode} without "
                f"an outcome: {' | '.join(tail)}"
            )
        outcome = RetentionOutcome(
            [(Path(path), str(how)) for path, how in answer["retired"]],
            [(Path(path), str(why)) for path, why in answer["kept"]],
        )
        return self._said(outcome)

    def _said(self, outcome: RetentionOutcome) -> RetentionOutcome:
        for gone, how in outcome.retired:
            # a removal from the table PC: said at warning, with where the copy is
            self._log.warning("segment_retired", file=str(gone), copy=how)
        for kept, why in outcome.kept:
            self._log.warning("segment_retention_held", file=str(kept), reason=why)
        return outcome


# --- retention's child process ----------------------------------------------------------------

#: Retention's child runs at this niceness: below the daemon's events, yet not SCHED_IDLE (the
#: background walk's), which a loaded machine may starve for good; a day's retention must end.
RETENTION_NICENESS = 10


def main(argv: list[str] | None = None) -> int:
    """`python -m tablectl.controller.record.journal_upkeep retire LIVE ...`: one pass of
    `apply_retention`, its outcome one JSON line on stdout ({"retired", "kept"}, or {"failed"}
    when the record could not be read or written: the daemon then stops dealing)."""
    parser = argparse.ArgumentParser(
        prog="python -m tablectl.controller.record.journal_upkeep",
        description="one pass of the journal's retention (the daemon's child, off its lock)",
    )
    parser.add_argument("action", choices=["retire"])
    parser.add_argument("live", type=Path, help="the live journal file")
    parser.add_argument("--today", type=datetime.date.fromisoformat, required=True)
    parser.add_argument("--live-day", type=datetime.date.fromisoformat, required=True)
    parser.add_argument("--retain-days", type=int, required=True)
    parser.add_argument("--archive", type=Path)
    parser.add_argument("--archive-same-filesystem", action="store_true")
    parser.add_argument("--floor-confirmed-seq", type=int)
    args = parser.parse_args(argv)
    confirmed: int | None = args.floor_confirmed_seq
    try:
        outcome = apply_retention(
            args.live,
            args.today,
            args.retain_days,
            args.archive,
            live_day=args.live_day,
            floor_confirmed_seq=None if confirmed is None else (lambda: confirmed),
            archive_same_filesystem=args.archive_same_filesystem,
        )
    except (JournalError, SealingError, OSError, sqlite3.Error) as error:
        print(json.dumps({"failed": str(error)}), flush=True)
        return 1
    print(
        json.dumps(
            {
                "retired": [[str(path), how] for path, how in outcome.retired],
                "kept": [[str(path), why] for path, why in outcome.kept],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    with contextlib.suppress(OSError):
        os.nice(RETENTION_NICENESS)  # here, not in main(): a caller in process keeps its own
    sys.exit(main())
