"""The floor at casino scale: 400 tables into one PostgreSQL, at 1x and 10x (never asserted).

A load generator writes synthetic journals: the rows of real rounds (legal rounds of three
games played through a TableService with its durable journal, the real engine's rows: ~31
rows and ~7.4 KB a round) repeated with each table's own seqs, times and a valid hash chain.
Everything goes into one throwaway PostgreSQL on this machine (simulators.pgserver), sized for
400 tables (FLOOR_SERVER: 500 connections, 6 GB of shared buffers); each table holds
its own connection, as a table PC does (`--pooler`: through a throwaway PgBouncer instead,
simulators.pgbouncer; its pools are per login role, so 400 tables' roles over 20 server
connections open a new backend for nearly every batch: docs/floor.md). The 400 tables' real
FloorShippers run in SHIPPER_PROCESSES processes of 100 threads each. Their per-round
summaries are counted by each table's daemon as its journal appends the rows, from its live
engine's round ends (FloorShipper.hand_over_summaries, TableSummaries: the table's work, not
the shipper's, which only checks and ships them): here each template's round ends are the
ones its TableService decided as it dealt the template, once, and each synthetic table's
rows are counted with those (offset by its seqs) before each command's clock starts. A
synthetic table that begins mid-template gets round ends its rows' own replay would not give
(its first round is partial): the CPU is the shipper's as in play, the summaries are the
template's rounds, not checked against a replay here (floor_report_day's are).

    floor_catch_up_400_seconds  400 tables, each with one hour of play waiting (a floor outage
                                of an hour at 1,000 rounds a table a day), 400 real
                                FloorShippers started at once: 400 logins, then until every
                                table is caught up
    floor_ingest_vs_copy        the next hour of play committed to all 400 journals at once,
                                shipped by the 400 connected shippers: rows per second / a
                                COPY of the same rows (one a table, one connection) into a
                                table of the same columns and indexes, no checks
                                                                            goal >= 0.5
    floor_server_ingest_vs_copy the ingest's floor side alone, as a casino's floor server meets
                                it (every shipper on its own table PC): the same hour of the
                                400 tables, each one COPY and one add_round_summaries in one
                                transaction over its own connection, all at once, the rows
                                encoded before the clock (server_ingest); against the same
                                COPY                                        information
    floor_lookup_growth         dispute lookups' p99 (a table's round; the whole floor's
                                minute) at 10x rows / at 1x, the larger of the two
                                                                            goal <= 1.5
    floor_report_seconds_400    `floor report` of one gaming day for 400 tables, with the rows
                                it read (the server's own count of rows fetched)
    floor_verify_vs_hash_floor  `floor verify` rows/s / the same rows fetched and their hashes
                                recomputed and linked, nothing else         goal >= 0.5

Between 1x and 10x the floor grows as a live floor fills, in time order (every table's rows of
a minute side by side), later play spread over ten gaming days; the fill is set-up, written
with the triggers off and each table's head and round spans set after it (the catch-up and
ingest above go through every check; the verify below proves the filled chains). After each
fill the server is settled: the new rows vacuumed, a checkpoint taken and the page cache
written back (_settle), so no vacuum, checkpoint or write-back of the set-up runs inside the
lookups. The floor at 1x is kept as a copy of its database (CREATE DATABASE ... TEMPLATE, its
pages read into shared buffers) and the lookups of the two sizes take turns, one sample at a
time, once the 10x floor is settled: a busy minute of the machine falls on both alike. (The
ingest is not settled before: settled there, it ran at 0.38 and 0.40 of COPY in two runs,
unsettled 0.43-0.62; what runs beside it is a live floor's lot.)

    python -m tests.bench.floor_scale [--quick] [--base-rows N (default 900,000: 10x 9 M)]
        [--ingest-only [--unchecked]] [--batch-rows N] [--processes N] [--pooler]
        [--check-cost] [--server-ingest]

`--ingest-only --unchecked` measures the ingest goal's ceiling on this machine: the same 400
shippers into the same floor with its checks dropped (the chain's trigger, the own-table
check; no summaries), i.e. what shipping alone reaches beside its server on these cores. On
2026-11-29 it reached 0.354-0.412 of COPY in four runs, the checked floor 0.246-0.292: the
goal (0.5) is out of reach here whatever the checks cost. `--server-ingest` measures the
floor side alone (floor_server_ingest_vs_copy above): 0.407-0.433 in three runs that night
on the goal's 40 day partitions (docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import heapq
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from psycopg import sql

from tablectl.controller.common.config import DEFAULT_FLOOR_BATCH_ROWS, FloorConfig, parse_config
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.floor.report import build_report, day_window
from tablectl.controller.floor.retention import ensure_days
from tablectl.controller.floor.schema import (
    OWN_TABLE_CHECK,
    RECORDED_AT_SQL,
    SCHEMA,
    SUMMARIES,
    add_table,
    create_schema,
    writer_role,
)
from tablectl.controller.floor.shipper import COPY_COLUMNS, FloorShipper, floor_time
from tablectl.controller.floor.store import (
    connect,
    floor_raw_rows,
    round_span_rows,
    verify_table,
)
from tablectl.controller.floor.summary import TableSummaries
from tablectl.controller.record.journal import (
    GENESIS_HASH,
    Journal,
    JournalRow,
    read_rows,
    row_hash,
)
from tablectl.controller.service.service import TableService
from tablectl.simulators.pgbouncer import ThrowawayPgBouncer
from tablectl.simulators.pgserver import ThrowawayPostgres
from tablectl.simulators.roundgen import legal_stream

RESULT_KEYS = (
    "floor_ingest_vs_copy",
    "floor_server_ingest_vs_copy",
    "floor_lookup_growth",
    "floor_report_seconds_400",
    "floor_verify_vs_hash_floor",
    "floor_catch_up_400_seconds",
)
GOALS = {
    "floor_ingest_vs_copy": (">=", 0.5),
    "floor_lookup_growth": ("<=", 1.5),
    "floor_verify_vs_hash_floor": (">=", 0.5),
}
TABLES = 400
DATABASE = "floor_scale"
#: the floor as it stood at 1x, kept for the lookups to take turns with the 10x floor
DATABASE_1X = "floor_scale_1x"
ROUNDS_A_DAY = 1000
OUTAGE = datetime.timedelta(hours=1)
START = datetime.datetime(2026, 3, 1, 6, 0, tzinfo=datetime.UTC)
GAMES = (
    ("three_card_21", {}),
    ("five_card_hilo", {"dealing": "manual_shoe"}),
    ("heads_up_holdem", {"dealing": "automated_shoe"}),
)
_TIME = re.compile(r'"time":"[^"]*"')
#: the floor's server for 400 tables, as its DBA would size it: each table PC holds one
#: connection (400 backends and room for readers), and shared buffers a quarter of the
#: machine's memory (6 GB of 24), which holds the 10x floor (4.9 GB) as it holds the 1x: the
#: lookups' growth then measures their work, not whether the floor fits in memory (with 1 GB
#: the 1x fitted and the 10x did not: a round's lookup touched the same ~22 buffers at both
#: sizes, two thirds of them from outside shared buffers at 10x, and its p99 grew 1.3-2.1x)
FLOOR_SERVER = {"max_connections": "500", "shared_buffers": "6GB"}
#: the real daemon's rows are ~7.4 KB a round of ~31 (~239 bytes a row: device, caller and
#: firmware fields the generated events lack): bodies are padded to that mean
REAL_BYTES_PER_ROW = 239


class Template:
    """A game's real rows (after its table row): kind, round offset, body; cycled. `ends`: by
    row position, the rounds its event ended as the live engine that dealt it handed them
    over (TableService.round_ends: the daemon's work, done once here, not the shipper's)."""

    def __init__(
        self,
        game: str,
        options: dict[str, Any],
        table_body: str,
        rows: list[Any],
        ends: dict[int, list[list[dict[str, Any]]]] | None = None,
    ):
        self.game = game
        self.options = options
        self.table_body = table_body
        self.ends = ends or {}
        # padded with JSON whitespace after the object, which every reader of a body skips: an
        # event's fields are the engine's to check (a padding field is rejected, E0, and the
        # report's Q3 replays the events: with one it ended no round and read on to the head)
        mean = statistics.fmean(len(r[2]) for r in rows)
        pad = " " * max(0, round(REAL_BYTES_PER_ROW - mean))
        self.rows = [(k, r, b + pad) for k, r, b in rows]
        self.rounds = max((r[1] or 0) for r in rows) or 1

    @property
    def bytes_per_row(self) -> float:
        return statistics.fmean(len(r[2]) for r in self.rows)


async def _play(game: str, options: dict[str, Any], directory: Path, rounds: int) -> Template:
    config = parse_config(
        {
            "table": {"id": "template", "game": game, "options": dict(options)},
            "journal": {"path": str(directory / f"{game}.sqlite")},
        },
        "template.toml",
    )
    journal = Journal(config.journal_path)
    service = TableService(config, journal, random_source=random.Random(1).randrange)
    ended: dict[int, list[list[dict[str, Any]]]] = {}

    def handed(seq: int, ends: list[list[dict[str, Any]]] | None) -> None:
        if ends:
            ended[seq] = ends

    service.round_ends = handed  # as a daemon wires it for its shipper
    await service.start()
    spec = TableSpec.from_dict({"game": game, "options": dict(options)})
    for event in legal_stream(spec, random.Random(7), rounds):
        await service.handle_event(event)
    service.close()
    db = sqlite3.connect(config.journal_path)
    rows = list(db.execute("SELECT seq, kind, round, body FROM journal ORDER BY seq"))
    db.close()
    if [r[0] for r in rows] != list(range(1, len(rows) + 1)):
        raise RuntimeError("a template journal's seqs are not 1, 2, 3 ...")
    # row 2 (after the table row) is position 0
    return Template(
        game,
        options,
        rows[0][3],
        [tuple(r[1:]) for r in rows[1:]],
        {seq - 2: ends for seq, ends in ended.items()},
    )


def templates(directory: Path, rounds: int = 40) -> list[Template]:
    import asyncio

    return [asyncio.run(_play(game, options, directory, rounds)) for game, options in GAMES]


def count_at_table(
    summaries: TableSummaries, template: Template, offset: int, rows: Iterable[JournalRow]
) -> None:
    """Count a synthetic table's rows as its daemon does as its journal appends them: each
    row, then its event's round ends as the daemon's engine would have decided them (the
    template's, at each row's position: SyntheticTable's rows are the template's from
    `offset`, after a table row)."""
    length = len(template.rows)
    for row in rows:
        summaries.row_appended(row)
        if row.seq >= 2 and row.kind == "event":
            ended = template.ends.get((offset + row.seq - 2) % length)
            summaries.handled(row.seq, ended or [])


class SyntheticTable:
    """One table's chain, continued a chunk at a time."""

    def __init__(self, table_id: str, template: Template, offset: int) -> None:
        self.table_id = table_id
        self.template = template
        self.offset = offset % len(template.rows)
        self.seq = 0
        self.prev = GENESIS_HASH
        self.position = self.offset
        self.cycle = 0

    def rows(self, count: int, first_at: datetime.datetime, spacing: float) -> Iterator[tuple]:
        """(seq, kind, round, recorded_at, body, prev_hash, hash), `count` of them."""
        for n in range(count):
            at = first_at + datetime.timedelta(seconds=n * spacing)
            text = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
            self.seq += 1
            if self.seq == 1:
                kind, rnd, body = "table", None, self.template.table_body
            else:
                kind, base_round, body = self.template.rows[self.position]
                rnd = None if base_round is None else base_round + self.cycle * self.template.rounds
                if '"time"' in body:
                    body = _TIME.sub(f'"time":"{at:%Y-%m-%dT%H:%M:%S.%f}"', body, count=1)
                self.position += 1
                if self.position == len(self.template.rows):
                    self.position, self.cycle = 0, self.cycle + 1
            digest = row_hash(self.prev, self.seq, kind, rnd, text, body)
            yield (self.seq, kind, rnd, text, body, self.prev, digest)
            self.prev = digest


def _write_journal(path: Path, rows: list[tuple]) -> None:
    """Rows into a table's journal file (made if new), as its daemon would have committed them."""
    if not path.exists():
        Journal(path).close()
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.commit()
    db.close()


def _copy_rows(conn: Any, target: str, table_id: str, rows: list[tuple]) -> None:
    """COPY rows of one table into `target` (the floor's rows table or the bare copy)."""
    columns = f"({COPY_COLUMNS})"
    with conn.cursor() as cursor, cursor.copy(f"COPY {target} {columns} FROM STDIN") as copy:
        for seq, kind, rnd, at, body, prev, digest in rows:
            moment, text = floor_time(at)
            copy.write_row((table_id, seq, kind, rnd, moment, text, body, prev, digest))


def _say(text: str) -> None:
    print(f"floor_scale: {text}", file=sys.stderr, flush=True)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _settle(conn: Any) -> float:
    """The server quiet before a measure: the rows just written vacuumed (their pages all
    visible, as autovacuum leaves a floor's closed days), a checkpoint taken and the page
    cache written back, so that none of them runs inside the lookups (one did, now and then:
    a 10x round lookup's p99 went from 1.1 to 2.1 ms, run to run). Set-up; returns its
    seconds."""
    began = time.perf_counter()
    conn.execute(f"VACUUM (ANALYZE) {SCHEMA}.journal_rows")
    conn.execute(f"VACUUM (ANALYZE) {SCHEMA}.rounds")
    conn.execute(f"VACUUM (ANALYZE) {SCHEMA}.tables")
    conn.execute("CHECKPOINT")
    os.sync()  # the throwaway server runs with fsync off: the kernel writes its pages back
    return time.perf_counter() - began


class _LookupSampler:
    """One floor's dispute lookups, one sample at a time: a table's round (every row of it) and
    the floor's minute, both drawn from the play after `grown_from` (written as a live floor
    writes it) at either size: the rounds of the outage's and the ingest's hours sit table by
    table, one or two pages a round, and would flatter the smaller floor, where they are most
    of the rounds."""

    def __init__(self, conn: Any, grown_from: datetime.datetime, end: datetime.datetime) -> None:
        self.conn, self.grown_from, self.end = conn, grown_from, end
        self.rng = random.Random(5)
        self.by_round: list[float] = []
        self.by_minute: list[float] = []
        self.played = conn.execute(
            f"SELECT table_id, round FROM {SCHEMA}.rounds WHERE first_at >= %s"
            " ORDER BY table_id, round",
            (grown_from,),
        ).fetchall()

    def sample(self) -> None:
        conn, rng = self.conn, self.rng
        table_id, number = rng.choice(self.played)
        began = time.perf_counter()
        round_span_rows(conn, table_id, number)
        self.by_round.append(time.perf_counter() - began)
        moment = self.grown_from + (self.end - self.grown_from) * rng.random()
        columns = f"seq, kind, round, {RECORDED_AT_SQL}, body, prev_hash, hash"
        began = time.perf_counter()
        conn.execute(
            f"SELECT table_id, {columns} FROM {SCHEMA}.journal_rows"
            " WHERE recorded_at >= %s AND recorded_at < %s ORDER BY recorded_at",
            (moment, moment + datetime.timedelta(minutes=1)),
        ).fetchall()
        self.by_minute.append(time.perf_counter() - began)

    def figures(self) -> dict:
        """p99 and median (ms) of each lookup; what a round's lookup reads: the buffers its
        rows' query touched (hit in shared buffers, or read from outside them), over 50 of
        the same rounds."""
        touched, outside = 0, 0
        for table_id, number in self.played[:: max(1, len(self.played) // 50)][:50]:
            span = self.conn.execute(
                f"SELECT first_seq, last_seq, first_at, last_at FROM {SCHEMA}.rounds"
                " WHERE table_id = %s AND round = %s",
                (table_id, number),
            ).fetchone()
            plan = self.conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM floor.journal_rows"
                " WHERE table_id = %s AND seq BETWEEN %s AND %s"
                " AND recorded_at BETWEEN %s AND %s AND round = %s ORDER BY seq",
                (table_id, *span, number),
            ).fetchone()[0][0]["Plan"]
            touched += plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
            outside += plan["Shared Read Blocks"]
        return {
            "round_pages_touched_mean": round(touched / 50, 1),
            "round_pages_from_outside_shared_buffers_mean": round(outside / 50, 1),
            "round_p99_ms": round(_p99(self.by_round) * 1000, 2),
            "minute_p99_ms": round(_p99(self.by_minute) * 1000, 2),
            "round_median_ms": round(statistics.median(self.by_round) * 1000, 2),
            "minute_median_ms": round(statistics.median(self.by_minute) * 1000, 2),
        }


def _lookups_taking_turns(samplers: list[_LookupSampler], n: int) -> list[dict]:
    """`n` samples of each floor, the floors taking turns one sample at a time: a neighbour's
    load, a busy minute of the machine, falls on every size alike (measured one size after the
    other, minutes apart, the 10x round lookup's median came out 1.37-1.58x the 1x's in three
    runs and 0.93x in a fourth, with the same pages touched)."""
    for _ in range(n):
        for sampler in samplers:
            sampler.sample()
    return [sampler.figures() for sampler in samplers]


def _keep_a_copy(server: ThrowawayPostgres, source: str, copy: str) -> Any:
    """The floor as it stands, kept as a database of its own (CREATE DATABASE ... TEMPLATE: a
    file copy, no other session on `source`), its pages read into shared buffers as the
    original's are after its settle; a connection to it."""
    with connect(server.admin_dsn("postgres")) as maintenance:
        maintenance.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY file_copy").format(
                sql.Identifier(copy), sql.Identifier(source)
            )
        )
    conn = connect(server.admin_dsn(copy))
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    conn.execute(
        "SELECT sum(pg_prewarm(c.oid)) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'i')",
        (SCHEMA,),
    )
    return conn


def _grow(
    conn: Any,
    tables: list[SyntheticTable],
    rows_each: int,
    first_at: datetime.datetime,
    days: float,
    chunk_hours: float = 2.0,
) -> datetime.datetime:
    """Every table `rows_each` more rows spread over `days` gaming days, written as a live
    floor writes them: in time order, every table's rows of a moment side by side (one COPY
    per `chunk_hours` of play holding all 400 tables' rows, sorted by time). The fill is set-up,
    not what is measured: it goes in with the floor's triggers off (a session in replication
    mode, the DBA's), then each table's head and the rounds' spans are set from the rows, as
    the trigger would have; the chains themselves are proved by the verify section below.
    Returns the end time."""
    if rows_each <= 0:
        return first_at
    spacing = days * 86400 / rows_each
    per_chunk = max(1, int(chunk_hours * 3600 / spacing))
    done = 0
    conn.execute("SET session_replication_role = replica")
    try:
        while done < rows_each:
            step = min(per_chunk, rows_each - done)
            at = first_at + datetime.timedelta(seconds=done * spacing)
            merged = heapq.merge(
                *(
                    [(r[3], table.table_id, r) for r in table.rows(step, at, spacing)]
                    for table in tables
                )
            )
            with conn.transaction():
                _copy_rows_of_tables(conn, f"{SCHEMA}.journal_rows", merged)
            done += step
    finally:
        conn.execute("RESET session_replication_role")
    low = first_at - datetime.timedelta(seconds=1)
    with conn.transaction():
        conn.execute(
            f"UPDATE {SCHEMA}.tables AS t SET head_seq = h.seq, head_hash = h.hash,"
            " released_seq = h.seq"
            f" FROM (SELECT DISTINCT ON (table_id) table_id, seq, hash FROM {SCHEMA}.journal_rows"
            " WHERE recorded_at >= %s ORDER BY table_id, seq DESC) AS h"
            " WHERE t.table_id = h.table_id",
            (low,),
        )
        conn.execute(
            f"INSERT INTO {SCHEMA}.rounds AS r"
            " (table_id, round, first_seq, last_seq, first_at, last_at)"
            " SELECT table_id, round, min(seq), max(seq), min(recorded_at), max(recorded_at)"
            f" FROM {SCHEMA}.journal_rows WHERE recorded_at >= %s AND round IS NOT NULL"
            " GROUP BY table_id, round"
            " ON CONFLICT (table_id, round) DO UPDATE SET"
            " first_seq = least(r.first_seq, excluded.first_seq),"
            " last_seq = greatest(r.last_seq, excluded.last_seq),"
            " first_at = least(r.first_at, excluded.first_at),"
            " last_at = greatest(r.last_at, excluded.last_at)",
            (low,),
        )
    return first_at + datetime.timedelta(seconds=rows_each * spacing)


def _copy_rows_of_tables(conn: Any, target: str, rows: Iterator[tuple]) -> None:
    """COPY (time, table_id, row) triples, in their order, into `target`."""
    columns = f"({COPY_COLUMNS})"
    with conn.cursor() as cursor, cursor.copy(f"COPY {target} {columns} FROM STDIN") as copy:
        for _, table_id, (seq, kind, rnd, at, body, prev, digest) in rows:
            moment, text = floor_time(at)
            copy.write_row((table_id, seq, kind, rnd, moment, text, body, prev, digest))


#: the 400 tables' shippers run in this many processes of 100 threads each: a table PC runs
#: one shipper in its own daemon, and 400 threads under one interpreter lock measure the lock
#: (one process of 50 threads shipped 38k rows/s, of 400 threads 6.5k, on this machine), not
#: the floor; 4 processes of 100 and 16 of 25 came out within the runs' spread of 8 of 50
#: (ingest 0.55, 0.55 / 0.50, 0.59 / 0.49-0.50), fewer processes a little ahead on 2 cores
SHIPPER_PROCESSES = 4


def _fleet_worker(
    pipe: Any,
    slice_: list[tuple[str, str, str]],
    passfile: str,
    batch_rows: int | None,
    summaries: bool = True,
    handing: dict[str, tuple[Template, int]] | None = None,
) -> None:
    """One process of the load generator: real FloorShippers for its tables, driven by the
    parent: "count" (the tables count the rows they appended: TableSummaries, untimed),
    "start" (connect, resume, catch up), "notify" (rows committed: ship them), "stop".
    Answers each with the seconds it took to have every table caught up. `handing`: by table,
    its template and offset, with which its rows are counted (as its daemon counts them as
    it appends them) before the command's clock starts."""
    import logging

    import structlog

    from tablectl.controller.floor import shipper as shipper_module

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    # A caught-up shipper also reads its journal every IDLE_WAKE_SECONDS by itself (a fallback
    # for a commit it was not told of). Here the next hour is written, then counted, before
    # the clock starts: a shipper idle since the catch-up would wake meanwhile and ship it
    # untimed (with the catch-up slowed by a pooler, all of it was: "ingest 0.0 s"). The rows
    # are told at the clock (notify), as a daemon tells each commit: the fallback waits.
    shipper_module.IDLE_WAKE_SECONDS = 3600.0
    shippers = {
        table_id: FloorShipper(
            table_id,
            Path(journal),
            FloorConfig(dsn=dsn, passfile=Path(passfile), batch_rows=batch_rows)
            if batch_rows
            else FloorConfig(dsn=dsn, passfile=Path(passfile)),
            publish_metrics=False,
            linger=0.0,
            summaries=summaries,
        )
        for table_id, journal, dsn in slice_
    }
    import resource

    handed: dict[str, int] = {}
    settled = 0  # the rows acknowledged when the last command had every table caught up
    counted = {
        table_id: shipper.hand_over_summaries(1)
        for table_id, shipper in shippers.items()
        if handing is not None
    }
    journals = {table_id: journal for table_id, journal, _ in slice_}
    while True:
        command, argument = pipe.recv()
        if command == "count":  # the tables' work as they appended the rows: untimed
            for table_id in shippers:
                summaries = counted.get(table_id)
                upto = argument[table_id] if argument else 0
                if summaries is not None and handing and upto > handed.get(table_id, 0):
                    template, offset = handing[table_id]
                    rows = _journal_rows(journals[table_id], handed.get(table_id, 0), upto)
                    count_at_table(summaries, template, offset, rows)
                    handed[table_id] = upto
            pipe.send(("counted", 0.0, 0, 0.0, 0))
            continue
        began = time.perf_counter()
        used = resource.getrusage(resource.RUSAGE_SELF)
        before = sum(s.acknowledged_seq for s in shippers.values())
        if command == "notify" and before != settled:
            # rows acknowledged while no command ran: shipped outside the clock
            pipe.send(("early", 0.0, before - settled, 0.0, 0))
            continue
        if command == "start":
            for shipper in shippers.values():
                shipper.start()
        elif command == "notify":
            for table_id, seq in argument.items():
                shippers[table_id].notify(seq)
        elif command == "stop":
            for shipper in shippers.values():
                shipper.stop(0)
            pipe.send(("stopped", 0.0, 0, 0.0, 0))
            return
        _wait_caught_up(list(shippers.values()), began)
        acknowledged = settled = sum(s.acknowledged_seq for s in shippers.values())
        now = resource.getrusage(resource.RUSAGE_SELF)
        cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
        replayed = sum(s.summary_events_replayed for s in shippers.values())
        pipe.send(("caught_up", time.perf_counter() - began, acknowledged, cpu, replayed))


def _journal_rows(journal: str, after_seq: int, upto_seq: int) -> list[JournalRow]:
    """A table's rows after_seq+1..upto_seq, as the journal reads them back."""
    return [row for row in read_rows(journal) if after_seq < row.seq <= upto_seq]


class ShipperFleet:
    """The 400 tables' real FloorShippers, in SHIPPER_PROCESSES processes."""

    def __init__(
        self,
        tables: list[tuple[str, str, str]],
        passfile: Path,
        batch_rows: int | None = None,
        processes: int = SHIPPER_PROCESSES,
        summaries: bool = True,
        handing: dict[str, tuple[Template, int]] | None = None,
    ) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.summary_events_replayed = 0
        self.workers = []
        for n in range(processes):
            parent, child = context.Pipe()
            mine = tables[n::processes]
            process = context.Process(
                target=_fleet_worker,
                args=(
                    child,
                    mine,
                    str(passfile),
                    batch_rows,
                    summaries,
                    None if handing is None else {t[0]: handing[t[0]] for t in mine},
                ),
            )
            process.start()
            self.workers.append((parent, process, tables[n::processes]))

    def run(self, command: str, seqs: dict[str, int] | None = None) -> tuple[float, int, float]:
        """Send a command to every process at once; wall seconds until all are caught up, the
        sum of the rows acknowledged, and the CPU seconds the shippers' processes spent."""
        began = time.perf_counter()
        for pipe, _, slice_ in self.workers:
            mine = {t[0]: seqs[t[0]] for t in slice_} if seqs else None
            pipe.send((command, mine))
        acknowledged, cpu, replayed, early = 0, 0.0, 0, 0
        for pipe, _, _ in self.workers:
            answer, _, count, spent, events = pipe.recv()
            if answer == "early":
                early += count
            acknowledged, cpu, replayed = acknowledged + count, cpu + spent, replayed + events
        if early:
            raise RuntimeError(
                f"{early} rows were shipped before the {command!r} clock started: not timed"
            )
        self.summary_events_replayed = replayed
        return time.perf_counter() - began, acknowledged, cpu

    def stop(self) -> None:
        for pipe, process, _ in self.workers:
            with contextlib.suppress(OSError, EOFError):
                pipe.send(("stop", None))
                pipe.recv()
            process.join(30)
            if process.is_alive():
                process.kill()


def _rows_fetched(conn: Any, after: int | None = None) -> int:
    """Rows the server read from the floor's partitions so far (its statistics: sequential
    and index fetches), or since `after`; waits for a closed backend's figures to land."""
    query = (
        "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)"
        " FROM pg_stat_user_tables WHERE schemaname = %s AND relname LIKE 'journal\\_rows\\_%%'"
    )
    deadline = time.monotonic() + 10
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        total = int(conn.execute(query, (SCHEMA,)).fetchone()[0])
        if after is None or total > after or time.monotonic() > deadline:
            return total if after is None else total - after
        time.sleep(0.2)


def _server_cpu_seconds(server: ThrowawayPostgres) -> float:
    """The server's CPU seconds so far: the postmaster's own and its exited children's (it
    waits for them), and every live child's (the backends, the checkpointer, the WAL writer)."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid, parent = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        elif parent == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _wal_and_checkpoints(conn: Any) -> tuple[int, int]:
    """The server's WAL position (bytes) and the checkpoints it has begun so far."""
    row = conn.execute(
        "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn,"
        " checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
    ).fetchone()
    return int(row[0]), int(row[1])


def _wait_caught_up(shippers: list[FloorShipper], began: float) -> None:
    while not all(s.head_known and s.rows_behind == 0 for s in shippers):
        if time.perf_counter() - began > 1800:
            raise RuntimeError("the 400 tables did not catch up in 30 minutes")
        time.sleep(0.02)


def _hash_floor(conn: Any, table_id: str) -> int:
    """The verify's floor: the rows fetched as verify fetches them, each hash recomputed and
    linked to the one before, nothing else."""
    prev, count = GENESIS_HASH, 0
    for seq, kind, rnd, at, body, stored_prev, digest in floor_raw_rows(conn, table_id):
        if stored_prev != prev or row_hash(prev, seq, kind, rnd, at, body) != digest:
            raise AssertionError(f"{table_id} row {seq}")
        prev, count = digest, count + 1
    return count


def _drop_checks(admin: Any) -> None:
    """The floor without its checks (the ceiling run only): the chain's statement trigger and
    the own-table check dropped; the rows, their partitions and indexes as they are."""
    with admin.transaction():
        admin.execute(f"DROP TRIGGER check_batch ON {SCHEMA}.journal_rows")
        admin.execute(f"ALTER TABLE {SCHEMA}.journal_rows DROP CONSTRAINT {OWN_TABLE_CHECK}")


def measure(
    quick: bool = False,
    base_rows: int | None = None,
    via_pooler: bool = False,
    *,
    ingest_only: bool = False,
    batch_rows: int | None = None,
    processes: int = SHIPPER_PROCESSES,
    summaries: bool = True,
    unchecked: bool = False,
) -> dict[str, Any]:
    """The figures above. `unchecked` (with `ingest_only`): the floor without its checks, the
    ingest goal's ceiling (the shipping and the server's insert alone)."""
    if unchecked and not ingest_only:
        raise ValueError("unchecked measures the ingest only (ingest_only=True)")
    summaries = summaries and not unchecked  # the summaries need the release mark (the trigger)
    base_rows = base_rows or 900_000  # 1x: the two hours (756,000 rows) and ~4 h of play
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-scale-"))
    server = ThrowawayPostgres(settings=FLOOR_SERVER)
    bouncer: ThrowawayPgBouncer | None = None
    timings: dict[str, Any] = {
        "tables": TABLES,
        "base_rows": base_rows,
        "summaries": summaries,
        "checks": not unchecked,
    }
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir)
        timings["template_bytes_per_row"] = round(
            statistics.fmean(t.bytes_per_row for t in made), 1
        )
        timings["template_rows_per_round"] = round(
            statistics.fmean(len(t.rows) / t.rounds for t in made), 1
        )
        admin = connect(server.admin_dsn(DATABASE))
        passfile = workdir / "floor.pgpass"
        create_schema(admin)
        if unchecked:
            _drop_checks(admin)
        ensure_days(admin, START.date() - datetime.timedelta(days=1), 40)
        tables = [SyntheticTable(f"s{i:03d}", made[i % len(made)], 37 * i) for i in range(TABLES)]
        for table in tables:
            add_table(admin, table.table_id, passfile=passfile, dbname=DATABASE)

        # -- an hour's outage: every table's hour of play waiting in its journal --------------
        per_hour = int(ROUNDS_A_DAY / 24 * timings["template_rows_per_round"])
        _say(f"templates: {timings}; writing {TABLES} journals of {per_hour} rows")
        spacing = OUTAGE.total_seconds() / per_hour
        journals = workdir / "journals"
        journals.mkdir()
        hour_rows: dict[str, list[tuple]] = {}
        for table in tables:
            rows = list(table.rows(per_hour, START, spacing))
            hour_rows[table.table_id] = rows
            _write_journal(journals / f"{table.table_id}.sqlite", rows)
        outage_rows = per_hour * TABLES
        if via_pooler:
            bouncer = ThrowawayPgBouncer(server, DATABASE, pool_size=20, clients=TABLES + 50)
            bouncer.start([writer_role(t.table_id) for t in tables])

        def dsn(table_id: str) -> str:
            role = writer_role(table_id)
            return bouncer.table_dsn(role) if bouncer else server.table_dsn(DATABASE, role)

        fleet = ShipperFleet(
            [(t.table_id, str(journals / f"{t.table_id}.sqlite"), dsn(t.table_id)) for t in tables],
            passfile,
            batch_rows,
            processes,
            summaries,
            {t.table_id: (t.template, t.offset) for t in tables} if summaries else None,
        )
        try:
            fleet.run("count", {t.table_id: t.seq for t in tables})
            catch_up, _, _ = fleet.run("start", {t.table_id: t.seq for t in tables})
            _say(f"catch-up of {outage_rows} rows: {catch_up:.1f} s")

            # -- ingest: the next hour of play reaches 400 connected shippers at once -----------
            # (a floor in service: every table holds its connection; the catch-up above
            # includes 400 logins, each a new server backend: the outage's cost, not ingest's)
            next_rows = {
                t.table_id: list(t.rows(per_hour, START + OUTAGE, spacing)) for t in tables
            }
            for table in tables:
                _write_journal(journals / f"{table.table_id}.sqlite", next_rows[table.table_id])
            server_cpu = _server_cpu_seconds(server)
            wal, checkpoints = _wal_and_checkpoints(admin)
            fleet.run("count", {t.table_id: t.seq for t in tables})
            ingest_seconds, acknowledged, shippers_cpu = fleet.run(
                "notify", {t.table_id: t.seq for t in tables}
            )
            server_cpu = _server_cpu_seconds(server) - server_cpu
            wal_after, checkpoints_after = _wal_and_checkpoints(admin)
            ingest_wal, ingest_checkpoints = wal_after - wal, checkpoints_after - checkpoints
        finally:
            fleet.stop()
        summaries_stored = admin.execute(f"SELECT count(*) FROM {SCHEMA}.{SUMMARIES}").fetchone()[0]
        if acknowledged != 2 * outage_rows:
            raise RuntimeError(f"{acknowledged} rows acknowledged of {2 * outage_rows}")
        if bouncer is not None:
            bouncer.stop()
            bouncer = None
        ingest = outage_rows / ingest_seconds
        _say(f"ingest of {outage_rows} rows by connected shippers: {ingest_seconds:.1f} s")
        # the same rows by COPY into the same columns and indexes, no checks: one COPY a table
        admin.execute(
            f"CREATE TABLE {SCHEMA}.bench_copy (LIKE {SCHEMA}.journal_rows INCLUDING ALL)"
        )
        began, copy_cpu = time.perf_counter(), _server_cpu_seconds(server)
        wal, checkpoints = _wal_and_checkpoints(admin)
        for table in tables:
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bench_copy", table.table_id, next_rows[table.table_id])
        copy_seconds = time.perf_counter() - began
        copy_cpu = _server_cpu_seconds(server) - copy_cpu
        wal_after, checkpoints_after = _wal_and_checkpoints(admin)
        copy_wal, copy_checkpoints = wal_after - wal, checkpoints_after - checkpoints
        admin.execute(f"DROP TABLE {SCHEMA}.bench_copy")
        copy_rate = outage_rows / copy_seconds
        _say(f"the same rows by COPY: {copy_seconds:.1f} s")
        timings["outage"] = {
            "rows": outage_rows,
            "rows_per_table": per_hour,
            "catch_up_seconds": round(catch_up, 2),
            "catch_up_rows_per_second": round(outage_rows / catch_up),
            "server_connections": "20 through PgBouncer (400 clients)"
            if via_pooler
            else "400, one a table",
        }
        timings["ingest"] = {
            "rows": outage_rows,
            "seconds": round(ingest_seconds, 2),
            "shipper_processes": processes,
            "shippers_cpu_seconds": round(shippers_cpu, 2),
            "shippers_cpu_us_per_row": round(shippers_cpu / outage_rows * 1e6, 1),
            # the server's CPU a row while the shippers shipped, and while the COPY ran
            "server_cpu_us_per_row": round(server_cpu / outage_rows * 1e6, 1),
            "copy_server_cpu_us_per_row": round(copy_cpu / outage_rows * 1e6, 1),
            # the WAL each wrote a row, and the checkpoints that began meanwhile (after one,
            # a page's first change is logged whole)
            "wal_bytes_per_row": round(ingest_wal / outage_rows),
            "copy_wal_bytes_per_row": round(copy_wal / outage_rows),
            "checkpoints": ingest_checkpoints,
            "copy_checkpoints": copy_checkpoints,
            # the events the shippers' summaries replayed through an engine (0: every round
            # end handed over, as a daemon's engine hands them)
            "summary_events_replayed": fleet.summary_events_replayed,
            "summaries_on_the_floor": summaries_stored,
            "batch_rows": batch_rows or DEFAULT_FLOOR_BATCH_ROWS,
            "shipper_rows_per_second": round(ingest),
            "copy_rows_per_second": round(copy_rate),
        }
        del hour_rows, next_rows
        if ingest_only:
            # the ceiling's ratio is not the goal's: named apart so no one reads it as that
            ratio = "floor_ingest_unchecked_vs_copy" if unchecked else "floor_ingest_vs_copy"
            return {
                ratio: round(ingest / copy_rate, 3),
                "floor_catch_up_400_seconds": round(catch_up, 2),
                **timings,
            }

        # -- 1x: the floor grown to base_rows; the lookups ---------------------------------
        # later play at one density (the 10x's: its rows over ten gaming days), so that a
        # minute of the floor holds as many rows at 1x as at 10x
        per_day = base_rows // TABLES
        each = max(0, base_rows // TABLES - 2 * per_hour)
        # (after the outage's hour and the ingest's: their rows sit table by table, as a
        # catch-up writes them, and the lookups measure the floor as it fills in play)
        grown_from = START + 2 * OUTAGE
        end = _grow(admin, tables, each, grown_from, days=each / per_day)
        settled = [_settle(admin)]
        samples = 400 if quick else 2000
        rows_1x = admin.execute(f"SELECT sum(head_seq) FROM {SCHEMA}.tables").fetchone()[0]
        _say(f"1x grown: {rows_1x} rows; kept as {DATABASE_1X}")
        admin.close()  # a template has no other session
        kept = _keep_a_copy(server, DATABASE, DATABASE_1X)
        admin = connect(server.admin_dsn(DATABASE))
        # -- 10x ------------------------------------------------------------------------
        end_1x = end
        end = _grow(admin, tables, 9 * per_day, end, days=9.0)
        settled.append(_settle(admin))
        timings["settle_seconds"] = [round(x, 1) for x in settled]
        at_1x, at_10x = _lookups_taking_turns(
            [_LookupSampler(kept, grown_from, end_1x), _LookupSampler(admin, grown_from, end)],
            samples,
        )
        kept.close()
        with connect(server.admin_dsn("postgres")) as maintenance:
            maintenance.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(DATABASE_1X)))
        _say(f"1x: {at_1x}")
        _say(f"10x: {at_10x}")
        rows_10x = admin.execute(f"SELECT sum(head_seq) FROM {SCHEMA}.tables").fetchone()[0]
        size = admin.execute(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid)))"
            " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'floor.journal_rows'::regclass"
        ).fetchone()[0]
        growth = max(
            at_10x["round_p99_ms"] / at_1x["round_p99_ms"],
            at_10x["minute_p99_ms"] / at_1x["minute_p99_ms"],
        )
        timings["lookups"] = {
            "rows_1x": int(rows_1x),
            "rows_10x": int(rows_10x),
            "size_10x": size,
            "at_1x": at_1x,
            "at_10x": at_10x,
            "samples": samples,
        }

        # -- one gaming day's report, 400 tables (a day in the middle of the ten) -------------
        day = (end - datetime.timedelta(days=4)).date()
        fetched_before = _rows_fetched(admin)
        with connect(server.admin_dsn(DATABASE)) as reporting:  # its own backend: its stats
            began = time.perf_counter()
            report = build_report(reporting, day)
            report_seconds = time.perf_counter() - began
        read = _rows_fetched(admin, after=fetched_before)
        # counted after: a backend's statistics land up to a second or more after its
        # statement, and this count's rows must not be taken for the report's
        low, high = day_window(admin, day)
        in_window = admin.execute(
            f"SELECT count(*) FROM {SCHEMA}.journal_rows WHERE recorded_at >= %s"
            " AND recorded_at < %s",
            (low, high),
        ).fetchone()[0]
        _say(f"report: {report_seconds:.1f} s, {read} rows read, {in_window} in the window")
        timings["report"] = {
            "gaming_day": day.isoformat(),
            "seconds": round(report_seconds, 2),
            "rows_read": read,
            "rows_in_the_days_window": int(in_window),
            "floor_rows": int(rows_10x),
            "tables": len(report.tables),
        }

        # -- verify against the hash floor, over a few tables' whole chains ------------------
        chosen = [t.table_id for t in tables[:: TABLES // (4 if quick else 10)]]
        began = time.perf_counter()
        counted = sum(_hash_floor(admin, table_id) for table_id in chosen)
        floor_rate = counted / (time.perf_counter() - began)
        began = time.perf_counter()
        for table_id in chosen:
            result = verify_table(admin, table_id, from_start=True)
            assert result.ok, result.message
        verify_rate = counted / (time.perf_counter() - began)
        timings["verify"] = {
            "tables": len(chosen),
            "rows": counted,
            "verify_rows_per_second": round(verify_rate),
            "hash_floor_rows_per_second": round(floor_rate),
        }
        admin.close()
        return {
            "floor_ingest_vs_copy": round(ingest / copy_rate, 3),
            "floor_lookup_growth": round(growth, 2),
            "floor_report_seconds_400": round(report_seconds, 2),
            "floor_verify_vs_hash_floor": round(verify_rate / floor_rate, 3),
            "floor_catch_up_400_seconds": round(catch_up, 2),
            **timings,
        }
    finally:
        if bouncer is not None:
            bouncer.stop()
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.floor_scale", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--base-rows", type=int, default=None, help="rows at 1x (10x: ten times)")
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="only the catch-up and the ingest (no 1x/10x growth, lookups, report, verify)",
    )
    parser.add_argument("--batch-rows", type=int, default=None, help="the shippers' batch_rows")
    parser.add_argument("--processes", type=int, default=SHIPPER_PROCESSES)
    parser.add_argument(
        "--no-summaries",
        action="store_true",
        help="the shippers ship rows only (no per-round summaries), as before them",
    )
    parser.add_argument(
        "--unchecked",
        action="store_true",
        help="with --ingest-only: the floor's checks dropped (the ingest goal's ceiling here)",
    )
    parser.add_argument(
        "--pooler",
        action="store_true",
        help="the 400 tables through PgBouncer (20 server connections) rather than one "
        "connection each",
    )
    parser.add_argument(
        "--server-ingest",
        action="store_true",
        help="only the ingest's floor side: 400 tables' rows encoded before the clock, sent at "
        "once over their 400 connections (floor_server_ingest_vs_copy)",
    )
    parser.add_argument(
        "--check-cost",
        action="store_true",
        help="only the server's cost of the floor's checks (the shipper's statement with and "
        "without them, and COPY), on 20 tables of 5,000 rows",
    )
    args = parser.parse_args(argv)
    if args.unchecked and not args.ingest_only:
        parser.error("--unchecked measures the ingest only: add --ingest-only")
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.check_cost:
        print(json.dumps(check_cost(), indent=2))
        return 0
    if args.server_ingest:
        print(json.dumps(server_ingest(), indent=2))
        return 0
    print(
        json.dumps(
            measure(
                args.quick,
                args.base_rows,
                args.pooler,
                ingest_only=args.ingest_only,
                batch_rows=args.batch_rows,
                processes=args.processes,
                summaries=not args.no_summaries,
                unchecked=args.unchecked,
            ),
            indent=2,
        )
    )
    return 0


def check_cost(tables: int = 20, rows_each: int = 5000) -> dict[str, Any]:
    """The server's cost of the floor's checks alone: the shipper's very statement (a binary
    COPY of 500 rows a transaction) as each table's role into floor.journal_rows (the row's
    own-table check, the statement check, the release mark, the rounds' spans) against the
    same statement by the DBA into a table of the same columns and indexes without any of
    them; and one COPY of each table's rows into that bare table (the ingest goal's floor)."""
    import psycopg

    from tablectl.controller.floor.shipper import _COPY, _COPY_TYPES

    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-check-"))
    server = ThrowawayPostgres()
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir, rounds=20)
        admin = connect(server.admin_dsn(DATABASE))
        create_schema(admin)
        ensure_days(admin, START.date() - datetime.timedelta(days=1), 5)
        admin.execute(f"CREATE TABLE {SCHEMA}.bare (LIKE {SCHEMA}.journal_rows INCLUDING ALL)")
        passfile = workdir / "p"
        synthetic = [SyntheticTable(f"c{i:02d}", made[i % 3], i) for i in range(tables)]
        batches: dict[str, list[list[tuple]]] = {}
        for table in synthetic:
            add_table(admin, table.table_id, passfile=passfile, dbname=DATABASE)
            rows = list(table.rows(rows_each, START, 3.0))
            batches[table.table_id] = [rows[i : i + 500] for i in range(0, len(rows), 500)]

        def ship(conn: Any, statement: str, table_id: str, batch: list[tuple]) -> None:
            with conn.transaction(), conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(_COPY_TYPES)
                for seq, kind, rnd, at, body, prev, digest in batch:
                    moment, text = floor_time(at)
                    copy.write_row((table_id, seq, kind, rnd, moment, text, body, prev, digest, {}))

        bare = _COPY.replace(f"{SCHEMA}.journal_rows", f"{SCHEMA}.bare")
        total = tables * rows_each
        began, cpu = time.perf_counter(), _server_cpu_seconds(server)
        for table_id, table_batches in batches.items():
            with psycopg.connect(
                server.table_dsn(DATABASE, writer_role(table_id)), passfile=str(passfile)
            ) as conn:
                for batch in table_batches:
                    ship(conn, _COPY, table_id, batch)
        checked = time.perf_counter() - began
        checked_cpu = _server_cpu_seconds(server) - cpu
        began, cpu = time.perf_counter(), _server_cpu_seconds(server)
        for table_id, table_batches in batches.items():
            for batch in table_batches:
                ship(admin, bare, table_id, batch)
        unchecked = time.perf_counter() - began
        unchecked_cpu = _server_cpu_seconds(server) - cpu
        admin.execute(f"TRUNCATE {SCHEMA}.bare")
        began, cpu = time.perf_counter(), _server_cpu_seconds(server)
        for table_id, table_batches in batches.items():
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bare", table_id, [r for b in table_batches for r in b])
        copied = time.perf_counter() - began
        copied_cpu = _server_cpu_seconds(server) - cpu
        admin.close()
        return {
            "rows": total,
            "checked_copy_rows_per_second": round(total / checked),
            "bare_copy_batches_rows_per_second": round(total / unchecked),
            "copy_rows_per_second": round(total / copied),
            "checked_vs_bare": round(unchecked / checked, 3),
            "checked_vs_copy": round(copied / checked, 3),
            # the server's own CPU a row (its backends'), the clients' left out
            "server_cpu_us_per_row": {
                "checked": round(checked_cpu / total * 1e6, 1),
                "bare_batches": round(unchecked_cpu / total * 1e6, 1),
                "copy": round(copied_cpu / total * 1e6, 1),
            },
        }
    finally:
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def _encoded(admin: Any, tables: list[SyntheticTable], rows: dict[str, list[tuple]]) -> dict:
    """Each table's rows as the text of one COPY (the server's own encoding of them: COPY ...
    TO STDOUT from a staging table), so that sending them costs the client nothing a row."""
    admin.execute(
        f"CREATE UNLOGGED TABLE {SCHEMA}.bench_stage"
        f" (LIKE {SCHEMA}.journal_rows INCLUDING DEFAULTS)"
    )
    encoded: dict[str, bytes] = {}
    query = sql.SQL(
        "COPY (SELECT " + COPY_COLUMNS + " FROM {}.bench_stage WHERE table_id = {} ORDER BY seq)"
        " TO STDOUT"
    )
    for table in tables:
        _copy_rows(admin, f"{SCHEMA}.bench_stage", table.table_id, rows[table.table_id])
        data = bytearray()
        with (
            admin.cursor() as cursor,
            cursor.copy(query.format(sql.Identifier(SCHEMA), table.table_id)) as copy,
        ):
            for chunk in copy:
                data += chunk
        encoded[table.table_id] = bytes(data)
    admin.execute(f"DROP TABLE {SCHEMA}.bench_stage")
    return encoded


def server_ingest() -> dict[str, Any]:
    """The ingest's floor side alone, as a casino floor's server meets it (each table's shipper
    on its own PC): the 400 tables' next hour of play sent at once over their 400 connections
    (each its table's role), each table one transaction of one COPY of its rows and one call
    of add_round_summaries, as a shipper's batch is; but the rows encoded before the clock
    starts, so the clients cost nothing a row and the two cores are the server's. Against the
    same COPY floor as floor_ingest_vs_copy (one COPY a table of the same rows, one connection,
    into a table of the same columns and indexes, no checks). Information beside the goal, which
    counts the shippers' own CPU on these same cores."""
    import threading

    import psycopg

    from tablectl.controller.floor.shipper import ADD_SUMMARIES_CALL, summary_arguments
    from tablectl.controller.record.journal import parse_row

    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-server-ingest-"))
    # autovacuum off, and a checkpoint before each side's clock: the COPY's server CPU a row
    # came out 4.9-12.9 µs in five runs without them; neither side meets the other's upkeep
    server = ThrowawayPostgres(settings={**FLOOR_SERVER, "autovacuum": "off"})
    conns: dict[str, Any] = {}
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir)
        admin = connect(server.admin_dsn(DATABASE))
        passfile = workdir / "floor.pgpass"
        create_schema(admin)
        ensure_days(admin, START.date() - datetime.timedelta(days=1), 40)  # the goal's floor's
        tables = [SyntheticTable(f"s{i:03d}", made[i % len(made)], 37 * i) for i in range(TABLES)]
        for table in tables:
            add_table(admin, table.table_id, passfile=passfile, dbname=DATABASE)
        per_hour = int(ROUNDS_A_DAY / 24 * statistics.fmean(len(t.rows) / t.rounds for t in made))
        spacing = OUTAGE.total_seconds() / per_hour
        hours = [
            {t.table_id: list(t.rows(per_hour, START + n * OUTAGE, spacing)) for t in tables}
            for n in range(2)
        ]
        encoded = [_encoded(admin, tables, hour) for hour in hours]
        # the spans each table counted as it appended the rows (its daemon's work), taken as a
        # shipper takes them: closed by a row of the batch
        counted = {t.table_id: TableSummaries(1) for t in tables}
        handed: list[dict[str, list[Any]]] = []
        for hour in hours:
            taken: dict[str, list[Any]] = {}
            for table in tables:
                rows = hour[table.table_id]
                count_at_table(
                    counted[table.table_id],
                    table.template,
                    table.offset,
                    (parse_row(row) for row in rows),
                )
                spans = counted[table.table_id].take(rows[-1][0])
                taken[table.table_id] = [s.summary for s in spans]
            handed.append(taken)
        for table in tables:
            conns[table.table_id] = psycopg.connect(
                server.table_dsn(DATABASE, writer_role(table.table_id)), passfile=str(passfile)
            )
        statement = f"COPY {SCHEMA}.journal_rows ({COPY_COLUMNS}) FROM STDIN"
        left: dict[str, list[Any]] = {t.table_id: [] for t in tables}

        def ship(hour: int) -> float:
            failures: list[str] = []

            def one(table_id: str, summaries: list[Any], arguments: tuple[Any, ...]) -> None:
                conn = conns[table_id]
                try:
                    with conn.transaction():
                        with conn.cursor() as cursor, cursor.copy(statement) as copy:
                            copy.write(encoded[hour][table_id])
                        row = conn.execute(ADD_SUMMARIES_CALL, arguments).fetchone()
                    upto = int(row[0] or 0)
                    left[table_id] = [s for s in summaries if s.to_seq > upto]
                except Exception as error:  # said below, with the table's name
                    failures.append(f"{table_id}: {error}")

            offered = {t: left[t] + handed[hour][t] for t in conns}
            threads = [  # the summaries' text made by the tables (as their daemons do), not here
                threading.Thread(target=one, args=(t, offered[t], summary_arguments(t, offered[t])))
                for t in conns
            ]
            began = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                raise RuntimeError(f"{len(failures)} tables failed, e.g. {failures[0]}")
            return time.perf_counter() - began

        ship(0)  # the first hour: untimed, every table's head and release mark set
        admin.execute("CHECKPOINT")  # each side timed from a checkpoint: neither meets one
        cpu = _server_cpu_seconds(server)
        seconds = ship(1)
        server_cpu = _server_cpu_seconds(server) - cpu
        rows = per_hour * TABLES
        stored = admin.execute(f"SELECT count(*) FROM {SCHEMA}.{SUMMARIES}").fetchone()[0]
        for conn in conns.values():
            conn.close()
        conns.clear()
        _wait_no_table_backends(admin)
        admin.execute(
            f"CREATE TABLE {SCHEMA}.bench_copy (LIKE {SCHEMA}.journal_rows INCLUDING ALL)"
        )
        admin.execute("CHECKPOINT")
        began, cpu = time.perf_counter(), _server_cpu_seconds(server)
        for table in tables:
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bench_copy", table.table_id, hours[1][table.table_id])
        copy_seconds = time.perf_counter() - began
        copy_cpu = _server_cpu_seconds(server) - cpu
        admin.close()
        return {
            "floor_server_ingest_vs_copy": round(copy_seconds / seconds, 3),
            "server_ingest": {
                "rows": rows,
                "seconds": round(seconds, 2),
                "server_cpu_us_per_row": round(server_cpu / rows * 1e6, 1),
                "copy_seconds": round(copy_seconds, 2),
                "copy_server_cpu_us_per_row": round(copy_cpu / rows * 1e6, 1),
                "summaries_on_the_floor": stored,
            },
        }
    finally:
        for conn in conns.values():
            with contextlib.suppress(Exception):
                conn.close()
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_no_table_backends(admin: Any, deadline_seconds: float = 60.0) -> None:
    """Until the tables' backends have exited (their CPU is then the postmaster's, counted
    before the COPY's clock rather than inside it)."""
    deadline = time.monotonic() + deadline_seconds
    query = "SELECT count(*) FROM pg_stat_activity WHERE usename::text LIKE 'tablectl\\_table\\_%'"
    while admin.execute(query).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the tables' backends did not exit in {deadline_seconds:.0f} s")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
