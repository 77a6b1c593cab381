"""Upkeep never stalls a card (issue 33, step 4): retention (re-verifying, copying and removing
whole closed segments: seconds for a busy day's) runs off the daemon's event lock, in a child
process, after the roll-over's switch of files; events are acknowledged meanwhile.

The slow part is made slow for real: another SQLite connection holds an EXCLUSIVE lock on the
closed segment retention must verify (what a backup tool or a hand-run `sqlite3` does), so
retention's reading of it waits in SQLite's busy handler until the test lets go. Once
retention has the segment open (a descriptor beyond the test's own, in this process or a
child), an event is handled and committed, and retention still has it open after; then the
lock is released and retention completes: the segment is copied, compared and retired.
Retention under the event lock (as before the thread, then the child) holds the loop and the
lock until it gives up on the locked file: the test never sees it waiting, and the segment
is kept (the test fails).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record import journal_upkeep
from tablectl.controller.record.journal import Journal, read_rows, verify_journal
from tablectl.controller.record.journal_upkeep import JournalUpkeep, read_rows_tail
from tablectl.controller.record.sealing import Sealer, setup_keys
from tablectl.controller.service.service import TableService
from tests.journal.history import SAME_DISK_SAID, build_history, write_config

#: Generous: a loaded CI machine starts retention's child Python slowly (nice 10).
DEADLINE_SECONDS = 120.0


#: Another program holding an EXCLUSIVE lock on a journal file until its stdin closes.
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
db.close()
"""


def _moment(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(6, 0, 5)).astimezone()


def _openings(path: Path) -> dict[int, int]:
    """How many descriptors this process and each of its children hold on `path` (procfs)."""
    target, me, found = str(path.resolve()), os.getpid(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int(entry.name) != me:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) != me:
                    continue
            count = sum(os.readlink(fd) == target for fd in (entry / "fd").iterdir())
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if count:
            found[int(entry.name)] = count
    return found


def _readers(path: Path, baseline: dict[int, int]) -> set[tuple[int, int]]:
    """The openings of `path` beyond `baseline` (the lock holder's): retention's."""
    now = _openings(path)
    return {
        (pid, index) for pid, count in now.items() for index in range(baseline.get(pid, 0), count)
    }


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
        # the closed segment locked by another program (SQLite's locks are per process)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(oldest)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        holding = _openings(oldest)
        try:
            upkeep.start()
            # day 2: the upkeep task rolls over under the lock, then retention (of day 0's
            # segment, now old enough) reads the locked file and waits
            now[0] = _moment(first_day + datetime.timedelta(days=2))
            await _until(
                lambda: upkeep.segment_day == first_day + datetime.timedelta(days=2),
                "the roll-over to day 2",
            )
            await _until(lambda: _readers(oldest, holding), "retention reading the segment")
            waiting = _readers(oldest, holding)
            async with lock:  # an event, as the daemon takes one
                upkeep.between_events()
                event_seq = service.journal.last_seq + 1
                await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
                upkeep.between_events()
                service.journal.flush()  # committed: acknowledged
            still_waiting = waiting & _readers(oldest, holding)
            assert still_waiting, "retention ended before the event was acknowledged"
            assert oldest.exists() and service.journal.failure is None
        finally:
            holder.stdin.close()  # the holder rolls back and exits
            holder.wait(timeout=DEADLINE_SECONDS)
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


def test_retentions_child_keeps_what_the_floor_has_not_confirmed_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The child's command line (what the daemon runs): without an archive, the floor's
    acknowledged seq, read by the daemon and passed on, decides; below the segment's last row
    nothing is removed, at it the segment goes; each outcome is one JSON line."""
    config_path = write_config(tmp_path / "t", journal_extra="retain_days = 1")
    build_history(config_path, 3)
    directory = config_path.parent
    setup_keys(directory / "sealing-key", interval=3600)
    first_day = datetime.date.today()

    async def three_days() -> None:
        config = load_config(config_path)
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        service.sealer = Sealer(directory / "sealing-key")
        upkeep = JournalUpkeep(service, asyncio.Lock())
        upkeep.segment_day = first_day
        for offset in (1, 2):
            day = first_day + datetime.timedelta(days=offset)
            upkeep.step(_moment(day), retention_inline=False)  # retention: the child's, below
        service.close()

    asyncio.run(three_days())
    (oldest,) = directory.glob(f"journal-{first_day.isoformat()}-*.sqlite")
    last = read_rows_tail(oldest, 1)[-1].seq
    arguments = [
        "retire",
        str(directory / "journal.sqlite"),
        "--today",
        (first_day + datetime.timedelta(days=2)).isoformat(),
        "--live-day",
        (first_day + datetime.timedelta(days=2)).isoformat(),
        "--retain-days",
        "1",
    ]
    assert journal_upkeep.main([*arguments, "--floor-confirmed-seq", str(last - 1)]) == 0
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert said["retired"] == [] and oldest.exists()
    assert f"rows up to {last - 1} only" in dict(said["kept"])[str(oldest)]
    assert journal_upkeep.main([*arguments, "--floor-confirmed-seq", str(last)]) == 0
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [path for path, _ in said["retired"]] == [str(oldest)] and not oldest.exists()
