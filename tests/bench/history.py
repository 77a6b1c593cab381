"""READY time and resident memory against the history a table holds (issue 11).

For 1k, 10k and 100k rounds of history (one journal each, built fast by
tests/journal/history.py: engine and journal directly, a checkpoint every
`checkpoint_rounds` (25) rounds but none after the last round, so every start replays the 25
rounds since the last checkpoint: the most a daemon killed just before its next checkpoint
would), `tablectl run` is started on a
fresh copy of the journal several times with a real NOTIFY_SOCKET, under the 512 MiB limit.
`ready_ms_by_history` is the median time to READY=1, `rss_mib_by_history` the largest peak
resident memory (VmHWM at READY). Flat, not linear: the start reads the last checkpoint and
the rows after it, never the whole history. Never asserted (figures, not tests).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.journal.history import build_history, start_daemon, write_config

HISTORY_ROUNDS = (1_000, 10_000, 100_000)
QUICK_ROUNDS = (1_000, 10_000)
STARTS = 3


def measure(details: dict[str, Any], quick: bool = False) -> dict[str, Any]:
    """Build the histories, start the daemon on each; the two result keys (details filled)."""
    figures: dict[str, Any] = {}
    for rounds in QUICK_ROUNDS if quick else HISTORY_ROUNDS:
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-history-") as tmp:
            figures[str(rounds)] = _one(Path(tmp), rounds)
        print(f"  {rounds} rounds: {figures[str(rounds)]}", flush=True)
    details["history"] = figures
    return {
        "ready_ms_by_history": {k: v["ready_ms"] for k, v in figures.items()},
        "rss_mib_by_history": {k: v["rss_mib"] for k, v in figures.items()},
    }


def _one(directory: Path, rounds: int) -> dict[str, Any]:
    pristine = write_config(directory / "pristine")
    started = time.perf_counter()
    held, rows = build_history(pristine, rounds, checkpoint_last=False)
    built = time.perf_counter() - started
    journal = pristine.parent / "journal.sqlite"
    size = journal.stat().st_size
    ready: list[float] = []
    rss: list[float] = []
    how = ""
    for index in range(STARTS):
        run = write_config(directory / f"run{index}")
        shutil.copyfile(journal, run.parent / "journal.sqlite")
        daemon = start_daemon(run, timeout=120)
        try:
            if daemon.ready_seconds is None:
                raise RuntimeError(f"no READY on {rounds} rounds: {daemon.notifications}")
            ready.append(daemon.ready_seconds * 1000)
            rss.append(daemon.peak_rss_mib())
            how = daemon.limit.how
        finally:
            daemon.stop()
        shutil.rmtree(run.parent)
    return {
        "ready_ms": round(statistics.median(ready), 1),
        "rss_mib": round(max(rss), 1),
        "ready_ms_all": [round(value, 1) for value in ready],
        "rows": rows,
        "rounds": held,
        "journal_bytes": size,
        "bytes_per_round": round(size / held),
        "build_seconds": round(built, 1),
        "memory_limit": how,
    }
