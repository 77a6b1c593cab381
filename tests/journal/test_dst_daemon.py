"""The whole daemon across New Jersey's two DST nights of 2026, on a PC kept in UTC (issue 34).

The demo's daemon runs with `--timezone America/New_York` (the configuration's
`[table] timezone`) in a process whose zone is UTC, its clock moved by libfaketime to a few
seconds before the moment under test; it deals non-stop across it:

- 06:00 in New York after the autumn night (11:00 UTC on 1 November 2026, a 25-hour day)
  and after the spring night (10:00 UTC on 8 March 2026, a 23-hour day): the gaming day rolls
  over then, not at 06:00 UTC (the PC's zone) nor an hour off (the offset of the night before);
- the repeated hour of the autumn night (01:00-02:00 New York time twice, 05:00-07:00 UTC):
  local time goes back an hour at 06:00 UTC, and that is no roll-over and no clock step.

tests/journal/test_timezone.py walks the upkeep alone through both nights minute by minute;
this runs them through the daemon as a table does.
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import JournalError, read_rows, verify_journal
from tests.journal.crashing import demo_dealing_before

pytestmark = pytest.mark.long

UTC = datetime.UTC
ZONE = "America/New_York"


def _recorded(path: Path) -> list[datetime.datetime]:
    """When each row of a journal file was written (UTC)."""
    return [datetime.datetime.fromisoformat(row.recorded_at) for row in read_rows(path)]


def _deal_across(tmp_path: Path, moment: datetime.datetime, lead: float, done) -> tuple[Path, str]:
    """The demo dealing non-stop from `lead` seconds before `moment` (on its clock) until
    ``done(state_dir)`` holds; returns the state dir and the daemon's stderr."""
    state = tmp_path / "demo"
    demo = demo_dealing_before(moment, state, "--timezone", ZONE, leads=(lead, 20.0, 45.0))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and demo.poll() is None:
            with contextlib.suppress(JournalError):  # mid-roll-over: no live file a moment
                if done(state):
                    break
            time.sleep(0.3)
        else:
            pytest.fail(f"the daemon never got past {moment} (exit {demo.poll()})")
    finally:
        demo.send_signal(signal.SIGTERM)
        _, errors = demo.communicate(timeout=60)
    return state, errors.decode()


@pytest.mark.parametrize(
    ("night", "six_in_new_york", "closed_day"),
    [
        ("autumn", datetime.datetime(2026, 11, 1, 11, 0, tzinfo=UTC), "2026-10-31"),
        ("spring", datetime.datetime(2026, 3, 8, 10, 0, tzinfo=UTC), "2026-03-07"),
    ],
)
def test_the_gaming_day_rolls_over_at_six_in_new_york_after_a_dst_night(
    night: str, six_in_new_york: datetime.datetime, closed_day: str, tmp_path: Path
):
    def two_rounds_in_the_new_day(state: Path) -> bool:
        rolled = list(state.glob("journal-*.sqlite"))
        live = state / "journal.sqlite"
        return bool(rolled) and live.is_file() and len(_recorded(live)) >= 20

    state, errors = _deal_across(tmp_path, six_in_new_york, 6.0, two_rounds_in_the_new_day)
    rolled = sorted(state.glob("journal-*.sqlite"))
    assert len(rolled) == 1, f"{night}: roll-overs {rolled}: {errors[-2000:]}"
    assert closed_day in rolled[0].name, rolled[0].name
    closed = _recorded(rolled[0])
    assert closed and min(closed) < six_in_new_york, "the day before was dealt"
    assert max(closed) < six_in_new_york + datetime.timedelta(seconds=10), (
        f"{night}: the closed day went on to {max(closed)}, past 06:00 New York time"
    )
    opened = _recorded(state / "journal.sqlite")
    assert min(opened) >= six_in_new_york, f"{night}: the new day began at {min(opened)}"
    assert verify_journal(state).ok


def test_the_repeated_hour_of_the_autumn_night_is_no_roll_over_and_no_clock_step(
    tmp_path: Path,
):
    # 06:00 UTC on 1 November 2026: New York's 01:59:59 EDT is followed by 01:00:00 EST
    back = datetime.datetime(2026, 11, 1, 6, 0, tzinfo=UTC)

    def past_the_hour_going_back(state: Path) -> bool:
        live = state / "journal.sqlite"
        return live.is_file() and max(_recorded(live), default=back) > back + datetime.timedelta(
            seconds=8
        )

    state, errors = _deal_across(tmp_path, back, 6.0, past_the_hour_going_back)
    assert not list(state.glob("journal-*.sqlite")), "local time going back rolled the day over"
    rows = _recorded(state / "journal.sqlite")
    assert min(rows) < back < max(rows)
    steps = [row.body for row in read_rows(state / "journal.sqlite") if '"clock_step"' in row.body]
    assert not steps, f"a clock step noted: {steps}"
    assert "clock_step" not in (state / "daemon.log").read_text(), errors[-2000:]
    assert verify_journal(state).ok
