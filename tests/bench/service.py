"""The table service's and the journal's figures (never asserted; one event end to end through
the daemon is tests/bench/latency.py).

- ``throughput``: ``events_per_second`` next to ``group_commit_rows_per_second``, alternated.
- ``events_per_second``: legal rounds' events into one TableService with durable group
  commit (rows that command a device are still fsynced before they act).
- ``group_commit_rows_per_second``: the journal alone, appending with group commit.
- ``journal_figures``: a durable append's latency; group-commit rows per second; verify speed.
- ``service_latency``: per-event cost through the service, durable and group commit.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import TableConfig, parse_config
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.record.journal import Journal, verify_journal
from tablectl.controller.service.service import TableService
from tablectl.simulators.roundgen import legal_stream


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


async def events_per_second(rounds: int = 600) -> dict[str, Any]:
    """Legal 3C21 and HILO rounds into one service with durable group commit."""
    results: dict[str, Any] = {}
    total_events = total_rows = 0
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
            first_seq = journal.last_seq
            handle = service.handle_event
            started = time.perf_counter()
            for event in events:
                await handle(event)
            journal.flush()  # the last batch is durable before the clock stops
            seconds = time.perf_counter() - started
            rows = journal.last_seq - first_seq
            service.close()
            intact = verify_journal(config.journal_path).ok
        results[game] = {
            "events": len(events),
            "seconds": round(seconds, 3),
            "events_per_second": round(len(events) / seconds),
            "journal_rows": rows,
            "journal_verified": intact,
        }
        total_events += len(events)
        total_rows += rows
        total_seconds += seconds
    results["events_per_second"] = round(total_events / total_seconds)
    results["rows_per_event"] = round(total_rows / total_events, 3)
    return results


EVENT_ROW = {"type": "card_drawn", "card": "As", "face_up": False, "device": "shoe"}


async def group_commit_rows_per_second(path: Path, rows: int = 100_000) -> float:
    """The journal alone: `rows` event rows appended with group commit, the last one flushed.

    The loop gets a turn every 1000 rows, as a busy table's would between events, so the
    journal's flush timer fires as it does in the service.
    """
    journal = Journal(path, flush_interval=0.005, max_batch=512)
    append = journal.append
    started = time.perf_counter()
    for index in range(rows):
        append("event", EVENT_ROW)
        if index % 1000 == 0:
            await asyncio.sleep(0)
    journal.flush()
    elapsed = time.perf_counter() - started
    journal.close()
    return rows / elapsed


async def throughput(rounds: int = 600, rows: int = 100_000, repeats: int = 3) -> dict[str, Any]:
    """Service events/s and the journal's own group-commit rows/s, in alternating repeats.

    Each figure is the median of its repeats; the ratio is of the two medians.
    """
    events: list[dict[str, Any]] = []
    group: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        for repeat in range(repeats):
            group.append(await group_commit_rows_per_second(Path(tmp) / f"g{repeat}.sqlite", rows))
            events.append(await events_per_second(rounds))
    per_second = statistics.median(e["events_per_second"] for e in events)
    rows_per_second = statistics.median(group)
    return {
        "events_vs_group_commit": round(per_second / rows_per_second, 3),
        "events_per_second": round(per_second),
        "group_commit_rows_per_second": round(rows_per_second),
        "rows_per_event": events[0]["rows_per_event"],
        "repeats": [
            {"group_commit_rows_per_second": round(g), **e}
            for g, e in zip(group, events, strict=True)
        ],
    }


def journal_figures(directory: Path) -> dict[str, Any]:
    """A durable append's latency and the hash chain's verify speed."""
    journal = Journal(directory / "durable.sqlite")
    samples = []
    for _ in range(300):
        started = time.perf_counter()
        journal.append("event", EVENT_ROW, durable=True)
        samples.append(time.perf_counter() - started)
    journal.close()
    rows = asyncio.run(group_commit_rows_per_second(directory / "group.sqlite", 100_000))
    started = time.perf_counter()
    intact = verify_journal(directory / "group.sqlite").ok
    verify_seconds = time.perf_counter() - started
    return {
        "durable_append_median_us": round(statistics.median(samples) * 1e6, 1),
        "durable_append_p99_us": round(_percentile(samples, 0.99) * 1e6, 1),
        "group_commit_rows_per_second": round(rows),
        "verify_rows_per_second": round(100_000 / verify_seconds),
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


SPLIT_PARTS = ("whole", "without_engine", "without_journal", "service_alone")


async def events_split(rounds: int = 600, repeats: int = 5) -> dict[str, Any]:
    """Where `events_vs_group_commit`'s time goes: µs per event of the same 3C21 stream through
    the service whole, with the engine deciding nothing, with the journal writing nothing, and
    with neither (the service's own steps), next to one group-commit row, in alternating
    repeats; minimum of the repeats (the least disturbed). Not a figure of the daemon: the
    stubbed parts are taken out only to see what the rest costs around them.

    `python -m tests.bench.service --split` (not part of `make bench`).
    """
    game, options = "three_card_21", {}
    spec = TableSpec.from_dict({"game": game, "options": options})
    events = legal_stream(spec, random.Random(3), rounds)
    taken: dict[str, list[float]] = {part: [] for part in (*SPLIT_PARTS, "group_commit_row")}
    for _ in range(repeats):
        for part in SPLIT_PARTS:
            with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
                config = table_config(Path(tmp), game, options)
                journal = Journal(config.journal_path, flush_interval=0.005, max_batch=512)
                service = TableService(
                    config, journal, random_source=random.Random(1).randrange, group_commit=True
                )
                await service.start()
                if part in ("without_engine", "service_alone"):
                    service.engine.handle = lambda event, at: []  # type: ignore[method-assign]
                if part in ("without_journal", "service_alone"):
                    journal.append = lambda *args, **kwargs: 1  # type: ignore[method-assign]
                handle = service.handle_event
                started = time.perf_counter()
                for event in events:
                    await handle(event)
                journal.flush()
                taken[part].append((time.perf_counter() - started) / len(events) * 1e6)
                service.close()
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
            rows = await group_commit_rows_per_second(Path(tmp) / "g.sqlite", 30_000)
        taken["group_commit_row"].append(1e6 / rows)
    least = {part: round(min(samples), 1) for part, samples in taken.items()}
    row = least["group_commit_row"]
    return {
        "events": len(events),
        "us_per_event": least,
        "ratio_now": round(row / least["whole"], 3),
        "ratio_with_a_free_engine": round(row / least["without_engine"], 3),
        "engine_budget_us_for_0_5": round(2 * row - least["without_engine"], 1),
        "engine_in_the_service_us": round(least["whole"] - least["without_engine"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from tablectl.controller.common.logs import configure_logging

    parser = argparse.ArgumentParser(prog="python -m tests.bench.service")
    parser.add_argument("--split", action="store_true", help="events_vs_group_commit's parts")
    parser.add_argument("--rounds", type=int, default=600)
    args = parser.parse_args(argv)
    if not args.split:
        parser.error("say what to measure: --split")
    with open(os.devnull, "w") as quiet:
        configure_logging("info", mode="json", stream=quiet)
        print(json.dumps(asyncio.run(events_split(args.rounds)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
