"""The start and the roll-over at a busy table's scale (issue 33, steps 4-5).

`ready_ms_busy_day`: `tablectl run` started on one live segment as large as a busy gaming day
makes it, timed from the process's start (the test's fork) to READY=1: the interpreter, the
imports, the start's full verification of the live segment (its last START_VERIFY_ROWS rows
at most) and the replay since the last checkpoint. A busy day: BUSY_DAY_ROUNDS rounds (100
rounds an hour for 24 hours, more than a real table deals), ~74,000 rows: past the start's
verification bound, so the figure is the most any day's start verifies.

`rollover_delay_seconds_nonstop_dealing`: the demo dealing non-stop (`--fast`) under a
libfaketime clock that crosses the gaming day's start (06:00 UTC); the delay from 06:00 to the
new segment's first row (its `recorded_at`, on the same clock). Goal <= 5 s.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.record.journal import JournalError, read_rows
from tests.demo.demo_helpers import demo_command
from tests.journal.history import build_history, start_daemon, write_config

BUSY_DAY_ROUNDS = 2_400


def ready_busy_day(repeats: int = 3) -> dict[str, Any]:
    """Median READY from the process's start on a busy day's live segment, and the details."""
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-busy-day-") as tmp:
        config = write_config(Path(tmp) / "t")
        rounds, rows = build_history(config, BUSY_DAY_ROUNDS, checkpoint_last=False)
        size = (config.parent / "journal.sqlite").stat().st_size
        measured: list[float] = []
        reported: list[float] = []
        for _ in range(repeats):
            daemon = start_daemon(config, timeout=120)
            try:
                if daemon.ready_seconds is None:
                    raise RuntimeError(f"no READY: {daemon.notifications}")
                measured.append(round(daemon.ready_seconds * 1000, 1))
                time.sleep(0.3)  # its `ready` log line
            finally:
                daemon.process.kill()
                daemon.stop()
            for line in daemon.stderr().splitlines():
                if line.startswith("{") and '"event": "ready"' in line:
                    reported.append(round(float(json.loads(line)["seconds"]) * 1000, 1))
    return {
        "ready_ms_busy_day": round(statistics.median(measured), 1),
        "details": {
            "rounds": rounds,
            "rows": rows,
            "journal_bytes": size,
            "ready_ms_all": measured,
            "daemon_reported_ms_all": reported,
        },
    }


def rollover_delay(repeats: int = 3, lead: float = 5.0) -> dict[str, Any]:
    """Median seconds from 06:00 to the new segment's first row under non-stop dealing."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    if not found:
        raise FileNotFoundError("libfaketime (Debian's faketime) is missing")
    delays: list[float] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-rollover-") as tmp:
            now = datetime.datetime.now(datetime.UTC)
            six = now.replace(hour=6, minute=0, second=0, microsecond=0)
            if six <= now:
                six += datetime.timedelta(days=1)
            offset = int((six - now).total_seconds() - lead)
            env = {**os.environ, "LD_PRELOAD": str(found[0]), "FAKETIME": f"+{offset}"}
            env.update(TZ="UTC")
            env.pop("NOTIFY_SOCKET", None)
            state = Path(tmp)
            demo = subprocess.Popen(
                demo_command(state, "--rounds", "100000"),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            live = state / "journal.sqlite"
            try:
                deadline = time.monotonic() + lead + 120
                while time.monotonic() < deadline and demo.poll() is None:
                    if list(state.glob("journal-*.sqlite")) and live.exists():
                        try:
                            first = next(read_rows(live), None)
                        except JournalError:  # mid-roll-over: no live file for a moment
                            continue
                        if first is not None and first.kind == "segment":
                            at = datetime.datetime.fromisoformat(first.recorded_at)
                            delays.append(round((at - six).total_seconds(), 3))
                            break
                    time.sleep(0.2)
                else:
                    raise RuntimeError("no roll-over within two minutes of 06:00")
            finally:
                demo.send_signal(signal.SIGTERM)
                demo.wait(60)
    return {
        "rollover_delay_seconds_nonstop_dealing": statistics.median(delays),
        "details": {"delays_seconds": delays, "lead_seconds": lead},
    }
