"""A season of history: the real daemon on 20,000 rounds, under 512 MiB, replaying only the
rounds after its last checkpoint.

Before checkpoints the start replayed every round ever played (~0.37 ms and ~36 KB each) and
was OOM-killed at ~14,900 rounds inside MemoryMax=512M. Now it replays from the last
checkpoint, streamed. How fast READY comes is a figure of `make bench` (tests/bench/history.py,
docs/performance.md), not a timed assertion here: under a loaded machine a wall-clock limit
failed a start that replayed exactly what it should (issue 34).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.journal.history import MEMORY_LIMIT, build_history, start_daemon, write_config

ROUNDS = 20_000  # no checkpoint after the last round: the start replays the 25 before it


@pytest.mark.long  # minutes under load: make test-long
def test_the_daemon_starts_on_20000_rounds_from_its_checkpoint_under_512_mib(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "table")
    rounds, rows = build_history(config, ROUNDS, checkpoint_last=False)
    assert rounds == ROUNDS and rows > 600_000
    started = start_daemon(config, timeout=30)
    try:
        assert started.ready_seconds is not None, started.stop() and started.stderr()
        peak = started.peak_rss_mib()
    finally:
        status = started.stop()
    log = [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]
    assert status == 0, log[-5:]
    print(
        f"{rounds} rounds, {rows} rows: READY in {started.ready_seconds:.3f} s, "
        f"peak RSS {peak:.1f} MiB, limit: {started.limit.how}"
    )
    assert peak < MEMORY_LIMIT / 2**20
    replayed = next(entry for entry in log if entry["event"] == "journal_replayed")
    # from the last checkpoint (round 19,975), the 25 rounds after it, not the whole history
    assert replayed["from_seq"] > rows - 5_000 and 0 < replayed["events"] < 5_000
    assert replayed["round"] == ROUNDS
    assert not any(entry["event"] == "replay_diverged" for entry in log)
