"""The gaming day's report from the floor store: per table and floor-wide, as CSV and HTML.

A row belongs to the gaming day of the event it follows: an event's `time` is the table's
local time (the daemon stamps it), and a gaming day runs from the table's `gaming_day_start`
(its table row's options, default 06:00) to the same time the next day. Counted per table:
rounds (accepted `bets_closed`), voided rounds (`void_round` decisions), misdeals (accepted
`misdeal_reported`), deck removals (`remove_deck` decisions), device faults (`*_fault` and
`device_lost` events), stub counts (accepted `stub_counted`) and every decision by rule.

Q3, a biased seat (docs/shuffle-integrity.md): per table, the chi-square of the ranks each
player position received in the rounds that ended on the floor's gaming day (its partition's
day), replayed through the engine from the rows of ended rounds only (floor/shuffle.py);
flagged at SEAT_BIAS_ALPHA, "not tested" when a cell would expect fewer than 5 cards.

The HTML page is one self-contained file (inline CSS and SVG plots, no script, nothing
fetched) that a shift manager opens from a share or a mail. Nothing face-down is in either
file: counts, rule ids and citations only (docs/rules.md H7).
"""

from __future__ import annotations

import csv
import datetime
import html
import itertools
import json
import math
import multiprocessing
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.controller.engine.shuffle_integrity import SEAT_BIAS_ALPHA
from tablectl.controller.floor.schema import RECORDED_AT_SQL, SCHEMA, SUMMARIES
from tablectl.controller.floor.summary import (
    RoundSummary,
    SpanCounter,
    day_start,
    local_time,
    tally_event,
)
from tablectl.controller.record.journal import JournalError, JournalRow, parse_row

COUNTS = ("rounds", "voids", "misdeals", "deck_removals", "device_faults", "stub_counts")
COUNT_TITLES = {
    "rounds": "Rounds",
    "voids": "Voided rounds",
    "misdeals": "Misdeals",
    "deck_removals": "Deck removals",
    "device_faults": "Device faults",
    "stub_counts": "Stub counts",
}


@dataclass
class TableDay:
    table_id: str
    game: str
    counts: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)  # rule_id -> decisions
    rule_names: dict[str, str] = field(default_factory=dict)  # rule_id -> citation
    decision_names: Counter[str] = field(default_factory=Counter)
    rounds_by_hour: Counter[int] = field(default_factory=Counter)
    faults_by_device: Counter[str] = field(default_factory=Counter)
    voided_rounds: list[int] = field(default_factory=list)
    first_event: str | None = None
    last_event: str | None = None
    # Q3: shuffle_integrity.seat_bias over the players' cards of the day's ended rounds (None:
    # too few cards to test) and how many cards that was
    seat_bias: dict[str, Any] | None = None
    seat_cards: int = 0
    seat_untested: str = ""  # why Q3 could not run at all (the replay failed)


@dataclass
class FloorReport:
    gaming_day: datetime.date
    generated_at: str
    tables: list[TableDay]
    #: --recompute: each stored summary that differs from the rows it summarises
    findings: list[str] = field(default_factory=list)
    #: how each table's day was made: "summaries" (plus any rounds replayed) or "replayed"
    sources: dict[str, str] = field(default_factory=dict)

    def total(self, name: str) -> int:
        return sum(table.counts[name] for table in self.tables)

    def decisions(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for table in self.tables:
            total.update(table.decisions)
        return total

    def rule_names(self) -> dict[str, str]:
        names: dict[str, str] = {}
        for table in self.tables:
            names.update(table.rule_names)
        return names

    def rounds_by_hour(self) -> Counter[int]:
        total: Counter[int] = Counter()
        for table in self.tables:
            total.update(table.rounds_by_hour)
        return total


_day_start = day_start


class DayCounter:
    """One table's gaming day counted from its rows fed in seq order (rows of other days
    skipped): fed by the day's report from the same pass that replays Q3."""

    def __init__(self, table_id: str, day: datetime.date, start: datetime.time) -> None:
        self.result = TableDay(table_id, "")
        self.day = day
        self.start = start
        self._event: JournalRow | None = None
        self._in_day = False
        self._decisions: list[dict[str, Any]] = []

    def feed(self, row: JournalRow) -> None:
        result = self.result
        if row.kind == "table" and not result.game:
            result.game = str(row.body.get("game", ""))
        elif row.kind == "event":
            self._close_event()
            self._event, self._decisions = row, []
            when = local_time(row.body.get("time"))
            self._in_day = when is not None and gaming_day_of(when, self.start) == self.day
        elif row.kind == "decision" and self._event is not None:
            self._decisions.append(row.body)

    def window_feed(
        self, low: datetime.datetime, high: datetime.datetime
    ) -> Callable[[JournalRow, datetime.datetime], None]:
        """A feed for rows recorded in [low, high) only (the day's window), others passed by."""

        def feed(row: JournalRow, recorded_at: datetime.datetime) -> None:
            if low <= recorded_at < high:
                self.feed(row)

        return feed

    def finish(self) -> TableDay:
        self._close_event()
        self._event = None
        return self.result

    def _close_event(self) -> None:
        if self._event is not None and self._in_day:
            tally_event(self.result, self._event, self._decisions)


def summarize_table(
    table_id: str, rows: Iterable[JournalRow], day: datetime.date, start: datetime.time
) -> TableDay:
    """Count one table's gaming day from its rows in seq order (rows of other days skipped)."""
    counter = DayCounter(table_id, day, start)
    for row in rows:
        counter.feed(row)
    return counter.finish()


def build_report(
    conn: Any,
    day: datetime.date,
    *,
    workers: int = 1,
    dsn: str | None = None,
    passfile: str | Path | None = None,
    recompute: bool = False,
) -> FloorReport:
    """Every table's gaming day, read from the floor. By default from the per-round
    summaries the tables shipped (floor/summary.py), aggregated in SQL; the rows no summary
    covers (a table of an earlier tablectl, a shipper's restart before its next checkpoint)
    are replayed, those rounds only. With `recompute`, every table's day is replayed from
    its rows (table_day: the engine in Python, one core's work a table; with `workers` > 1
    and the `dsn`, that many worker processes) and each stored summary the replay passes is
    checked against it: one that differs is a finding (FloorReport.findings)."""
    window = day_window(conn, day)
    tables = [
        (str(table_id), str(table_text))
        for table_id, table_text in conn.execute(
            f"SELECT table_id, table_row FROM {SCHEMA}.tables"
            " WHERE table_row IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    generated = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if not recompute and _has_summaries(conn):
        days, sources = summarized_days(conn, day, window, tables)
        return FloorReport(day, generated, days, sources=sources)
    workers = max(1, min(workers, os.cpu_count() or 1, len(tables)))
    check = _has_summaries(conn)
    results: list[tuple[TableDay, list[str]]]
    if workers == 1 or dsn is None:
        results = [
            table_day_checked(conn, tid, json.loads(text), day, window, check=check)
            for tid, text in tables
        ]
    else:
        with ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),  # no connection crosses a fork
            initializer=_open_worker,
            initargs=(dsn, None if passfile is None else str(passfile)),
        ) as pool:
            results = list(
                pool.map(
                    _worker_table_day, *zip(*tables, strict=True), *_repeat(day, window, check)
                )
            )
    return FloorReport(
        day,
        generated,
        [d for d, _ in results],
        findings=[f for _, found in results for f in found],
        sources={d.table_id: "replayed" for d, _ in results},
    )


def _repeat(*values: Any) -> list[Any]:
    return [itertools.repeat(value) for value in values]


#: a report worker's own connection (one a process, opened by _open_worker)
_WORKER_CONN: Any = None


def _open_worker(dsn: str, passfile: str | None) -> None:
    from tablectl.controller.floor.store import connect

    global _WORKER_CONN
    _WORKER_CONN = connect(dsn, passfile=passfile)


def _worker_table_day(
    table_id: str,
    table_text: str,
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    check: bool,
) -> tuple[TableDay, list[str]]:
    return table_day_checked(
        _WORKER_CONN, table_id, json.loads(table_text), day, window, check=check
    )


def table_day(
    conn: Any,
    table_id: str,
    table_row: Mapping[str, Any],
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
) -> TableDay:
    """One table's gaming day replayed from its rows (table_day_checked, no summary check)."""
    return table_day_checked(conn, table_id, table_row, day, window, check=False)[0]


def table_day_checked(
    conn: Any,
    table_id: str,
    table_row: Mapping[str, Any],
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    *,
    check: bool,
) -> tuple[TableDay, list[str]]:
    """One table's gaming day in one pass over its rows: those since the engine checkpoint
    before the day's window (day_window) through the window's last, which Q3 replays and
    the counts read (the rows recorded in the window); never the table's history. With
    `check`, the same pass cuts the rows into spans as the shipper did (SpanCounter) and
    compares every stored summary it passes: the findings name those that differ."""
    low, high = window
    start = _day_start(table_row)
    counter = DayCounter(table_id, day, start)
    spans = SpanCounter(start) if check else None
    closed: list[RoundSummary] = []
    read = counter.window_feed(low, high)
    rows_read = read
    if spans is not None:
        span_counter = spans

        def rows_read(row: JournalRow, recorded_at: datetime.datetime) -> None:
            read(row, recorded_at)
            summary = span_counter.feed(row, recorded_at)
            if summary is not None:
                closed.append(summary)

    try:
        seat = day_seat_bias(
            conn,
            table_id,
            table_row,
            day,
            window,
            rows_read=rows_read,
            ended=None if spans is None else spans.round_ended,
        )
        untested = ""
    except (ValueError, JournalError) as error:
        # a table row no engine here knows (a game not installed), a checkpoint it cannot
        # restore, none within reach: its Q3 says why; its day is still counted, from the
        # window's rows alone
        seat, untested = (None, 0), f"cannot replay: {error}"
        counter = DayCounter(table_id, day, start)
        closed = []
        for row in _rows_between(conn, table_id, low, high):
            counter.feed(row)
    summary = counter.finish()
    summary.game = str(table_row.get("game", ""))
    summary.seat_bias, summary.seat_cards = seat
    summary.seat_untested = untested
    findings = check_summaries(conn, table_id, closed) if check else []
    return summary, findings


def check_summaries(conn: Any, table_id: str, replayed: list[RoundSummary]) -> list[str]:
    """The stored summaries within the replayed spans, each against the span the replay cut
    from the rows: a summary that differs, or one whose rows end no round, is a finding.
    The replay's first span began at its checkpoint, not where the shipper's did: it is
    compared only where both begin at the same row."""
    if not replayed:
        return []
    by_end = {s.to_seq: s for s in replayed}
    first = replayed[0]
    stored = conn.execute(
        f"SELECT from_seq, to_seq, first_at, last_at, ended_at, summary::text"
        f" FROM {SCHEMA}.{SUMMARIES} WHERE table_id = %s AND to_seq >= %s AND to_seq <= %s"
        " ORDER BY to_seq",
        (table_id, first.to_seq, replayed[-1].to_seq),
    ).fetchall()
    findings = []
    for from_seq, to_seq, first_at, last_at, ended_at, text in stored:
        mine = by_end.get(int(to_seq))
        where = f"table {table_id}: the summary of rows {from_seq}-{to_seq}"
        if mine is None:
            findings.append(f"{where}: the rows end no round there")
            continue
        if mine is first and mine.from_seq != from_seq:
            continue  # the replay's partial first span
        differs = [
            name
            for name, theirs, ours in (
                ("from_seq", int(from_seq), mine.from_seq),
                ("first_at", first_at, mine.first_at),
                ("last_at", last_at, mine.last_at),
                ("ended_at", ended_at, mine.ended_at),
            )
            if theirs != ours
        ]
        body = json.loads(text)
        differs += [
            f"{key} on {day_text}"
            for day_text in sorted(set(body.get("days", {})) | set(mine.body["days"]))
            for key in sorted(
                set(body.get("days", {}).get(day_text, {}))
                | set(mine.body["days"].get(day_text, {}))
            )
            if body.get("days", {}).get(day_text, {}).get(key)
            != mine.body["days"].get(day_text, {}).get(key)
        ]
        if body.get("seats") != mine.body["seats"]:
            differs.append("seat tallies")
        if set(body) - {"days", "seats"}:
            differs.append("unknown fields")
        if differs:
            findings.append(f"{where} differs from its rows: {', '.join(differs)}")
    return findings


# -- the day from the shipped summaries -----------------------------------------------------

#: the summaries' fields whose values the report sums (per table, the day's bucket)
SUMMED = ("counts", "decisions", "decision_names", "rounds_by_hour", "faults_by_device")
#: a span (the rows between two round ends) longer than this is not looked for by its end
#: time: its rows are then replayed as a gap (a table idle for days between two rounds)
SPAN_REACH = datetime.timedelta(days=2)


def _has_summaries(conn: Any) -> bool:
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.{SUMMARIES}",))
    row = found.fetchone()
    return bool(row and row[0])


def _aggregate_sql() -> str:
    """One statement over the day's summaries (those whose span meets the window): the sums
    per table, the first citation of each rule, the voided rounds, the first and last event,
    Q3's tallies of the rounds that ended on the floor's day, and where the spans leave a
    gap. Rows of (what, table_id, key, value, a, b)."""
    picked = f"{SCHEMA}.{SUMMARIES}"
    summed = ", ".join(f"'{name}'" for name in SUMMED)
    return f"""
WITH picked AS MATERIALIZED (
    SELECT table_id, from_seq, to_seq, ended_at, summary->'days'->%(day)s AS b,
           summary->'seats' AS seats
        FROM {picked}
        WHERE last_at >= %(low)s AND last_at < %(far)s AND first_at < %(high)s
)
SELECT 'sum:' || f.name, p.table_id, k.key, NULL::text, sum(k.value::bigint), NULL::bigint
    FROM picked AS p, unnest(ARRAY[{summed}]) AS f(name), jsonb_each_text(p.b->f.name) AS k
    WHERE p.b IS NOT NULL GROUP BY f.name, p.table_id, k.key
UNION ALL
SELECT 'rule', table_id, key, value, to_seq, NULL FROM (
    SELECT DISTINCT ON (p.table_id, k.key) p.table_id, k.key, k.value, p.to_seq
        FROM picked AS p, jsonb_each_text(p.b->'rule_names') AS k
        WHERE p.b IS NOT NULL ORDER BY p.table_id, k.key, p.to_seq) AS rules
UNION ALL
SELECT 'void', p.table_id, v.value, NULL, p.to_seq, NULL
    FROM picked AS p, jsonb_array_elements_text(p.b->'voided_rounds') AS v
    WHERE p.b IS NOT NULL AND p.b ? 'voided_rounds'
UNION ALL
SELECT 'first', table_id, stamp, NULL, to_seq, NULL FROM (
    SELECT DISTINCT ON (table_id) table_id, b->>'first_event' AS stamp, to_seq
        FROM picked WHERE b->>'first_event' IS NOT NULL ORDER BY table_id, to_seq) AS firsts
UNION ALL
SELECT 'last', table_id, stamp, NULL, to_seq, NULL FROM (
    SELECT DISTINCT ON (table_id) table_id, b->>'last_event' AS stamp, to_seq
        FROM picked WHERE b->>'last_event' IS NOT NULL ORDER BY table_id, to_seq DESC) AS lasts
UNION ALL
SELECT 'seat', p.table_id, q.key, r.key, sum(r.value::bigint), NULL
    FROM picked AS p, {SCHEMA}.settings AS s, jsonb_each(p.seats) AS q,
         jsonb_each_text(q.value) AS r
    WHERE p.ended_at IS NOT NULL
      AND ((p.ended_at AT TIME ZONE s.time_zone) - s.gaming_day_start)::date = %(day)s::date
    GROUP BY p.table_id, q.key, r.key
UNION ALL
SELECT 'gap', table_id, NULL, NULL, prev_to, from_seq - 1 FROM (
    SELECT table_id, from_seq, lag(to_seq) OVER (PARTITION BY table_id ORDER BY to_seq) AS prev_to
        FROM picked) AS spans
    WHERE prev_to IS NOT NULL AND prev_to <> from_seq - 1
UNION ALL
SELECT 'ends', table_id, NULL, NULL, min(from_seq), max(to_seq) FROM picked GROUP BY table_id
"""


@dataclass
class _Gathered:
    """One table's day as the summaries gave it, and where in its rows each piece lies."""

    day: TableDay
    first: tuple[int, str] | None = None
    last: tuple[int, str] | None = None
    rules: dict[str, tuple[int, str]] = field(default_factory=dict)
    voided: list[tuple[int, int]] = field(default_factory=list)
    seats: list[tuple[int, str]] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    ends: tuple[int, int] | None = None


def summarized_days(
    conn: Any,
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    tables: list[tuple[str, str]],
) -> tuple[list[TableDay], dict[str, str]]:
    """Every table's day from its summaries (one SQL statement for the floor), the rows
    they leave uncovered replayed (those rounds only); a table with no summary in the
    window replayed whole (table_day), as before summaries."""
    low, high = window
    gathered: dict[str, _Gathered] = {}
    params = {"day": day.isoformat(), "low": low, "high": high, "far": high + SPAN_REACH}
    for what, table_id, key, value, a, b in conn.execute(_aggregate_sql(), params):
        one = gathered.get(table_id)
        if one is None:
            one = gathered[table_id] = _Gathered(TableDay(table_id, ""))
        if what.startswith("sum:"):
            name = what[4:]
            if name == "counts":
                one.day.counts[key] += int(a)
            elif name == "decisions":
                one.day.decisions[key] += int(a)
            elif name == "decision_names":
                one.day.decision_names[key] += int(a)
            elif name == "rounds_by_hour":
                one.day.rounds_by_hour[int(key)] += int(a)
            elif name == "faults_by_device":
                one.day.faults_by_device[key] += int(a)
        elif what == "rule":
            one.rules[key] = (int(a), value)
        elif what == "void":
            one.voided.append((int(a), int(key)))
        elif what == "first":
            one.first = (int(a), key)
        elif what == "last":
            one.last = (int(a), key)
        elif what == "seat":
            one.seats += [(int(key), value)] * int(a)
        elif what == "gap":
            one.gaps.append((int(a), int(b)))
        elif what == "ends":
            one.ends = (int(a), int(b))
    days: list[TableDay] = []
    sources: dict[str, str] = {}
    for table_id, table_text in tables:
        table_row = json.loads(table_text)
        one = gathered.get(table_id)
        if one is None or one.ends is None:
            days.append(table_day(conn, table_id, table_row, day, window))
            sources[table_id] = "replayed"
            continue
        result, replayed = _from_summaries(conn, table_id, table_row, day, window, one)
        days.append(result)
        sources[table_id] = f"summaries, {replayed} rows replayed" if replayed else "summaries"
    return days, sources


def _from_summaries(
    conn: Any,
    table_id: str,
    table_row: Mapping[str, Any],
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    one: _Gathered,
) -> tuple[TableDay, int]:
    """A table's day: its summaries' share (one) and its uncovered rows' (replayed), merged
    in seq order as the replay would have met them. Returns it and the rows replayed."""
    assert one.ends is not None
    first_from, last_to = one.ends
    before = conn.execute(
        f"SELECT max(to_seq) FROM {SCHEMA}.{SUMMARIES} WHERE table_id = %s AND to_seq < %s",
        (table_id, first_from),
    ).fetchone()
    released = conn.execute(
        f"SELECT released_seq FROM {SCHEMA}.tables WHERE table_id = %s", (table_id,)
    ).fetchone()
    gaps = [
        ((before[0] if before and before[0] is not None else 0), first_from - 1),
        *one.gaps,
        (last_to, int(released[0]) if released else last_to),
    ]
    result = one.day
    result.game = str(table_row.get("game", ""))
    firsts = [one.first] if one.first else []
    lasts = [one.last] if one.last else []
    rules = dict(one.rules)
    voided = list(one.voided)
    dealt = list(one.seats)
    replayed = 0
    for after, upto in gaps:
        if upto <= after:
            continue
        part, part_dealt, untested, count = _replay_gap(
            conn, table_id, table_row, day, window, after, upto
        )
        replayed += count
        if untested:
            result.seat_untested = untested
        at = after + 1  # the gap lies between the summaries: its rows are in this order
        result.counts.update(part.counts)
        result.decisions.update(part.decisions)
        result.decision_names.update(part.decision_names)
        result.rounds_by_hour.update(part.rounds_by_hour)
        result.faults_by_device.update(part.faults_by_device)
        for rule, name in part.rule_names.items():
            if rule not in rules or rules[rule][0] > at:
                rules[rule] = (at, name)
        voided += [(at, r) for r in part.voided_rounds]
        if part.first_event:
            firsts.append((at, part.first_event))
        if part.last_event:
            lasts.append((at, part.last_event))
        dealt += part_dealt
    result.first_event = min(firsts)[1] if firsts else None
    result.last_event = max(lasts)[1] if lasts else None
    result.rule_names = {rule: name for rule, (_, name) in sorted(rules.items())}
    result.voided_rounds = [r for _, r in sorted(voided)]
    if not result.seat_untested:
        from tablectl.controller.engine.shuffle_integrity import seat_bias
        from tablectl.controller.record.journal import ReplayedDraws, engine_from_table_row

        try:
            copies = engine_from_table_row(table_row, ReplayedDraws(())).composition.copies
        except ValueError as error:
            result.seat_untested = f"cannot replay: {error}"
        else:
            result.seat_bias, result.seat_cards = seat_bias(copies, dealt), len(dealt)
    return result, replayed


def _replay_gap(
    conn: Any,
    table_id: str,
    table_row: Mapping[str, Any],
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    after: int,
    upto: int,
) -> tuple[TableDay, list[tuple[int, str]], str, int]:
    """The rows (after, upto] no summary covers, recorded in the window: counted; and, when
    a round ends among them (an accepted collection: the floor releases rows only at one),
    replayed through the engine from the checkpoint before them for Q3 (those rounds only).
    Read once: where a round may end among them (the server finds a collection's name in
    their bodies), they are counted as the replay reads them; else read and counted alone.
    Returns the counts, Q3's (position, card), why Q3 could not run, the rows replayed."""
    low, high = window
    start = _day_start(table_row)
    rows, first_at, collection = _gap_outline(conn, table_id, low, high, after, upto)
    if not rows or not collection:
        return _count_gap(conn, table_id, day, start, window, after, upto)[0], [], "", 0
    from tablectl.controller.floor.shuffle import EndedRound, TableReplay, replay_table

    counter = DayCounter(table_id, day, start)
    dealt: list[tuple[int, str]] = []
    seen, counted, collected = 0, 0, False

    def heard(row: JournalRow, recorded_at: datetime.datetime) -> None:
        nonlocal seen, counted, collected
        seen = row.seq
        if after < row.seq <= upto and low <= recorded_at < high:
            counter.feed(row)
            counted += 1
            collected = collected or _a_collection(row)

    reach = low + WINDOW_MARGIN - CHECKPOINT_REACH
    replay = replay_table(
        conn,
        table_id,
        first_at,
        info=TableReplay(table_id),
        reach=reach,
        until=high,
        rows_read=heard,
    )
    try:
        for item in replay:
            if seen > upto:
                break
            if isinstance(item, EndedRound) and after < seen and item.gaming_day == day:
                dealt += [
                    (e["to"], str(e["card"])) for e in item.dealt if isinstance(e.get("to"), int)
                ]
    except (ValueError, JournalError) as error:
        part, read, collected = _count_gap(conn, table_id, day, start, window, after, upto)
        return part, [], f"cannot replay: {error}" if collected else "", read if collected else 0
    finally:
        replay.close()
    part = counter.finish()
    if counted != rows:  # the replay stopped short of some (a clock stepped back): read them
        part, rows, collected = _count_gap(conn, table_id, day, start, window, after, upto)
    if not collected:  # the name was in a body but no round ended there: nothing replayed
        return part, [], "", 0
    return part, dealt, "", rows


def _count_gap(
    conn: Any,
    table_id: str,
    day: datetime.date,
    start: datetime.time,
    window: tuple[datetime.datetime, datetime.datetime],
    after: int,
    upto: int,
) -> tuple[TableDay, int, bool]:
    """The gap's rows read and counted alone: the counts, how many, whether a round ended
    among them (an accepted collection)."""
    counter, read, collected = DayCounter(table_id, day, start), 0, False
    for row in _rows_between(conn, table_id, *window, after=after, upto=upto):
        counter.feed(row)
        read += 1
        collected = collected or _a_collection(row)
    return counter.finish(), read, collected


def _a_collection(row: JournalRow) -> bool:
    return row.kind == "event" and row.body.get("type") == "hands_collected"


def _gap_outline(
    conn: Any,
    table_id: str,
    low: datetime.datetime,
    high: datetime.datetime,
    after: int,
    upto: int,
) -> tuple[int, datetime.datetime | None, bool]:
    """On the server, without sending a row: the gap's rows (how many), the first one's
    time, and whether any event among them names a collection (a superset of the rounds
    that end there: the name in any field of an event's body counts)."""
    from tablectl.controller.floor.store import table_rows_sql

    source, where, params = table_rows_sql(
        conn, table_id, low=low, high=high, after=after, upto=upto
    )
    row = conn.execute(
        f"SELECT count(*), (array_agg(r.recorded_at ORDER BY r.seq))[1],"
        f" coalesce(bool_or(r.kind = 'event' AND r.body LIKE %s), false)"
        f" FROM {source} WHERE {where}",
        ["%hands\\_collected%", *params],
    ).fetchone()
    return (int(row[0]), row[1], bool(row[2])) if row else (0, None, False)


def day_seat_bias(
    conn: Any,
    table_id: str,
    table_row: Mapping[str, Any],
    day: datetime.date,
    window: tuple[datetime.datetime, datetime.datetime],
    *,
    rows_read: Callable[[JournalRow, datetime.datetime], None] | None = None,
    ended: Callable[[list[dict[str, Any]]], None] | None = None,
) -> tuple[dict[str, Any] | None, int]:
    """Q3 for one table's gaming day: the players' (position, card) of the rounds that ended
    on that day, replayed from the last checkpoint before the day's `window` (within
    CHECKPOINT_REACH of its start) to the window's end; ended rounds only."""
    from tablectl.controller.engine.shuffle_integrity import seat_bias
    from tablectl.controller.floor.shuffle import EndedRound, TableReplay, replay_table
    from tablectl.controller.record.journal import ReplayedDraws, engine_from_table_row

    copies = engine_from_table_row(table_row, ReplayedDraws(())).composition.copies
    dealt: list[tuple[int, str]] = []
    low, high = window
    reach = low + WINDOW_MARGIN - CHECKPOINT_REACH
    info = TableReplay(table_id)
    replay = replay_table(
        conn, table_id, low, info=info, reach=reach, until=high, rows_read=rows_read
    )
    for item in replay:  # to its end: the counts hear every row
        if isinstance(item, EndedRound) and ended is not None:
            ended(item.dealt)
        if isinstance(item, EndedRound) and item.gaming_day == day:
            dealt += [(e["to"], str(e["card"])) for e in item.dealt if isinstance(e.get("to"), int)]
    return seat_bias(copies, dealt), len(dealt)


#: how far before a gaming day's start Q3's replay may begin: a journal writes an engine
#: checkpoint at each gaming day's start, so the day's own (or the day before's, a table that
#: was down at the roll-over) is within it; past it Q3 says why it is untested rather than
#: replay the table's history (the report reads its day, not the floor)
CHECKPOINT_REACH = datetime.timedelta(days=1, hours=12)

#: rows read either side of the gaming day's bounds: a table's clock a little off, and the
#: decisions recorded just after the day's last event (the exact rule is applied per row)
WINDOW_MARGIN = datetime.timedelta(hours=1)


def day_window(conn: Any, day: datetime.date) -> tuple[datetime.datetime, datetime.datetime]:
    """The gaming day's bounds on the floor's clock (its partition's), with the margin: the
    report reads one day's rows, not the floor's."""
    row = conn.execute(
        f"SELECT (%s::date + gaming_day_start) AT TIME ZONE time_zone,"
        f" (%s::date + 1 + gaming_day_start) AT TIME ZONE time_zone FROM {SCHEMA}.settings",
        (day, day),
    ).fetchone()
    return row[0] - WINDOW_MARGIN, row[1] + WINDOW_MARGIN


def _rows_between(
    conn: Any,
    table_id: str,
    low: datetime.datetime,
    high: datetime.datetime,
    *,
    after: int = 0,
    upto: int | None = None,
) -> Iterable[JournalRow]:
    from tablectl.controller.floor.store import table_rows_sql

    source, where, params = table_rows_sql(
        conn, table_id, low=low, high=high, after=after, upto=upto
    )
    with conn.transaction(), conn.cursor(name=f"report_{table_id}") as cursor:
        cursor.itersize = 2000
        cursor.execute(
            f"SELECT r.seq, r.kind, r.round, {RECORDED_AT_SQL}, r.body, r.prev_hash, r.hash"
            f" FROM {source} WHERE {where} ORDER BY r.seq",
            params,
        )
        for raw in cursor:
            yield parse_row(raw)


# -- CSV -----------------------------------------------------------------------------------------

#: Q3's columns: the players' cards tested, the chi-square, its dof, its p-value, the verdict
SEAT_COLUMNS = ("seat_cards", "seat_chi_square", "seat_dof", "seat_p_value", "seat_bias")


def seat_verdict(table: TableDay) -> str:
    """flagged | ok | not tested (a cell would expect fewer than 5 cards)."""
    if table.seat_untested:
        return f"not tested ({table.seat_untested})"
    if table.seat_bias is None:
        return "not tested"
    return "flagged" if table.seat_bias["flagged"] else "ok"


def _seat_cells(table: TableDay) -> list[object]:
    test = table.seat_bias
    if test is None:
        return [table.seat_cards, "", "", "", seat_verdict(table)]
    return [
        table.seat_cards,
        test["statistic"],
        test["dof"],
        f"{test['p_value']:.3g}",
        seat_verdict(table),
    ]


def write_csv(report: FloorReport, path: Path) -> Path:
    """One line per table and one for the floor; a column per count and per rule id."""
    rules = sorted(report.decisions())
    header = [
        "gaming_day",
        "table",
        "game",
        *COUNTS,
        "decisions",
        *(f"rule_{r}" for r in rules),
        *SEAT_COLUMNS,
    ]
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        for table in report.tables:
            writer.writerow(
                [
                    report.gaming_day.isoformat(),
                    table.table_id,
                    table.game,
                    *(table.counts[name] for name in COUNTS),
                    sum(table.decisions.values()),
                    *(table.decisions[rule] for rule in rules),
                    *_seat_cells(table),
                ]
            )
        floor = report.decisions()
        writer.writerow(
            [
                report.gaming_day.isoformat(),
                "FLOOR",
                "",
                *(report.total(name) for name in COUNTS),
                sum(floor.values()),
                *(floor[rule] for rule in rules),
                *([""] * len(SEAT_COLUMNS)),
            ]
        )
    return path


# -- HTML ----------------------------------------------------------------------------------------

PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb")


def whole_ticks(peak: float, most: int = 5) -> list[int]:
    """The y axis's ticks for counts up to `peak`: whole numbers from 0, a step of 1, 2 or 5
    times a power of ten, at most `most` of them, the last at or above the peak (a quarter of
    a peak of 2 printed as 0, 0, 1, 2, 2)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            candidate = step * factor
            if math.ceil(peak / candidate) + 1 <= most:
                return [candidate * n for n in range(math.ceil(peak / candidate) + 1)]
        step *= 10


def bar_chart(
    title: str, labels: list[str], series: dict[str, list[float]], *, width: int = 640
) -> str:
    """Grouped vertical bars as inline SVG (one group per label, one bar per series)."""
    height, left, bottom, top = 260, 44, 56, 30
    plot_w, plot_h = width - left - 10, height - bottom - top
    ticks = whole_ticks(max([v for values in series.values() for v in values] + [1]))
    peak = ticks[-1]
    group_w = plot_w / max(1, len(labels))
    bar_w = max(2.0, group_w * 0.8 / max(1, len(series)))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="{left}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>',
    ]
    for tick in ticks:
        y = top + plot_h - plot_h * tick / peak
        parts.append(
            f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
            f"{tick}</text>"
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
            'stroke="#ddd"/>'
        )
    for index, label in enumerate(labels):
        x0 = left + index * group_w + group_w * 0.1
        for number, (name, values) in enumerate(series.items()):
            value = values[index]
            bar_h = plot_h * value / peak
            x = x0 + number * bar_w
            parts.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - bar_h:.1f}" width="{bar_w - 1:.1f}" '
                f'height="{bar_h:.1f}" fill="{PALETTE[number % len(PALETTE)]}">'
                f"<title>{html.escape(label)}: {html.escape(name)} {value:g}</title></rect>"
            )
        parts.append(
            f'<text x="{x0 + group_w * 0.4:.1f}" y="{top + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{html.escape(label)}</text>'
        )
    for number, name in enumerate(series):
        x = left + number * 130
        parts.append(
            f'<rect x="{x}" y="{height - 18}" width="10" height="10" '
            f'fill="{PALETTE[number % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{height - 9}" font-size="11">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1180px; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
tr.total td { font-weight: bold; background: #f2f2f2; }
.alert { color: #b00; font-weight: bold; }
figure { margin: 1em 0; }
"""


def _clock(stamp: str | None) -> str:
    """An event's time on this machine's clock to the second, with the zone it is in (a
    floor of several sites, or a report read after a clock change, needs to know)."""
    moment = local_time(stamp) if stamp else None
    if moment is None:
        return "-"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _zone() -> str:
    """This machine's zone now, as the report's times carry it ("CET", "UTC")."""
    return datetime.datetime.now().astimezone().strftime("%Z")


def write_html(report: FloorReport, path: Path) -> Path:
    """The one page a shift manager reads: totals, per table, plots, decisions by rule."""
    day = report.gaming_day.isoformat()
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Floor report, gaming day {esc(day)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Floor report: gaming day {esc(day)}</h1>",
        f"<p>{len(report.tables)} tables; generated {esc(report.generated_at)} from the floor "
        "store (each table's gaming day starts at its configured time).</p>",
        "<h2>Floor totals</h2><table><tr>",
        *(f"<th>{esc(COUNT_TITLES[name])}</th>" for name in COUNTS),
        "</tr><tr>",
        *(f"<td>{report.total(name)}</td>" for name in COUNTS),
        "</tr></table>",
        "<h2>Per table</h2><table><tr><th>Table</th><th>Game</th>",
        *(f"<th>{esc(COUNT_TITLES[name])}</th>" for name in COUNTS),
        "<th class='text'>First event</th><th class='text'>Last event</th></tr>",
    ]
    for table in report.tables:
        out.append(f"<tr><td>{esc(table.table_id)}</td><td class='text'>{esc(table.game)}</td>")
        for name in COUNTS:
            flagged = name in ("voids", "misdeals", "deck_removals") and table.counts[name]
            cell = (
                f"<span class='alert'>{table.counts[name]}</span>"
                if flagged
                else str(table.counts[name])
            )
            out.append(f"<td>{cell}</td>")
        out.append(
            f"<td class='text'>{esc(_clock(table.first_event))}</td>"
            f"<td class='text'>{esc(_clock(table.last_event))}</td></tr>"
        )
    out.append("<tr class='total'><td>Floor</td><td></td>")
    out += [f"<td>{report.total(name)}</td>" for name in COUNTS]
    out.append("<td></td><td></td></tr></table>")

    labels = [table.table_id for table in report.tables]
    out.append("<h2>Plots</h2>")
    out.append(
        "<figure>"
        + bar_chart(
            "Rounds per table",
            labels,
            {"rounds": [float(t.counts["rounds"]) for t in report.tables]},
        )
        + "</figure>"
    )
    out.append(
        "<figure>"
        + bar_chart(
            "Exceptions per table",
            labels,
            {
                COUNT_TITLES[name]: [float(t.counts[name]) for t in report.tables]
                for name in ("voids", "misdeals", "deck_removals", "device_faults")
            },
        )
        + "</figure>"
    )
    hours = report.rounds_by_hour()
    if hours:
        ordered = sorted(hours)
        out.append(
            "<figure>"
            + bar_chart(
                f"Rounds per hour, floor-wide (local time, {_zone()})",
                [f"{hour:02d}h" for hour in ordered],
                {"rounds": [float(hours[hour]) for hour in ordered]},
            )
            + "</figure>"
        )
    decisions = report.decisions()
    names = report.rule_names()
    out.append("<h2>Decisions by rule</h2><table><tr><th>Rule</th><th class='text'>Citation</th>")
    out += [f"<th>{esc(t.table_id)}</th>" for t in report.tables]
    out.append("<th>Floor</th></tr>")
    for rule in sorted(decisions):
        out.append(f"<tr><td>{esc(rule)}</td><td class='text'>{esc(names.get(rule, ''))}</td>")
        out += [f"<td>{t.decisions[rule]}</td>" for t in report.tables]
        out.append(f"<td>{decisions[rule]}</td></tr>")
    out.append("</table>")
    out.append(
        "<h2>Seat bias (Q3)</h2><p>The ranks each player position received in the day's "
        "ended rounds against the deck's composition: a chi-square, flagged below p = "
        f"{SEAT_BIAS_ALPHA:g} (docs/shuffle-integrity.md). Counts only, never a card.</p>"
        "<table><tr><th>Table</th><th>Players' cards</th><th>Chi-square</th><th>dof</th>"
        "<th>p-value</th><th class='text'>Seat bias</th></tr>"
    )
    for table in report.tables:
        cards, statistic, dof, p_value, verdict = _seat_cells(table)
        shown = esc(str(verdict))
        if verdict == "flagged":
            shown = f"<span class='alert'>{shown}</span>"
        out.append(
            f"<tr><td>{esc(table.table_id)}</td><td>{cards}</td><td>{statistic}</td>"
            f"<td>{dof}</td><td>{p_value}</td><td class='text'>{shown}</td></tr>"
        )
    out.append("</table>")
    voided = [(t.table_id, r) for t in report.tables for r in sorted(set(t.voided_rounds))]
    if voided:
        out.append("<h2>Voided rounds</h2><ul>")
        out += [
            f"<li>{esc(tid)} round {rnd}: <code>tablectl floor round --dsn DSN --table "
            f"{esc(tid)} --round {rnd}</code></li>"
            for tid, rnd in voided
        ]
        out.append("</ul>")
    out.append("</body></html>")
    path.write_text("\n".join(out), encoding="utf-8")
    return path
