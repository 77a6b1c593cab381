"""Every write site of the record fails safe on a real full filesystem (a size-limited tmpfs
the test mounts; tests/tools/smallfs.py): the head file (a checkpoint's), the sealing key (a
seal's), the roll-over, and `demo` refusing to start like `run`. Each failure stops dealing
(devices locked, `dealing_stopped` alarm, `tablectl_journal_write_errors_total`, exit 3), leaves
no temporary behind, and tells the operator the truth about what was recorded. (A journal
commit's own failure is tests/e2e/test_failsafe.py's.)
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.service.operator_client import request
from tests.demo.demo_helpers import run_demo
from tests.journal.crashing import held_key, libfaketime, log_of, setup_keys
from tests.journal.history import Started, start_daemon, write_config
from tests.tools.smallfs import fill, small_filesystem

LINGER = ("--fail-stop-linger", "1")


def _stopped(started: Started, config: Path) -> dict[str, object]:
    """The status while dealing is stopped (the daemon lingers, answering), then the exit."""
    deadline = time.monotonic() + 15
    while True:
        status = request(config.parent / "op.sock", {"type": "status"})
        if status.get("status", status).get("dealing") == "stopped":  # type: ignore[union-attr]
            return status
        assert time.monotonic() < deadline, f"dealing never stopped: {status}"
        time.sleep(0.1)


def _write_errors(started: Started) -> list[dict[str, object]]:
    return [e for e in log_of(started) if e["event"] in ("journal_write_failed", "dealing_stopped")]


@pytest.mark.long  # make test stays under 10 minutes
def test_a_full_disk_at_the_head_file_stops_dealing_and_the_reply_says_it_was_recorded(
    tmp_path: Path,
):
    with small_filesystem(80) as mount:
        config = write_config(mount / "t", checkpoint_rounds=1)
        started = start_daemon(config, timeout=20, extra=LINGER)
        assert started.ready_seconds is not None
        sock = config.parent / "op.sock"
        assert request(sock, {"type": "bets_closed", "positions": [1]})["reply"] == "decisions"
        filler = fill(mount)
        # the round ends: its checkpoint row goes into the -wal (preallocated), the head file
        # it records next cannot be written
        reply = request(sock, {"type": "hands_collected"})
        assert reply["reply"] == "error", reply
        assert "recorded (journal row" in reply["error"] and "dealing stopped" in reply["error"]
        status = _stopped(started, config)
        assert "cannot record the head" in str(status)
        refused = request(sock, {"type": "bets_closed", "positions": [1]})
        assert refused["reply"] == "error" and "dealing stopped" in refused["error"]
        assert started.process.wait(timeout=20) == 3
        logged = _write_errors(started)
        assert {e["event"] for e in logged} == {"journal_write_failed", "dealing_stopped"}
        assert not list(config.parent.glob(".journal.sqlite.head.*"))  # no 0-byte temporary
        filler.unlink()
        rows = list(read_rows(config.parent / "journal.sqlite"))
        # what the reply said was recorded is in the journal; nothing after the failure
        assert [r.body.get("type") for r in rows if r.kind == "event"][-1] == "hands_collected"
        assert rows[-1].kind == "checkpoint"
        again = start_daemon(config, timeout=20)
        assert again.ready_seconds is not None and again.stop() == 0
        assert verify_journal(config.parent / "journal.sqlite").ok


@pytest.mark.long
def test_a_full_disk_at_a_seal_still_erases_the_key_in_place_then_stops_at_the_head_file(
    tmp_path: Path,
):
    """The sealing key is overwritten in its own blocks (docs/journal.md, "Erased keys are
    overwritten"): a full disk does not keep an erased key alive. The seal's next write, the
    head file, needs a new block: dealing stops there, and the restart verifies."""
    with small_filesystem(80) as mount:
        config = write_config(mount / "t")
        key = setup_keys(config, interval=1)
        started = start_daemon(config, timeout=20, extra=LINGER)
        assert started.ready_seconds is not None
        filler = fill(mount)
        status = _stopped(started, config)  # the next epoch's seal cannot record its head
        assert "cannot record the head" in str(status), status
        assert started.process.wait(timeout=20) == 3
        assert any(e["event"] == "journal_write_failed" for e in log_of(started))
        assert not list(config.parent.glob(".sealing-key.*"))  # no key left in a temporary
        seals = [r for r in read_rows(config.parent / "journal.sqlite") if r.kind == "seal"]
        assert held_key(config)["epoch"] > seals[-1].body["epoch"]  # its key erased all the same
        filler.unlink()
        again = start_daemon(config, timeout=20)
        assert again.ready_seconds is not None
        time.sleep(1.5)
        assert again.stop() == 0
        result = verify_journal(config.parent / "journal.sqlite", verification_key=key)
        assert result.ok and result.seals >= 2, result.message


@pytest.mark.long
def test_a_full_disk_at_the_roll_over_stops_dealing_and_the_restart_rolls_over(tmp_path: Path):
    """The daemon's clock (libfaketime) reaches 06:00 a few seconds after READY, on a disk
    filled in between: the roll-over cannot record the head or close the segment, dealing stops
    (exit 3); with space back, the restart finds the live segment whole and rolls it over."""
    tomorrow = datetime.date.today() + datetime.timedelta(days=1)
    clock = {
        "LD_PRELOAD": libfaketime(),
        "FAKETIME": f"@{tomorrow.isoformat()} 05:59:50",
        "TZ": "UTC",
    }
    with small_filesystem(80) as mount:
        config = write_config(mount / "t")
        started = start_daemon(config, timeout=20, extra=LINGER, env=clock)
        assert started.ready_seconds is not None
        sock = config.parent / "op.sock"
        for _ in range(200):  # rows in the -wal, for the roll-over's checkpoint to write out
            assert request(sock, {"type": "dealer_changed"})["reply"] == "decisions"
        filler = fill(mount)
        status = _stopped(started, config)
        # the roll-over's first write fails: the head file it writes before closing anything
        # (the unsealed undo needs it), or the close itself on a disk with a little room left
        assert any(
            words in str(status) for words in ("cannot record the head", "cannot close the segment")
        ), status
        assert started.process.wait(timeout=30) == 3
        assert not list(config.parent.glob("journal-*.sqlite"))  # nothing half-closed
        filler.unlink()
        again = start_daemon(config, timeout=20, env=clock)
        assert again.ready_seconds is not None
        deadline = time.monotonic() + 15
        while not list(config.parent.glob("journal-*.sqlite")):
            assert time.monotonic() < deadline, "no roll-over after the restart"
            time.sleep(0.2)
        assert again.stop() == 0
        assert verify_journal(config.parent).ok


@pytest.mark.long
def test_demo_refuses_to_start_on_a_full_disk_as_run_does(tmp_path: Path):
    with small_filesystem(80) as mount:
        fill(mount, leave=16 << 20)
        state = mount / "demo"
        done = run_demo(state, "--rounds", "1")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "MiB free under" in done.stderr
        assert not (state / "journal.sqlite").exists() and not (state / "sealing-key").exists()


def test_a_full_disk_at_a_clean_stops_checkpoint_ends_it_with_3(tmp_path: Path):
    """SIGTERM between rounds writes a checkpoint and records the head: on a full disk the
    head cannot be written, and the stop says the record failed (exit 3), not 0."""
    with small_filesystem(80) as mount:
        config = write_config(mount / "t")
        started = start_daemon(config, timeout=20, extra=LINGER)
        assert started.ready_seconds is not None
        filler = fill(mount)
        assert started.stop() == 3
        assert any(e["event"] == "journal_write_failed" for e in log_of(started))
        filler.unlink()
        again = start_daemon(config, timeout=20)
        assert again.ready_seconds is not None and again.stop() == 0
        assert verify_journal(config.parent / "journal.sqlite").ok
