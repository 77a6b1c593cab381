"""The shipper's reading of a journal's recorded_at: the floor keeps a timestamptz and, only
when the journal's text is not that time's standard form, the text itself (the chain hashes
the text, so `floor verify` must rebuild it byte for byte). The fast path that skips
formatting the time back must agree with the full comparison on every input."""

from __future__ import annotations

import datetime
import random

import pytest

from tablectl.controller.floor.shipper import floor_time


def _by_formatting(recorded_at: str) -> tuple[datetime.datetime, str | None]:
    """The full comparison: parse, to UTC, format back, compare."""
    moment = datetime.datetime.fromisoformat(recorded_at)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    moment = moment.astimezone(datetime.UTC)
    standard = moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
    return moment, (None if standard == recorded_at else recorded_at)


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-01T06:00:00.000001+00:00",  # the journal's own form
        "2026-03-01T06:00:00.000000+00:00",  # whole second, still the standard form
        "2026-03-01T06:00:00+00:00",  # no fraction: kept as written
        "2026-03-01 06:00:00.000001+00:00",  # another separator: 32 characters, not standard
        "2026-03-01T06:00:00,000001+00:00",  # a decimal comma
        "2026-W09-1T06:00:00.000001+00:00",  # an ISO week date of the same length
        "2026-03-01T06:00:00.000001-00:00",
        "2026-03-01T07:00:00.000001+01:00",  # another offset: the same instant, kept as text
        "2026-03-01T06:00:00.000001Z",
        "2026-03-01T06:00:00.000001",  # naive: read as UTC, kept as written
    ],
)
def test_the_fast_path_agrees_with_formatting_back(text: str) -> None:
    assert floor_time(text) == _by_formatting(text)


def test_the_fast_path_agrees_on_random_times() -> None:
    rng = random.Random(17)
    base = datetime.datetime(1990, 1, 1, tzinfo=datetime.UTC)
    for _ in range(5000):
        moment = base + datetime.timedelta(seconds=rng.random() * 2e9)
        for text in (
            moment.isoformat(timespec="microseconds"),
            moment.isoformat(),
            moment.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat(),
        ):
            assert floor_time(text) == _by_formatting(text), text


def test_a_text_that_is_no_time_is_kept_as_written() -> None:
    moment, text = floor_time("not a time")
    assert text == "not a time" and moment.tzinfo is not None
