"""`floor report` of a real-sized gaming day: 400 tables, 1,000 rounds a table (never asserted).

The floor holds one gaming day of 400 tables as busy tables deal it (the rows of real rounds
of three games, repeated with each table's own seqs, times and hash chain, as in
tests/bench/floor_scale.py: ~31 rows a round, ~12.4 M rows), from each table's first row at
the day's start (so Q3's replay starts at row 1 within its reach). Then the day's report,
as `tablectl floor report` builds it: the tables replayed in one process (`--workers 1`)
and in one worker process a CPU (`--workers N`, each its own connection), timed each; the
two reports must be equal. The fill is set-up (triggers off, as floor_scale's _grow).

    floor_report_seconds_real_day   the report with a worker a CPU, at the size run

A real day is ~12.4 M rows and takes a while to fill; `--rounds N` runs a smaller day (the
harness's --quick: 20 rounds a table), and its figure is then that size's, not a real day's.

    python -m tests.bench.floor_report_day [--rounds 1000] [--tables 400]
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
from pathlib import Path
from typing import Any

from tablectl.controller.floor.report import build_report, day_window
from tablectl.controller.floor.retention import ensure_days
from tablectl.controller.floor.schema import SCHEMA, add_table, create_schema
from tablectl.controller.floor.store import connect
from tablectl.simulators.pgserver import ThrowawayPostgres
from tests.bench.floor_scale import FLOOR_SERVER, SyntheticTable, _grow, templates

RESULT_KEYS = ("floor_report_seconds_real_day",)
DATABASE = "floor_report_day"
DAY = datetime.date(2026, 3, 2)


def measure(rounds: int = 1000, tables: int = 400) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-floor-report-day-"))
    server = ThrowawayPostgres(settings=FLOOR_SERVER)
    try:
        server.init()
        server.start()
        server.create_database(DATABASE)
        made = templates(workdir)
        rows_per_round = statistics.fmean(len(t.rows) / t.rounds for t in made)
        dsn = server.admin_dsn(DATABASE)
        with connect(dsn) as admin:
            create_schema(admin)
            ensure_days(admin, DAY - datetime.timedelta(days=2), 5)
            synthetic = [
                SyntheticTable(f"r{i:03d}", made[i % len(made)], 37 * i) for i in range(tables)
            ]
            for table in synthetic:
                add_table(admin, table.table_id, passfile=workdir / "pgpass", dbname=DATABASE)
            low, _ = day_window(admin, DAY)
            # the day's play: from a minute after the gaming day starts to before it ends
            first_at = low + datetime.timedelta(hours=1, minutes=1)
            rows_each = int(rounds * rows_per_round)
            began = time.perf_counter()
            _grow(admin, synthetic, rows_each, first_at, days=0.95)
            fill_seconds = time.perf_counter() - began
            # the table row, as the trigger (off for the fill) takes it from a table's row 1
            admin.execute(
                f"UPDATE {SCHEMA}.tables AS t SET table_row = r.body FROM {SCHEMA}.journal_rows"
                " AS r WHERE r.table_id = t.table_id AND r.seq = 1"
            )
            admin.execute("VACUUM ANALYZE")
            timed: dict[int, float] = {}
            reports = {}
            for workers in sorted({1, os.cpu_count() or 1}):
                began = time.perf_counter()
                report = build_report(admin, DAY, workers=workers, dsn=dsn)
                timed[workers] = time.perf_counter() - began
                reports[workers] = [
                    (t.table_id, dict(t.counts), t.seat_cards, t.seat_untested)
                    for t in report.tables
                ]
        parallel = max(timed)
        rows = rows_each * tables
        return {
            "tables": tables,
            "rounds_per_table": rounds,
            "rows": rows,
            "real_day": rounds >= 1000 and tables >= 400,
            "fill_seconds": round(fill_seconds, 1),
            "report_seconds_by_workers": {str(k): round(v, 2) for k, v in timed.items()},
            "rows_per_second_by_workers": {str(k): round(rows / v) for k, v in timed.items()},
            "reports_equal": len({json.dumps(r, sort_keys=True) for r in reports.values()}) == 1,
            "seat_tested_tables": sum(1 for t in report.tables if t.seat_bias is not None),
            "floor_report_seconds_real_day": round(timed[parallel], 2),
        }
    finally:
        server.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="rounds a table (default 1000)")
    parser.add_argument("--tables", type=int, default=400)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.rounds, args.tables), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
