"""Figures for the daemon's infrastructure (printed and written to .bench/; never asserted)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

from controller.journal import Journal, verify_journal

BENCH_DIR = Path(__file__).resolve().parents[2] / ".bench"
EVENT = {"type": "card_drawn", "card": "As", "face_up": False, "device": "shoe"}


def record(name: str, figures: dict[str, float]) -> None:
    BENCH_DIR.mkdir(exist_ok=True)
    (BENCH_DIR / f"{name}.json").write_text(json.dumps(figures, indent=2))
    print(f"\n{name}: " + ", ".join(f"{k}={v:.4g}" for k, v in figures.items()))


def test_journal_durable_append_latency(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    samples = []
    for _ in range(300):
        started = time.perf_counter()
        journal.append("event", EVENT, durable=True)
        samples.append(time.perf_counter() - started)
    journal.close()
    samples.sort()
    record(
        "journal_durable_append",
        {
            "median_us": statistics.median(samples) * 1e6,
            "p99_us": samples[int(len(samples) * 0.99)] * 1e6,
        },
    )


def test_journal_group_commit_throughput(tmp_path):
    rows = 100_000

    async def run() -> float:
        journal = Journal(tmp_path / "g.sqlite", flush_interval=0.005, max_batch=512)
        started = time.perf_counter()
        for index in range(rows):
            journal.append("event", EVENT)
            if index % 1000 == 0:
                await asyncio.sleep(0)
        journal.flush()
        elapsed = time.perf_counter() - started
        journal.close()
        return elapsed

    elapsed = asyncio.run(run())
    started = time.perf_counter()
    assert verify_journal(tmp_path / "g.sqlite").ok
    verify_elapsed = time.perf_counter() - started
    record(
        "journal_group_commit",
        {
            "rows_per_s": rows / elapsed,
            "us_per_row": elapsed / rows * 1e6,
            "verify_rows_per_s": rows / verify_elapsed,
        },
    )
