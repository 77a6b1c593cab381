"""Per-round summaries: a gaming day's counts and Q3's seat tallies, computed once.

The day's report (floor/report.py) needs, per table, the day's counts (rounds, voids,
misdeals, decisions by rule ...) and the players' cards of the rounds that ended on the day,
by position and rank (Q3). Replaying every row through the engine at report time costs
minutes for a real day; so the table's shipper, which reads every row anyway, computes them as
it ships, one summary per *span*: the rows from just after one round's end to the last row
the floor releases with the next (the round-ending event and its decisions), which is the
floor's own release rule (schema.check_batch). A summary is shipped only once its last row is
released (floor.add_round_summaries refuses to store it earlier): nothing of a round in play.

One piece of code counts a span on both sides: SpanCounter here, fed by the shipper's engine
(ShipperSummaries) and, for `floor report --recompute`, by the floor's replay; a summary that
differs from its rows is named there (report.py).
"""

from __future__ import annotations

import datetime
import functools
import json
import threading
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Protocol

from tablectl.controller.engine.gaming_day import (
    DEFAULT_START,
    gaming_day_of,
    local_wall_clock,
    parse_start,
)
from tablectl.controller.floor.local import floor_time
from tablectl.controller.floor.shuffle import NewShoe, RowReplay
from tablectl.controller.record.journal import JournalRow

#: summaries a shipper holds while the floor has not released their rows (a round voided and
#: no collection since): past this the oldest are dropped (the report replays those rounds)
PENDING_MAX = 200
#: spans a daemon's table counted and its shipper has not yet taken (~1,000 a busy table's
#: day; a KB or two each): past this the oldest are dropped (the report replays those rounds)
SUMMARIES_HELD_MAX = 4000
#: the events counted as device faults in the day's report
FAULT_EVENTS = frozenset(
    {"shuffler_fault", "shoe_fault", "reader_fault", "rack_fault", "device_lost"}
)


@dataclass(frozen=True)
class RoundSummary:
    """A span's counts per gaming day (the table's event-time day) and its ended round's
    players' cards by position and rank; `ended_at` is the recorded time of the row that ended
    the round (the floor's partition day of it is Q3's day)."""

    from_seq: int
    to_seq: int
    first_at: datetime.datetime
    last_at: datetime.datetime
    ended_at: datetime.datetime | None
    body: dict[str, Any]

    def text(self) -> str:
        """The summary as stored (canonical JSON: what --recompute compares)."""
        return canonical(self.body)


def canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def day_start(table_row: Any) -> datetime.time:
    """A table's gaming day start, from its table row's options (default 06:00)."""
    text = str(dict(table_row.get("options", {})).get("gaming_day_start", ""))
    try:
        return parse_start(text)
    except ValueError:
        return DEFAULT_START  # a table row without one still counts the day


def local_time(text: object) -> datetime.datetime | None:
    """An event's `time` on the table's clock (None: not a time). Each event's is asked twice
    (its gaming day as it is fed, its hour as it is counted): the last few are remembered."""
    return _local_time(str(text))


@functools.lru_cache(maxsize=64)
def _local_time(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return local_wall_clock(moment)


class EventTally(Protocol):
    """What tally_event counts into: a span's share of a gaming day (_DayBucket, shipped as
    the summary) or a table's gaming day (report.TableDay, the replayed report)."""

    counts: Counter[str]
    decisions: Counter[str]  # rule_id -> decisions
    decision_names: Counter[str]
    rule_names: dict[str, str]  # rule_id -> citation
    rounds_by_hour: Counter[int]  # the event's local hour -> rounds
    faults_by_device: Counter[str]
    voided_rounds: list[int]
    first_event: str | None
    last_event: str | None


def tally_event(tally: EventTally, event: JournalRow, decisions: list[dict[str, Any]]) -> None:
    """Count one event of the tally's gaming day and the decisions that followed it: rounds
    (accepted `bets_closed`, by hour), misdeals (accepted `misdeal_reported`), stub counts
    (accepted `stub_counted`), device faults (FAULT_EVENTS, by device), every decision by
    rule, voided rounds and deck removals. The one counting rule of the summaries and the
    replayed report: `floor report --recompute` compares the two."""
    stamp = str(event.body.get("time"))
    tally.first_event = tally.first_event or stamp
    tally.last_event = stamp
    kind = event.body.get("type")
    accepted = not any(d.get("decision") == "rejected" for d in decisions)
    when = local_time(event.body.get("time"))
    if kind == "bets_closed" and accepted:
        tally.counts["rounds"] += 1
        if when is not None:
            tally.rounds_by_hour[when.hour] += 1
    elif kind == "misdeal_reported" and accepted:
        tally.counts["misdeals"] += 1
    elif kind == "stub_counted" and accepted:
        tally.counts["stub_counts"] += 1
    if kind in FAULT_EVENTS:
        tally.counts["device_faults"] += 1
        tally.faults_by_device[str(event.body.get("device") or str(kind).split("_")[0])] += 1
    for decision in decisions:
        name = str(decision.get("decision"))
        rule_id = str(decision.get("rule_id") or "none")
        tally.decisions[rule_id] += 1
        tally.decision_names[name] += 1
        tally.rule_names.setdefault(rule_id, str(decision.get("rule") or ""))
        if name == "void_round":
            tally.counts["voids"] += 1
            if event.round is not None:
                tally.voided_rounds.append(int(event.round))
        elif name == "remove_deck":
            tally.counts["deck_removals"] += 1


class _DayBucket:
    """One gaming day's share of a span: what tally_event counts, as JSON (the hours as
    strings, as JSON keys are)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        self.decision_names: Counter[str] = Counter()
        self.rule_names: dict[str, str] = {}
        self.rounds_by_hour: Counter[int] = Counter()
        self.faults_by_device: Counter[str] = Counter()
        self.voided_rounds: list[int] = []
        self.first_event: str | None = None
        self.last_event: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: dict(value)
            for name, value in (
                ("counts", self.counts),
                ("decisions", self.decisions),
                ("decision_names", self.decision_names),
                ("rule_names", self.rule_names),
                ("rounds_by_hour", {str(hour): n for hour, n in self.rounds_by_hour.items()}),
                ("faults_by_device", self.faults_by_device),
            )
            if value
        }
        if self.voided_rounds:
            out["voided_rounds"] = self.voided_rounds
        out["first_event"] = self.first_event
        out["last_event"] = self.last_event
        return out


class SpanCounter:
    """Counts rows fed in seq order into spans; `round_ended` marks the row just fed as the
    end of a round; the span closes at the next row that is not a decision (the floor's
    release rule). Each event is counted by tally_event (as report.DayCounter counts it)
    into the bucket of the event's own gaming day."""

    def __init__(self, start: datetime.time) -> None:
        self.start = start
        self._reset()

    def _reset(self) -> None:
        self._first: tuple[int, datetime.datetime] | None = None
        self._last: tuple[int, datetime.datetime] | None = None
        self._days: dict[datetime.date, _DayBucket] = {}
        self._event: JournalRow | None = None
        self._event_day: datetime.date | None = None
        self._decisions: list[dict[str, Any]] = []
        self._seats: dict[int, Counter[str]] = {}
        self._ended_at: datetime.datetime | None = None
        self._ended = False

    def feed(self, row: JournalRow, recorded_at: datetime.datetime) -> RoundSummary | None:
        """Count a row; the span it closed, if it closed one (the row then begins the next)."""
        closed = None
        if self._ended and row.kind != "decision":
            closed = self.close()
        if self._first is None:
            self._first = (row.seq, recorded_at)
        self._last = (row.seq, recorded_at)
        if row.kind == "event":
            self._close_event()
            self._event, self._decisions = row, []
            when = local_time(row.body.get("time"))
            self._event_day = None if when is None else gaming_day_of(when, self.start)
        elif row.kind == "decision" and self._event is not None:
            self._decisions.append(row.body)
        return closed

    def round_ended(self, dealt: list[dict[str, Any]]) -> None:
        """The row just fed ended a round with these cards dealt (the engine's dealt_cards)."""
        for entry in dealt:
            position = entry.get("to")
            if isinstance(position, int) and not isinstance(position, bool):
                card = str(entry.get("card"))
                rank = card if card == "JK" else card[0]
                ranks = self._seats.get(position)
                if ranks is None:
                    ranks = self._seats[position] = Counter()
                ranks[rank] += 1
        self._ended = True
        if self._last is not None:
            self._ended_at = self._last[1]

    def close(self) -> RoundSummary | None:
        """The span so far as a summary (None: no row fed); the counter starts afresh."""
        self._close_event()
        if self._first is None or self._last is None:
            self._reset()
            return None
        body: dict[str, Any] = {
            "days": {day.isoformat(): b.as_json() for day, b in sorted(self._days.items())},
            "seats": {
                str(position): dict(sorted(ranks.items()))
                for position, ranks in sorted(self._seats.items())
            },
        }
        summary = RoundSummary(
            self._first[0], self._last[0], self._first[1], self._last[1], self._ended_at, body
        )
        self._reset()
        return summary

    def _bucket(self, day: datetime.date) -> _DayBucket:
        bucket = self._days.get(day)
        if bucket is None:
            bucket = self._days[day] = _DayBucket()
        return bucket

    def _close_event(self) -> None:
        event, decisions, day = self._event, self._decisions, self._event_day
        self._event, self._decisions, self._event_day = None, [], None
        if event is not None and day is not None:
            tally_event(self._bucket(day), event, decisions)


def begins_a_count(row: JournalRow, table: dict[str, Any] | None) -> bool:
    """Whether a count of the spans may begin at `row`: the table row (row 1), or a checkpoint
    row once the table row is known (the engine is set from it; the rows before have no
    summary and the report replays them). One rule for the table's count and the replay's."""
    return (row.kind == "table" and row.seq == 1) or (
        row.kind == "checkpoint" and table is not None
    )


@dataclass(frozen=True)
class HandedSummary:
    """A span the table counted, and the `prev_hash` of the row that closed it (the row right
    after `to_seq`): the shipper ships the summary only when the row it reads there carries
    the same hash, i.e. the span's rows are the ones on disk (the chain links them all)."""

    summary: RoundSummary
    closing_prev_hash: str


class TableSummaries:
    """The spans counted on the table's own thread: fed every row as its journal appends it
    (Journal.row_listeners: the body still a dict, nothing to parse) and each event's round
    ends as its live engine decides them (TableService.round_ends), so that its shipper
    neither parses a row nor replays the engine for them (that cost it ~1.5 times the rest of
    shipping a row); the shipper takes the closed spans (`take`) as it ships their rows.

    Counting begins at row 1 or, after a restart (`first_seq` > 1), at the first checkpoint
    row once the table row is known (`set_table_row`: the floor's copy of row 1, given by the
    shipper when it connects), as the shipper's own replay begins. An event the engine failed
    on stops the counting until the next checkpoint row. At most `limit` closed spans are held
    (a floor away for days): past it the oldest are dropped. The report replays the rows of
    every span not shipped."""

    def __init__(self, first_seq: int, limit: int = SUMMARIES_HELD_MAX) -> None:
        self.first_seq = first_seq
        self.limit = limit
        #: why the counting stopped last (None: counting, or not begun)
        self.failure: str | None = None
        #: the last span dropped past `limit` ends here (0: none)
        self.dropped_upto = 0
        self._table: dict[str, Any] | None = None
        self._counter: SpanCounter | None = None
        self._closed: deque[HandedSummary] = deque()
        self._lock = threading.Lock()

    def set_table_row(self, table_row: dict[str, Any]) -> None:
        """The table row (row 1's body), where this process did not append row 1."""
        if self._table is None:
            self._table = dict(table_row)

    def row_appended(self, row: JournalRow) -> None:
        """The journal appended `row` (the table's thread: never raises)."""
        try:
            kind = row.kind
            if kind == "table" and row.seq == 1:
                self._table = dict(row.body)
            counter = self._counter
            if counter is None:
                if not begins_a_count(row, self._table):
                    return
                counter = self._counter = SpanCounter(day_start(self._table or {}))
                self.failure = None
            closed = counter.feed(row, floor_time(row.recorded_at)[0])
            if closed is not None:
                self._hold(HandedSummary(closed, row.prev_hash))
        except Exception as error:  # a row it cannot count: no summaries until a checkpoint
            # the error's kind only: its text may quote the row, and the row may be in play
            self._stop(f"row {row.seq}: {type(error).__name__}")

    def handled(self, seq: int, ends: list[list[dict[str, Any]]] | None) -> None:
        """The table's engine handled event `seq`, ending these rounds (each as its dealt
        cards: engine.dealt_cards() at that moment), or failed on it (None)."""
        counter = self._counter
        if counter is None:
            return
        if ends is None:
            self._stop(f"row {seq}: the engine failed on the event")
            return
        try:
            for dealt in ends:
                counter.round_ended(dealt)
        except Exception as error:  # its kind only: the text may quote a dealt card
            self._stop(f"row {seq}: {type(error).__name__}")

    def take(self, upto_seq: int) -> list[HandedSummary]:
        """The held spans whose closing row is at or before `upto_seq` (the shipper's thread)."""
        taken: list[HandedSummary] = []
        with self._lock:
            held = self._closed
            while held and held[0].summary.to_seq < upto_seq:
                taken.append(held.popleft())
        return taken

    def _hold(self, handed: HandedSummary) -> None:
        with self._lock:
            held = self._closed
            held.append(handed)
            while len(held) > self.limit:
                self.dropped_upto = held.popleft().summary.to_seq

    def _stop(self, why: str) -> None:
        self.failure = why
        self._counter = None

    def __len__(self) -> int:
        return len(self._closed)


class ShipperSummaries:
    """The shipper's own count of the spans, for rows its table did not count as it appended
    them (TableSummaries): a standalone shipper's, and a daemon's rows written before it
    started. The round ends are found by replaying the engine over the rows (RowReplay, as
    the floor's replay runs it).

    It begins at the table row (row 1) or, after a restart (the shipper resumes mid-journal),
    at the next engine checkpoint row it ships (a journal writes one every few rounds and at
    each gaming day's start): the rows before it have no summary and the report replays them.
    An engine that cannot follow the rows (a game not installed here) stops the summaries
    until the next checkpoint: the report replays those rounds too; the rows ship as ever."""

    def __init__(self) -> None:
        self._replay: RowReplay | None = None
        self._table: dict[str, Any] | None = None
        self._counter: SpanCounter | None = None
        self.failure: str | None = None
        #: events the engine replayed here
        self.replayed_events = 0

    @property
    def active(self) -> bool:
        return self._counter is not None

    def feed(self, row: JournalRow, recorded_at: datetime.datetime) -> RoundSummary | None:
        if row.kind == "table" and row.seq == 1:
            self._table = dict(row.body)
        if not self.active and begins_a_count(row, self._table):
            self._begin()  # the engine is set from the table or checkpoint row (fresh)
        counter, replay = self._counter, self._replay
        if counter is None or replay is None:
            return None
        try:
            closed = counter.feed(row, recorded_at)
            before = replay.events
            marks = replay.feed(row)
            self.replayed_events += replay.events - before
            for mark in marks:
                if not isinstance(mark, NewShoe):
                    counter.round_ended(mark[2])
        except Exception as error:  # the engine refused a row it should take: stop here
            self._stop(f"row {row.seq}: {type(error).__name__}: {error}")
            return None
        return closed

    def set_table_row(self, table_row: dict[str, Any]) -> None:
        """After a restart: the table row (the floor's copy of row 1), for the checkpoints."""
        self._table = dict(table_row)

    def _begin(self) -> None:
        self._counter = self._replay = None
        try:
            self._replay = RowReplay(dict(self._table or {}))
        except Exception as error:
            self._stop(f"{type(error).__name__}: {error}")
            return
        self._counter = SpanCounter(day_start(self._table or {}))
        self.failure = None

    def _stop(self, why: str) -> None:
        self.failure = why
        self._counter = None
        self._replay = None
