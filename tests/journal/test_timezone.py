"""`[table] timezone`: the gaming day in the casino's zone, whatever zone the PC is kept in.

A table PC imaged in UTC counted its gaming days five hours off New Jersey's, and a DST night
had a day of 23 or 25 hours nobody had tested. These tests run the process in UTC (as such a
PC) with the table in America/New_York, and walk both of 2026's DST nights there.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablectl.controller.common.config import ConfigError, load_config
from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.record.journal import Journal, LocalTimestamp
from tablectl.controller.record.journal_upkeep import JournalUpkeep
from tablectl.controller.service.service import TableService
from tests.journal.crashing import run
from tests.journal.history import write_config

NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
UTC = datetime.UTC
SIX = datetime.time(6, 0)
#: 2026's DST nights in New York: clocks forward 02:00 -> 03:00, back 02:00 -> 01:00
SPRING_FORWARD = datetime.date(2026, 3, 8)
FALL_BACK = datetime.date(2026, 11, 1)


@pytest.fixture
def process_in_utc() -> Iterator[None]:
    """This process's zone is UTC for the test (an imaged table PC), restored after."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def with_timezone(config: Path, name: str) -> Path:
    text = config.read_text()
    config.write_text(text.replace("[table]\n", f'[table]\ntimezone = "{name}"\n', 1))
    return config


def day_starts(first: datetime.datetime, last: datetime.datetime) -> list[datetime.datetime]:
    """The UTC minutes at which the New York gaming day changes, walked minute by minute."""
    starts: list[datetime.datetime] = []
    moment = first
    day = gaming_day_of(local_wall_clock(moment, NEW_YORK), SIX)
    while moment < last:
        moment += datetime.timedelta(minutes=1)
        now_day = gaming_day_of(local_wall_clock(moment, NEW_YORK), SIX)
        if now_day != day:
            assert now_day == day + datetime.timedelta(days=1), (moment, day, now_day)
            starts.append(moment)
            day = now_day
    return starts


@pytest.mark.parametrize(
    ("night", "hours"), [(SPRING_FORWARD, 23), (FALL_BACK, 25)], ids=["spring", "fall"]
)
def test_the_gaming_day_across_a_dst_night_is_23_or_25_hours_and_starts_once_at_six(
    process_in_utc: None, night: datetime.date, hours: int
) -> None:
    first = datetime.datetime.combine(night - datetime.timedelta(days=2), SIX, tzinfo=UTC)
    last = datetime.datetime.combine(night + datetime.timedelta(days=2), SIX, tzinfo=UTC)
    starts = day_starts(first, last)
    # one start a day, each at 06:00 New York time
    assert [s.astimezone(NEW_YORK).time() for s in starts] == [SIX] * len(starts)
    dates = [s.astimezone(NEW_YORK).date() for s in starts]
    assert dates == sorted(set(dates))
    lengths = {
        starts[i].astimezone(NEW_YORK).date(): starts[i + 1] - starts[i]
        for i in range(len(starts) - 1)
    }
    # the day that holds the night (it began at 06:00 the day before) is 23 or 25 hours
    assert lengths[night - datetime.timedelta(days=1)] == datetime.timedelta(hours=hours)
    assert lengths[night - datetime.timedelta(days=2)] == datetime.timedelta(hours=24)


def test_event_stamps_are_the_tables_local_time_not_the_pcs(process_in_utc: None) -> None:
    moment = datetime.datetime(2026, 7, 4, 16, 30, 15, tzinfo=UTC)
    nanoseconds = int(moment.timestamp()) * 1_000_000_000 + 250_000_000
    assert LocalTimestamp(NEW_YORK)(nanoseconds) == "2026-07-04T12:30:15.250000"
    assert LocalTimestamp()(nanoseconds) == "2026-07-04T16:30:15.250000"  # the PC's: UTC


async def _roll_overs(
    config: Path, first_day: datetime.date, nows: list[datetime.datetime]
) -> list[datetime.datetime]:
    """The moments among `nows` at which the upkeep rolled the journal over to a new day, the
    live segment's day being `first_day`."""
    loaded = load_config(config)
    service = TableService(loaded, Journal(loaded.journal_path))
    await service.start()
    try:
        upkeep = JournalUpkeep(service, asyncio.Lock())
        upkeep.segment_day = first_day
        rolled: list[datetime.datetime] = []
        for now in nows:
            before = upkeep.segment_day
            upkeep.step(now)
            if upkeep.segment_day != before:
                rolled.append(now)
        return rolled
    finally:
        service.close()


@pytest.mark.parametrize("night", [SPRING_FORWARD, FALL_BACK], ids=["spring", "fall"])
def test_the_journal_rolls_over_once_a_day_at_six_new_york_time_on_a_utc_pc(
    process_in_utc: None, tmp_path: Path, night: datetime.date
) -> None:
    """The upkeep stepped every 10 minutes (UTC, as the PC's clock gives it) from the day
    before the night to the day after: one roll-over a day, each in the first 10 minutes
    after 06:00 New York time (10:00 or 11:00 UTC, as the season has it), none at 06:00 UTC."""
    config = with_timezone(write_config(tmp_path / "t"), "America/New_York")
    first = datetime.datetime.combine(night - datetime.timedelta(days=1), SIX, tzinfo=NEW_YORK)
    first = first.astimezone(UTC) + datetime.timedelta(minutes=5)
    nows = [first + datetime.timedelta(minutes=10 * i) for i in range(3 * 24 * 6 + 12)]  # 74 hours
    rolled = asyncio.run(_roll_overs(config, night - datetime.timedelta(days=1), nows))
    local = [moment.astimezone(NEW_YORK) for moment in rolled]
    assert [m.date() for m in local] == [
        night,
        night + datetime.timedelta(days=1),
        night + datetime.timedelta(days=2),
    ], local
    for moment in local:
        assert SIX <= moment.time() < datetime.time(6, 10), local
    # each roll-over opened a segment of its own gaming day
    closed = sorted(p.name[: len("journal-2026-03-07")] for p in (tmp_path / "t").glob("journal-*"))
    assert closed == [
        f"journal-{(night - datetime.timedelta(days=d)).isoformat()}" for d in (1, 0, -1)
    ], closed


def test_a_bad_timezone_is_an_error_naming_the_file_and_the_key(tmp_path: Path) -> None:
    config = with_timezone(write_config(tmp_path / "t"), "America/Newark")
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    (problem,) = [p for p in raised.value.problems if "timezone" in p]
    assert str(config) in problem and "table.timezone" in problem
    assert "'America/Newark'" in problem and "America/New_York" in problem
    checked = run("check-config", "--file-only", str(config))
    assert checked.returncode == 1
    assert "table.timezone: unknown time zone 'America/Newark'" in checked.stderr


def test_check_config_warns_when_a_utc_pc_has_no_timezone(tmp_path: Path) -> None:
    config = write_config(tmp_path / "t")
    in_utc = run("check-config", str(config), env={"TZ": "UTC"})
    assert in_utc.returncode == 0, in_utc.stderr
    assert "warning:" in in_utc.stderr and "table.timezone: not set" in in_utc.stderr
    assert "06:00 UTC" in in_utc.stderr and 'timezone = "America/New_York"' in in_utc.stderr
    in_new_york = run("check-config", str(config), env={"TZ": "America/New_York"})
    assert in_new_york.returncode == 0 and "table.timezone" not in in_new_york.stderr
    with_timezone(config, "America/New_York")
    stated = run("check-config", str(config), env={"TZ": "UTC"})
    assert stated.returncode == 0 and "table.timezone" not in stated.stderr, stated.stderr
