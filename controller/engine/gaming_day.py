"""The gaming day: one definition for every part of tablectl that counts by it.

The hole-card reader is inspected "at the start of each gaming day" (13:69E-1.10D(f), rule
H1); the journal starts a segment per gaming day (docs/journal.md); the floor's report and
the round export count a gaming day. A gaming day runs from the table's `gaming_day_start`
(local time, default 06:00) to the same time the next day: a time before it belongs to the
day before. Local means the table's `[table] timezone` (an IANA name) when it has one, else
this machine's zone. Pure: a time with an offset is read as written; the callers that hold UTC
stamps (journal rows) turn them into the table's local time first (`local_wall_clock`). Across
a DST night the day is 23 or 25 hours long and starts once, at the first `start` of its date.
"""

from __future__ import annotations

import datetime

DEFAULT_START = datetime.time(6, 0)


def parse_start(text: str) -> datetime.time:
    """`HH:MM` (00:00-23:59) as a time; ValueError naming the text otherwise."""
    hours, _, minutes = text.partition(":")
    if not (len(hours) == len(minutes) == 2 and hours.isdigit() and minutes.isdigit()):
        raise ValueError(f"gaming_day_start: must be HH:MM, got {text!r}")
    try:
        return datetime.time(int(hours), int(minutes))
    except ValueError:
        raise ValueError(f"gaming_day_start: must be 00:00-23:59, got {text!r}") from None


def gaming_day_of(moment: datetime.datetime, start: datetime.time) -> datetime.date:
    """The gaming day of a wall-clock reading (its date, or the day before if before `start`)."""
    day = moment.date()
    return day - datetime.timedelta(days=1) if moment.time() < start else day


def local_wall_clock(
    moment: datetime.datetime, zone: datetime.tzinfo | None = None
) -> datetime.datetime:
    """A time with an offset (a journal row's UTC stamp) on the table's clock, naive: in
    `zone` (the table's `[table] timezone`), or this machine's zone when it has none; a naive
    time (an event's local stamp, already the table's) as it is."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(zone).replace(tzinfo=None)
