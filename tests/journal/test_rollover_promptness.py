"""The roll-over comes at the first moment between rounds of a new gaming day, even under
non-stop dealing (issue 33, step 4): right after the event that ends the round in play at the
gaming day's start, not at the next upkeep tick (a tick rarely falls between two rounds of a
busy table: rounds begun after 06:00 went on into the closed day's segment, 17 s and more).

Structural, not timed: the closed segment holds no round begun after the gaming day's start,
and the round in play then is finished there (the day it began)."""

from __future__ import annotations

import contextlib
import datetime
import signal
import time
from pathlib import Path

from tablectl.controller.record.journal import JournalError, read_rows, verify_journal
from tests.journal.crashing import demo_dealing_before


def _round_starts(path: Path) -> dict[int, datetime.datetime]:
    """When each round began: its `bets_closed` event (written under the round number before
    it, the engine counts the round from that event on), else its first event row."""
    starts: dict[int, datetime.datetime] = {}
    for row in read_rows(path):
        if row.kind != "event" or row.round is None:
            continue
        opens = isinstance(row.body, dict) and row.body.get("type") == "bets_closed"
        number = row.round + 1 if opens else row.round
        starts.setdefault(number, datetime.datetime.fromisoformat(row.recorded_at))
    return starts


def test_the_roll_over_comes_between_the_first_two_rounds_of_the_new_day(tmp_path: Path):
    now = datetime.datetime.now(datetime.UTC)
    six = now.replace(hour=6, minute=0, second=0, microsecond=0)
    if six <= now:
        six += datetime.timedelta(days=1)
    state = tmp_path / "demo"
    demo = demo_dealing_before(six, state)  # dealing from a few seconds before 06:00
    live = state / "journal.sqlite"
    try:
        deadline = time.monotonic() + 90
        rolled: list[Path] = []
        while time.monotonic() < deadline and demo.poll() is None:
            rolled = list(state.glob("journal-*.sqlite"))
            with contextlib.suppress(JournalError):  # mid-roll-over: no live file a moment
                if rolled and len(_round_starts(live)) >= 3:
                    break
            time.sleep(0.3)
    finally:
        demo.send_signal(signal.SIGTERM)
        _, errors = demo.communicate(timeout=60)
    assert rolled, f"no roll-over: {errors.decode()[-2000:]}"
    (closed,) = rolled
    closed_starts = _round_starts(closed)
    boundary = six
    assert closed_starts and min(closed_starts.values()) < boundary  # the day before was dealt
    late = {n: t for n, t in closed_starts.items() if t >= boundary}
    assert not late, f"rounds begun after 06:00 written into the closed day: {late}"
    new_starts = _round_starts(live)
    assert new_starts and min(new_starts.values()) >= boundary
    assert verify_journal(state).ok
