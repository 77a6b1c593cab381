"""`tablectl run` with one table: process start to READY=1, and resident memory when idle.

The table is the e2e five_card_hilo table (shuffler, ADS, discard rack) on ptys, hosted by the
e2e rig process; READY arrives on a real NOTIFY_SOCKET. Figures go to .bench/daemon_ready.json
(`ready_ms` median of several starts, `idle_rss_mib` after the daemon sat idle). Never asserted.

    .venv/bin/python -m tests.bench.bench_daemon_ready      (or `make bench`)
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from tests.e2e.conftest import Table

BENCH_DIR = Path(__file__).resolve().parents[2] / ".bench"
STARTS = 7
IDLE_SECONDS = 3.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def measure() -> dict[str, float]:
    table = Table("five_card_hilo")
    try:
        ready = []
        for _ in range(STARTS):
            ready.append(table.start() * 1000)
            assert table.stop() == 0
        table.start()
        assert table.daemon is not None
        time.sleep(IDLE_SECONDS)
        idle = rss_mib(table.daemon.pid)
        assert table.stop() == 0
    finally:
        table.close()
    figures = {
        "ready_ms": statistics.median(ready),
        "ready_ms_min": min(ready),
        "ready_ms_max": max(ready),
        "idle_rss_mib": idle,
    }
    BENCH_DIR.mkdir(exist_ok=True)
    (BENCH_DIR / "daemon_ready.json").write_text(json.dumps(figures, indent=2))
    print("\ndaemon_ready: " + ", ".join(f"{k}={v:.4g}" for k, v in figures.items()))
    return figures


def test_daemon_ready_and_idle_rss() -> None:
    measure()


if __name__ == "__main__":
    measure()
