"""Benchmark: the engine's median cost per event next to one bare `transitions` trigger.

Both are measured in the same run on the same machine; the goal (DESIGN.md) is a ratio
of 1 or less. Never a timed assertion; part of the one harness, tests/bench/harness.py
(`make bench`), which writes the figures to .bench/.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from transitions import Machine

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream

TABLES: list[tuple[str, dict[str, Any]]] = [
    ("three_card_21", {}),
    ("five_card_hilo", {"dealing": "automated_shoe"}),
    ("five_card_hilo", {"dealing": "manual_shoe", "dual_deck": True}),
    ("heads_up_holdem", {"dealing": "manual_shoe"}),
    ("asia_poker", {}),
]


class _Toggle:
    state: str


def bare_trigger_ns(repeats: int = 7, n: int = 20_000) -> float:
    """Median cost of one trigger of a plain queued machine with no callbacks."""
    model = _Toggle()
    Machine(
        model=model,
        states=["a", "b"],
        transitions=[
            {"trigger": "go", "source": "a", "dest": "b"},
            {"trigger": "go", "source": "b", "dest": "a"},
        ],
        initial="a",
        queued=True,
        auto_transitions=False,
    )
    go = model.go  # type: ignore[attr-defined]
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(n):
            go()
        samples.append((time.perf_counter_ns() - start) / n)
    return statistics.median(samples)


def engine_event_ns(
    game: str, options: dict[str, Any], rounds: int = 300
) -> tuple[float, float, int]:
    """Median cost of one engine event over legal rounds (each event timed on its own)."""
    spec = TableSpec.from_dict({"game": game, "options": options})
    events = legal_stream(spec, random.Random(1), rounds)
    engine = Engine(spec, random_source=random.Random(2).randrange)
    handle = engine.handle
    clock = time.perf_counter_ns
    costs = []
    for at, event in enumerate(events, start=2):
        start = clock()
        handle(event, at)
        costs.append(clock() - start)
    overhead = statistics.median(_clock_overhead() for _ in range(5))
    median = max(statistics.median(costs) - overhead, 1.0)
    return median, statistics.fmean(costs) - overhead, len(events)


def _clock_overhead() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(1000):
        start = clock()
        samples.append(clock() - start)
    return statistics.median(samples)


def measure() -> dict[str, Any]:
    bare = bare_trigger_ns()
    per_table = {}
    for game, options in TABLES:
        cost, mean, events = engine_event_ns(game, options)
        label = game + "".join(f",{k}={v}" for k, v in options.items())
        per_table[label] = {"median_ns": round(cost), "mean_ns": round(mean), "events": events}
    overall = statistics.median(t["median_ns"] for t in per_table.values())
    return {
        "bare_trigger_ns": round(bare),
        "engine_event_ns": round(overall),
        "engine_vs_bare_trigger": round(overall / bare, 2),
        "tables": per_table,
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        f"bare transitions trigger: {results['bare_trigger_ns'] / 1000:.2f} us (median)",
        f"engine, per event:        {results['engine_event_ns'] / 1000:.2f} us (median of tables)",
        f"ratio engine / trigger:   {results['engine_vs_bare_trigger']:.2f}  (goal <= 1)",
    ]
    for label, row in results["tables"].items():
        lines.append(
            f"  {label:<52} median {row['median_ns'] / 1000:6.2f} us, mean "
            f"{row['mean_ns'] / 1000:6.2f} us ({row['events']} events)"
        )
    return "\n".join(lines)
