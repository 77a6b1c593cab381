"""A shipper's CPU a row, without a server (never asserted): what the per-round summaries add.

Three synthetic tables' journals (floor_scale's templates and SyntheticTable, 20,000 rows
each) are read back as a FloorShipper reads them (LocalJournal.rows_after, batches of 1,000),
their times parsed once a row and their COPY fields built as _insert builds them (not sent):

    none     rows only (no summaries)
    handed   + summaries counted from the round ends the table's engine handed over
             (RoundEnds, told before the rows are read: the daemon's engine's work)
    replay   + summaries found by replaying the engine over the rows (a standalone shipper,
             and every daemon's shipper before the hand-off)

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

from tablectl.controller.floor.local import LocalJournal
from tablectl.controller.floor.shipper import LocalRow, _raw, copy_fields, floor_time
from tablectl.controller.floor.summary import RoundEnds, ShipperSummaries
from tablectl.controller.record.journal import parse_row
from tests.bench.floor_scale import START, SyntheticTable, _write_journal, hand_over, templates

MODES = ("none", "handed", "replay")


def _ship(tables: list[tuple[SyntheticTable, Path]], mode: str) -> int:
    rows = 0
    for table, path in tables:
        local = LocalJournal(path)
        ends = RoundEnds(1, limit=10**9)
        hand_over(ends, table.template, table.offset, 0, table.seq)
        summaries = ShipperSummaries(ends if mode == "handed" else None)
        seq = 0
        while batch := [LocalRow(int(v["seq"]), v) for v in local.rows_after(seq, 1000)]:
            batch = [row._replace(at=floor_time(row.recorded_at)) for row in batch]
            if mode != "none":
                for row in batch:
                    summaries.feed(parse_row(_raw(row)), row.floor_time()[0])
            for row in batch:
                copy_fields("t", row, False)
            seq = batch[-1].seq
            rows += len(batch)
        local.close()
        if mode == "handed" and summaries.replayed_events:
            raise RuntimeError("the handed summaries replayed events")
    return rows


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
            began = time.process_time()
            shipped = _ship(tables, mode)
            out.setdefault(f"{mode}_cpu_us_per_row", []).append(
                round((time.process_time() - began) / shipped * 1e6, 1)
            )
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
