"""The real daemon (`tablectl run`, a child process) and its journal: the start check, the
override, sequence numbers after a cut, seals every epoch, a segment at the gaming day.

Every damage here is a real edit of the SQLite file between two runs of the daemon.
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.record.journal import read_head_file, read_rows, verify_journal
from tablectl.controller.record.sealing import VerificationKey, read_key_file
from tests.journal.history import Started, build_history, start_daemon, write_config
from tests.journal.sealed import forge_one_first_seal

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def log_of(started: Started) -> list[dict[str, Any]]:
    return [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]


def count(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        db.close()


def tamper(path: Path, statement: str) -> None:
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS journal_no_update")
    db.execute("DROP TRIGGER IF EXISTS journal_no_delete")
    db.execute(statement)
    db.commit()
    db.close()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A table's configuration and 30 rounds of history (no checkpoint yet: every 100)."""
    config = write_config(tmp_path / "t", checkpoint_rounds=100)
    build_history(config, 30)
    return config


def test_the_daemon_refuses_an_edited_journal_and_starts_on_it_only_on_purpose(table: Path):
    journal = table.parent / "journal.sqlite"
    tamper(journal, "UPDATE journal SET body = body || ' ' WHERE seq = 40")
    rows = count(journal)
    refused = start_daemon(table, timeout=20)
    assert refused.ready_seconds is None
    assert refused.stop() == 2
    entry = next(e for e in log_of(refused) if e["event"] == "journal_damaged")
    assert entry["first_bad_seq"] == 40 and "row 40 edited" in entry["error"]
    assert any("refusing to start" in n for n in refused.notifications)
    assert count(journal) == rows  # nothing appended to a journal it refused

    accepted = start_daemon(table, timeout=20, extra=("--accept-damaged-journal",))
    assert accepted.ready_seconds is not None
    assert accepted.stop() == 0
    assert any(e["event"] == "journal_damage_accepted" for e in log_of(accepted))
    notes = [r.body for r in read_rows(journal) if r.body.get("type") == "journal_damage_accepted"]
    assert notes and notes[0]["first_bad_seq"] == 40 and "row 40 edited" in notes[0]["reason"]


def test_a_cut_tail_is_refused_and_its_sequence_numbers_are_never_reused(table: Path):
    journal = table.parent / "journal.sqlite"
    first = start_daemon(table, timeout=20)
    assert first.ready_seconds is not None and first.stop() == 0
    written, _ = read_head_file(journal) or (0, "")
    assert written == count(journal)
    tamper(journal, f"DELETE FROM journal WHERE seq > {written - 25}")
    refused = start_daemon(table, timeout=20)
    assert refused.stop() == 2
    entry = next(e for e in log_of(refused) if e["event"] == "journal_damaged")
    assert f"rows {written - 24}-{written} were cut" in entry["error"]

    accepted = start_daemon(table, timeout=20, extra=("--accept-damaged-journal",))
    assert accepted.ready_seconds is not None and accepted.stop() == 0
    seqs = [row.seq for row in read_rows(journal)]
    after_cut = [seq for seq in seqs if seq > written - 25]
    assert after_cut and min(after_cut) == written + 1  # the cut numbers stay unused
    result = verify_journal(journal)
    assert result.exit_code == 1 and f"rows {written - 24}-{written} deleted" in result.message


def test_the_daemon_seals_every_epoch_and_at_a_clean_stop(tmp_path: Path):
    table = write_config(tmp_path / "t", checkpoint_rounds=100, sealing="on")
    made = subprocess.run(
        [*TABLECTL, "journal", "setup-keys", "--config", str(table), "--interval", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    build_history(table, 30)  # after the keys: a seal vouches for no row older than its key
    key = VerificationKey.parse(made.stdout)
    journal = table.parent / "journal.sqlite"
    started = start_daemon(table, timeout=20)
    assert started.ready_seconds is not None
    time.sleep(3.2)
    stopped_at = time.time()
    assert started.stop() == 0
    seals = [row for row in read_rows(journal) if row.kind == "seal"]
    assert len(seals) >= 3  # ~3 epochs of 1 s, and the stop
    assert [s.body["prev_epoch"] for s in seals[1:]] == [s.body["epoch"] for s in seals[:-1]]
    result = verify_journal(journal, verification_key=key)
    assert result.ok and result.seals == len(seals), result.message
    assert result.unsealed_rows == 0  # the clean stop sealed the last row
    assert result.sealed_until is not None
    assert abs(datetime.datetime.fromisoformat(result.sealed_until).timestamp() - stopped_at) < 2
    held = read_key_file(table.parent / "sealing-key").as_dict()
    assert held["epoch"] > seals[-1].body["epoch"]  # the last seal's key is gone
    assert held["key"] != key.seed.hex()


def test_verify_at_start_refuses_an_edited_checkpoint(tmp_path: Path):
    """A checkpoint row edited (the state a start would restore) is refused at start."""
    table = write_config(tmp_path / "c", checkpoint_rounds=100)
    journal = table.parent / "journal.sqlite"
    build_history(table, 130)  # a checkpoint at round 100
    checkpoint = next(r for r in read_rows(journal) if r.kind == "checkpoint")
    tamper(
        journal,
        f"UPDATE journal SET body = replace(body, '\"round_counted\":100', '\"round_counted\":99')"
        f" WHERE seq = {checkpoint.seq}",
    )
    refused = start_daemon(table, timeout=20)
    assert refused.stop() == 2
    entry = next(e for e in log_of(refused) if e["event"] == "journal_damaged")
    assert entry["first_bad_seq"] == checkpoint.seq


def _libfaketime() -> str:
    """libfaketime (the `faketime` package), preloaded into the daemon itself."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    if not found:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("libfaketime is missing: tests/tools/install-system-tools.sh installs it")
        pytest.skip("faketime is not installed (apt-get install faketime)")
    return str(found[0])


def test_the_segment_rolls_over_at_the_gaming_day_while_the_daemon_runs(tmp_path: Path):
    """The daemon's own clock crosses 06:00 (libfaketime: its wall clock starts at 05:59:57
    and runs): the live segment closes, sealed and read-only, and the next one begins linked
    to it, with the table row and a checkpoint; the daemon restarts on the new segment."""
    libfaketime = _libfaketime()
    config = write_config(tmp_path / "t", day_start="06:00", sealing="on")
    today = gaming_day_of(
        local_wall_clock(datetime.datetime.now(datetime.UTC)), datetime.time(6, 0)
    )
    tomorrow = today + datetime.timedelta(days=1)
    made = subprocess.run(
        [*TABLECTL, "journal", "setup-keys", "--config", str(config), "--interval", "3600"],
        capture_output=True,
        text=True,
        check=True,
    )
    # recorded now (today's gaming day), after the keys: a seal vouches for no older row
    build_history(config, 20)
    key = VerificationKey.parse(made.stdout)
    clock = {
        "LD_PRELOAD": libfaketime,
        "FAKETIME": f"@{tomorrow.isoformat()} 05:59:57",  # a start point; the clock then runs
        "TZ": "UTC",
    }
    started = start_daemon(config, timeout=20, env=clock)
    assert started.ready_seconds is not None
    directory = config.parent
    closed = directory / f"journal-{today.isoformat()}-000000000001.sqlite"
    deadline = time.monotonic() + 15
    while not closed.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert closed.exists(), "no segment closed at 06:00"
    done = subprocess.run(
        [
            *TABLECTL,
            "op",
            "--socket",
            str(directory / "op.sock"),
            "reader_inspected",  # `by` is the caller the socket names
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert started.stop() == 0
    assert not os.access(closed, os.W_OK) or os.geteuid() == 0
    assert oct(closed.stat().st_mode & 0o777) == "0o400"
    live = list(read_rows(directory / "journal.sqlite"))
    assert [r.kind for r in live[:3]] == ["segment", "table", "checkpoint"]
    assert live[0].body["gaming_day"] == tomorrow.isoformat()
    old = list(read_rows(closed))
    assert old[-1].kind == "seal"  # the closed segment is sealed to its last row
    assert live[0].prev_hash == old[-1].hash and live[0].seq == old[-1].seq + 1
    assert live[0].body["previous"] == {
        "file": closed.name,
        "last_seq": old[-1].seq,
        "head": old[-1].hash,
    }
    assert any(r.body.get("type") == "reader_inspected" for r in live)
    whole = verify_journal(directory, verification_key=key)
    assert whole.ok and whole.rows == len(old) + len(live), whole.message
    alone = verify_journal(directory / "journal.sqlite", verification_key=key)
    assert alone.ok and "earlier segments archived" in alone.message, alone.message
    # restored from the new segment's checkpoint, its clock going on from where it was (the
    # real clock is ~6 hours behind it: rows stamped by a clock stepped back that far fail
    # their seal's span, docs/journal.md "What a seal proves")
    later = {**clock, "FAKETIME": f"@{tomorrow.isoformat()} 06:00:30"}
    again = start_daemon(config, timeout=20, env=later)
    assert again.ready_seconds is not None and again.stop() == 0
    assert verify_journal(directory, verification_key=key).ok
    # issue 30's forgery on these two segments: merged, every seal dropped, a card changed,
    # rehashed, one first seal under the key stolen from the key file: refused at row 1
    changed, seal_seq, epoch = forge_one_first_seal(directory)
    assert not list(directory.glob("journal-*.sqlite")) and changed >= 101
    assert verify_journal(directory).ok  # the chain alone holds
    forged = verify_journal(directory, verification_key=key)
    assert not forged.ok and forged.first_bad_seq == seal_seq, forged.message
    assert forged.message.startswith("row 1 is stamped "), forged.message
    assert f"before seal row {seal_seq} (epoch {epoch}, after no earlier seal)" in forged.message


def test_a_long_replay_reports_progress_and_asks_systemd_for_time(tmp_path: Path):
    """No checkpoint yet (an old journal): ~4,600 events replayed, told every 2,000."""
    table = write_config(tmp_path / "p", checkpoint_rounds=1000)
    build_history(table, 150)
    started = start_daemon(table, timeout=30)
    assert started.ready_seconds is not None
    assert started.stop() == 0
    progress = [n for n in started.notifications if "EXTEND_TIMEOUT_USEC=" in n]
    assert len(progress) >= 2, started.notifications
    assert all("STATUS=replaying the journal: row " in n for n in progress)
    first_ready = next(i for i, n in enumerate(started.notifications) if "READY=1" in n)
    assert started.notifications.index(progress[-1]) < first_ready


def test_status_shows_the_journal(table: Path):
    started = start_daemon(table, timeout=20)
    try:
        assert started.ready_seconds is not None
        shown = subprocess.run(
            [*TABLECTL, "status", "--socket", str(table.parent / "op.sock"), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        started.stop()
    assert shown.returncode == 0, shown.stderr
    journal = json.loads(shown.stdout)["journal"]
    assert journal["sealed"] is False and journal["started_damaged"] is False
    assert journal["last_seq"] > 900 and journal["gaming_day"]
