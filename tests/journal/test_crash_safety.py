"""Every rename survives a crash: the real daemon killed (SIGKILL, by its own fault-injection
point, controller/common/faults.py) at each step of the gaming-day roll-over, between a seal and its
new key, inside the key's and the head file's replacement and the journal's creation; and
the files a power cut leaves (a journal file without its table, an empty verification key).
Each restart must be clean: no false "rows were cut", no empty journal file, the chain and
the seals verifying.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.record.sealing import VerificationKey
from tests.demo.demo_helpers import run_demo
from tests.journal.crashing import faketime_env, held_key, log_of, run, setup_keys
from tests.journal.history import build_history, start_daemon, write_config

ROLL_OVER_STEPS = [
    "rollover.after_seal",
    "rollover.after_close",
    "rollover.after_rename",
    "rollover.after_create",
    "rollover.after_rows",
]
#: One step stays in `make test`; all five run in `make test-long`.
QUICK = {"rollover.after_rename"}


def _rows(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        db.close()


def _wait_for(predicate, timeout: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    "point",
    [p if p in QUICK else pytest.param(p, marks=pytest.mark.long) for p in ROLL_OVER_STEPS],
)
def test_kill_9_at_each_step_of_the_roll_over_restarts_cleanly(tmp_path: Path, point: str):
    """The daemon's clock is a day ahead (libfaketime): its upkeep rolls the segment over at
    once, and dies at `point`. The restart completes or undoes the roll-over: READY, no
    "rows were cut", one closed segment and a live one that begins with its segment row,
    every journal file holding rows, the whole directory verifying with the seals."""
    config = write_config(tmp_path / "t", checkpoint_rounds=10)
    key = setup_keys(config)  # before the history: a seal vouches for no row older than its key
    build_history(config, 12)
    directory = config.parent
    clock = faketime_env(tmp_path / "clock", "+1d")  # tomorrow's gaming day
    crashed = start_daemon(config, timeout=20, env={**clock, "TABLECTL_FAULT_AT": point})
    assert crashed.process.wait(timeout=20) == -9, f"never reached {point}"
    crashed.stop()

    again = start_daemon(config, timeout=20, env=clock)
    assert again.ready_seconds is not None, again.stop()
    live = directory / "journal.sqlite"

    def rolled() -> bool:
        closed = list(directory.glob("journal-*.sqlite"))
        return len(closed) == 1 and live.exists() and _rows(live) >= 3

    assert _wait_for(rolled), "the roll-over was not completed after the restart"
    assert again.stop() == 0
    events = [entry["event"] for entry in log_of(again)]
    assert "journal_damaged" not in events and "cannot_start" not in events, events
    for segment in directory.glob("*.sqlite"):
        assert _rows(segment) > 0, f"{segment.name} holds no row"
    first = next(read_rows(live))
    assert first.kind == "segment"
    whole = verify_journal(directory, verification_key=key)
    assert whole.ok and whole.first_seq == 1, whole.message
    assert not list(directory.glob(".*.tmp")) and not list(directory.glob(".*.new"))


@pytest.mark.long
def test_a_crash_between_a_seal_and_its_new_key_is_levelled_at_start(tmp_path: Path):
    """Killed right after a seal row's commit, before the evolved key file lands: the key
    file still names the epoch the journal sealed. The restart takes the journal's word,
    evolves the key past it, and the seals that follow name the right predecessor:
    `journal verify --verify-key` passes (it failed for ever before)."""
    config = write_config(tmp_path / "t")
    key = setup_keys(config, interval=1)
    build_history(config, 5)
    time.sleep(1.1)  # epoch 0 is over: the start seals the history at once
    crashed = start_daemon(config, timeout=20, env={"TABLECTL_FAULT_AT": "seal.after_commit"})
    assert crashed.process.wait(timeout=20) == -9
    crashed.stop()
    journal = config.parent / "journal.sqlite"
    sealed = [r for r in read_rows(journal) if r.kind == "seal"]
    assert sealed and held_key(config)["epoch"] == sealed[-1].body["epoch"]  # the crash's state

    again = start_daemon(config, timeout=20)
    assert again.ready_seconds is not None
    time.sleep(2.5)  # seals of the next epochs
    assert again.stop() == 0
    assert any(e["event"] == "sealing_key_levelled" for e in log_of(again))
    seals = [r for r in read_rows(journal) if r.kind == "seal"]
    assert len(seals) >= 3
    result = verify_journal(journal, verification_key=key)
    assert result.ok, result.message


def test_a_kill_between_the_new_key_and_the_old_keys_erasure_is_finished_at_the_next_start(
    tmp_path: Path,
):
    """Killed with the evolved key written and fsynced in the key file's free slot and the
    old key's slot not yet overwritten: the old key is still on disk, and whoever read it
    could forge seals of its epoch. The next start takes the newer slot, overwrites the
    older one and says so; the seals go on verifying."""
    config = write_config(tmp_path / "t")
    key = setup_keys(config, interval=1)
    build_history(config, 5)
    time.sleep(1.1)
    crashed = start_daemon(config, timeout=20, env={"TABLECTL_FAULT_AT": "key.after_new_slot"})
    assert crashed.process.wait(timeout=20) == -9
    crashed.stop()
    key_file = config.parent / "sealing-key"
    assert key.seed.hex().encode() in key_file.read_bytes()  # epoch 0's key, not yet erased
    again = start_daemon(config, timeout=20)
    assert again.ready_seconds is not None and again.stop() == 0
    assert key.seed.hex().encode() not in key_file.read_bytes()
    repaired = [e for e in log_of(again) if e["event"] == "sealing_key_repaired"]
    assert any("wiped the older slot" in e["what"] for e in repaired), repaired
    assert verify_journal(config.parent / "journal.sqlite", verification_key=key).ok


@pytest.mark.parametrize(
    ("point", "pattern"), [("head.before_rename", ".journal.sqlite.head.*.tmp")]
)
@pytest.mark.long
def test_a_temporary_left_by_a_crash_is_wiped_at_the_next_start(
    tmp_path: Path, point: str, pattern: str
):
    """Killed with the new head written to its temporary and not yet renamed: the temporary
    stays on disk; the next start overwrites and removes it, and says so (a key temporary of
    an earlier version's key file, which held an erased epoch's key, likewise)."""
    config = write_config(tmp_path / "t")
    key = setup_keys(config, interval=1)
    build_history(config, 5)
    time.sleep(1.1)
    crashed = start_daemon(config, timeout=20, env={"TABLECTL_FAULT_AT": point})
    assert crashed.process.wait(timeout=20) == -9
    crashed.stop()
    left = list(config.parent.glob(pattern))
    assert len(left) == 1 and left[0].stat().st_size > 0
    again = start_daemon(config, timeout=20)
    assert again.ready_seconds is not None and again.stop() == 0
    assert not list(config.parent.glob(pattern))
    recovered = [e for e in log_of(again) if e["event"] == "journal_recovered_at_start"]
    assert any(left[0].name in e["what"] for e in recovered), recovered
    assert verify_journal(config.parent / "journal.sqlite", verification_key=key).ok


@pytest.mark.long
def test_a_crash_while_the_journal_is_created_leaves_no_journal_without_its_table(tmp_path):
    config = write_config(tmp_path / "t")
    crashed = start_daemon(
        config, timeout=20, env={"TABLECTL_FAULT_AT": "journal.create.before_rename"}
    )
    assert crashed.process.wait(timeout=20) == -9
    crashed.stop()
    assert not (config.parent / "journal.sqlite").exists()
    again = start_daemon(config, timeout=20)
    assert again.ready_seconds is not None and again.stop() == 0
    assert verify_journal(config.parent / "journal.sqlite").ok
    assert not list(config.parent.glob(".journal.sqlite.new*"))


def _tableless(path: Path, how: str) -> None:
    """What a power cut during the journal's first open leaves."""
    if how == "zeroed":
        path.write_bytes(bytes(4096))  # the file's blocks allocated, its pages never written
    else:
        db = sqlite3.connect(path)  # SQLite's header and WAL mode, no table yet
        db.execute("PRAGMA journal_mode=WAL")
        db.close()


@pytest.mark.parametrize(
    "how", ["zeroed", pytest.param("sqlite_without_table", marks=pytest.mark.long)]
)
def test_a_journal_file_without_its_table_is_completed_by_run_and_demo(tmp_path: Path, how):
    config = write_config(tmp_path / "t")
    _tableless(config.parent / "journal.sqlite", how)
    started = start_daemon(config, timeout=20)
    assert started.ready_seconds is not None, started.stop()
    assert started.stop() == 0
    assert verify_journal(config.parent / "journal.sqlite").ok

    state = tmp_path / "demo"
    state.mkdir()
    _tableless(state / "journal.sqlite", how)
    done = run_demo(state, "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "held no row" in done.stderr
    assert verify_journal(state / "journal.sqlite").ok


@pytest.mark.long
def test_a_journal_file_that_may_hold_rows_is_refused_by_run_and_demo_untouched(tmp_path):
    config = write_config(tmp_path / "t")
    garbage = b"not a journal, and not empty either\n" * 100
    (config.parent / "journal.sqlite").write_bytes(garbage)
    started = start_daemon(config, timeout=20)
    assert started.ready_seconds is None
    assert started.stop() == 2
    said = " ".join(e.get("error", "") for e in log_of(started))
    assert "not a SQLite file" in said and "move it away" in said
    assert (config.parent / "journal.sqlite").read_bytes() == garbage
    state = tmp_path / "demo"
    state.mkdir()
    (state / "journal.sqlite").write_bytes(garbage)
    done = run_demo(state, "--rounds", "1")
    assert done.returncode == 2 and "move it away" in done.stderr, done.stderr
    assert (state / "journal.sqlite").read_bytes() == garbage


@pytest.mark.long
def test_the_demos_verification_key_lost_to_a_power_cut_is_written_again(tmp_path: Path):
    """The demo drew its keys, and the power went before the verification key reached the
    disk (an empty file): the next demo writes it again from the key (still at epoch 0), and
    the verify command it prints proves the seals."""
    state = tmp_path / "demo"
    state.mkdir()
    done = run("journal", "setup-keys", "--config", str(_demo_like_config(state)))
    assert done.returncode == 0, done.stderr
    seed = VerificationKey.parse(done.stdout)
    (state / "verification-key").write_text("")
    demo = run_demo(state, "--rounds", "2")
    assert demo.returncode == 0, demo.stderr
    assert VerificationKey.parse((state / "verification-key").read_text()) == seed
    verified = subprocess.run(
        [
            *(sys.executable, "-m", "tablectl.controller", "journal", "verify", str(state)),
            *("--verify-key", str(seed)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr


def _demo_like_config(state: Path) -> Path:
    """A configuration whose sealing key is the demo's (STATE_DIR/sealing-key)."""
    return write_config(state / "cfg", journal_extra=f'sealing_key = "{state / "sealing-key"}"')
