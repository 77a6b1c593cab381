"""`floor report` of a real-sized gaming day: 400 tables, 1,000 rounds a table (never asserted).

The floor holds one gaming day of 400 tables as busy tables deal it (the rows of real rounds
of three games, repeated with each table's own seqs, times and hash chain, as in
tests/bench/floor_scale.py), from each table's first row at the day's start (so Q3's replay
starts at row 1 within its reach): 31,000 rows a table by default (a real table-day: 1,000
rounds of ~31 rows; the templates' rounds are ~23 rows, so ~1,360 of them), 12.4 M rows.
Each table's per-round summaries are counted as its daemon counts them while its journal
appends the rows (TableSummaries fed every row, timed: `summaries_cpu_us_per_row`, what the
summaries add to a table PC's work; the row's parse is not timed: the daemon holds the body as
a dict), from the round ends the table's live engine decides: here each template's, as its
TableService decided them while dealing it (once, untimed: the daemon's engine's work), told
for each event at its position right after the row is counted (the replayed report below
checks them). Then the day's report, as `tablectl floor report` builds it:
from the summaries (the default), and replayed from the rows with a worker process a CPU
(`--recompute --workers N`); the two reports must be byte for byte the same (their CSV and
HTML) and the recompute must find no summary that differs. The fill is set-up (triggers
off, as floor_scale's _grow).

    floor_report_seconds_real_day   the report (from the summaries), at the size run
    floor_report_recompute_seconds  the same day replayed from the rows (--recompute)

`--rows N` runs a smaller day (the harness's --quick: 700 rows a table), and its figure is
then that size's, not a real day's.

    python -m tests.bench.floor_report_day [--rows 31000] [--tables 400]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.controller.floor.report import build_report, day_window, write_csv, write_html
from tablectl.controller.floor.retention import ensure_days
from tablectl.controller.floor.schema import SCHEMA, SUMMARIES, add_table, create_schema
from tablectl.controller.floor.store import connect
from tablectl.controller.floor.summary import RoundSummary, TableSummaries
from tablectl.controller.record.journal import parse_row
from tablectl.simulators.pgserver import ThrowawayPostgres
from tests.bench.floor_scale import (
    FLOOR_SERVER,
    SyntheticTable,
    _grow,
    count_at_table,
    templates,
)

RESULT_KEYS = ("floor_report_seconds_real_day", "floor_report_recompute_seconds")
DATABASE = "floor_report_day"
DAY = datetime.date(2026, 3, 2)
#: a real table-day's rows: 1,000 rounds of ~31 rows (docs/floor.md, "A year, by arithmetic")
REAL_ROWS_PER_TABLE = 31_000
#: summaries held before they are written (a second connection: the fill's COPY is open)
SUMMARY_FLUSH = 20_000


class SummarizedTable(SyntheticTable):
    """A synthetic table whose rows are also counted as its daemon counts them."""

    def __init__(self, sink: SummarySink, *args: Any) -> None:
        super().__init__(*args)
        self.sink = sink
        self.summaries = TableSummaries(1, limit=10**9)

    def rows(self, count: int, first_at: datetime.datetime, spacing: float) -> Iterator[tuple]:
        for raw in super().rows(count, first_at, spacing):
            seq = raw[0]
            row = parse_row(raw)  # the daemon holds it as a dict: untimed
            began = time.process_time()
            count_at_table(self.summaries, self.template, self.offset, (row,))
            self.sink.cpu += time.process_time() - began
            for handed in self.summaries.take(seq):  # what the shipper ships, as it ships
                self.sink.add(self.table_id, handed.summary)
            yield raw


class SummarySink:
    """Summaries into floor.round_summaries by COPY on their own connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.held: list[tuple[Any, ...]] = []
        self.cpu = 0.0
        self.count = 0

    def add(self, table_id: str, s: RoundSummary) -> None:
        self.held.append(
            (table_id, s.from_seq, s.to_seq, s.first_at, s.last_at, s.ended_at, s.text())
        )
        if len(self.held) >= SUMMARY_FLUSH:
            self.flush()

    def flush(self) -> None:
        columns = "(table_id, from_seq, to_seq, first_at, last_at, ended_at, summary)"
        with (
            self.conn.cursor() as cursor,
            cursor.copy(f"COPY {SCHEMA}.{SUMMARIES} {columns} FROM STDIN") as copy,
        ):
            for row in self.held:
                copy.write_row(row)
        self.count += len(self.held)
        self.held = []


def _files(report: Any, directory: Path) -> tuple[bytes, bytes]:
    report.generated_at = "-"
    return (
        write_csv(report, directory / "r.csv").read_bytes(),
        write_html(report, directory / "r.html").read_bytes(),
    )


def measure(
    rows: int = REAL_ROWS_PER_TABLE, tables: int = 400, *, recompute: bool = True
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-report-day-"))
    server = ThrowawayPostgres(settings=FLOOR_SERVER)
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir)
        rows_per_round = statistics.fmean(len(t.rows) / t.rounds for t in made)
        dsn = server.admin_dsn(DATABASE)
        with connect(dsn) as admin, connect(dsn) as side:
            create_schema(admin)
            ensure_days(admin, DAY - datetime.timedelta(days=2), 5)
            sink = SummarySink(side)
            synthetic = [
                # from its template's first row, as a table's journal begins: a table started
                # mid-template (floor_scale's offsets) has rows no table writes, whose engine
                # ends no round (no summary: the report replays it whole, Q3 finds no cards)
                SummarizedTable(sink, f"r{i:03d}", made[i % len(made)], 0)
                for i in range(tables)
            ]
            for table in synthetic:
                add_table(admin, table.table_id, passfile=workdir / "pgpass", dbname=DATABASE)
            low, _ = day_window(admin, DAY)
            # the day's play: from a minute after the gaming day starts to before it ends
            first_at = low + datetime.timedelta(hours=1, minutes=1)
            began = time.perf_counter()
            _grow(admin, synthetic, rows, first_at, days=0.95)
            sink.flush()
            fill_seconds = time.perf_counter() - began
            stopped = [t.table_id for t in synthetic if t.summaries.failure]
            # the table row, as the trigger (off for the fill) takes it from a table's row 1
            admin.execute(
                f"UPDATE {SCHEMA}.tables AS t SET table_row = r.body FROM {SCHEMA}.journal_rows"
                " AS r WHERE r.table_id = t.table_id AND r.seq = 1"
            )
            admin.execute("VACUUM ANALYZE")
            workers = os.cpu_count() or 1
            began = time.perf_counter()
            summed = build_report(admin, DAY)
            summed_seconds = time.perf_counter() - began
            replayed_seconds, equal, findings = 0.0, None, None
            if recompute:
                began = time.perf_counter()
                replayed = build_report(admin, DAY, workers=workers, dsn=dsn, recompute=True)
                replayed_seconds = time.perf_counter() - began
                (workdir / "summed").mkdir()
                (workdir / "replayed").mkdir()
                equal = _files(summed, workdir / "summed") == _files(replayed, workdir / "replayed")
                findings = len(replayed.findings)
        total = rows * tables
        return {
            "tables": tables,
            "rows_per_table": rows,
            "rounds_per_table": round(rows / rows_per_round),
            "rows": total,
            "real_day": rows >= REAL_ROWS_PER_TABLE and tables >= 400,
            "fill_seconds": round(fill_seconds, 1),
            "summaries": sink.count,
            "summaries_cpu_seconds": round(sink.cpu, 1),
            "summaries_cpu_us_per_row": round(sink.cpu / total * 1e6, 1),
            "summaries_stopped_tables": len(stopped),
            "tables_from_summaries": sum(1 for v in summed.sources.values() if v == "summaries"),
            "tables_with_rows_replayed": sum(
                1 for v in summed.sources.values() if v != "summaries"
            ),
            "recompute_workers": workers,
            "recompute_findings": findings,
            "reports_equal": equal,
            "seat_tested_tables": sum(1 for t in summed.tables if t.seat_bias is not None),
            "floor_report_seconds_real_day": round(summed_seconds, 2),
            "floor_report_recompute_seconds": round(replayed_seconds, 2) if recompute else None,
            "rows_per_second_recompute": round(total / replayed_seconds) if recompute else None,
        }
    finally:
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=REAL_ROWS_PER_TABLE, help="rows a table (default 31000)"
    )
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument(
        "--no-recompute", action="store_true", help="the report from summaries only"
    )
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.rows, args.tables, recompute=not args.no_recompute), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
