"""Every restart path, for every configuration a table can have (issue 33, step 1): sealed and
unsealed, as root and as the service user (an unprivileged uid, the unit's UMask=0077), with
an archive; the real daemon killed (SIGKILL, its own fault points) at each step of the
gaming-day roll-over, and the files a cut inside the roll-over's close leaves.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import read_head_file, read_rows, verify_journal
from tests.journal.crashing import faketime_env, log_of, setup_keys
from tests.journal.history import (
    SAME_DISK_SAID,
    ServiceUser,
    Started,
    build_history,
    start_daemon,
    write_config,
)
from tests.journal.service_user import hand_over, service_user, shared_dir  # noqa: F401

ROLL_OVER_STEPS = [
    "rollover.after_seal",
    "rollover.after_close",
    "rollover.after_rename",
    "rollover.after_create",
    "rollover.after_rows",
]
#: In `make test`: the unsealed table's undo (it never restarted before), as root and as the
#: service user; every other combination in `make test-long`.
QUICK = {("rollover.after_rename", "off", "root"), ("rollover.after_create", "off", "user")}


def _rows(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        db.close()


def _wait_for(predicate, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _table(
    base: Path,
    sealing: str,
    user: ServiceUser | None,
    *,
    extra: str = "",
    rounds: int = 12,
    hand: bool = True,
) -> tuple[Path, object]:
    """A table with `rounds` rounds of history, sealed or not, for `user` (handed over unless
    `hand` is False: the test does it once it has made its state)."""
    config = write_config(
        base / "t",
        checkpoint_rounds=10,
        journal_extra=extra,
        operator_group=user.group if user is not None else None,
    )
    # the key before the history: a first seal vouches for no row stamped before its epoch
    key = setup_keys(config) if sealing == "on" else None
    build_history(config, rounds)
    if user is not None and hand:
        hand_over(config.parent, user)
    return config, key


def _start(config: Path, user: ServiceUser | None, env: dict[str, str], *extra: str) -> Started:
    return start_daemon(config, timeout=30, env=env, user=user, extra=extra)


def log_of_text(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _errors(started: Started) -> str:
    text = started.stderr()
    said = [str(e.get("error", "")) for e in log_of_text(text)]
    return " ".join(said) or text[-2000:]


MATRIX = [
    (point, sealing, who)
    for point in ROLL_OVER_STEPS
    for sealing in ("off", "on")
    for who in ("root", "user")
]


@pytest.mark.parametrize(
    ("point", "sealing", "who"),
    [c if c in QUICK else pytest.param(*c, marks=pytest.mark.long) for c in MATRIX],
)
def test_kill_9_in_the_roll_over_restarts_for_every_configuration(
    shared_dir: Path,  # noqa: F811
    point: str,
    sealing: str,
    who: str,
):
    """Tomorrow's gaming day under libfaketime: the upkeep rolls over at once and dies at
    `point`. The restart, sealed or not, as root or as the service user, is READY with no
    "rows were cut", completes the roll-over, and the directory verifies (with the seals)."""
    user = service_user() if who == "user" else None
    config, key = _table(shared_dir, sealing, user)
    directory = config.parent
    clock = faketime_env(shared_dir / "clock", "+1d")
    os.chmod(shared_dir / "clock", 0o644)
    crashed = _start(config, user, {**clock, "TABLECTL_FAULT_AT": point})
    assert crashed.process.wait(timeout=30) == -signal.SIGKILL, (
        f"never reached {point}: {crashed.stop()} {_errors(crashed)}"
    )
    crashed.stop()

    again = _start(config, user, clock)
    assert again.ready_seconds is not None, (again.stop(), _errors(again))
    live = directory / "journal.sqlite"

    def rolled() -> bool:
        closed = list(directory.glob("journal-*.sqlite"))
        return len(closed) == 1 and live.exists() and _rows(live) >= 3

    assert _wait_for(rolled), "the roll-over was not completed after the restart"
    assert again.stop() == 0
    events = [entry["event"] for entry in log_of(again)]
    assert "journal_damaged" not in events and "cannot_start" not in events, events
    first = next(read_rows(live))
    assert first.kind == "segment"
    whole = verify_journal(directory, verification_key=key)
    assert whole.ok and whole.first_seq == 1, whole.message
    for entry in directory.iterdir():
        if entry.is_file() and not entry.name.endswith((".toml", ".sock")):
            assert entry.stat().st_mode & 0o077 == 0, f"{entry.name} readable by others"
            if user is not None:
                assert entry.stat().st_uid == user.uid, f"{entry.name} not the service user's"
    assert not [p.name for p in directory.iterdir() if p.name.startswith(".")]


def _hot_rollback_journal(live: Path) -> None:
    """What a cut inside the roll-over's close can leave: the live file out of WAL mode, mode
    0400, beside a hot rollback journal (a transaction cut mid-write; SQLite must roll it
    back before anything reads the file). Made for real: a child writes in rollback-journal
    mode with a tiny cache (pages spill to the file) and is killed mid-transaction."""
    script = f"""
import os, signal, sqlite3
db = sqlite3.connect({str(live)!r}, isolation_level=None)
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.execute("PRAGMA journal_mode=DELETE")
db.execute("PRAGMA cache_size=2")
db.execute("BEGIN IMMEDIATE")
for n in range(2000):
    db.execute("INSERT INTO journal VALUES (?, 'note', NULL, 'x', ?, 'x', 'x')",
               (10_000_000 + n, "x" * 200))
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert Path(f"{live}-journal").stat().st_size > 0, "no hot journal was left"
    os.chmod(live, 0o400)


@pytest.mark.parametrize("who", ["user", pytest.param("root", marks=pytest.mark.long)])
def test_a_live_file_left_0400_beside_a_hot_journal_starts_as_the_service_user(
    shared_dir: Path,  # noqa: F811
    who: str,
):
    """Start-up recovery restores the modes before it opens a file: as the service user, a
    0400 live file would be opened read-only, its hot journal never rolled back, and the
    start refused it as "not a SQLite file" (exit 2) while root started on it."""
    user = service_user() if who == "user" else None
    config, _ = _table(shared_dir, "off", user, rounds=5, hand=False)
    live = config.parent / "journal.sqlite"
    before = [r.hash for r in read_rows(live)]
    _hot_rollback_journal(live)
    if user is not None:
        hand_over(config.parent, user)
    started = _start(config, user, {})
    assert started.ready_seconds is not None, (started.stop(), _errors(started))
    assert started.stop() == 0
    rows = list(read_rows(live))
    assert [r.hash for r in rows[: len(before)]] == before  # the rolled-back rows never came
    assert all(r.seq < 10_000_000 for r in rows)
    assert verify_journal(live).ok
    recovered = [e["what"] for e in log_of(started) if e["event"] == "journal_recovered_at_start"]
    assert any("mode 0600 again (it was 0400)" in what for what in recovered), recovered


def test_a_file_the_service_user_cannot_repair_is_refused_naming_it_and_the_command(
    shared_dir: Path,  # noqa: F811
):
    """The live file owned by root (a restore from a backup made as root): the service user
    can neither open nor repair it. The start refuses (exit 2) naming the file, its owner
    and mode, and the command that mends it; the file is left as it was."""
    user = service_user()
    config, _ = _table(shared_dir, "off", user, rounds=3)
    live = config.parent / "journal.sqlite"
    os.chown(live, 0, 0)
    os.chmod(live, 0o600)
    content = live.read_bytes()
    started = _start(config, user, {})
    assert started.ready_seconds is None
    assert started.stop() == 2
    said = _errors(started)
    assert str(live) in said and "owner uid 0, mode 0600" in said, said
    assert f"chown {user.name}: {live}" in said, said
    assert live.read_bytes() == content
    os.chown(live, user.uid, user.gid)  # what the message says to do
    mended = _start(config, user, {})
    assert mended.ready_seconds is not None, (mended.stop(), _errors(mended))
    assert mended.stop() == 0


def _unsealed_roll_over_cut(base: Path) -> tuple[Path, int]:
    """The unsealed table killed right after its roll-over's rename: (config, the closed
    segment's last seq)."""
    config, _ = _table(base, "off", None)
    clock = faketime_env(base / "clock", "+1d")
    crashed = _start(config, None, {**clock, "TABLECTL_FAULT_AT": "rollover.after_rename"})
    assert crashed.process.wait(timeout=30) == -signal.SIGKILL
    crashed.stop()
    (closed,) = config.parent.glob("journal-*.sqlite")
    return config, list(read_rows(closed))[-1].seq


@pytest.mark.long
def test_accept_damaged_journal_never_reuses_a_closed_segments_sequence_numbers(tmp_path):
    """The unsealed roll-over cut, and a head file the closed segment does not hold (so the
    undo cannot apply; before, an older head from the last checkpoint was enough): the start
    refuses "rows were cut"; `--accept-damaged-journal` deals on, numbering its rows after
    the closed segment's last one (before: after the head file's, reusing the closed
    segment's last rows)."""
    config, closed_last = _unsealed_roll_over_cut(tmp_path)
    live = config.parent / "journal.sqlite"
    recorded = read_head_file(live)
    assert recorded is not None
    head = config.parent / "journal.sqlite.head"
    head.write_text(f'{{"head":"{"ab" * 32}","seq":{closed_last - 1}}}\n')
    refused = _start(config, None, {})
    assert refused.stop() == 2 and "were cut" in _errors(refused)
    accepted = _start(config, None, {}, "--accept-damaged-journal")
    assert accepted.ready_seconds is not None, (accepted.stop(), _errors(accepted))
    assert accepted.stop() == 0
    seqs = [r.seq for r in read_rows(live)]
    assert seqs and min(seqs) > closed_last, (closed_last, seqs[:3])


def test_the_unsealed_roll_over_cut_restarts_and_goes_on_after_the_closed_rows(tmp_path):
    """The same cut restarts without any flag: the closed file is the live one again, and the
    rows go on after its last."""
    config, closed_last = _unsealed_roll_over_cut(tmp_path)
    again = _start(config, None, {})
    assert again.ready_seconds is not None, (again.stop(), _errors(again))
    assert again.stop() == 0
    live = config.parent / "journal.sqlite"
    seqs = [r.seq for r in read_rows(live)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > closed_last
    assert verify_journal(config.parent).ok


@pytest.mark.long
@pytest.mark.parametrize("point", ["rollover.after_rename", "rollover.after_rows"])
def test_kill_9_in_the_roll_over_with_an_archive_as_the_service_user(
    shared_dir: Path,  # noqa: F811
    point: str,
):
    """The same with retention and an archive directory (retain_days = 1), unsealed, as the
    service user: the restart completes the roll-over, nothing is retired before its time,
    no temporary is left in the archive."""
    user = service_user()
    archive = shared_dir / "archive"
    archive.mkdir()
    os.chown(archive, user.uid, user.gid)
    archive.chmod(0o700)
    extra = f'retain_days = 1\narchive_dir = "{archive}"\n{SAME_DISK_SAID}'
    config, _ = _table(shared_dir, "off", user, extra=extra)
    clock = faketime_env(shared_dir / "clock", "+1d")
    os.chmod(shared_dir / "clock", 0o644)
    crashed = _start(config, user, {**clock, "TABLECTL_FAULT_AT": point})
    assert crashed.process.wait(timeout=30) == -signal.SIGKILL, _errors(crashed)
    crashed.stop()
    again = _start(config, user, clock)
    assert again.ready_seconds is not None, (again.stop(), _errors(again))
    directory = config.parent
    live = directory / "journal.sqlite"
    assert _wait_for(
        lambda: len(list(directory.glob("journal-*.sqlite"))) == 1 and _rows(live) >= 3
    )
    assert again.stop() == 0
    assert verify_journal(directory).ok
    assert not [p.name for p in archive.iterdir() if p.name.startswith(".")]
