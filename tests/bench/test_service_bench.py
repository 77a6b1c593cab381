"""Table-service figures with the real engine (printed, written to .bench/; never asserted)."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest

from controller.config import parse_config
from controller.journal import Journal
from controller.service import TableService

from .test_daemon_bench import record

pytest.importorskip("controller.engine")

RANKS = "A23456789TJQK"
DECK = [rank + suit for suit in "cdhs" for rank in RANKS]


def rounds(count: int) -> list[dict[str, object]]:
    """HILO, manual shoe, two players: shuffle, deal 15 cards, collect, count the stub."""
    events: list[dict[str, object]] = [{"type": "deck_received"}]
    for _ in range(count):
        events += [
            {"type": "shuffle_completed", "count": 52},
            {"type": "shoe_loaded"},
            {"type": "bets_closed", "positions": [1, 2]},
        ]
        events += [{"type": "card_drawn", "card": card} for card in DECK[:15]]
        events += [
            {"type": "deal_completed"},
            {"type": "hands_collected"},
            {"type": "stub_counted", "count": 37},
        ]
    return events


def config(tmp_path):
    return parse_config(
        {
            "table": {"id": "b1", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
            "journal": {"path": str(tmp_path / "journal.sqlite")},
        },
        "bench.toml",
    )


@pytest.mark.parametrize("group_commit", [False, True], ids=["durable", "group_commit"])
def test_event_latency_and_replay(tmp_path, group_commit):
    events = rounds(100)
    table = config(tmp_path)

    async def live() -> list[float]:
        service = TableService(table, Journal(table.journal_path), group_commit=group_commit)
        await service.start()
        samples = []
        for event in events:
            started = time.perf_counter()
            await service.handle_event(event)
            samples.append(time.perf_counter() - started)
        service.close()
        return samples

    async def replay() -> float:
        started = time.perf_counter()
        service = TableService(table, Journal(table.journal_path))
        await service.start()
        elapsed = time.perf_counter() - started
        service.close()
        return elapsed

    samples = sorted(asyncio.run(live()))
    replay_seconds = asyncio.run(replay())
    name = "durable" if not group_commit else "group_commit"
    record(
        f"service_event_{name}",
        {
            "events": len(samples),
            "median_us": statistics.median(samples) * 1e6,
            "p99_us": samples[int(len(samples) * 0.99)] * 1e6,
            "events_per_s": len(samples) / sum(samples),
            "replay_events_per_s": len(events) / replay_seconds,
        },
    )
