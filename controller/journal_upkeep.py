"""The journal's upkeep while the daemon runs: the start check, seals, segments, retention.

`check_before_start` is what the daemon runs before replaying (docs/journal.md, "Verify at
start"). `JournalUpkeep` ticks on the daemon's loop, under the daemon's event lock (so no event
is half-handled when a seal or a new segment is written): it seals when an epoch has ended,
and at the first moment between rounds on a new gaming day it closes the live segment, begins
the next one and applies retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.journal import (
    ChainWalk,
    Journal,
    _Tampered,
    live_segments,
    read_head_file,
)
from tablectl.controller.journal_verifier import check_segment_links
from tablectl.controller.logs import get_logger
from tablectl.controller.service import TableService

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
    journal: Journal, day_start: datetime.time, now: datetime.datetime
) -> datetime.date:
    """The gaming day of the live segment: its segment row's, else its first row's, else now's."""
    first = journal.first_row()
    if first is not None and first.kind == "segment":
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return datetime.date.fromisoformat(str(first.body["gaming_day"]))
    if first is not None:
        with contextlib.suppress(ValueError):
            recorded = datetime.datetime.fromisoformat(first.recorded_at)
            return gaming_day_of(local_wall_clock(recorded), day_start)
    return gaming_day_of(local_wall_clock(now), day_start)


def apply_retention(
    live: Path, today: datetime.date, retain_days: int, archive_dir: Path | None
) -> list[Path]:
    """Closed segments older than `retain_days` gaming days: moved to `archive_dir` or removed."""
    if retain_days <= 0:
        return []
    oldest_kept = today - datetime.timedelta(days=retain_days)
    gone: list[Path] = []
    for segment in live_segments(live):
        match = _CLOSED_DAY.search(segment.stem)
        if segment == live or match is None:
            continue
        if datetime.date.fromisoformat(match.group(1)) >= oldest_kept:
            continue
        if archive_dir is not None:
            archive_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.move(segment, archive_dir / segment.name)
        else:
            os.unlink(segment)
        gone.append(segment)
    return gone


class JournalUpkeep:
    """Seals at epoch ends and rolls the segment over at the gaming day's start (see module)."""

    def __init__(
        self,
        service: TableService,
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
        self.segment_day = segment_gaming_day(service.journal, self.day_start, self.clock())
        self._log = get_logger("journal", table=config.table_id)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="journal:upkeep")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            async with self.lock:
                try:
                    self.step(self.clock())
                except Exception as error:  # a seal or a roll-over that failed: said, retried
                    self._log.exception("journal_upkeep_failed", error=str(error))

    def step(self, now: datetime.datetime) -> None:
        """Whatever is due at `now`: a seal, a new segment (with retention)."""
        sealer = self.service.sealer
        if sealer is not None and sealer.due(now):
            self.service.seal(now)
        today = gaming_day_of(local_wall_clock(now), self.day_start)
        if today > self.segment_day and self.service.between_rounds():
            self.roll(today)

    def roll(self, today: datetime.date) -> None:
        closed = self.service.roll_segment(today, self.segment_day.isoformat())
        self.segment_day = today
        config = self.service.config
        for gone in apply_retention(
            config.journal_path, today, config.retain_days, config.archive_dir
        ):
            where = f"moved to {config.archive_dir}" if config.archive_dir else "removed"
            self._log.info("segment_retired", file=str(gone), how=where)
        self._log.info("segment_rolled", closed=str(closed), gaming_day=today.isoformat())
