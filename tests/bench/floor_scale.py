"""The floor at casino scale: 400 tables into one PostgreSQL, at 1x and 10x (never asserted).

A load generator writes synthetic journals: the rows of real rounds (legal rounds of three
games played through a TableService with its durable journal, the real engine's rows: ~31
rows and ~7.4 KB a round) repeated with each table's own seqs, times and a valid hash chain.
Everything goes into one throwaway PostgreSQL on this machine (simulators.pgserver); the
tables' 400 connections go through a throwaway PgBouncer (simulators.pgbouncer, transaction
mode, 20 server connections).

    floor_catch_up_400_seconds  400 tables, each with one hour of play waiting (a floor outage
                                of an hour at 1,000 rounds a table a day), 400 real
                                FloorShippers started at once through PgBouncer: until every
                                table is caught up
    floor_ingest_vs_copy        those rows per second / a COPY of the same rows into a table of
                                the same columns and indexes, no checks     goal >= 0.5
    floor_lookup_growth         dispute lookups' p99 (a table's round; the whole floor's
                                minute) at 10x rows / at 1x, the larger of the two
                                                                            goal <= 1.5
    floor_report_seconds_400    `floor report` of one gaming day for 400 tables (rows read:
                                that day's window only)
    floor_verify_vs_hash_floor  `floor verify` rows/s / the same rows fetched and their hashes
                                recomputed and linked, nothing else         goal >= 0.5

Between 1x and 10x the floor grows by COPY into floor.journal_rows (the same statement check
as a shipper's INSERT), later play spread over ten gaming days.

    python -m tests.bench.floor_scale [--quick] [--base-rows N (default 500,000: 10x 5 M)]
        [--check-cost] [--catch-up-batch ROWS]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.controller.config import FloorConfig, parse_config
from tablectl.controller.floor.report import build_report, day_window
from tablectl.controller.floor.retention import ensure_days
from tablectl.controller.floor.schema import (
    RECORDED_AT_SQL,
    SCHEMA,
    add_table,
    create_schema,
    writer_role,
)
from tablectl.controller.floor.shipper import FloorShipper, floor_time
from tablectl.controller.floor.store import (
    connect,
    floor_raw_rows,
    round_span_rows,
    verify_table,
)
from tablectl.controller.journal import GENESIS_HASH, Journal, row_hash
from tablectl.controller.service import TableService
from tablectl.controller.table import TableSpec
from tablectl.simulators.pgbouncer import ThrowawayPgBouncer
from tablectl.simulators.pgserver import ThrowawayPostgres
from tablectl.simulators.roundgen import legal_stream

RESULT_KEYS = (
    "floor_ingest_vs_copy",
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
ROUNDS_A_DAY = 1000
OUTAGE = datetime.timedelta(hours=1)
START = datetime.datetime(2026, 3, 1, 6, 0, tzinfo=datetime.UTC)
GAMES = (
    ("three_card_21", {}),
    ("five_card_hilo", {"dealing": "manual_shoe"}),
    ("heads_up_holdem", {"dealing": "automated_shoe"}),
)
_TIME = re.compile(r'"time":"[^"]*"')
#: the real daemon's rows are ~7.4 KB a round of ~31 (~239 bytes a row: device, caller and
#: firmware fields the generated events lack): bodies are padded to that mean
REAL_BYTES_PER_ROW = 239


class Template:
    """A game's real rows (after its table row): kind, round offset, body; cycled."""

    def __init__(self, game: str, options: dict[str, Any], table_body: str, rows: list[Any]):
        self.game = game
        self.options = options
        self.table_body = table_body
        mean = statistics.fmean(len(r[2]) for r in rows)
        pad = "x" * max(0, int(REAL_BYTES_PER_ROW - mean - 12))
        self.rows = [(k, r, b[:-1] + f',"zz_pad":"{pad}"}}') for k, r, b in rows]
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
    await service.start()
    spec = TableSpec.from_dict({"game": game, "options": dict(options)})
    for event in legal_stream(spec, random.Random(7), rounds):
        await service.handle_event(event)
    service.close()
    db = sqlite3.connect(config.journal_path)
    rows = list(db.execute("SELECT kind, round, body FROM journal ORDER BY seq"))
    db.close()
    return Template(game, options, rows[0][2], [tuple(r) for r in rows[1:]])


def templates(directory: Path, rounds: int = 40) -> list[Template]:
    import asyncio

    return [asyncio.run(_play(game, options, directory, rounds)) for game, options in GAMES]


class SyntheticTable:
    """One table's chain, continued a chunk at a time."""

    def __init__(self, table_id: str, template: Template, offset: int) -> None:
        self.table_id = table_id
        self.template = template
        self.seq = 0
        self.prev = GENESIS_HASH
        self.position = offset % len(template.rows)
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
    columns = "(table_id, seq, kind, round, recorded_at, recorded_at_text, body, prev_hash, hash)"
    with conn.cursor() as cursor, cursor.copy(f"COPY {target} {columns} FROM STDIN") as copy:
        for seq, kind, rnd, at, body, prev, digest in rows:
            moment, text = floor_time(at)
            copy.write_row((table_id, seq, kind, rnd, moment, text, body, prev, digest))


def _say(text: str) -> None:
    print(f"floor_scale: {text}", file=sys.stderr, flush=True)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _lookups(
    conn: Any,
    tables: list[SyntheticTable],
    grown_from: datetime.datetime,
    end: datetime.datetime,
    n: int,
) -> dict:
    """p99 (ms) of a table's round (every row of it) and of the floor's minute."""
    rng = random.Random(5)
    by_round, by_minute = [], []
    columns = f"seq, kind, round, {RECORDED_AT_SQL}, body, prev_hash, hash"
    for _ in range(n):
        table = rng.choice(tables)
        top = max(1, table.cycle * table.template.rounds)
        began = time.perf_counter()
        round_span_rows(conn, table.table_id, rng.randrange(1, top + 1))
        by_round.append(time.perf_counter() - began)
        moment = grown_from + (end - grown_from) * rng.random()
        began = time.perf_counter()
        conn.execute(
            f"SELECT table_id, {columns} FROM {SCHEMA}.journal_rows"
            " WHERE recorded_at >= %s AND recorded_at < %s ORDER BY recorded_at",
            (moment, moment + datetime.timedelta(minutes=1)),
        ).fetchall()
        by_minute.append(time.perf_counter() - began)
    return {
        "round_p99_ms": round(_p99(by_round) * 1000, 2),
        "minute_p99_ms": round(_p99(by_minute) * 1000, 2),
        "round_median_ms": round(statistics.median(by_round) * 1000, 2),
        "minute_median_ms": round(statistics.median(by_minute) * 1000, 2),
    }


def _grow(
    conn: Any,
    tables: list[SyntheticTable],
    rows_each: int,
    first_at: datetime.datetime,
    days: float,
    chunk: int = 5000,
) -> datetime.datetime:
    """Every table `rows_each` more rows spread over `days` gaming days, by COPY through the
    floor's check (one statement per table per chunk). Returns the end time."""
    if rows_each <= 0:
        return first_at
    spacing = days * 86400 / rows_each
    done = 0
    while done < rows_each:
        step = min(chunk, rows_each - done)
        at = first_at + datetime.timedelta(seconds=done * spacing)
        for table in tables:
            rows = list(table.rows(step, at, spacing))
            with conn.transaction():
                _copy_rows(conn, f"{SCHEMA}.journal_rows", table.table_id, rows)
        done += step
    return first_at + datetime.timedelta(seconds=rows_each * spacing)


def _hash_floor(conn: Any, table_id: str) -> int:
    """The verify's floor: the rows fetched as verify fetches them, each hash recomputed and
    linked to the one before, nothing else."""
    prev, count = GENESIS_HASH, 0
    for seq, kind, rnd, at, body, stored_prev, digest in floor_raw_rows(conn, table_id):
        if stored_prev != prev or row_hash(prev, seq, kind, rnd, at, body) != digest:
            raise AssertionError(f"{table_id} row {seq}")
        prev, count = digest, count + 1
    return count


def measure(quick: bool = False, base_rows: int | None = None) -> dict[str, Any]:
    base_rows = base_rows or (400_000 if quick else 500_000)
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-scale-"))
    server = ThrowawayPostgres()
    bouncer: ThrowawayPgBouncer | None = None
    timings: dict[str, Any] = {"tables": TABLES, "base_rows": base_rows}
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
        bouncer = ThrowawayPgBouncer(server, DATABASE, pool_size=20, clients=TABLES + 50)
        bouncer.start([writer_role(t.table_id) for t in tables])
        shippers = [
            FloorShipper(
                t.table_id,
                journals / f"{t.table_id}.sqlite",
                FloorConfig(dsn=bouncer.table_dsn(writer_role(t.table_id)), passfile=passfile),
                publish_metrics=False,
                linger=0.0,
            )
            for t in tables
        ]
        began = time.perf_counter()
        for shipper in shippers:
            shipper.start()
        while not all(s.head_known and s.rows_behind == 0 for s in shippers):
            if time.perf_counter() - began > 1800:
                raise RuntimeError("the 400 tables did not catch up in 30 minutes")
            time.sleep(0.05)
        catch_up = time.perf_counter() - began
        _say(f"catch-up of {outage_rows} rows: {catch_up:.1f} s")
        for shipper in shippers:
            shipper.stop(0)
        bouncer.stop()
        bouncer = None
        ingest = outage_rows / catch_up
        # the same rows by COPY into the same columns and indexes, no checks, no RLS
        admin.execute(
            f"CREATE TABLE {SCHEMA}.bench_copy (LIKE {SCHEMA}.journal_rows INCLUDING ALL)"
        )
        began = time.perf_counter()
        for table in tables:
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bench_copy", table.table_id, hour_rows[table.table_id])
        copy_seconds = time.perf_counter() - began
        admin.execute(f"DROP TABLE {SCHEMA}.bench_copy")
        copy_rate = outage_rows / copy_seconds
        _say(f"the same rows by COPY: {copy_seconds:.1f} s")
        timings["outage"] = {
            "rows": outage_rows,
            "rows_per_table": per_hour,
            "catch_up_seconds": round(catch_up, 2),
            "shipper_rows_per_second": round(ingest),
            "copy_rows_per_second": round(copy_rate),
            "server_connections": "20 through PgBouncer (400 clients)",
        }
        del hour_rows

        # -- 1x: the floor grown to base_rows; the lookups ---------------------------------
        # later play at one density (the 10x's: its rows over ten gaming days), so that a
        # minute of the floor holds as many rows at 1x as at 10x
        per_day = base_rows // TABLES
        each = max(0, base_rows // TABLES - per_hour)
        grown_from = START + OUTAGE
        end = _grow(admin, tables, each, grown_from, days=each / per_day)
        admin.execute("ANALYZE floor.journal_rows")
        samples = 60 if quick else 200
        at_1x = _lookups(admin, tables, grown_from, end, samples)
        _say(f"1x: {at_1x}")
        rows_1x = admin.execute(f"SELECT sum(head_seq) FROM {SCHEMA}.tables").fetchone()[0]
        _say(f"1x grown: {rows_1x} rows")
        # -- 10x ------------------------------------------------------------------------
        end = _grow(admin, tables, 9 * per_day, end, days=9.0)
        admin.execute("ANALYZE floor.journal_rows")
        at_10x = _lookups(admin, tables, grown_from, end, samples)
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
        low, high = day_window(admin, day)
        read = admin.execute(
            f"SELECT count(*) FROM {SCHEMA}.journal_rows WHERE recorded_at >= %s"
            " AND recorded_at < %s",
            (low, high),
        ).fetchone()[0]
        began = time.perf_counter()
        report = build_report(admin, day)
        report_seconds = time.perf_counter() - began
        _say(f"report: {report_seconds:.1f} s, {read} rows in the window")
        timings["report"] = {
            "gaming_day": day.isoformat(),
            "seconds": round(report_seconds, 2),
            "rows_read": int(read),
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
        "--check-cost",
        action="store_true",
        help="only the server's cost of the floor's checks (the shipper's statement with and "
        "without them, and COPY), on 20 tables of 5,000 rows",
    )
    parser.add_argument(
        "--catch-up-batch",
        type=int,
        default=None,
        metavar="ROWS",
        help="only the hour's outage of 400 tables, shipped with this batch_rows",
    )
    args = parser.parse_args(argv)
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.catch_up_batch:
        print(json.dumps(catch_up_only(args.catch_up_batch), indent=2))
        return 0
    if args.check_cost:
        print(json.dumps(check_cost(), indent=2))
        return 0
    print(json.dumps(measure(args.quick, args.base_rows), indent=2))
    return 0


def check_cost(tables: int = 20, rows_each: int = 5000) -> dict[str, Any]:
    """The server's cost of the floor's checks alone: the shipper's very statement (INSERT ...
    SELECT unnest, batches of 500) as each table's role into floor.journal_rows (RLS, the
    statement check, the release mark, the rounds' spans) against the same statement by the
    DBA into a table of the same columns and indexes without any of them; and COPY into each."""
    import psycopg
    from psycopg.types.json import Jsonb

    from tablectl.controller.floor.shipper import _INSERT

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
        admin.execute(f"CREATE TABLE {SCHEMA}.bare_tables (table_id text, head_seq bigint)")
        passfile = workdir / "p"
        synthetic = [SyntheticTable(f"c{i:02d}", made[i % 3], i) for i in range(tables)]
        batches: dict[str, list[list[tuple]]] = {}
        for table in synthetic:
            add_table(admin, table.table_id, passfile=passfile, dbname=DATABASE)
            admin.execute(f"INSERT INTO {SCHEMA}.bare_tables VALUES (%s, 0)", (table.table_id,))
            rows = list(table.rows(rows_each, START, 3.0))
            batches[table.table_id] = [rows[i : i + 500] for i in range(0, len(rows), 500)]

        def params(table_id: str, batch: list[tuple]) -> dict[str, Any]:
            moments = [floor_time(r[3]) for r in batch]
            return {
                "table": table_id,
                "seq": [r[0] for r in batch],
                "kind": [r[1] for r in batch],
                "round": [r[2] for r in batch],
                "at": [m[0] for m in moments],
                "at_text": [m[1] for m in moments],
                "body": [r[4] for r in batch],
                "prev": [r[5] for r in batch],
                "hash": [r[6] for r in batch],
                "columns": [Jsonb({}) for _ in batch],
            }

        prepared = {t: [params(t, b) for b in bs] for t, bs in batches.items()}
        bare = _INSERT.replace(f"{SCHEMA}.journal_rows", f"{SCHEMA}.bare").replace(
            f"{SCHEMA}.tables", f"{SCHEMA}.bare_tables"
        )
        total = tables * rows_each
        began = time.perf_counter()
        for table_id, all_params in prepared.items():
            with psycopg.connect(
                server.table_dsn(DATABASE, writer_role(table_id)), passfile=str(passfile)
            ) as conn:
                for one in all_params:
                    with conn.transaction():
                        conn.execute(_INSERT, one)
        checked = time.perf_counter() - began
        began = time.perf_counter()
        for all_params in prepared.values():
            for one in all_params:
                with admin.transaction():
                    admin.execute(bare, one)
        unchecked = time.perf_counter() - began
        admin.execute(f"TRUNCATE {SCHEMA}.bare")
        began = time.perf_counter()
        for table_id, bs in batches.items():
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bare", table_id, [r for b in bs for r in b])
        copied = time.perf_counter() - began
        admin.close()
        return {
            "rows": total,
            "checked_insert_rows_per_second": round(total / checked),
            "bare_insert_rows_per_second": round(total / unchecked),
            "copy_rows_per_second": round(total / copied),
            "checked_vs_bare_insert": round(unchecked / checked, 3),
            "checked_insert_vs_copy": round(copied / checked, 3),
        }
    finally:
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def catch_up_only(batch_rows: int) -> dict[str, Any]:
    """The hour's outage alone (400 tables through PgBouncer) with this `[floor] batch_rows`,
    against the COPY of the same rows: how the batch size moves the catch-up."""
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-catch-up-"))
    server = ThrowawayPostgres()
    bouncer: ThrowawayPgBouncer | None = None
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir, rounds=20)
        admin = connect(server.admin_dsn(DATABASE))
        passfile = workdir / "floor.pgpass"
        create_schema(admin)
        ensure_days(admin, START.date() - datetime.timedelta(days=1), 3)
        tables = [SyntheticTable(f"s{i:03d}", made[i % 3], 37 * i) for i in range(TABLES)]
        per_hour = int(ROUNDS_A_DAY / 24 * statistics.fmean(len(t.rows) / t.rounds for t in made))
        spacing = OUTAGE.total_seconds() / per_hour
        hour_rows = {}
        for table in tables:
            add_table(admin, table.table_id, passfile=passfile, dbname=DATABASE)
            hour_rows[table.table_id] = list(table.rows(per_hour, START, spacing))
            _write_journal(workdir / f"{table.table_id}.sqlite", hour_rows[table.table_id])
        bouncer = ThrowawayPgBouncer(server, DATABASE, pool_size=20, clients=TABLES + 50)
        bouncer.start([writer_role(t.table_id) for t in tables])
        shippers = [
            FloorShipper(
                t.table_id,
                workdir / f"{t.table_id}.sqlite",
                FloorConfig(
                    dsn=bouncer.table_dsn(writer_role(t.table_id)),
                    passfile=passfile,
                    batch_rows=batch_rows,
                ),
                publish_metrics=False,
                linger=0.0,
            )
            for t in tables
        ]
        began = time.perf_counter()
        for shipper in shippers:
            shipper.start()
        while not all(s.head_known and s.rows_behind == 0 for s in shippers):
            time.sleep(0.05)
        catch_up = time.perf_counter() - began
        for shipper in shippers:
            shipper.stop(0)
        admin.execute(
            f"CREATE TABLE {SCHEMA}.bench_copy (LIKE {SCHEMA}.journal_rows INCLUDING ALL)"
        )
        began = time.perf_counter()
        for table_id, rows in hour_rows.items():
            with admin.transaction():
                _copy_rows(admin, f"{SCHEMA}.bench_copy", table_id, rows)
        copy_seconds = time.perf_counter() - began
        rows_total = per_hour * TABLES
        return {
            "batch_rows": batch_rows,
            "rows": rows_total,
            "catch_up_seconds": round(catch_up, 2),
            "copy_seconds": round(copy_seconds, 2),
            "ingest_vs_copy": round(copy_seconds / catch_up, 3),
        }
    finally:
        if bouncer is not None:
            bouncer.stop()
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
