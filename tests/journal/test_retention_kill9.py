"""Retention's child killed (kill -9, its own fault point) while it archives a closed segment.

The real daemon (`tablectl run`, sealed, an `archive_dir`) under libfaketime at noon two days
after its history's gaming day rolls its segment over at once and starts retention's child,
which dies at the point the test armed (controller/common/faults.py): with a chunk of the
copy written to its temporary, with the copy fsynced and its comparison begun, or with the
verified copy linked under the segment's name before its temporary and the local segment are
removed. The daemon goes on. Then a restart (its start sweeps the archive's temporaries) and
a third start a day later, whose roll-over runs retention again. At every stage: the local
segment is still there until the archive holds a copy equal to it byte for byte, the archive
holds that copy or nothing, no temporary is left, the retirement is logged with where the
copy is, and every row the journal held (its seq and hash) is in the local segments or the
archive, which verify as one chain.

The link point failed before the sweep left a file with a second name unzeroed
(durable.wipe_file): the restart zeroed the archive's copy through its temporary name.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.record.durable import is_temporary
from tablectl.controller.record.journal import read_rows, verify_journal
from tests.journal.crashing import faketime_env, setup_keys
from tests.journal.history import SAME_DISK_SAID, Started, build_history, start_daemon, write_config

POINTS = ["retention.mid_copy", "retention.verifying_copy", "retention.after_link"]
VERIFY = [sys.executable, "-m", "tablectl.controller", "journal", "verify"]
#: generous: three daemons start under load, each rolls a segment over
DEADLINE = 90.0


class Log:
    """The daemon's JSON log lines, read from its stderr as they come (a reader thread)."""

    def __init__(self, started: Started) -> None:
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        assert started.process.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(started.process.stderr,))
        self._thread.daemon = True
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            text = line.decode(errors="replace")
            self.raw.append(text)
            if text.startswith("{"):
                try:
                    self.lines.append(json.loads(text))
                except ValueError:
                    continue

    def events(self, name: str) -> list[dict[str, Any]]:
        return [entry for entry in list(self.lines) if entry.get("event") == name]

    def wait_for(self, name: str, started: Started) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            found = self.events(name)
            if found:
                return found[0]
            if started.process.poll() is not None:
                self._thread.join(5)
                break
            time.sleep(0.05)
        raise AssertionError(f"no {name} in the daemon's log: {''.join(self.raw)[-3000:]}")


def _start(config: Path, clock: dict[str, str], fault: str | None = None) -> tuple[Started, Log]:
    env = {**clock, **({"TABLECTL_FAULT_AT": fault} if fault else {})}
    started = start_daemon(config, timeout=DEADLINE, env=env)
    log = Log(started)
    if started.ready_seconds is None:
        started.stop()
        log._thread.join(5)
        raise AssertionError(f"the daemon did not start: {''.join(log.raw)[-3000:]}")
    return started, log


def _clock_at(path: Path, day: datetime.date, hour: int, minute: int = 0) -> dict[str, str]:
    """libfaketime's environment for a daemon whose UTC clock reads `day` at `hour`:`minute`
    now, and runs on: fixed moments, so no real 06:00 met during the test moves a roll-over
    from one start to another."""
    moment = datetime.datetime.combine(day, datetime.time(hour, minute), datetime.UTC)
    offset = int((moment - datetime.datetime.now(datetime.UTC)).total_seconds())
    return faketime_env(path, f"{offset:+d}")


def _history_day(live: Path) -> datetime.date:
    """The gaming day (06:00 UTC: the daemons run with TZ=UTC) of the journal's first row."""
    recorded = datetime.datetime.fromisoformat(next(read_rows(live)).recorded_at)
    return gaming_day_of(local_wall_clock(recorded, datetime.UTC), datetime.time(6, 0))


def _temporaries(*directories: Path) -> list[str]:
    return [p.name for d in directories if d.exists() for p in d.iterdir() if is_temporary(p.name)]


def _rows(*directories: Path) -> dict[int, str]:
    """seq -> hash of every row in the journal files of these directories."""
    rows: dict[int, str] = {}
    for directory in directories:
        for path in sorted(directory.glob("journal*.sqlite")):
            rows.update((row.seq, row.hash) for row in read_rows(path))
    return rows


def _archive_holds_a_copy_or_none(archive: Path, segment: Path, original: bytes) -> None:
    copy = archive / segment.name
    if copy.exists():
        assert copy.read_bytes() == original, f"{copy} is not the segment's bytes"
    if not segment.exists():  # deleted only once a verified copy exists
        assert copy.exists() and copy.read_bytes() == original, f"{segment.name} lost"


@pytest.mark.long  # three daemon starts a point, each rolling a segment over
@pytest.mark.parametrize("point", POINTS)
def test_retentions_child_killed_leaves_a_verified_copy_or_none(tmp_path: Path, point: str):
    archive = tmp_path / "archive"
    extra = f'retain_days = 1\narchive_dir = "{archive}"\n{SAME_DISK_SAID}'
    config = write_config(tmp_path / "t", journal_extra=extra)
    directory = config.parent
    setup_keys(config)
    build_history(config, 4)
    day = _history_day(directory / "journal.sqlite")
    clock = tmp_path / "clock"

    # 1. two days on: the roll-over closes the history's day, retention's child dies
    first, log = _start(config, _clock_at(clock, day + datetime.timedelta(days=2), 12), point)
    failed = log.wait_for("journal_upkeep_failed", first)
    assert "exited -9" in str(failed), failed
    (segment,) = directory.glob("journal-*.sqlite")
    original = segment.read_bytes()
    before = _rows(directory)
    assert first.stop() == 0
    assert segment.exists()
    left = _temporaries(archive)
    if point == "retention.after_link":
        assert (archive / segment.name).read_bytes() == original
    else:
        assert not (archive / segment.name).exists()
    assert left == [f".{segment.name}.copy"], left  # what the kill left for the start to sweep

    # 2. a restart the same day: its start sweeps the archive's temporary, nothing retired
    second, log = _start(config, _clock_at(clock, day + datetime.timedelta(days=2), 12, 30))
    assert second.stop() == 0
    swept = [e["what"] for e in log.events("journal_recovered_at_start")]
    assert any(f".{segment.name}.copy" in what for what in swept), swept
    assert segment.exists() and _temporaries(archive, directory) == []
    _archive_holds_a_copy_or_none(archive, segment, original)

    # 3. a day later: the roll-over's retention copies (or finds the copy), then retires
    third, log = _start(config, _clock_at(clock, day + datetime.timedelta(days=3), 12))
    retired = log.wait_for("segment_retired", third)
    assert third.stop() == 0
    assert retired["file"] == str(segment), retired
    assert str(archive / segment.name) in retired["copy"], retired  # where the copy is
    assert not segment.exists()
    _archive_holds_a_copy_or_none(archive, segment, original)
    assert verify_journal(archive / segment.name).ok
    assert _temporaries(archive, directory) == []
    after = _rows(directory, archive)
    assert {seq: after.get(seq) for seq in before} == before  # no row lost or changed
    whole = subprocess.run(
        [*VERIFY, str(directory), "--archive", str(archive)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert whole.returncode == 0, whole.stdout + whole.stderr
