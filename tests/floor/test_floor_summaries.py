"""Per-round summaries (docs/floor.md, "The day's report from summaries"), on a real server:
the report from the summaries the shipper shipped is byte for byte the report replayed from
the rows; a table that shipped none (an earlier tablectl) is replayed, and so are the rounds
a shipper left without summaries; a summary edited on the floor is named by
`floor report --recompute`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import shutil
import sqlite3
from pathlib import Path
from random import Random
from typing import Any

import psycopg
import pytest
import structlog

from tablectl.controller.common.config import FloorConfig, parse_config
from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.floor import report as report_module
from tablectl.controller.floor.local import LocalJournal
from tablectl.controller.floor.report import FloorReport, build_report, write_csv, write_html
from tablectl.controller.floor.schema import READER_GROUP, SCHEMA
from tablectl.controller.floor.shipper import FloorShipper, LocalRow, floor_time
from tablectl.controller.floor.store import connect
from tablectl.controller.floor.summary import (
    RoundSummary,
    ShipperSummaries,
    TableSummaries,
    canonical,
)
from tablectl.controller.record.journal import Journal, JournalRow, parse_row
from tablectl.controller.service.service import TableService
from tablectl.simulators import demo
from tablectl.simulators.roundgen import legal_stream
from tests.floor.floorkit import (
    FloorDb,
    local_rows,
    truncate_journal,
    unique_table_id,
    wait_for,
)
from tests.floor.test_floor_shipping import assert_floor_equals_local, demo_args

ROUNDS = 8


def _play(
    floor_db: FloorDb,
    state: Path,
    table_id: str,
    game: str,
    seed: int,
    *,
    rounds: int = ROUNDS,
    shippers: list[FloorShipper] | None = None,
    floor: bool = True,
) -> Path:
    """A real table (the demo's daemon) dealing `rounds` rounds, shipping as it deals (its
    shipper into `shippers`); `floor` False: a table without [floor] (the floor falls behind)."""
    if not (state / "journal.sqlite").exists():
        floor_db.provision(table_id)
    args = demo_args(state, rounds, floor_db, table_id)
    args.game = game
    args.faults = 0.5 if game == "heads_up_holdem" else 0.0
    args.fault_kind = ["ads_jam"] if game == "heads_up_holdem" else []
    if not floor:
        args.floor_dsn = args.floor_passfile = None

    async def keep(report: Any, daemon: Any) -> None:
        if shippers is not None and daemon.floor is not None and daemon.floor not in shippers:
            shippers.append(daemon.floor)

    assert asyncio.run(demo.play_demo(args, seed, "127.0.0.1", 0, on_round=keep)) == 0
    journal = state / "journal.sqlite"
    if floor:
        assert_floor_equals_local(floor_db, table_id, journal)
    return journal


def _replayed_summaries(journal: Path) -> dict[int, RoundSummary]:
    """The spans a standalone shipper's summaries give for the journal (the engine replayed
    over every row), by their last row."""
    summaries, closed = ShipperSummaries(), {}
    for raw in local_rows(journal):
        summary = summaries.feed(parse_row(raw), floor_time(raw[3])[0])
        if summary is not None:
            closed[summary.to_seq] = summary
    assert summaries.replayed_events > 0 and summaries.failure is None
    return closed


def _assert_as_replayed(floor_db: FloorDb, table_id: str, journal: Path) -> int:
    """Every summary the table shipped is, byte for byte, the replay's of the same rows."""
    replayed = _replayed_summaries(journal)
    with floor_db.admin() as conn:
        shipped = conn.execute(
            "SELECT from_seq, to_seq, first_at, last_at, ended_at, summary::text"
            f" FROM {SCHEMA}.round_summaries WHERE table_id = %s ORDER BY to_seq",
            (table_id,),
        ).fetchall()
    assert shipped
    for from_seq, to_seq, first_at, last_at, ended_at, text in shipped:
        expected = replayed[to_seq]
        assert (from_seq, first_at, last_at, ended_at) == (
            expected.from_seq,
            expected.first_at,
            expected.last_at,
            expected.ended_at,
        )
        assert canonical(json.loads(text)) == expected.text()
    return len(shipped)


def _today() -> datetime.date:
    return gaming_day_of(datetime.datetime.now(), datetime.time(6, 0))


def _written(report: FloorReport, directory: Path) -> tuple[bytes, bytes]:
    """The report's two files, made at one fixed time (so two reports compare byte for byte)."""
    directory.mkdir(parents=True, exist_ok=True)
    report.generated_at = "2026-01-01T00:00:00+00:00"
    return (
        write_csv(report, directory / "r.csv").read_bytes(),
        write_html(report, directory / "r.html").read_bytes(),
    )


def _reports(floor_db: FloorDb, tmp_path: Path) -> tuple[FloorReport, FloorReport]:
    with connect(floor_db.admin_dsn) as conn:
        summed = build_report(conn, _today())
        replayed = build_report(conn, _today(), recompute=True)
    assert _written(summed, tmp_path / "summed") == _written(replayed, tmp_path / "replayed")
    assert replayed.findings == []
    return summed, replayed


def _summaries(floor_db: FloorDb, table_id: str) -> list[tuple[Any, ...]]:
    with floor_db.admin() as conn:
        return list(
            conn.execute(
                f"SELECT from_seq, to_seq, summary FROM {SCHEMA}.round_summaries"
                " WHERE table_id = %s ORDER BY to_seq",
                (table_id,),
            )
        )


@pytest.mark.long
def test_the_report_from_summaries_is_the_replayed_report(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """Three games dealt by real daemons shipping as they deal (voided rounds included): the
    shipper shipped a summary a round, within the released rows only, and the report made
    from them in SQL is byte for byte the report replayed from the rows."""
    tables = {}
    for number, game in enumerate(("heads_up_holdem", "five_card_hilo", "three_card_21")):
        table_id = unique_table_id()
        shippers: list[FloorShipper] = []
        journal = _play(
            floor_db, tmp_path / table_id, table_id, game, 21 + number, shippers=shippers
        )
        tables[table_id] = game
        # the daemon's engine handed its round ends over: the shipper replayed nothing, and
        # each summary is byte for byte what the engine's replay over the rows gives
        (shipper,) = shippers
        assert shipper.summaries_shipped > 0
        assert shipper.summary_events_replayed == 0
        assert _assert_as_replayed(floor_db, table_id, journal) == shipper.summaries_shipped
    with floor_db.admin() as conn:
        released = dict(conn.execute(f"SELECT table_id, released_seq FROM {SCHEMA}.tables"))
    for table_id in tables:
        shipped = _summaries(floor_db, table_id)
        rounds = sum(
            s[2]["days"].get(_today().isoformat(), {}).get("counts", {}).get("rounds", 0)
            for s in shipped
        )
        assert len(shipped) >= ROUNDS - 1 and rounds >= ROUNDS - 1, shipped
        assert all(s[1] <= released[table_id] for s in shipped)  # never a round in play
        # one chain of spans: each begins where the last ended
        assert [s[0] for s in shipped[1:]] == [s[1] + 1 for s in shipped[:-1]]
    summed, replayed = _reports(floor_db, tmp_path)
    assert {t: summed.sources[t] for t in tables} == dict.fromkeys(tables, "summaries")
    # a reader (surveillance) makes the same report from the summaries, released state only
    reader = unique_table_id("reader_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
    local = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    with psycopg.connect(f"{local} user={reader}", autocommit=True) as conn:
        as_reader = build_report(conn, _today())
    assert as_reader.sources == summed.sources
    assert _written(as_reader, tmp_path / "reader") == _written(replayed, tmp_path / "replayed")
    voids = {t.table_id: t.counts["voids"] for t in summed.tables}
    assert sum(voids[t] for t in tables) > 0  # the jams voided rounds: counted from summaries


@pytest.mark.long
def test_rows_without_summaries_are_replayed(
    floor_db: FloorDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of an earlier tablectl (its shipper ships rows only) is replayed whole; a
    table whose shipper restarted mid-day (its summaries begin again at the next checkpoint
    row: none in this short day) has the rounds after the restart replayed, its rows read
    once (counted as the replay reads them, not read again to be counted); both reports
    equal the replayed one."""
    source = unique_table_id()
    journal = _play(floor_db, tmp_path / "played", source, "five_card_hilo", 5)
    rows = sqlite3.connect(journal).execute("SELECT count(*) FROM journal").fetchone()[0]

    older = unique_table_id()
    config = floor_db.provision(older)
    copy = tmp_path / "older" / "journal.sqlite"
    copy.parent.mkdir()
    shutil.copy(journal, copy)
    _ship(older, copy, config, summaries=False)

    mixed = unique_table_id()
    config = floor_db.provision(mixed)
    half = tmp_path / "mixed" / "journal.sqlite"
    half.parent.mkdir()
    shutil.copy(journal, half)
    truncate_journal(half, rows // 2)
    _ship(mixed, half, config, summaries=True)
    partly = _summaries(floor_db, mixed)
    assert partly
    shutil.copy(journal, half)  # the rest of the day, by a restarted shipper: it resumes at
    _ship(mixed, half, config, summaries=True)  # the floor's head, summaries from a checkpoint
    assert _summaries(floor_db, mixed)[: len(partly)] == partly

    read_to_count: dict[str, int] = {}
    rows_between = report_module._rows_between

    def counting(conn: Any, table_id: str, *args: Any, **kwargs: Any) -> Any:
        for row in rows_between(conn, table_id, *args, **kwargs):
            read_to_count[table_id] = read_to_count.get(table_id, 0) + 1
            yield row

    monkeypatch.setattr(report_module, "_rows_between", counting)
    summed, replayed = _reports(floor_db, tmp_path)
    assert read_to_count.get(mixed, 0) == 0  # the restart's rows: read by the replay only
    assert _summaries(floor_db, older) == []
    assert summed.sources[older] == "replayed"
    assert (
        summed.sources[mixed].startswith("summaries, ") and "rows replayed" in summed.sources[mixed]
    )
    by_table = {t.table_id: t for t in summed.tables}
    assert by_table[older].counts == by_table[source].counts == by_table[mixed].counts
    assert by_table[mixed].counts["rounds"] == ROUNDS
    assert by_table[mixed].seat_cards == by_table[source].seat_cards > 0
    assert {t.table_id: t.seat_cards for t in replayed.tables}[mixed] == by_table[mixed].seat_cards


@pytest.mark.long
def test_a_restarted_daemon_hands_over_from_its_start(floor_db: FloorDb, tmp_path: Path) -> None:
    """A table deals without its floor, then is restarted twice with it, mid-day: each
    shipper replays the rows written before its daemon started (from row 1, or from the
    next checkpoint after the floor's head); the rest are its table's to count, from the
    next checkpoint row (none in these short runs: those rows are replayed by the report);
    every summary shipped is the replay's, and the report counts all nine rounds."""
    table_id = unique_table_id()
    state = tmp_path / "t"
    floor_db.provision(table_id)
    shippers: list[FloorShipper] = []
    _play(floor_db, state, table_id, "five_card_hilo", 3, rounds=3, floor=False)
    for seed in (4, 5):
        journal = _play(
            floor_db, state, table_id, "five_card_hilo", seed, rounds=3, shippers=shippers
        )
    first, second = shippers
    assert first.summary_events_replayed > 0  # the rows dealt while the floor was away
    assert first.table_summaries is not None and first.table_summaries.first_seq > 1
    shipped = _assert_as_replayed(floor_db, table_id, journal)
    assert shipped == first.summaries_shipped + second.summaries_shipped >= 3
    summed, _ = _reports(floor_db, tmp_path)
    assert summed.sources[table_id] == "summaries" or summed.sources[table_id].startswith(
        "summaries, "
    )
    assert {t.table_id: t.counts["rounds"] for t in summed.tables}[table_id] == 9


def _row(seq: int, kind: str, body: dict[str, Any], prev: str = "p") -> JournalRow:
    at = f"2026-03-02T10:00:{seq % 60:02d}.000000+00:00"
    return JournalRow(seq, kind, 1, at, body, prev, f"h{seq}")


def _event(seq: int, kind: str = "card_drawn") -> JournalRow:
    return _row(seq, "event", {"type": kind, "time": "2026-03-02T10:00:00+00:00"}, f"h{seq - 1}")


def test_the_tables_own_spans_held_are_bounded_and_stop_at_an_engine_failure() -> None:
    """A floor away for days: past the limit the oldest spans are dropped (their rows are
    replayed by the report). An event the engine failed on stops the counting (no span is
    counted without its round's end) until the next checkpoint row."""
    counted = TableSummaries(first_seq=10, limit=3)
    counted.row_appended(_event(10))  # no table row known yet: nothing counted
    assert len(counted) == 0
    counted.set_table_row({"game": "five_card_hilo", "options": {}})
    counted.row_appended(_row(11, "checkpoint", {"type": "checkpoint"}, "h10"))
    seq = 12
    for _ in range(6):  # six rounds: an event that ends one, then the next begins a span
        counted.row_appended(_event(seq))
        counted.handled(seq, [[{"to": 1, "card": "AS"}]])
        seq += 1
    counted.row_appended(_event(seq))  # closes the sixth
    assert len(counted) == 3 and counted.dropped_upto > 0
    taken = counted.take(seq)
    assert [h.summary.to_seq for h in taken] == [15, 16, 17]  # of 12 ... 17
    assert all(h.closing_prev_hash == f"h{h.summary.to_seq}" for h in taken)
    counted.handled(seq, None)  # the engine failed on this event
    assert counted.failure is not None and "engine failed" in counted.failure
    for n in range(seq + 1, seq + 4):
        counted.row_appended(_event(n))
        counted.handled(n, [[{"to": 2, "card": "KD"}]])
    assert counted.take(seq + 10) == []  # nothing counted after the failure
    counted.row_appended(_row(seq + 4, "checkpoint", {"type": "checkpoint"}, f"h{seq + 3}"))
    assert counted.failure is None  # counting again from the checkpoint row
    counted.row_appended(_event(seq + 5))
    counted.handled(seq + 5, [[{"to": 2, "card": "KD"}]])
    counted.row_appended(_event(seq + 6))
    (again,) = counted.take(seq + 6)
    assert (again.summary.from_seq, again.summary.to_seq) == (seq + 4, seq + 5)
    assert again.summary.body["seats"] == {"2": {"K": 1}}


def _counted_by_table(
    journal: Path, told: dict[int, Any], limit: int = 10_000, altered: int = 0
) -> TableSummaries:
    """The journal's rows counted as its daemon counts them as it appends them (each row,
    then its event's round ends); `altered`: that row as the table saw it links to another
    row than the one on disk (its prev_hash)."""
    counted = TableSummaries(1, limit=limit)
    for raw in local_rows(journal):
        row = parse_row(raw)
        if row.seq == altered:
            row = dataclasses.replace(row, prev_hash="0" * 64)
        counted.row_appended(row)
        if row.kind == "event":
            counted.handled(row.seq, told.get(row.seq, []))
    return counted


def _shipped_of(journal: Path, counted: TableSummaries) -> list[RoundSummary]:
    """What a shipper puts up for the floor of the spans its table counted, reading the whole
    journal as one batch (its own _summarize: taken, each checked against its closing row)."""
    shipper = FloorShipper("t", journal, FloorConfig(dsn="host=/nonexistent"))
    shipper.table_summaries = counted
    shipper._summarizer = ShipperSummaries()  # a floor that takes summaries
    local = LocalJournal(journal)
    batch = [LocalRow(int(v["seq"]), v) for v in local.rows_after(0, 100_000)]
    local.close()
    shipper._summarize(batch)
    assert shipper.summary_events_replayed == 0
    return list(shipper._pending)


def test_a_span_that_does_not_end_at_the_journals_row_is_not_shipped(tmp_path: Path) -> None:
    """The shipper ships a span its table counted only when the row after it, as read from
    the journal, links to the span's last row as the table saw it (the chain then vouches
    for every row of the span): a span counted from other rows than those on disk is
    dropped, said once at warning, and never shipped; the others are."""
    journal, told, _ = _dealt_journal(tmp_path, 6)
    honest = _shipped_of(journal, _counted_by_table(journal, told))
    assert len(honest) >= 5
    closing = honest[2].to_seq + 1
    with structlog.testing.capture_logs() as logs:
        shipped = _shipped_of(journal, _counted_by_table(journal, told, altered=closing))
    assert [s.to_seq for s in shipped] == [s.to_seq for s in honest if s.to_seq != closing - 1]
    said = [e for e in logs if e["event"] == "floor_summary_unverified"]
    assert len(said) == 1 and said[0]["to_seq"] == closing - 1 and said[0]["log_level"] == "warning"


def test_a_summary_edited_on_the_floor_is_named_by_recompute(
    floor_db: FloorDb, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The DBA (or an intruder with the owner's rights) disables the guard and adds a round
    to one summary: the report from summaries shows it (it reads them), `floor report
    --recompute` replays the rows, reports the true count and names that summary (exit 1)."""
    table_id = unique_table_id()
    _play(floor_db, tmp_path / "t", table_id, "five_card_hilo", 9)
    day = _today().isoformat()
    with floor_db.admin() as conn:
        with psycopg.ClientCursor(conn) as cursor:
            cursor.execute(f"ALTER TABLE {SCHEMA}.round_summaries DISABLE TRIGGER append_only")
        edited = conn.execute(
            f"UPDATE {SCHEMA}.round_summaries SET summary = jsonb_set(summary,"
            " ARRAY['days', %s, 'counts', 'rounds'],"
            " to_jsonb((summary->'days'->%s->'counts'->>'rounds')::int + 1))"
            " WHERE table_id = %s AND to_seq = (SELECT min(to_seq) FROM"
            f" {SCHEMA}.round_summaries WHERE table_id = %s AND from_seq > 1"
            " AND summary->'days'->%s->'counts' ? 'rounds') RETURNING from_seq, to_seq",
            (day, day, table_id, table_id, day),
        ).fetchone()
        conn.execute(f"ALTER TABLE {SCHEMA}.round_summaries ENABLE TRIGGER append_only")
    assert edited is not None
    with connect(floor_db.admin_dsn) as conn:
        summed = build_report(conn, _today())
        replayed = build_report(conn, _today(), recompute=True)
    rounds = {t.table_id: t.counts["rounds"] for t in summed.tables}
    assert rounds[table_id] == ROUNDS + 1  # what the edited summaries say
    assert {t.table_id: t.counts["rounds"] for t in replayed.tables}[table_id] == ROUNDS
    assert replayed.findings == [
        f"table {table_id}: the summary of rows {edited[0]}-{edited[1]} differs from its"
        f" rows: counts on {day}"
    ]
    from tablectl.controller.commands.cli import main as tablectl

    code = tablectl(
        [
            "floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day", day,
            "--recompute", "--output", str(tmp_path / "out"), "--workers", "1",
        ]
    )  # fmt: skip
    said = capsys.readouterr()
    assert code == 1, said.out + said.err
    assert f"SUMMARY DIFFERS: table {table_id}: the summary of rows {edited[0]}-" in said.err


def _ship(table_id: str, journal: Path, config: Any, *, summaries: bool) -> None:
    shipper = FloorShipper(table_id, journal, config, publish_metrics=False, summaries=summaries)
    shipper.start()
    try:
        wait_for(lambda: shipper.head_known and shipper.rows_behind == 0, 60, "the rows shipped")
    finally:
        shipper.stop()


def _dealt_journal(directory: Path, rounds: int) -> tuple[Path, dict[int, Any], list[RoundSummary]]:
    """A table service dealing `rounds` legal rounds of five-card hi-lo into its journal (a
    checkpoint every 2 rounds); the round ends its engine told, by event seq; and the spans
    it counted as its journal appended the rows (wired as a daemon wires them)."""
    config = parse_config(
        {
            "table": {"id": "t", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
            "journal": {"path": str(directory / "journal.sqlite"), "checkpoint_rounds": 2},
        },
        "test.toml",
    )
    service = TableService(config, Journal(config.journal_path), random_source=Random(1).randrange)
    told: dict[int, Any] = {}
    live = TableSummaries(1)

    def handled(seq: int, ends: Any) -> None:
        told[seq] = ends
        live.handled(seq, ends)

    service.round_ends = handled
    service.journal.row_listeners.append(live.row_appended)

    async def deal() -> None:
        await service.start()
        spec = TableSpec.from_dict(
            {"game": "five_card_hilo", "options": {"dealing": "manual_shoe"}}
        )
        for event in legal_stream(spec, Random(3), rounds):
            await service.handle_event(event)

    asyncio.run(deal())
    service.close()
    return config.journal_path, told, [h.summary for h in live.take(10**9)]


def _replayed(journal: Path) -> list[RoundSummary]:
    summaries, closed = ShipperSummaries(), []
    for raw in local_rows(journal):
        summary = summaries.feed(parse_row(raw), floor_time(raw[3])[0])
        if summary is not None:
            closed.append(summary)
    return closed


def _as_text(summaries: list[RoundSummary]) -> list[tuple[Any, ...]]:
    return [(s.from_seq, s.to_seq, s.first_at, s.last_at, s.ended_at, s.text()) for s in summaries]


def test_the_spans_a_table_counts_as_it_deals_are_the_replayed_ones(tmp_path: Path) -> None:
    """A table service counts its spans as its journal appends the rows and its engine ends
    the rounds: they are the replay's, byte for byte, with no row parsed and no event
    replayed; with the held spans past their bound (a floor away), the oldest are dropped and
    every one held is still the replay's."""
    journal, told, live = _dealt_journal(tmp_path, 8)
    replayed = _replayed(journal)
    assert len(replayed) >= 7
    # the last span is still open (no row after the round's end): the others are the replay's
    assert _as_text(live) == _as_text(replayed)
    assert _as_text(_shipped_of(journal, _counted_by_table(journal, told))) == _as_text(replayed)
    bounded = _counted_by_table(journal, told, limit=3)
    kept = [h.summary for h in bounded.take(10**9)]
    assert _as_text(kept) == _as_text(replayed[-3:]) and bounded.dropped_upto > 0


def test_a_reconnecting_shipper_keeps_the_spans_its_table_counted(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """The spans a shipper took from its table and the floor has not stored yet (their batch
    failed, the floor went away) wait across its next connection: the table counted them
    once and will not again; the floor skips any it already holds."""
    journal, told, _ = _dealt_journal(tmp_path, 6)
    table_id = unique_table_id()
    shipper = FloorShipper(table_id, journal, floor_db.provision(table_id), publish_metrics=False)
    shipper.table_summaries = _counted_by_table(journal, told)
    shipper._summarizer = ShipperSummaries()
    local = LocalJournal(journal)
    shipper._summarize([LocalRow(int(v["seq"]), v) for v in local.rows_after(0, 100_000)])
    local.close()
    taken = list(shipper._pending)
    assert len(taken) >= 5 and len(shipper.table_summaries) == 0
    conn = shipper._connect()  # the next connection, as _resume begins it
    try:
        shipper._begin_summaries(conn, 0)
    finally:
        conn.close()
    assert shipper._pending == taken
