"""The background verifier's speed, against a bare hash walk of the same rows (issue 21).

A gaming day of a busy table (1,000 rounds of five_card_hilo, ~31,000 rows, ~8 MB: the
sizing of docs/journal.md) is built once (tests/journal/history.py) and cloned into `days`
chained segments (each a `segment` row naming the one before, its rows renumbered and
rehashed), as the roll-over leaves them. Then, alternating, three times each:

- `floor`: the same rows streamed from the same files by the same query, each hashed with
  SHA-256 as the chain defines it (`journal.row_hash`) and compared with the stored hash: the
  least any check of the chain must do;
- `verifier`: `journal_verifier.walk`, the code the daemon's background child runs (ChainWalk:
  seq, link, hash, seal links, across the files).

`verify_vs_hash_floor` is the verifier's rows/s over the floor's (goal >= 0.5). Then the real
child (`python -m tablectl.controller.record.journal_verifier`, SCHED_IDLE) walks all the segments
once, wall time measured; `verify_year_seconds` is that time scaled to 365 segments of 8 MB
(by bytes: the walk is linear in rows, one file after another, one row in memory at a
time). Figures,
never asserted.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.record.journal import (
    _SCHEMA,
    _connect_read_only,
    canonical_json,
    closed_segment_name,
    live_segments,
    row_hash,
)
from tablectl.controller.record.journal_verifier import walk
from tests.journal.history import build_history, write_config

DAY_ROUNDS = 1_000
DAYS = 30
REPEATS = 3
#: A year of segments: 365 gaming days of ~8 MB (docs/journal.md, "Sizing").
YEAR_BYTES = 365 * 8_000_000


def build_days(directory: Path, days: int, rounds: int) -> tuple[Path, int, int]:
    """`days` chained segments of `rounds` rounds each: the live file, its last seq, bytes."""
    import sqlite3

    config = write_config(directory, checkpoint_rounds=25)
    build_history(config, rounds)
    live = directory / "journal.sqlite"
    db = sqlite3.connect(live)
    day = [tuple(r) for r in db.execute("SELECT kind, round, recorded_at, body FROM journal")]
    last_seq, last_hash = db.execute(
        "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    first_seq = 1
    for index in range(1, days):
        closed = closed_segment_name(live, f"2026-01-{index:02d}", first_seq)
        live.replace(closed)
        for suffix in ("-wal", "-shm"):
            Path(f"{live}{suffix}").unlink(missing_ok=True)
        first_seq = last_seq + 1
        segment = canonical_json(
            {
                "type": "segment",
                "gaming_day": f"2026-01-{index + 1:02d}",
                "previous": {"file": closed.name, "last_seq": last_seq, "head": last_hash},
            }
        )
        rows = []
        prev = last_hash
        for offset, (kind, rnd, at, body) in enumerate(
            [("segment", None, day[0][2], segment), *day]
        ):
            seq = first_seq + offset
            digest = row_hash(prev, seq, kind, rnd, at, body)
            rows.append((seq, kind, rnd, at, body, prev, digest))
            prev = digest
        db = sqlite3.connect(live)
        db.executescript(_SCHEMA)
        db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        db.commit()
        db.close()
        last_seq, last_hash = rows[-1][0], rows[-1][6]
    size = sum(p.stat().st_size for p in live_segments(live))
    return live, last_seq, size


def hash_floor(live: Path) -> int:
    """Every row of every segment streamed and its SHA-256 recomputed and compared: rows."""
    rows = 0
    for path in sorted(live_segments(live), key=lambda p: (p == live, p.name)):
        db = _connect_read_only(path)
        try:
            cursor = db.execute(
                "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
                " ORDER BY rowid"
            )
            while batch := cursor.fetchmany(512):
                for seq, kind, rnd, at, body, prev, digest in batch:
                    if row_hash(prev, seq, kind, rnd, at, body) != digest:
                        raise AssertionError(f"row {seq}")
                rows += len(batch)
        finally:
            db.close()
    return rows


def measure(quick: bool = False) -> dict[str, Any]:
    days = 3 if quick else DAYS
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-verify-") as tmp:
        live, last_seq, size = build_days(Path(tmp) / "t", days, 200 if quick else DAY_ROUNDS)
        floor_rates, verifier_rates = [], []
        for _ in range(REPEATS):
            started = time.perf_counter()
            rows = hash_floor(live)
            floor_rates.append(rows / (time.perf_counter() - started))
            started = time.perf_counter()
            verdict = walk(live, last_seq, lambda seq, count: None)
            verifier_rates.append(verdict["rows"] / (time.perf_counter() - started))
            if not verdict["ok"] or verdict["rows"] != rows:
                raise AssertionError(verdict)
        started = time.perf_counter()
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "tablectl.controller.record.journal_verifier",
                str(live),
                "--until",
                str(last_seq),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        child_seconds = time.perf_counter() - started
    floor_rate = statistics.median(floor_rates)
    verifier_rate = statistics.median(verifier_rates)
    return {
        "verify_vs_hash_floor": round(verifier_rate / floor_rate, 3),
        "verify_rows_per_second": round(verifier_rate),
        "floor_hash_rows_per_second": round(floor_rate),
        "verify_year_seconds": round(child_seconds * YEAR_BYTES / size, 1),
        "segments": days,
        "rows": rows,
        "bytes": size,
        "bytes_per_segment": size // days,
        "child_seconds": round(child_seconds, 2),
        "child_verdict": child.stdout.strip().splitlines()[-1],
        "floor_rates": [round(r) for r in floor_rates],
        "verifier_rates": [round(r) for r in verifier_rates],
    }


RESULT_KEYS = (
    "verify_vs_hash_floor",
    "verify_rows_per_second",
    "floor_hash_rows_per_second",
    "verify_year_seconds",
)
