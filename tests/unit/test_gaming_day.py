"""The gaming day, defined once (controller/engine/gaming_day.py): the engine's H1 day, the
journal's segments, the floor's report and the export all count by it."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock, parse_start
from tablectl.controller.engine.table import TableSpec, TableSpecError

D = datetime.date(2026, 11, 23)


@pytest.mark.parametrize(
    ("clock", "start", "day"),
    [
        ("05:59:59.999999", "06:00", D - datetime.timedelta(days=1)),
        ("06:00:00", "06:00", D),
        ("23:59:59", "06:00", D),
        ("00:00:00", "00:00", D),
        ("23:58:59", "23:59", D - datetime.timedelta(days=1)),
    ],
)
def test_a_time_before_the_start_belongs_to_the_day_before(clock, start, day):
    moment = datetime.datetime.combine(D, datetime.time.fromisoformat(clock))
    assert gaming_day_of(moment, parse_start(start)) == day


@pytest.mark.parametrize("text", ["6:00", "24:00", "06:60", "0600", "06:00:00", "", "ab:cd"])
def test_a_start_that_is_not_hh_mm_is_refused_naming_it(text):
    with pytest.raises(ValueError, match="gaming_day_start"):
        parse_start(text)
    with pytest.raises(TableSpecError, match="gaming_day_start"):
        TableSpec.from_dict({"game": "three_card_21", "options": {"gaming_day_start": text}})


def test_a_utc_stamp_is_read_on_the_local_clock_a_naive_one_as_written():
    naive = datetime.datetime(2026, 11, 23, 5, 30)
    assert local_wall_clock(naive) is naive
    utc = datetime.datetime(2026, 11, 23, 5, 30, tzinfo=datetime.UTC)
    assert local_wall_clock(utc) == utc.astimezone().replace(tzinfo=None)


@given(
    st.datetimes(datetime.datetime(2000, 1, 1), datetime.datetime(2099, 12, 31)),
    st.times().map(lambda t: t.replace(second=0, microsecond=0)),
)
def test_H1_engine_day_is_the_journals_day(moment, start):
    """The engine's gaming day (H1) of an event's local stamp is the one the journal rolls its
    segment on for the same instant recorded in UTC."""
    spec = TableSpec.from_dict(
        {"game": "three_card_21", "options": {"gaming_day_start": start.strftime("%H:%M")}}
    )
    engine = Engine(spec, random_source=lambda n: 0)
    recorded = moment.astimezone(datetime.UTC)  # as the journal stamps its rows
    assert engine._gaming_day(moment) == gaming_day_of(local_wall_clock(recorded), start)
