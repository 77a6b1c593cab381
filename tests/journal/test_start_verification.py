"""No start on a record the daemon cannot vouch for, and history walked after READY.

The real daemon (`tablectl run`, a child process) on journals damaged by real edits of the
SQLite files between two runs. At start: the live segment in full (not only from its last
checkpoint), the closed segments' links and row counts, and every seal's link to the row before
it. After READY: a child process walks every segment end to end, and damage there is a
critical alarm, a metric and a journaled note.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import select
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import Journal, read_rows, row_hash, write_head_file
from tablectl.controller.service.service import TableService
from tests.journal.history import Started, build_history, start_daemon, write_config

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def log_of(started: Started, earlier: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]
    return [*(earlier or []), *lines]


def log_until(started: Started, event: str, timeout: float) -> list[dict[str, Any]]:
    """The daemon's log lines read while it runs, up to the first `event` (or the timeout)."""
    assert started.process.stderr is not None
    descriptor = started.process.stderr.fileno()
    os.set_blocking(descriptor, False)
    seen: list[dict[str, Any]] = []
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([descriptor], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(descriptor, 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"{"):
                    seen.append(json.loads(line))
            if any(entry["event"] == event for entry in seen):
                break
    finally:
        os.set_blocking(descriptor, True)
    return seen


def tamper(path: Path, *statements: str) -> None:
    os.chmod(path, 0o600)
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS journal_no_update")
    db.execute("DROP TRIGGER IF EXISTS journal_no_delete")
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def build_segments(config_path: Path, days: int) -> list[Path]:
    """30 rounds of history, then `days` gaming-day roll-overs by the table service itself
    (each closed segment sealed when keys are set, the next opening with its segment row, the
    table row and a checkpoint), a few rows in each. The closed files, oldest first."""
    build_history(config_path, 30)
    config = load_config(config_path)

    async def roll() -> list[Path]:
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        closed = []
        for day in range(days):
            opening = datetime.date(2026, 11, 21 + day)
            closed.append(
                service.roll_segment(opening, (opening - datetime.timedelta(1)).isoformat())
            )
            for index in range(5):
                service.journal.append("note", {"type": "filler", "n": index, "day": day})
        service.close()
        return closed

    return asyncio.run(roll())


def refused(config: Path) -> dict[str, Any]:
    started = start_daemon(config, timeout=30)
    code = started.stop()
    log = log_of(started)
    assert started.ready_seconds is None and code == 2, log[-5:]
    return next(e for e in log if e["event"] == "journal_damaged")


def test_a_missing_middle_segment_is_refused_at_start(tmp_path: Path):
    config = write_config(tmp_path / "t", checkpoint_rounds=10)
    closed = build_segments(config, 3)
    middle = closed[1]
    first_missing = min(row.seq for row in read_rows(middle))
    middle.unlink()
    entry = refused(config)
    assert "a segment between them is missing" in entry["error"], entry
    assert entry["first_bad_seq"] == first_missing, entry


def test_an_edited_row_before_the_last_checkpoint_is_refused_at_start(tmp_path: Path):
    """Rows 30 rounds deep, checkpoints every 10: row 40 is long before the last one, where
    the start used to begin its check."""
    config = write_config(tmp_path / "t", checkpoint_rounds=10)
    build_history(config, 30)
    journal = config.parent / "journal.sqlite"
    last_checkpoint = max(r.seq for r in read_rows(journal) if r.kind == "checkpoint")
    assert last_checkpoint > 500
    tamper(
        journal,
        'UPDATE journal SET body = replace(body, \'"card":"\', \'"card":"X\') WHERE seq = 40',
    )
    entry = refused(config)
    assert entry["first_bad_seq"] == 40 and "row 40 edited" in entry["error"], entry


def test_a_consistent_rewrite_with_the_head_file_updated_is_refused_at_start(tmp_path: Path):
    """The daemon ran sealed and stopped (a checkpoint, then a seal); an intruder edits an
    event before the seal, recomputes every hash after it and writes the head file: the chain
    and the head agree, but the seal names the hash of the row the daemon wrote before it."""
    config = write_config(tmp_path / "t", checkpoint_rounds=10, sealing="on")
    subprocess.run(
        [*TABLECTL, "journal", "setup-keys", "--config", str(config), "--interval", "3600"],
        capture_output=True,
        check=True,
    )
    build_history(config, 12)
    first = start_daemon(config, timeout=30)
    assert first.ready_seconds is not None and first.stop() == 0
    journal = config.parent / "journal.sqlite"
    rows = [list(r) for r in sqlite3.connect(journal).execute("SELECT * FROM journal ORDER BY seq")]
    seal = max(int(r[0]) for r in rows if r[1] == "seal")
    edited = 25
    body = json.loads(rows[edited - 1][4])
    body["edited"] = True
    rows[edited - 1][4] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    prev = rows[edited - 2][6]
    for row in rows[edited - 1 :]:
        row[5] = prev
        row[6] = prev = row_hash(prev, row[0], row[1], row[2], row[3], row[4])
    tamper(journal, "DELETE FROM journal")
    db = sqlite3.connect(journal)
    db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    head = config.parent / "journal.sqlite.head"
    head.unlink()
    write_head_file(journal, rows[-1][0], rows[-1][6])
    entry = refused(config)
    assert entry["first_bad_seq"] == seal, entry
    assert f"seal row {seal} does not seal the rows before it" in entry["error"], entry


@pytest.mark.long  # minutes under load: make test-long
def test_a_reordered_row_in_a_closed_segment_is_found_by_the_background_walk(tmp_path: Path):
    """Two rows of the oldest closed segment swap places (seqs kept): its ends and its count
    are untouched, so the start goes on; the walk after READY finds it within seconds: the
    metric, a critical log line, the alarm's note in the journal."""
    config = write_config(tmp_path / "t", checkpoint_rounds=10)
    closed = build_segments(config, 2)
    oldest = closed[0]
    a, b = [
        (
            r.kind,
            r.round,
            r.recorded_at,
            # the body as written: with its nonce (format 2)
            json.dumps(
                {**r.body, **({"nonce": r.nonce} if r.nonce else {})},
                sort_keys=True,
                separators=(",", ":"),
            ),
            r.prev_hash,
            r.hash,
        )
        for r in read_rows(oldest)
        if r.seq in (50, 51)
    ]
    columns = "kind = ?, round = ?, recorded_at = ?, body = ?, prev_hash = ?, hash = ?"
    db_statements = []
    os.chmod(oldest, 0o600)
    db = sqlite3.connect(oldest)
    db.execute("DROP TRIGGER IF EXISTS journal_no_update")
    db.execute(f"UPDATE journal SET {columns} WHERE seq = 50", b)
    db.execute(f"UPDATE journal SET {columns} WHERE seq = 51", a)
    db.commit()
    db.close()
    del db_statements
    started = start_daemon(config, timeout=30)
    assert started.ready_seconds is not None
    seen = log_until(started, "journal_damage_found", timeout=180)
    ready = next(e for e in seen if e["event"] == "ready")
    with urllib.request.urlopen(f"http://{ready['metrics']}/metrics", timeout=10) as reply:
        scraped = reply.read().decode()
    assert started.stop() == 0
    log = log_of(started, seen)
    found = next(e for e in log if e["event"] == "journal_damage_found")
    assert found["first_bad_seq"] == 50 and "row 50 reordered" in found["error"], found
    assert found["level"] == "critical"
    assert "tablectl_journal_background_damage 1.0" in scraped
    notes = [
        r.body
        for r in read_rows(config.parent / "journal.sqlite")
        if r.body.get("type") == "journal_damage_found"
    ]
    assert len(notes) == 1 and notes[0]["first_bad_seq"] == 50, notes


@pytest.mark.long
def test_an_intact_history_is_walked_after_ready_and_says_so(tmp_path: Path):
    config = write_config(tmp_path / "t", checkpoint_rounds=10)
    build_segments(config, 2)
    started = start_daemon(config, timeout=30)
    assert started.ready_seconds is not None
    seen = log_until(started, "journal_background_verified", timeout=30)
    ready = next(e for e in seen if e["event"] == "ready")
    with urllib.request.urlopen(f"http://{ready['metrics']}/metrics", timeout=10) as reply:
        scraped = reply.read().decode()
    assert started.stop() == 0
    done = next(e for e in log_of(started, seen) if e["event"] == "journal_background_verified")
    assert done["rows"] == done["last_seq"] > 900
    assert "tablectl_journal_background_damage 0.0" in scraped
    assert f"tablectl_journal_background_verified_seq {float(done['last_seq'])}" in scraped
