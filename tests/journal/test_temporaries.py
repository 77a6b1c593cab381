"""Every temporary a durable write path can leave is swept at start, from one registry
(controller/record/durable.py, TEMPORARY_PATTERNS), and wiped: a crash between a temporary's
fsync and its rename leaves it, and some hold key material (issue 33, step 2)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tablectl.controller.floor.schema import append_passfile
from tablectl.controller.record import durable
from tablectl.controller.record.durable import (
    TEMPORARY_PATTERNS,
    is_temporary,
    sweep_temporaries,
    temporary_path,
)
from tablectl.controller.record.journal import recover_at_start
from tests.demo.demo_helpers import demo_command, run_demo


def test_the_demos_verification_key_temporary_is_wiped_at_the_next_start(tmp_path: Path):
    """Killed with the verification key (the seed: whoever reads it forges every seal) in its
    temporary, fsynced, not renamed: the next start overwrites and removes it (before, the
    start swept only the head's, the sealing key's and a new journal's temporaries, and this
    one stayed for ever)."""
    state = tmp_path / "demo"
    state.mkdir()
    crashed = subprocess.run(
        demo_command(state, "--rounds", "1"),
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "TABLECTL_FAULT_AT": "verification_key.before_rename"},
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (left,) = state.glob(".verification-key.*.tmp")
    seed = left.read_bytes()
    assert len(seed) > 64
    again = run_demo(state, "--rounds", "1")
    assert again.returncode == 0, again.stderr
    assert not left.exists()
    assert f"removed the stale temporary {left}" in again.stderr
    assert (state / "verification-key").read_bytes() == seed  # written again from the key


def test_every_writer_takes_its_temporary_name_from_the_registry(tmp_path: Path):
    """A name outside the registry cannot be made: every purpose's name matches its pattern,
    and the product's known temporaries are recognised; ordinary files are not."""
    target = tmp_path / "journal.sqlite"
    for purpose, pattern in TEMPORARY_PATTERNS.items():
        assert pattern.match(temporary_path(target, purpose).name), purpose
    for name in (
        ".journal.sqlite.head.12.tmp",
        ".sealing-key.7.tmp",
        ".verification-key.99.tmp",
        ".passfile.3.tmp",
        ".floor-2026-11-20.csv.41.tmp",
        ".journal.sqlite.new",
        ".journal.sqlite.new-journal",
        ".journal-2026-11-20-000000000001.sqlite.copy",
    ):
        assert is_temporary(name), name
    for name in ("journal.sqlite", "journal.sqlite.head", "sealing-key", "verification-key"):
        assert not is_temporary(name), name
    with pytest.raises(KeyError):
        temporary_path(target, "scratch")


def test_the_sweep_wipes_before_unlinking_and_leaves_a_running_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Each stale temporary is overwritten with zeroes (fsynced) before it is unlinked; one
    whose writer is still running (its PID alive) is left to it."""
    stale = tmp_path / ".sealing-key.999999999.tmp"
    stale.write_bytes(b"secret" * 1000)
    running = tmp_path / f".passfile.{os.getppid()}.tmp"
    running.write_bytes(b"being written")
    kept = tmp_path / "sealing-key"
    kept.write_bytes(b"the key")
    left_on_disk: list[bytes] = []
    real = durable.wipe_file

    def wipe_and_look(path: Path) -> None:
        descriptor = os.open(path, os.O_RDONLY)  # still reads the blocks once unlinked
        try:
            real(path)
            left_on_disk.append(os.pread(descriptor, 1 << 20, 0))
        finally:
            os.close(descriptor)

    monkeypatch.setattr(durable, "wipe_file", wipe_and_look)
    assert sweep_temporaries(tmp_path) == [stale]
    assert left_on_disk == [bytes(6000)] and not stale.exists()
    assert running.exists() and kept.read_bytes() == b"the key"


def test_the_start_sweeps_the_archive_and_the_passfiles_directories(tmp_path: Path):
    """The floor's passfile and a retired segment's archive copy are swept too, in their own
    directories, when the daemon's start is told of them."""
    journal_dir, archive, etc = tmp_path / "state", tmp_path / "archive", tmp_path / "etc"
    for directory in (journal_dir, archive, etc):
        directory.mkdir()
    copy = archive / ".journal-2026-11-20-000000000001.sqlite.copy"
    copy.write_bytes(b"rows" * 100)
    password = etc / ".floor.pass.999999999.tmp"
    password.write_text("*:*:floor:t01:hunter2\n")
    done = recover_at_start(journal_dir / "journal.sqlite", also_sweep=[archive, etc])
    assert not copy.exists() and not password.exists()
    assert sum("stale temporary" in line for line in done) == 2
    append_passfile(etc / "floor.pass", "floor", "t01", "s3cret")  # the writer still works
    assert not [p for p in etc.iterdir() if is_temporary(p.name)]
    assert (etc / "floor.pass").read_text() == "*:*:floor:t01:s3cret\n"


def test_a_temporary_linked_under_another_name_is_unlinked_not_zeroed(tmp_path: Path):
    """Retention's child links its verified copy under the segment's name before it removes
    the temporary name: killed between the two, the start's sweep finds the temporary with a
    second name. It is unlinked only; zeroing it zeroed the archive's copy (the same inode),
    which retention then refused for good as "other content than the segment"."""
    archive = tmp_path / "archive"
    archive.mkdir()
    copy = archive / "journal-2026-11-20-000000000001.sqlite"
    copy.write_bytes(b"SQLite format 3\0" + b"rows" * 1000)
    temporary = temporary_path(copy, "copy")
    os.link(copy, temporary)
    assert sweep_temporaries(archive) == [temporary]
    assert not temporary.exists()
    assert copy.read_bytes() == b"SQLite format 3\0" + b"rows" * 1000
    assert copy.stat().st_nlink == 1
