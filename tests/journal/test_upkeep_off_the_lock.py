"""Upkeep never stalls a card (issue 33, step 4): retention (re-verifying, copying and removing
whole closed segments: seconds for a busy day's) runs off the daemon's event lock, in a child
process, after the roll-over's switch of files; events are acknowledged meanwhile.

The slow part is made slow for real: another SQLite connection holds an EXCLUSIVE lock on the
closed segment retention must verify (what a backup tool or a hand-run `sqlite3` does), so
retention's reading of it waits in SQLite's busy handler until the test lets go. Once a child
of this process has the segment open (retention, waiting), an event is handled and committed,
and the child still has it open after; then the lock is released and retention completes: the
segment is copied, compared and retired. Retention run in this process under the event lock
(as before) never shows as a child, and the event waits for it: the test fails.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sqlite3
import time
from pathlib import Path

from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import Journal, read_rows, verify_journal
from tablectl.controller.record.journal_upkeep import JournalUpkeep
from tablectl.controller.record.sealing import Sealer, setup_keys
from tablectl.controller.service.service import TableService
from tests.journal.history import SAME_DISK_SAID, build_history, write_config

#: Generous: a loaded CI machine starts retention's child Python slowly (nice 10).
DEADLINE_SECONDS = 120.0


def _moment(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(6, 0, 5)).astimezone()


def _children_reading(path: Path) -> set[int]:
    """This process's children that have `path` open (procfs)."""
    target, me, found = str(path.resolve()), os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != me:
                continue
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


async def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS:.0f} s: {what}")
        await asyncio.sleep(0.01)


def test_an_event_is_acknowledged_while_retention_waits_on_a_locked_segment(tmp_path: Path):
    archive = tmp_path / "archive"
    config_path = write_config(
        tmp_path / "t",
        journal_extra=f'retain_days = 1\narchive_dir = "{archive}"\n{SAME_DISK_SAID}',
    )
    build_history(config_path, 3)
    directory = config_path.parent
    setup_keys(directory / "sealing-key", interval=3600)  # retention retires sealed ones only
    first_day = datetime.date.today()
    now = [_moment(first_day)]

    async def scenario() -> tuple[Path, int]:
        config = load_config(config_path)
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        service.sealer = Sealer(directory / "sealing-key")
        lock = asyncio.Lock()
        upkeep = JournalUpkeep(service, lock, clock=lambda: now[0], tick=0.05)
        upkeep.segment_day = first_day
        # day 1: the first day's segment closed (nothing old enough to retire yet)
        now[0] = _moment(first_day + datetime.timedelta(days=1))
        upkeep.step(now[0])
        (oldest,) = directory.glob(f"journal-{first_day.isoformat()}-*.sqlite")
        holder = sqlite3.connect(oldest, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # the closed segment locked by another program
        try:
            upkeep.start()
            # day 2: the upkeep task rolls over under the lock, then retention (of day 0's
            # segment, now old enough) reads the locked file and waits
            now[0] = _moment(first_day + datetime.timedelta(days=2))
            await _until(
                lambda: upkeep.segment_day == first_day + datetime.timedelta(days=2),
                "the roll-over to day 2",
            )
            await _until(lambda: _children_reading(oldest), "retention reading the segment")
            waiting = _children_reading(oldest)
            async with lock:  # an event, as the daemon takes one
                upkeep.between_events()
                event_seq = service.journal.last_seq + 1
                await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
                upkeep.between_events()
                service.journal.flush()  # committed: acknowledged
            still_waiting = waiting & _children_reading(oldest)
            assert still_waiting, "retention ended before the event was acknowledged"
            assert oldest.exists() and service.journal.failure is None
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await _until(lambda: not oldest.exists(), "retention of the unlocked segment")
        await upkeep.stop()
        assert service.journal.failure is None
        service.close()
        return oldest, event_seq

    oldest, event_seq = asyncio.run(scenario())
    assert (archive / oldest.name).is_file(), "retired without its copy in the archive"
    assert verify_journal(archive / oldest.name).ok
    rows = {row.seq: row for row in read_rows(directory / "journal.sqlite")}
    assert rows[event_seq].kind == "event"
    assert rows[event_seq].body["type"] == "reader_inspected"
