"""Upkeep never stalls a card (issue 33, step 4): retention (re-verifying, copying and removing
whole closed segments: seconds for a busy day's) runs off the daemon's event lock, after the
roll-over's switch of files; events take the lock meanwhile."""

from __future__ import annotations

import asyncio
import datetime
import time
from pathlib import Path

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record import journal_upkeep
from tablectl.controller.record.journal import Journal
from tablectl.controller.record.journal_upkeep import JournalUpkeep, RetentionOutcome
from tablectl.controller.service.service import TableService
from tests.journal.history import build_history, write_config

RETENTION_SECONDS = 0.6


def test_retention_runs_off_the_event_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The upkeep task rolls the segment over (a clock a day ahead) and then runs retention,
    made slow here (a stand-in for a big segment's verify and copy, timed by the test's own
    clock). While it runs the event lock is free: the lock is taken and released many times
    during it, and retention itself never held it (before, it ran inside the lock: every
    event waited for it)."""
    config_path = write_config(tmp_path / "t", journal_extra="retain_days = 1")
    build_history(config_path, 3)
    held_during_retention: list[bool] = []
    finished = asyncio.Event()

    def slow_retention(*args: object, **kwargs: object) -> RetentionOutcome:
        started = time.monotonic()
        while time.monotonic() - started < RETENTION_SECONDS:
            held_during_retention.append(lock.locked())
            time.sleep(0.01)
        loop.call_soon_threadsafe(finished.set)
        return RetentionOutcome([], [])

    monkeypatch.setattr(journal_upkeep, "apply_retention", slow_retention)
    tomorrow = datetime.datetime.now().astimezone() + datetime.timedelta(days=1)

    async def scenario() -> tuple[int, float]:
        nonlocal lock, loop
        loop = asyncio.get_running_loop()
        config = load_config(config_path)
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        lock = asyncio.Lock()
        upkeep = JournalUpkeep(service, lock, clock=lambda: tomorrow, tick=0.05)
        upkeep.start()
        taken, longest = 0, 0.0
        deadline = time.monotonic() + 30
        while not finished.is_set() and time.monotonic() < deadline:
            asked = time.monotonic()
            async with lock:  # an event
                longest = max(longest, time.monotonic() - asked)
                taken += held_during_retention != []
            await asyncio.sleep(0.005)
        await upkeep.stop()
        assert list(config.journal_path.parent.glob("journal-*.sqlite")), "no roll-over"
        service.close()
        return taken, longest

    lock: asyncio.Lock
    loop: asyncio.AbstractEventLoop
    taken, longest = asyncio.run(scenario())
    assert held_during_retention and not any(held_during_retention), "retention held the lock"
    assert taken >= 5, f"the lock was taken only {taken} times while retention ran ({longest})"
