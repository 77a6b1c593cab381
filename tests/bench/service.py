"""The daemon's figures: journal, table service, and one event end to end (never asserted).

- ``end_to_end``: a simulated card-reading shoe on a real pty draws a card; the host's
  pyserial transport, the reference codec, link and driver turn the frame into `card_drawn`,
  the TableService journals it, the engine decides, the decisions are journaled durably
  (SQLite WAL, synchronous=FULL: fsync) and metrics and logs are updated. Timed from the
  device's write to the end of `handle_event`, next to the frame's 115200-baud wire time.
- ``events_per_second``: legal rounds' events into one TableService with durable group
  commit (rows that command a device are still fsynced before they act).
- ``journal_figures``: a durable append's latency; group-commit rows per second; verify speed.
- ``service_latency``: per-event cost through the service, durable and group commit.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tablectl.controller.config import TableConfig, parse_config
from tablectl.controller.journal import Journal, verify_journal
from tablectl.controller.service import TableService
from tablectl.controller.table import TableSpec
from tablectl.drivers.base import DriverSettings
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import OVERHEAD, wire_time
from tablectl.drivers.reference import ReferenceShoe
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.simulators.cards import composition
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.roundgen import legal_stream
from tablectl.simulators.shoe import ShoeSim

HILO_POSITIONS = [1, 2, 3, 4, 5, 6, 7]
CARDS_PER_ROUND = 5 * (len(HILO_POSITIONS) + 1)


def table_config(directory: Path, game: str, options: dict[str, Any]) -> TableConfig:
    return parse_config(
        {
            "table": {"id": "bench", "game": game, "options": options},
            "journal": {"path": str(directory / "journal.sqlite")},
        },
        "bench.toml",
    )


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def end_to_end(samples: int = 2000, warmup: int = 100) -> dict[str, Any]:
    """Frame on a pty -> decision journaled durably; returns figures and the raw samples."""
    loop = asyncio.get_running_loop()
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        directory = Path(tmp)
        config = table_config(directory, "five_card_hilo", {"dealing": "manual_shoe"})
        service = TableService(config, Journal(config.journal_path), group_commit=False)
        await service.start()
        sim = ShoeSim(seed=1)
        attachment = PtyAttachment(sim, loop, link_path=directory / "shoe")
        driver = ReferenceShoe(
            SerialTransport(attachment.plug()), settings=DriverSettings(heartbeat_interval=None)
        )
        done: asyncio.Future[float] | None = None
        handled: list[asyncio.Task[Any]] = []

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] != "card_drawn":
                return
            task = loop.create_task(service.handle_event(event))
            handled.append(task)
            waiting = done

            def finished(_: asyncio.Task[Any]) -> None:
                if waiting is not None and not waiting.done():
                    waiting.set_result(time.perf_counter())

            task.add_done_callback(finished)

        async def operator(kind: str, **fields: Any) -> None:
            await service.handle_event({"type": kind, **fields}, source="operator")

        await driver.start(loop, on_event)
        assert await driver.wait_connected(5)
        # The clock starts when the frame's bytes are written to the pty (DESIGN.md: "frame on
        # a pty -> decision journaled"), not while the simulator composes the frame.
        written: list[float] = []
        write_to_pty = sim._send
        assert write_to_pty is not None

        def timed_write(data: bytes) -> None:
            written.append(time.perf_counter())
            write_to_pty(data)

        sim._send = timed_write
        latencies: list[float] = []
        rng = random.Random(7)
        drawn = CARDS_PER_ROUND
        decisions = 0
        for index in range(samples + warmup):
            if drawn == CARDS_PER_ROUND:
                if index:
                    await operator("deal_completed")
                    await operator("stub_counted", count=52 - CARDS_PER_ROUND)
                    await operator("hands_collected")
                await operator("shuffle_started")
                await operator("shuffle_completed", count=52)
                await operator("bets_closed", positions=HILO_POSITIONS)
                deck = composition(1)
                rng.shuffle(deck)
                sim.cards = deck
                drawn = 0
            while not sim.link.idle:  # the previous frame's ACK is back
                await asyncio.sleep(0)
            done = loop.create_future()
            written.clear()
            sim.draw()
            start = written[0]  # the CARD_DRAWN frame, written synchronously by draw()
            end = await done
            drawn += 1
            decisions += len(handled[-1].result())
            if index >= warmup:
                latencies.append(end - start)
        await driver.stop()
        attachment.close()
        service.close()
        intact = verify_journal(config.journal_path).ok
    frame_size = OVERHEAD + len(m.pack_card_drawn("As", False))
    wire = wire_time(frame_size, 115200)
    median, p99 = statistics.median(latencies), _percentile(latencies, 0.99)
    return {
        "samples": len(latencies),
        "frame_bytes": frame_size,
        "wire_time_us": round(wire * 1e6, 1),
        "median_us": round(median * 1e6, 1),
        "p99_us": round(p99 * 1e6, 1),
        "median_vs_wire": round(median / wire, 4),
        "p99_vs_wire": round(p99 / wire, 4),
        "decisions_made": decisions,
        "journal_verified": intact,
        "latencies_us": [round(x * 1e6, 1) for x in latencies],
    }


async def events_per_second(rounds: int = 600) -> dict[str, Any]:
    """Legal 3C21 and HILO rounds into one service with durable group commit."""
    results: dict[str, Any] = {}
    total_events = 0
    total_seconds = 0.0
    for game, options in (
        ("three_card_21", {}),
        ("five_card_hilo", {"dealing": "manual_shoe"}),
    ):
        spec = TableSpec.from_dict({"game": game, "options": options})
        events = legal_stream(spec, random.Random(3), rounds)
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
            config = table_config(Path(tmp), game, options)
            journal = Journal(config.journal_path, flush_interval=0.005, max_batch=512)
            service = TableService(
                config, journal, random_source=random.Random(1).randrange, group_commit=True
            )
            await service.start()
            handle = service.handle_event
            started = time.perf_counter()
            for event in events:
                await handle(event)
            journal.flush()  # the last batch is durable before the clock stops
            seconds = time.perf_counter() - started
            service.close()
            intact = verify_journal(config.journal_path).ok
        results[game] = {
            "events": len(events),
            "seconds": round(seconds, 3),
            "events_per_second": round(len(events) / seconds),
            "journal_verified": intact,
        }
        total_events += len(events)
        total_seconds += seconds
    results["events_per_second"] = round(total_events / total_seconds)
    return results


def journal_figures(directory: Path) -> dict[str, Any]:
    """A durable append's latency, group-commit throughput and the hash chain's verify speed."""
    event = {"type": "card_drawn", "card": "As", "face_up": False, "device": "shoe"}
    journal = Journal(directory / "durable.sqlite")
    samples = []
    for _ in range(300):
        started = time.perf_counter()
        journal.append("event", event, durable=True)
        samples.append(time.perf_counter() - started)
    journal.close()
    rows = 100_000

    async def group() -> float:
        journal = Journal(directory / "group.sqlite", flush_interval=0.005, max_batch=512)
        started = time.perf_counter()
        for index in range(rows):
            journal.append("event", event)
            if index % 1000 == 0:
                await asyncio.sleep(0)
        journal.flush()
        elapsed = time.perf_counter() - started
        journal.close()
        return elapsed

    elapsed = asyncio.run(group())
    started = time.perf_counter()
    intact = verify_journal(directory / "group.sqlite").ok
    verify_seconds = time.perf_counter() - started
    return {
        "durable_append_median_us": round(statistics.median(samples) * 1e6, 1),
        "durable_append_p99_us": round(_percentile(samples, 0.99) * 1e6, 1),
        "group_commit_rows_per_second": round(rows / elapsed),
        "verify_rows_per_second": round(rows / verify_seconds),
        "verified": intact,
    }


async def service_latency(rounds: int = 100) -> dict[str, Any]:
    """Per-event cost through the service, durable and with group commit, and replay speed."""
    spec = TableSpec.from_dict({"game": "five_card_hilo", "options": {"dealing": "manual_shoe"}})
    events = legal_stream(spec, random.Random(5), rounds)
    figures: dict[str, Any] = {}
    for name, group_commit in (("durable", False), ("group_commit", True)):
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
            config = table_config(Path(tmp), "five_card_hilo", {"dealing": "manual_shoe"})
            service = TableService(config, Journal(config.journal_path), group_commit=group_commit)
            await service.start()
            samples = await _timed(service.handle_event, events)
            service.close()
            started = time.perf_counter()
            replayed = TableService(config, Journal(config.journal_path))
            await replayed.start()
            replay_seconds = time.perf_counter() - started
            replayed.close()
        figures[name] = {
            "events": len(samples),
            "median_us": round(statistics.median(samples) * 1e6, 1),
            "p99_us": round(_percentile(samples, 0.99) * 1e6, 1),
            "replay_events_per_second": round(len(events) / replay_seconds),
        }
    return figures


async def _timed(handle: Callable[..., Any], events: list[dict[str, Any]]) -> list[float]:
    samples = []
    for event in events:
        started = time.perf_counter()
        await handle(event)
        samples.append(time.perf_counter() - started)
    return samples
