"""`floor shuffle-check` over a month of 400 tables: the fingerprint store (never asserted).

What is measured is the part of the check that grows with the days: every run of 12 cards
fingerprinted and sent to floor.shuffle_runs (FloorReplayCheck, its real code and the
floor's real functions on a throwaway PostgreSQL), then the repeats found by SQL
(shuffle_check_repeats). The engine replay that produces the rounds is not in it: it costs
what a day's report's replay costs (docs/floor.md) and is measured there. Synthetic rounds:
each a new shoe of 52 random cards (41 runs), 400 tables, 30 gaming days; a busy table-day
is ~25,000 runs (3.65e9 runs a floor-year, docs/shuffle-integrity.md), so the full month is
~300 M runs. `--scale` runs a fraction of each table-day (default 1/100 on this shared
machine) and the month and the year are given by arithmetic from the measured rates (linear
in the runs; the repeats query is a sort-grouped index scan, n log n, so the arithmetic is a
lower bound for it). Two stacked orders are planted: the check must find exactly them.

    python -m tests.bench.floor_shuffle_month [--scale 0.01] [--tables 400] [--days 30]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import resource
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tablectl.controller.engine.cards import STANDARD_DECK
from tablectl.controller.floor.schema import SCHEMA, create_schema
from tablectl.controller.floor.shuffle import EndedRound, FloorReplayCheck, NewShoe
from tablectl.simulators.pgserver import ThrowawayPostgres

RUNS_PER_TABLE_DAY = 25_000  # a busy table's day (3.65e9 runs / 365 days / 400 tables)
RUNS_PER_ROUND = 52 - 12 + 1
RESULT_KEYS = ("floor_shuffle_month_runs_per_second", "floor_shuffle_year_hours_estimate")


def _table_rounds(
    rng: random.Random, days: int, rounds_a_day: int, planted: dict[tuple[int, int], list[str]]
) -> Iterator[EndedRound | NewShoe]:
    first = datetime.date(2026, 1, 1)
    number = 0
    for day in range(days):
        for _ in range(rounds_a_day):
            number += 1
            deck = planted.get((day, number)) or rng.sample(STANDARD_DECK, 52)
            yield NewShoe("A")
            dealt = [{"card": card, "position": 1} for card in deck]
            yield EndedRound(number, "A", dealt, first + datetime.timedelta(days=day))


def measure(scale: float = 0.01, tables: int = 400, days: int = 30) -> dict[str, Any]:
    rounds_a_day = max(1, round(RUNS_PER_TABLE_DAY * scale / RUNS_PER_ROUND))
    rng = random.Random(31)
    stacked = rng.sample(STANDARD_DECK, 52)
    # table 0's first round dealt again by table 0 and by table 7 in the last day's first round
    plants = {0: {(0, 1): stacked, (days - 1, rounds_a_day * (days - 1) + 1): stacked}}
    plants[min(7, tables - 1)] = {(days - 1, rounds_a_day * (days - 1) + 1): stacked}
    server = ThrowawayPostgres()
    server.init()
    server.start()
    try:
        name = f"floor_{uuid.uuid4().hex[:10]}"
        server.create_database(name)
        import psycopg

        with psycopg.connect(server.admin_dsn(name), autocommit=True) as conn:
            create_schema(conn)
            made = conn.execute(f"SELECT {SCHEMA}.shuffle_check_begin()").fetchone()
            assert made is not None
            check_id = int(made[0])
            check = FloorReplayCheck(conn, check_id)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            began = time.perf_counter()
            for index in range(tables):
                table_rng = random.Random(1_000 + index)  # never the plant's seed
                check.check_table(
                    _table_rounds(table_rng, days, rounds_a_day, plants.get(index, {})),
                    f"t{index:03d}",
                )
                check.flush()
            stored = time.perf_counter() - began
            began = time.perf_counter()
            findings = check.results()
            repeats = time.perf_counter() - began
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            size = conn.execute(
                f"SELECT pg_total_relation_size('{SCHEMA}.shuffle_runs')"
            ).fetchone()
            assert size is not None
            conn.execute(f"SELECT {SCHEMA}.shuffle_check_end(%s)", (check_id,))
    finally:
        server.destroy()
    found = sorted(
        ((f.first.table_id, f.first.round), (f.second.table_id, f.second.round)) for f in findings
    )
    last = rounds_a_day * (days - 1)
    expected = sorted(
        [
            (("t000", 1), ("t000", last + 1)),
            (("t000", 1), (f"t{min(7, tables - 1):03d}", last + 1)),
        ]
    )
    runs = check.runs_checked
    per_second = runs / (stored + repeats)
    year_runs = 3.65e9 * tables / 400
    return {
        "scale": scale,
        "tables": tables,
        "days": days,
        "rounds_per_table_day": rounds_a_day,
        "runs": runs,
        "store_seconds": round(stored, 1),
        "repeats_seconds": round(repeats, 1),
        "findings_as_planted": found == expected,
        "findings": [str(f) for f in found],
        "process_max_rss_growth_mb": round((rss_after - rss_before) / 1024, 1),
        "most_runs_held": check.most_held,
        "disk_bytes_per_run": round(int(size[0]) / max(1, runs)),
        "year_disk_gb_estimate": round(int(size[0]) / max(1, runs) * year_runs / 1e9),
        "floor_shuffle_month_runs_per_second": round(per_second),
        "full_month_hours_estimate": round(year_runs / 12 / per_second / 3600, 1),
        "floor_shuffle_year_hours_estimate": round(year_runs / per_second / 3600, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.scale, args.tables, args.days), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
