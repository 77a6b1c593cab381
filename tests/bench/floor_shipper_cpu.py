"""A shipper's CPU a row, without a server (never asserted): what the per-round summaries add.

Three synthetic tables' journals (floor_scale's templates and SyntheticTable, 20,000 rows
each) are read back as a FloorShipper reads them (LocalJournal.rows_after, batches of 1,000),
their times parsed once a row, their summaries made by the shipper's own _summarize and their
COPY fields built as _insert builds them (not sent):

    none     rows only (no summaries)
    handed   + the summaries the table counted as its journal appended the rows
             (TableSummaries, fed before the rows are read: the daemon's work, below), taken
             and checked against their closing rows
    replay   + summaries found by replaying the engine over the rows (a standalone shipper,
             and a daemon's rows written before it started)
    table    the daemon's side of `handed`: TableSummaries fed each row (as the journal
             appends it: a JournalRow, its body a dict; the parse untimed) and each event's
             round ends, on the table's thread

Each mode twice, CPU µs a row (process time). The server's side and the COPY's own work are
not in it: `python -m tests.bench.floor_scale --ingest-only` measures those.

    python -m tests.bench.floor_shipper_cpu [--rows 20000]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from tablectl.controller.common.config import FloorConfig
from tablectl.controller.floor.local import LocalJournal
from tablectl.controller.floor.shipper import FloorShipper, LocalRow, copy_fields, floor_time
from tablectl.controller.floor.summary import ShipperSummaries, TableSummaries
from tests.bench.floor_scale import (
    START,
    SyntheticTable,
    _journal_rows,
    _write_journal,
    count_at_table,
    templates,
)

MODES = ("none", "handed", "replay", "table")


def _counted(table: SyntheticTable, path: Path) -> tuple[TableSummaries, float]:
    """The table's own count of its rows, and the CPU seconds it took (the parse untimed)."""
    counted = TableSummaries(1, limit=10**9)
    rows = _journal_rows(str(path), 0, table.seq)
    began = time.process_time()
    count_at_table(counted, table.template, table.offset, rows)
    return counted, time.process_time() - began


def _ship(tables: list[tuple[SyntheticTable, Path]], mode: str) -> tuple[int, float]:
    """The rows, and the CPU seconds the mode's work took."""
    rows, cpu, summaries = 0, 0.0, 0
    for table, path in tables:
        if mode == "table":
            _, spent = _counted(table, path)
            rows, cpu = rows + table.seq, cpu + spent
            continue
        shipper = FloorShipper(
            table.table_id, path, FloorConfig(dsn="host=/nonexistent"), publish_metrics=False
        )
        if mode == "handed":
            shipper.table_summaries, _ = _counted(table, path)
            shipper._summarizer = ShipperSummaries()
        elif mode == "replay":
            shipper._summarizer = ShipperSummaries()
        began = time.process_time()
        local = LocalJournal(path)
        seq = 0
        while batch := [
            LocalRow(int(v["seq"]), v, floor_time(v["recorded_at"]))
            for v in local.rows_after(seq, 1000)
        ]:
            if mode != "none":
                shipper._summarize(batch)
                summaries += len(shipper._pending)
                shipper._pending.clear()  # shipped
            for row in batch:
                copy_fields("t", row, False)
            seq = batch[-1].seq
            rows += len(batch)
        local.close()
        cpu += time.process_time() - began
        if mode == "handed" and shipper.summary_events_replayed:
            raise RuntimeError("the handed summaries replayed events")
    if mode in ("handed", "replay") and summaries < rows // 100:
        raise RuntimeError(f"{mode}: {summaries} summaries for {rows} rows")
    return rows, cpu


def measure(rows: int = 20_000) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-shipper-cpu-"))
    try:
        made = templates(workdir)
        tables = []
        for i in range(3):
            table = SyntheticTable(f"s{i}", made[i % len(made)], 37 * i)
            path = workdir / f"{table.table_id}.sqlite"
            _write_journal(path, list(table.rows(rows, START, 0.1)))
            tables.append((table, path))
        out: dict[str, Any] = {"rows": 3 * rows}
        for mode in MODES * 2:
            shipped, cpu = _ship(tables, mode)
            out.setdefault(f"{mode}_cpu_us_per_row", []).append(round(cpu / shipped * 1e6, 1))
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows a table (default 20000)")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(measure(args.rows), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
