"""READY time and resident memory against the history a table holds (issue 11).

For 1k, 10k and 100k rounds of history (one journal each, built fast by
tests/journal/history.py: engine and journal directly, a checkpoint every
`checkpoint_rounds` (25) rounds but none after the last round, so every start replays the 25
rounds since the last checkpoint: the most a daemon killed just before its next checkpoint
would), `tablectl run` is started on
it five times with a real NOTIFY_SOCKET, under the 512 MiB limit. `ready_ms_by_history` is the
median time from the process's start to READY=1, `rss_mib_by_history` the largest peak resident
memory (VmHWM at READY); details.json adds `opened_to_ready_ms` (journal opened to READY: the
start's own work, without the interpreter's start-up). Flat, not linear: the start reads the
last checkpoint and the rows after it, never the whole history. Never asserted (figures, not
tests).
"""

from __future__ import annotations

import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.journal.history import build_history, start_daemon, write_config

HISTORY_ROUNDS = (1_000, 10_000, 100_000)
QUICK_ROUNDS = (1_000, 10_000)
STARTS = 5


def measure(details: dict[str, Any], quick: bool = False) -> dict[str, Any]:
    """Build the histories, start the daemon on each; the two result keys (details filled).

    The starts take turns across the sizes (1k, 10k, 100k, 1k, ...), so a machine busy with
    something else weighs on every size alike. Each start ends with SIGKILL: a clean stop would
    write a checkpoint and leave the next start nothing to replay (a kill leaves the 25 rounds,
    plus the two rows of each `controller_restarted`).
    """
    sizes = QUICK_ROUNDS if quick else HISTORY_ROUNDS
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-history-") as tmp:
        tables: dict[int, tuple[Path, dict[str, Any]]] = {}
        for rounds in sizes:
            config = write_config(Path(tmp) / str(rounds))
            started = time.perf_counter()
            held, rows = build_history(config, rounds, checkpoint_last=False)
            size = (config.parent / "journal.sqlite").stat().st_size
            tables[rounds] = (
                config,
                {
                    "rounds": held,
                    "rows": rows,
                    "journal_bytes": size,
                    "bytes_per_round": round(size / held),
                    "build_seconds": round(time.perf_counter() - started, 1),
                    "ready_ms_all": [],
                    "rss_mib_all": [],
                    "opened_to_ready_ms_all": [],
                },
            )
            print(f"  built {rounds} rounds: {tables[rounds][1]}", flush=True)
        for _ in range(STARTS):
            for rounds in sizes:
                _start(*tables[rounds])
    figures: dict[str, Any] = {}
    for rounds, (_, figure) in tables.items():
        figure["ready_ms"] = round(statistics.median(figure["ready_ms_all"]), 1)
        figure["rss_mib"] = round(max(figure["rss_mib_all"]), 1)
        figure["opened_to_ready_ms"] = round(statistics.median(figure["opened_to_ready_ms_all"]), 1)
        figures[str(rounds)] = figure
        print(f"  {rounds} rounds: READY {figure['ready_ms']} ms, {figure['rss_mib']} MiB")
    details["history"] = figures
    return {
        "ready_ms_by_history": {k: v["ready_ms"] for k, v in figures.items()},
        "rss_mib_by_history": {k: v["rss_mib"] for k, v in figures.items()},
    }


def _start(config: Path, figure: dict[str, Any]) -> None:
    daemon = start_daemon(config, timeout=120)
    try:
        if daemon.ready_seconds is None:
            raise RuntimeError(f"no READY on {figure['rounds']} rounds: {daemon.notifications}")
        figure["ready_ms_all"].append(round(daemon.ready_seconds * 1000, 1))
        figure["rss_mib_all"].append(round(daemon.peak_rss_mib(), 1))
        figure["memory_limit"] = daemon.limit.how
        time.sleep(0.3)  # the daemon's own `ready` log line, before the kill
    finally:
        daemon.process.kill()
        daemon.stop()
    stamps = {}
    for line in daemon.stderr().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            stamps.setdefault(entry.get("event"), entry.get("timestamp"))
    if "journal_opened" in stamps and "ready" in stamps:
        opened = datetime.datetime.fromisoformat(stamps["journal_opened"].replace("Z", "+00:00"))
        ready = datetime.datetime.fromisoformat(stamps["ready"].replace("Z", "+00:00"))
        figure["opened_to_ready_ms_all"].append(round((ready - opened).total_seconds() * 1000, 1))
