"""The floor store's figures: twenty tables shipping at once into one PostgreSQL (never asserted).

A throwaway PostgreSQL (simulators.pgserver, as the tests use) takes twenty tables, each a
TableService with its own journal (durable: every event fsynced, the daemon's default) and its
own FloorShipper thread, as the daemon runs them; each has a twin that ships nothing. Legal
rounds' events go to every table in bursts, each event to a table's "off" twin and to its
"on" one in turn (the order swapping each step), so both are timed at the same moment of a
shared disk whose fsync time swings tenfold from one second to the next; after each burst
the twenty shippers must be caught up. Both figures come from the same run:

    floor_latency_on_vs_off    median per-event latency (handle_event, as
                               tablectl_event_processing_seconds times it) with shipping on
                               / with shipping off                         goal <= 1.10
    floor_catch_up_seconds     after each burst, the longest time until every table's rows
                               behind is back to 0                          goal <= 2

    python -m tests.bench.floor [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import parse_config
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.floor.schema import add_table, create_schema, writer_role
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.floor.store import connect
from tablectl.controller.record.journal import Journal
from tablectl.controller.service.service import TableService
from tablectl.simulators.pgserver import ThrowawayPostgres
from tablectl.simulators.roundgen import legal_stream

RESULT_KEYS = ("floor_latency_on_vs_off", "floor_catch_up_seconds")
GOALS = {"floor_latency_on_vs_off": ("<=", 1.10), "floor_catch_up_seconds": ("<=", 2)}
TABLES = 20
GAMES = (
    ("three_card_21", {}),
    ("five_card_hilo", {"dealing": "manual_shoe"}),
    ("heads_up_holdem", {"dealing": "automated_shoe"}),
    ("asia_poker", {}),
)
DATABASE = "floor_bench"


class Floor:
    """Twenty tables' services, with or without their shippers, on fresh journals."""

    def __init__(self, server: ThrowawayPostgres, base: Path, passfile: Path, tag: str) -> None:
        self.services: list[TableService] = []
        self.shippers: list[FloorShipper] = []
        self.server = server
        self.base = base
        self.passfile = passfile
        self.tag = tag

    async def open(self, shipping: bool) -> None:
        for index in range(TABLES):
            table_id = f"{self.tag}{index:02d}"
            game, options = GAMES[index % len(GAMES)]
            floor = None
            if shipping:
                floor = {
                    "dsn": self.server.table_dsn(DATABASE, writer_role(table_id)),
                    "passfile": str(self.passfile),
                }
            config = parse_config(
                {
                    "table": {"id": table_id, "game": game, "options": dict(options)},
                    "journal": {"path": str(self.base / f"{table_id}.sqlite")},
                    **({"floor": floor} if floor else {}),
                },
                f"{table_id}.toml",
            )
            journal = Journal(config.journal_path)
            service = TableService(config, journal, random_source=random.Random(index).randrange)
            if shipping and config.floor is not None:
                shipper = FloorShipper(table_id, journal.path, config.floor, publish_metrics=False)
                journal.commit_listeners.append(shipper.notify)
                shipper.start()
                self.shippers.append(shipper)
            await service.start()
            self.services.append(service)

    def behind(self) -> int:
        return sum(s.rows_behind for s in self.shippers) + sum(
            0 if s.head_known else 1 for s in self.shippers
        )

    def close(self) -> None:
        for service in self.services:
            service.close()
        for shipper in self.shippers:
            shipper.stop()


def _streams(rounds: int) -> list[list[dict[str, Any]]]:
    streams = []
    for index in range(TABLES):
        game, options = GAMES[index % len(GAMES)]
        spec = TableSpec.from_dict({"game": game, "options": dict(options)})
        streams.append(legal_stream(spec, random.Random(100 + index), rounds))
    return streams


async def _burst(
    floors: dict[str, Floor],
    streams: dict[str, list[list[dict[str, Any]]]],
    position: dict[str, list[int]],
    events: int,
    latencies: dict[str, list[float]],
) -> None:
    """`events` events per table; table by table, the "off" twin then the "on" one (the
    order swapping each step), so both see the same moment of a shared, noisy disk."""
    for step in range(events):
        for index in range(TABLES):
            for mode in ("off", "on") if (step + index) % 2 == 0 else ("on", "off"):
                stream = streams[mode][index]
                if position[mode][index] >= len(stream):
                    continue
                event = stream[position[mode][index]]
                position[mode][index] += 1
                started = time.perf_counter()
                await floors[mode].services[index].handle_event(event)
                latencies[mode].append(time.perf_counter() - started)


async def _caught_up(floor: Floor, limit: float = 30.0) -> float:
    ended = time.perf_counter()
    while floor.behind() and time.perf_counter() - ended < limit:
        await asyncio.sleep(0.005)
    return time.perf_counter() - ended


async def _measure(quick: bool) -> dict[str, Any]:
    server = ThrowawayPostgres()
    server.init()
    server.start()
    base = Path(tempfile.mkdtemp(prefix="tablectl-bench-floor-"))
    passfile = base / "floor.pgpass"
    floors: dict[str, Floor] = {}
    try:
        server.create_database(DATABASE)
        bursts = 4 if quick else 16
        burst_events = 15 if quick else 30
        rounds = 1 + bursts * burst_events // 25
        with connect(server.admin_dsn(DATABASE)) as conn:
            create_schema(conn)
            for index in range(TABLES):
                add_table(conn, f"on{index:02d}", passfile=passfile, dbname=DATABASE)
        # both floors open at once, each table with a twin: the same events go to the "off"
        # twin and the "on" one, interleaved event by event (see _burst)
        for mode in ("off", "on"):
            (base / mode).mkdir()
            floors[mode] = Floor(server, base / mode, passfile, mode)
            await floors[mode].open(shipping=mode == "on")
        streams = {mode: _streams(rounds) for mode in floors}
        positions = {mode: [0] * TABLES for mode in floors}
        latencies: dict[str, list[float]] = {"off": [], "on": []}
        catch_up: list[float] = []
        await _caught_up(floors["on"])
        for _ in range(bursts):
            await _burst(floors, streams, positions, burst_events, latencies)
            catch_up.append(await _caught_up(floors["on"]))
            await asyncio.sleep(0.3)  # the pause between bursts, as play has
        off = statistics.median(latencies["off"])
        on = statistics.median(latencies["on"])
        rows = sum(s.acknowledged_seq for s in floors["on"].shippers)

        def p99(values: list[float]) -> float:
            ordered = sorted(values)
            return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

        return {
            "floor_latency_on_vs_off": round(on / off, 3),
            "floor_catch_up_seconds": round(max(catch_up), 3),
            "tables": TABLES,
            "bursts": bursts,
            "events_per_table_per_burst": burst_events,
            "events_timed": {mode: len(values) for mode, values in latencies.items()},
            "median_us": {"off": round(off * 1e6, 1), "on": round(on * 1e6, 1)},
            "p99_us": {
                "off": round(p99(latencies["off"]) * 1e6, 1),
                "on": round(p99(latencies["on"]) * 1e6, 1),
            },
            "catch_up_seconds_each_burst": [round(x, 3) for x in catch_up],
            "rows_shipped": rows,
        }
    finally:
        for floor in floors.values():
            floor.close()
        server.destroy()
        shutil.rmtree(base, ignore_errors=True)


def measure(quick: bool = False) -> dict[str, Any]:
    """The harness's hook: the figures and what is behind them."""
    return asyncio.run(_measure(quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.floor", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.quick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
