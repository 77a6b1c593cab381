"""Time cannot erase or freeze the record: the real daemon under a real clock moved by
libfaketime (stepped ahead 65 days, stepped back, stepped while it runs), retention on real
segments, `journal verify --expect-until` on a directory whose first segments are gone, and
the H1 reader inspection across clock steps.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.engine.gaming_day import gaming_day_of, local_wall_clock
from tablectl.controller.record.journal import Journal, read_rows, verify_journal
from tablectl.controller.record.journal_upkeep import JournalUpkeep, apply_retention
from tablectl.controller.record.sealing import Sealer, VerificationKey
from tablectl.controller.service.service import TableService
from tablectl.simulators.ports import port_held_for_life
from tests.journal.crashing import faketime_env, held_key, log_of, run, setup_keys
from tests.journal.history import SAME_DISK_SAID, build_history, start_daemon, write_config

DAY_START = datetime.time(6, 0)


def _table(directory: Path, **extra: Any) -> tuple[Path, int]:
    """A table's configuration with a metrics port the test can scrape."""
    config = write_config(directory, **extra)
    port = port_held_for_life()
    config.write_text(config.read_text().replace("127.0.0.1:0", f"127.0.0.1:{port}"))
    return config, port


def _metric(port: int, name: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def _status(config: Path) -> dict[str, Any]:
    shown = run("status", "--socket", str(config.parent / "op.sock"), "--json")
    assert shown.returncode == 0, shown.stderr
    status: dict[str, Any] = json.loads(shown.stdout)
    return status


def _today() -> datetime.date:
    return gaming_day_of(local_wall_clock(datetime.datetime.now(datetime.UTC)), DAY_START)


def seven_closed_segments(config: Path) -> tuple[list[Path], VerificationKey]:
    """Seven gaming days of play, each closed and sealed by the upkeep: days today-8 to
    today-2 closed, today-1 live (the upkeep stepped with explicit times, the seals real)."""
    key = setup_keys(config)  # before the history: a seal vouches for no row older than its key
    build_history(config, 5)
    first_day = _today() - datetime.timedelta(days=8)

    async def scenario() -> None:
        loaded = load_config(config)
        service = TableService(loaded, Journal(loaded.journal_path))
        await service.start()
        service.sealer = Sealer(loaded.sealing_key_path)
        upkeep = JournalUpkeep(service, asyncio.Lock())
        upkeep.segment_day = first_day
        for offset in range(1, 8):
            day = first_day + datetime.timedelta(days=offset)
            upkeep.step(datetime.datetime.combine(day, datetime.time(6, 0, 5)).astimezone())
            await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
        service.seal()
        service.close()

    asyncio.run(scenario())
    closed = sorted(config.parent.glob("journal-*.sqlite"))
    assert len(closed) == 7
    return closed, key


def test_a_start_65_days_ahead_retires_nothing_journals_the_step_and_keeps_the_key(tmp_path):
    """The issue's case: retain_days = 30, seven closed segments, the daemon started under a
    clock 65 days ahead. Nothing is retired (the journal holds 7 gaming days, not 30), the
    step is journaled, alarmed (status, metric, log) and holds the roll-over and the seals:
    the sealing key does not jump ~1,560 epochs (hourly) ahead."""
    archive = tmp_path / "archive"
    config, port = _table(
        tmp_path / "t",
        journal_extra=f'retain_days = 30\narchive_dir = "{archive}"\n{SAME_DISK_SAID}',
    )
    closed, _ = seven_closed_segments(config)
    key_before = held_key(config)
    clock = faketime_env(tmp_path / "clock", "+65d")
    started = start_daemon(config, timeout=20, env=clock)
    try:
        assert started.ready_seconds is not None
        status = _status(config)["journal"]
        assert status["clock_step"]["direction"] == "forward"
        assert status["clock_step"]["detected"] == "start"
        assert _metric(port, "tablectl_clock_step_unresolved") == 1
        assert _metric(port, "tablectl_clock_steps_total") == 1
        time.sleep(2.0)  # four upkeep ticks: a roll-over and retention would have run
    finally:
        assert started.stop() == 0
    assert sorted(config.parent.glob("journal-*.sqlite")) == closed  # all seven kept
    assert not archive.exists() or not list(archive.iterdir())
    assert held_key(config)["epoch"] == key_before["epoch"]  # the key did not jump
    live = list(read_rows(config.parent / "journal.sqlite"))
    steps = [r.body for r in live if r.body.get("type") == "clock_step"]
    assert len(steps) == 1 and steps[0]["direction"] == "forward"
    assert steps[0]["step_seconds"] > 50 * 86400
    stepped_at = next(r.seq for r in live if r.body.get("type") == "clock_step")
    assert not [r for r in live if r.kind == "seal" and r.seq > stepped_at]  # seals held
    assert any(e["event"] == "clock_step" and e["level"] == "error" for e in log_of(started))


def test_retention_counts_the_gaming_days_the_journal_holds_not_the_clocks(tmp_path: Path):
    """apply_retention on the same seven real segments: under a clock 65 days ahead nothing
    is old enough; at today's date with retain_days = 3 the five before today-3 are retired into the
    archive (copied, the copy verified, then removed), and only with `--archive` does
    `journal verify --expect-until` prove the history from row 1."""
    archive = tmp_path / "archive"
    config, _ = _table(tmp_path / "t")
    until = datetime.datetime.now(datetime.UTC).isoformat()  # the table ran until then
    closed, verification_key = seven_closed_segments(config)
    seed = str(verification_key)
    live = config.parent / "journal.sqlite"
    live_day = _today() - datetime.timedelta(days=1)
    ahead = _today() + datetime.timedelta(days=65)
    outcome = apply_retention(
        live, ahead, 30, archive, live_day=live_day, archive_same_filesystem=True
    )
    assert outcome.retired == [] and len(outcome.kept) == 7
    assert all("fewer than retain_days = 30" in why for _, why in outcome.kept)
    # no archive and no floor: old enough, but the only copy
    only = apply_retention(live, _today(), 3, None, live_day=live_day)
    assert only.retired == [] and all("only copy" in why for _, why in only.kept)
    outcome = apply_retention(
        live, _today(), 3, archive, live_day=live_day, archive_same_filesystem=True
    )
    assert [p.name for p, _ in outcome.retired] == [p.name for p in closed[:5]]
    assert sorted(p.name for p in archive.iterdir()) == [p.name for p in closed[:5]]
    assert sorted(config.parent.glob("journal-*.sqlite")) == closed[5:]

    cut = run(
        "journal", "verify", str(config.parent), "--verify-key", seed, "--expect-until", until
    )
    assert cut.returncode == 1, cut.stdout + cut.stderr
    assert "the proven history starts at row" in cut.stderr and "--archive" in cut.stderr
    whole = run(
        "journal",
        "verify",
        str(config.parent),
        "--verify-key",
        seed,
        "--archive",
        str(archive),
        *("--expect-until", until),
    )
    assert whole.returncode == 0, whole.stderr
    assert "rows 1-" in whole.stdout


@pytest.mark.long
def test_a_clock_stepped_back_at_start_holds_seals_until_the_clock_agrees_again(tmp_path):
    config, port = _table(tmp_path / "t")
    key = setup_keys(config)  # before the history: a seal vouches for no row older than its key
    build_history(config, 5)
    key_before = held_key(config)
    clock_file = tmp_path / "clock"
    clock = faketime_env(clock_file, "-2d")
    started = start_daemon(config, timeout=20, env=clock)
    try:
        assert started.ready_seconds is not None
        status = _status(config)["journal"]
        assert status["clock_step"]["direction"] == "backward"
        assert _metric(port, "tablectl_clock_step_unresolved") == 1
        clock_file.write_text("+0\n")  # the clock is corrected while the daemon runs
        deadline = time.monotonic() + 10
        while _metric(port, "tablectl_clock_step_unresolved") != 0:
            assert time.monotonic() < deadline, "the corrected clock was not seen"
            time.sleep(0.2)
        assert _status(config)["journal"]["clock_step"] is None
    finally:
        assert started.stop() == 0
    rows = list(read_rows(config.parent / "journal.sqlite"))
    kinds = [r.body.get("type") for r in rows if r.kind in ("note", "seal")]
    assert "clock_step" in kinds and "clock_step_resolved" in kinds
    assert kinds.index("clock_step") < kinds.index("clock_step_resolved") < kinds.index("seal")
    resolved = next(r.body for r in rows if r.body.get("type") == "clock_step_resolved")
    assert resolved["how"] == "the clock agrees again"
    assert held_key(config)["epoch"] >= key_before["epoch"]
    journal = config.parent / "journal.sqlite"
    assert verify_journal(journal).ok  # the chain holds across the step
    # the rows of the hold are stamped two days before the key's first epoch: no seal can
    # vouch for them (a first seal no more than any other), and the verdict names the step
    stepped = verify_journal(journal, verification_key=key)
    assert not stepped.ok and "after no earlier seal" in stepped.message, stepped.message
    assert "says the clock was stepped" in stepped.message, stepped.message


class _Subscriber:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("r")
        self.sock.sendall(b'{"type": "subscribe"}\n')
        assert json.loads(self.file.readline())["reply"] == "subscribed"

    def until(self, match: Any) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(self.file.readline())
            if match(message):
                return message

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.mark.long
def test_a_step_while_running_alarms_holds_the_roll_over_until_a_supervisor_acknowledges(
    tmp_path: Path,
):
    """The wall clock jumps 3 days while the daemon runs (its elapsed-time clock does not):
    an alarm reaches the subscribed terminal, a clock_step note is journaled, and neither the
    roll-over into the new gaming day nor a seal happens until a supervisor sends
    clock_step_acknowledged; then both resume, and the whole directory verifies."""
    config, port = _table(tmp_path / "t")
    key = setup_keys(config)  # before the history: a seal vouches for no row older than its key
    build_history(config, 5)
    clock_file = tmp_path / "clock"
    started = start_daemon(config, timeout=20, env=faketime_env(clock_file, "+0"))
    subscriber = _Subscriber(config.parent / "op.sock")
    try:
        assert started.ready_seconds is not None
        assert _metric(port, "tablectl_clock_step_unresolved") == 0
        clock_file.write_text("+3d\n")
        alarm = subscriber.until(lambda m: m.get("alarm") == "clock_step")
        assert alarm["direction"] == "forward" and alarm["detected"] == "running"
        assert "clock_step_acknowledged" in alarm["reason"]
        time.sleep(1.5)
        assert not list(config.parent.glob("journal-*.sqlite"))  # the roll-over is held
        acked = run("op", "--socket", str(config.parent / "op.sock"), "clock_step_acknowledged")
        assert acked.returncode == 0, acked.stderr
        deadline = time.monotonic() + 10
        while not list(config.parent.glob("journal-*.sqlite")):
            assert time.monotonic() < deadline, "no roll-over after the acknowledgement"
            time.sleep(0.2)
        assert _metric(port, "tablectl_clock_step_unresolved") == 0
        again = run("op", "--socket", str(config.parent / "op.sock"), "clock_step_acknowledged")
        assert again.returncode != 0 and "no clock step is held" in again.stderr + again.stdout
    finally:
        subscriber.close()
        assert started.stop() == 0
    closed = list(config.parent.glob("journal-*.sqlite"))
    notes = [r.body for r in read_rows(closed[0]) if r.kind == "note"]
    step = next(n for n in notes if n.get("type") == "clock_step")
    assert step["detected"] == "running" and step["step_seconds"] > 2 * 86400
    resolved = next(n for n in notes if n.get("type") == "clock_step_resolved")
    assert resolved["how"] == "acknowledged" and resolved["caller"]["role"] == "supervisor"
    assert verify_journal(config.parent).ok  # the chain holds across the step
    # the rows before the step were never sealed (seals held) and their key was erased at the
    # acknowledgement: the next seal's key was made after them, and the verdict names the step
    stepped = verify_journal(config.parent, verification_key=key)
    assert not stepped.ok and "a clock_step note at row" in stepped.message, stepped.message


@pytest.mark.long
def test_the_h1_daily_inspection_follows_the_gaming_day_across_clock_steps(tmp_path: Path):
    """The table service under a real clock (libfaketime) stepped 65 days ahead and back
    between rounds: the reader is used only on a gaming day it was inspected, whichever way
    the clock went (a step ahead needs a new inspection; a step back to the earlier day
    does not count the later day's inspection)."""
    config = write_config(tmp_path / "t", game="three_card_21")
    config.write_text(
        config.read_text().replace(
            'dealing = "manual_shoe"', 'dealing = "manual_shoe"\nreader = "concealed"'
        )
    )
    clock_file = tmp_path / "clock"
    env = {**os.environ, **faketime_env(clock_file, "+0")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.journal.h1_across_clock_steps", str(config), str(clock_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rounds = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["at_insert"] for r in rounds] == [
        [],
        ["H1:notify_supervisor", "H1:reader_disabled"],
        [],
        ["H1:notify_supervisor", "H1:reader_disabled"],
    ]
    days = [datetime.date.fromisoformat(r["gaming_day"]) for r in rounds]
    assert days[1] - days[0] == datetime.timedelta(days=65) and days[3] == days[0]
