"""Shuffle integrity across the floor (docs/shuffle-integrity.md): Q1 over every table's
ended rounds, and the rounds each gaming day's Q3 (a biased seat) is computed from.

Each table's rows are replayed through the engine, as the table ran them, with a recorder in
the place of the table's shuffle watch: the engine itself says when a shuffled deck goes into
play (a `shuffle_completed` of that deck, the event's `deck` or A; in three card 21 the
shuffled batch at its `shoe_loaded`; a discard rack reshuffled mid-round begins a new shoe
too) and hands over a round's cards only once the round is over. The rows read stop at the
table's release mark (floor.tables.released_seq): a round in play is never fetched, whoever
runs the check (the auditor's login sees every row; this check asks for ended rounds only).

Q1 here is the table's Q1 with a year's memory: every run of FLOOR_RUN consecutive cards of a
shoe is fingerprinted (80 bits, see FINGERPRINT_BYTES) and looked up among the runs of every
earlier shoe of every table; a run found in a different shoe is a finding. The fingerprints
are kept in the floor's table floor.shuffle_runs and the lookup is SQL over its index, so the
checking process's memory does not grow with the days checked. Only fingerprints
and where they came from are held, never a card, and a finding names tables, rounds and
gaming days (H7).
"""

from __future__ import annotations

import bisect
import datetime
import hashlib
import json
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tablectl.controller.engine.shuffle_integrity import FLOOR_RUN, ShuffleWatch
from tablectl.controller.floor.schema import RECORDED_AT_SQL, SCHEMA
from tablectl.controller.floor.store import table_rows_sql
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    JournalError,
    JournalRow,
    ReplayedDraws,
    engine_from_checkpoint,
    engine_from_table_row,
    parse_row,
)

#: the floor's fingerprint: 80 bits. The table's 48 bits are enough for its 1,024 runs, not
#: for a floor-year: 3.65e9 runs make 6.7e18 pairs, which 48 bits would collide ~24,000
#: times by chance; 80 bits, 5.5e-6 times (docs/shuffle-integrity.md). In Python an int of
#: 80 bits costs what one of 48 does (three 30-bit digits).
FINGERPRINT_BYTES = 10
FETCH_ROWS = 2000
#: runs held in the process before they are sent to floor.shuffle_runs
FLUSH_RUNS = 20_000


def floor_fingerprint(cards: Sequence[str]) -> int:
    """A run's fingerprint on the floor: 80 bits of BLAKE2b over its cards, as an int."""
    digest = hashlib.blake2b(",".join(cards).encode(), digest_size=FINGERPRINT_BYTES).digest()
    return int.from_bytes(digest, "big")


def floor_fingerprint_bytes(cards: Sequence[str]) -> bytes:
    """The same fingerprint as floor_fingerprint, as the bytes floor.shuffle_runs holds."""
    return hashlib.blake2b(",".join(cards).encode(), digest_size=FINGERPRINT_BYTES).digest()


# -- replaying a table's ended rounds --------------------------------------------------------


@dataclass(frozen=True)
class EndedRound:
    """A round that is over: its deck, its cards in deal order (with their positions)."""

    number: int
    deck: str
    dealt: list[dict[str, Any]]
    gaming_day: datetime.date


@dataclass(frozen=True)
class NewShoe:
    """A shuffled deck (or part of one) went into play: runs do not cross this mark."""

    deck: str


class _Marks(ShuffleWatch):
    """Stands in the engine for the table's watch: records where shoes begin and which
    rounds ended with which cards, and detects nothing (the floor does, over every table)."""

    def __init__(self, engine: Any) -> None:
        super().__init__(engine.composition.copies)
        self._engine = engine
        self.marks: list[Mark] = []

    def shuffled(self, deck: str) -> None:
        self.marks.append(NewShoe(deck))

    def partial_shuffle(self, deck: str) -> None:
        self.marks.append(NewShoe(deck))

    def round_ended(self, deck: str, round_number: int, cards: Sequence[str]) -> list[Any]:
        # the engine calls this before it clears the round's cards: read them now
        self.marks.append((deck, round_number, self._engine.dealt_cards()))
        return []


Mark = NewShoe | tuple[str, int, list[dict[str, Any]]]
_NO_MARKS: list[Mark] = []


class RowReplay:
    """The engine replayed over a table's rows fed in seq order, as the table ran it: from its
    table row, or from the first engine checkpoint row fed before any event (a journal writes
    one every few rounds and at each gaming day's start), the random draws from the journal's
    notes. `feed` gives the marks (_Marks) the row made. The one replay loop of the floor:
    replay_table's (Q1, the day's report) and the shipper's summaries (floor/summary.py)."""

    def __init__(self, table_row: dict[str, Any]) -> None:
        self.table_row = table_row
        self.draws = ReplayedDraws(())
        self.engine: Any = engine_from_table_row(table_row, self.draws)
        self.marks = _Marks(self.engine)
        self.engine.shuffle_watch = self.marks
        self.fresh = True  # no event replayed yet: a checkpoint row may set the engine
        #: events handled by the engine (what a replay costs)
        self.events = 0

    def feed(self, row: JournalRow) -> list[Mark]:
        kind = row.kind
        if kind == "checkpoint" and self.fresh:
            self.engine = engine_from_checkpoint(self.table_row, row.body["engine"], self.draws)
            self.marks = _Marks(self.engine)
            self.engine.shuffle_watch = self.marks
            return _NO_MARKS
        if kind == "note" and row.body.get("type") == RANDOM_DRAW:
            self.draws.extend([row.body])
            return _NO_MARKS
        if kind != "event":
            return _NO_MARKS
        self.fresh = False
        self.engine.handle(row.body, row.seq)
        self.events += 1
        marks = self.marks.marks
        if not marks:
            return _NO_MARKS
        self.marks.marks = []
        return marks


@dataclass
class TableReplay:
    """What a replay of one table's rows said besides its marks."""

    table_id: str
    game: str = ""
    shuffled_whole: bool = True  # False: a Bart Carter shoe (Q1 does not apply)


def replay_table(
    conn: Any,
    table_id: str,
    since: datetime.datetime | None = None,
    *,
    info: TableReplay,
    reach: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
    rows_read: Callable[[JournalRow, datetime.datetime], None] | None = None,
) -> Generator[EndedRound | NewShoe, None, None]:
    """The table's ended rounds and shoe marks, in order, from its rows up to the release
    mark: from the last engine checkpoint before `since` (a journal writes one at each gaming
    day's start), or from row 1. Streamed: a server-side cursor, FETCH_ROWS at a time.
    `rows_read(row, recorded_at)` hears every row read, in seq order (the day's report counts
    its day from the same pass).

    With `reach`, a replay never starts before it: no checkpoint at or after `reach` (and
    before `since`) and a row 1 older than `reach` raise ValueError rather than read the
    table's whole history (what a day's report must not do: it reads its day).

    With `until`, the rows read are those recorded from the first row's time to `until`
    (the partitions that hold them; a day's report stops at its window's end), and any row
    between two of them recorded outside (a clock stepped forward, then back) is read too,
    by its seq: the engine replays every row in order or none."""
    table = conn.execute(
        f"SELECT table_row, released_seq FROM {SCHEMA}.tables WHERE table_id = %s", (table_id,)
    ).fetchone()
    if table is None or table[0] is None:
        return
    table_row = json.loads(table[0])
    info.game = str(table_row.get("game", ""))
    replay = RowReplay(table_row)  # a game unknown here: ValueError
    info.shuffled_whole = bool(replay.engine._shoe_shuffled_whole())
    released = int(table[1])
    if not released:
        return
    start, first_at = 0, None
    if since is not None:
        # within reach only: the partitions before it are not read (the landmarks index)
        source, where, params = table_rows_sql(
            conn, table_id, upto=released, low=reach, high=since, kind="checkpoint"
        )
        mark = conn.execute(
            f"SELECT r.seq, r.recorded_at FROM {source} WHERE {where} ORDER BY r.seq DESC LIMIT 1",
            params,
        ).fetchone()
        if mark:
            start, first_at = int(mark[0]) - 1, mark[1]
    if (reach is not None or until is not None) and start == 0:
        source, where, params = table_rows_sql(conn, table_id, upto=1)
        oldest = conn.execute(
            f"SELECT min(r.recorded_at) FROM {source} WHERE {where}", params
        ).fetchone()
        first_at = None if oldest is None else oldest[0]
        if reach is not None and (first_at is None or first_at < reach):
            raise ValueError(
                f"no engine checkpoint on the floor between {reach.isoformat()} and "
                f"{(since or reach).isoformat()}: the replay would start at row {start + 1}, "
                "before the day; `tablectl journal seat-bias` on the table's journal runs it"
            )

    def select(**bounds: Any) -> tuple[str, list[Any]]:
        source, where, params = table_rows_sql(conn, table_id, **bounds)
        return (
            f"SELECT r.seq, r.kind, r.round, {RECORDED_AT_SQL}, r.body, r.prev_hash, r.hash,"
            " ((r.recorded_at AT TIME ZONE s.time_zone) - s.gaming_day_start)::date,"
            f" r.recorded_at FROM {source}, {SCHEMA}.settings AS s WHERE {where}"
            " ORDER BY r.seq",
            params,
        )

    if until is not None:
        if first_at is None or first_at >= until:
            return
        low = first_at if since is None else min(first_at, since)
        query, params = select(after=start, upto=released, low=low, high=until)
    else:
        query, params = select(after=start, upto=released)
    with conn.transaction(), conn.cursor(name=f"shuffle_{table_id}") as cursor:
        cursor.itersize = FETCH_ROWS
        cursor.execute(query, params)
        expected = start + 1
        for found in cursor:
            if found[0] == expected:
                rows: Iterable[Sequence[Any]] = (found,)
            else:  # rows between, recorded outside the window: read by their seq
                between = conn.execute(*select(after=expected - 1, upto=found[0] - 1)).fetchall()
                rows = (*between, found)
            expected = found[0] + 1
            for *raw, day, at in rows:
                row = parse_row(tuple(raw))
                if rows_read is not None:
                    rows_read(row, at)
                for mark in replay.feed(row):
                    if isinstance(mark, NewShoe):
                        yield mark
                    else:
                        yield EndedRound(mark[1], mark[0], mark[2], day)


# -- Q1 across the floor -------------------------------------------------------------------


@dataclass(frozen=True)
class Where:
    table_id: str
    round: int
    gaming_day: datetime.date


@dataclass(frozen=True)
class ReplayFinding:
    """Two shoes (two shuffles) that dealt the same run(s) of FLOOR_RUN cards: where each
    first shared run began (`first` the earlier gaming day, then table id, then round), and
    how many runs they share; never a card."""

    first: Where
    second: Where
    runs: int


@dataclass
class _Shoe:
    serial: int
    window: deque[tuple[str, int, datetime.date]] = field(
        default_factory=lambda: deque(maxlen=FLOOR_RUN)
    )


@dataclass
class FloorReplayCheck:
    """The floor's memory of runs is a table (floor.shuffle_runs, one check's rows by its
    number): each run's fingerprint, shoe serial, table index and first round are sent there
    FLUSH_RUNS at a time, and repeats are found by SQL (repeats()), so the process holds no
    more for a year than for a day. `conn` None: nothing is sent (a replay without Q1)."""

    conn: Any = None
    check_id: int = 0
    run: int = FLOOR_RUN
    tables: list[str] = field(default_factory=list)
    days: list[list[tuple[int, datetime.date]]] = field(default_factory=list)
    serials: int = 0
    runs_checked: int = 0
    runs_stored: int = 0
    rounds_read: int = 0
    not_watched: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)  # table -> why it was not replayed
    #: rounds that ended before this gaming day are replayed (the engine's state) not checked
    first_day: datetime.date | None = None
    #: the most runs held before they are sent (bounded by SHUFFLE_RUNS_PER_CALL)
    flush_runs: int = FLUSH_RUNS
    #: the most runs this process held at once (what a test reads: flat in the days)
    most_held: int = 0
    _pending: list[tuple[int, bytes, int, int, int]] = field(default_factory=list)

    def check_table(self, events: Iterator[EndedRound | NewShoe], table_id: str) -> None:
        index = len(self.tables)
        self.tables.append(table_id)
        self.days.append([])
        shoes: dict[str, _Shoe] = {}
        for item in events:
            if isinstance(item, NewShoe):
                self.serials += 1
                shoes[item.deck] = _Shoe(self.serials)
                continue
            if self.first_day is not None and item.gaming_day < self.first_day:
                if item.deck in shoes:  # no run joins cards across the rounds skipped
                    shoes[item.deck].window.clear()
                continue
            self.rounds_read += 1
            table_days = self.days[index]
            if not table_days or table_days[-1][1] != item.gaming_day:
                table_days.append((item.number, item.gaming_day))
            shoe = shoes.get(item.deck)
            if shoe is None:  # cards before the first shuffle read: a shoe of their own
                self.serials += 1
                shoe = shoes[item.deck] = _Shoe(self.serials)
            for entry in item.dealt:
                shoe.window.append((str(entry["card"]), item.number, item.gaming_day))
                if len(shoe.window) == self.run:
                    self._hold(shoe, index)

    def _hold(self, shoe: _Shoe, table_index: int) -> None:
        self.runs_checked += 1
        mark = floor_fingerprint_bytes([card for card, _, _ in shoe.window])
        self._pending.append((self.runs_checked, mark, shoe.serial, table_index, shoe.window[0][1]))
        self.most_held = max(self.most_held, len(self._pending))
        if len(self._pending) >= self.flush_runs:
            self.flush()

    def flush(self) -> None:
        """Send the runs held to floor.shuffle_runs."""
        if not self._pending or self.conn is None:
            self._pending.clear()
            return
        columns = zip(*self._pending, strict=True)
        ords, marks, shoes, tables, rounds = (list(column) for column in columns)
        self.conn.execute(
            f"SELECT {SCHEMA}.shuffle_check_add(%s, %s::bigint[], %s::bytea[], %s::bigint[],"
            " %s::integer[], %s::bigint[])",
            (self.check_id, ords, marks, shoes, tables, rounds),
        )
        self.runs_stored += len(self._pending)
        self._pending.clear()

    def _where(self, table_index: int, round_number: int) -> Where:
        table_days = self.days[table_index]
        at = bisect.bisect_right([r for r, _ in table_days], round_number) - 1
        day = table_days[max(0, at)][1]
        return Where(self.tables[table_index], round_number, day)

    def results(self) -> list[ReplayFinding]:
        """The repeats among the runs sent, found by the floor (shuffle_check_repeats)."""
        self.flush()
        if self.conn is None:
            return []
        repeats = self.conn.execute(
            f"SELECT first_table, first_round, second_table, second_round, runs"
            f" FROM {SCHEMA}.shuffle_check_repeats(%s)",
            (self.check_id,),
        ).fetchall()
        found = []
        for a_table, a_round, b_table, b_round, n in repeats:
            pair = (self._where(a_table, a_round), self._where(b_table, b_round))
            one, other = sorted(pair, key=lambda w: (w.gaming_day, w.table_id, w.round))
            found.append(ReplayFinding(one, other, int(n)))
        return sorted(found, key=lambda f: (f.first.gaming_day, f.first.table_id, f.first.round))


def floor_shuffle_check(
    conn: Any,
    since: datetime.datetime | None = None,
    first_day: datetime.date | None = None,
    *,
    flush_runs: int | None = None,
) -> tuple[FloorReplayCheck, list[ReplayFinding]]:
    """Q1 over every table's ended rounds: those of gaming day `first_day` on (the engine
    replayed from the last checkpoint before `since`, that day's start), or all. The runs go
    to floor.shuffle_runs under a check number of this login's, removed at the end."""
    # autocommit (store.connect): each table's replay is one transaction, its runs sent in it
    check_id = int(conn.execute(f"SELECT {SCHEMA}.shuffle_check_begin()").fetchone()[0])
    check = FloorReplayCheck(
        conn, check_id, first_day=first_day, flush_runs=flush_runs or FLUSH_RUNS
    )
    try:
        tables = [
            row[0] for row in conn.execute(f"SELECT table_id FROM {SCHEMA}.tables ORDER BY 1")
        ]
        for table_id in tables:
            info = TableReplay(table_id)
            events = replay_table(conn, table_id, since, info=info)
            try:
                first = next(events, None)
                if not info.shuffled_whole:
                    check.not_watched.append(table_id)
                    continue
                if first is not None:
                    check.check_table(_chain(first, events), table_id)
            except (ValueError, JournalError) as error:
                # a game no engine here knows, a checkpoint it cannot restore: said, not
                # skipped silently; the other tables are still checked
                check.unreadable[table_id] = str(error)
            finally:
                events.close()  # a table not watched: its replay's transaction ends here
            check.flush()
        findings = check.results()
    finally:
        if not conn.closed and not conn.broken:
            conn.execute(f"SELECT {SCHEMA}.shuffle_check_end(%s)", (check_id,))
            conn.commit()
    return check, findings


def _chain(first: EndedRound | NewShoe, rest: Iterator[EndedRound | NewShoe]) -> Iterator[Any]:
    yield first
    yield from rest
