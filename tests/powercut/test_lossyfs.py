"""lossyfs keeps what was fsynced and loses what was not, at a real power cut of a real mount.

Each test writes through the FUSE mount with ordinary system calls, cuts the power (the
in-memory state dropped, every later operation EIO), mounts again on the same backing
directory, and looks at what survived. The first ones fail on a filesystem that does not
drop unsynced writes (a plain passthrough): that is the proof the power-cut tests of the
daemon (test_power_cuts.py) really lose data.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.powercut.lossyfs import LossyMount


def write(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_file(lossy: LossyMount, name: str, data: bytes) -> Path:
    path = lossy.mountpoint / name
    write(path, data, sync=True)
    sync_dir(lossy.mountpoint)
    return path


def cut_and_remount(lossy: LossyMount) -> dict[str, object]:
    cut = lossy.cut()
    lossy.remount()
    return cut


def test_a_write_without_fsync_is_lost_at_a_cut_and_one_with_fsync_kept(lossy: LossyMount):
    kept = durable_file(lossy, "kept", b"first\n")
    lost = durable_file(lossy, "lost", b"first\n")
    with open(kept, "ab") as f:
        f.write(b"second\n")
        f.flush()
        os.fsync(f.fileno())
    with open(lost, "ab") as f:
        f.write(b"second\n")  # flushed to the filesystem, never fsynced
    assert lost.read_bytes() == b"first\nsecond\n"  # visible before the cut, as in a page cache
    dropped = cut_and_remount(lossy)
    assert dropped["dropped"]["files"] == ["/lost"]  # type: ignore[index]
    assert kept.read_bytes() == b"first\nsecond\n"
    assert lost.read_bytes() == b"first\n"


def test_an_overwrite_inside_a_durable_file_is_lost_block_by_block(lossy: LossyMount):
    path = durable_file(lossy, "blocks", bytes(range(256)) * 64)  # 16 KiB, 4 blocks
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"A" * 10, 5000)  # block 1
    os.fsync(fd)
    os.pwrite(fd, b"B" * 10, 9000)  # block 2, never fsynced
    os.ftruncate(fd, 20000)  # a size never fsynced
    os.close(fd)
    cut_and_remount(lossy)
    after = path.read_bytes()
    assert len(after) == 16384
    assert after[5000:5010] == b"A" * 10
    assert after[9000:9010] == (bytes(range(256)) * 64)[9000:9010]


def test_a_new_file_fsynced_without_its_directory_is_gone(lossy: LossyMount):
    write(lossy.mountpoint / "orphan", b"data", sync=True)
    write(lossy.mountpoint / "linked", b"data", sync=True)
    assert lossy.pending()["directories"] == ["/"]
    sync_dir(lossy.mountpoint)
    write(lossy.mountpoint / "late", b"data", sync=True)
    cut_and_remount(lossy)
    assert sorted(os.listdir(lossy.mountpoint)) == ["linked", "orphan"]
    assert (lossy.mountpoint / "linked").read_bytes() == b"data"
    # fsck's leftovers (a file fsynced before any durable name) are gone from the disk too
    assert os.listdir(lossy.backing / ".lossyfs") == []


def test_an_entry_made_durable_before_its_bytes_is_an_empty_file(lossy: LossyMount):
    write(lossy.mountpoint / "empty", b"never fsynced", sync=False)
    sync_dir(lossy.mountpoint)
    cut_and_remount(lossy)
    assert (lossy.mountpoint / "empty").read_bytes() == b""


def test_a_rename_without_a_directory_fsync_is_lost(lossy: LossyMount):
    """The write-temp-then-rename of a private file: without the directory's fsync the old
    file comes back at the cut; with it, the new one stays."""
    durable_file(lossy, "head", b"old")
    write(lossy.mountpoint / "head.tmp", b"new", sync=True)
    os.replace(lossy.mountpoint / "head.tmp", lossy.mountpoint / "head")
    assert (lossy.mountpoint / "head").read_bytes() == b"new"
    cut_and_remount(lossy)
    assert (lossy.mountpoint / "head").read_bytes() == b"old"
    assert not (lossy.mountpoint / "head.tmp").exists()

    write(lossy.mountpoint / "head.tmp", b"new", sync=True)
    os.replace(lossy.mountpoint / "head.tmp", lossy.mountpoint / "head")
    sync_dir(lossy.mountpoint)
    cut_and_remount(lossy)
    assert (lossy.mountpoint / "head").read_bytes() == b"new"
    assert os.listdir(lossy.mountpoint) == ["head"]


def test_a_rename_between_directories_needs_both_fsynced(lossy: LossyMount):
    (lossy.mountpoint / "a").mkdir()
    (lossy.mountpoint / "b").mkdir()
    sync_dir(lossy.mountpoint)
    durable_file(lossy, "a/file", b"x")
    sync_dir(lossy.mountpoint / "a")
    os.rename(lossy.mountpoint / "a/file", lossy.mountpoint / "b/file")
    sync_dir(lossy.mountpoint / "b")  # the new name durable, the old one not yet removed
    cut_and_remount(lossy)
    assert (lossy.mountpoint / "a/file").read_bytes() == b"x"
    assert (lossy.mountpoint / "b/file").read_bytes() == b"x"


def test_an_unlink_and_a_mkdir_without_a_directory_fsync_are_lost(lossy: LossyMount):
    durable_file(lossy, "gone", b"still here")
    os.unlink(lossy.mountpoint / "gone")
    (lossy.mountpoint / "dir").mkdir()
    write(lossy.mountpoint / "dir" / "inner", b"x", sync=True)
    sync_dir(lossy.mountpoint / "dir")  # its entries durable, but the directory itself is not
    cut_and_remount(lossy)
    assert os.listdir(lossy.mountpoint) == ["gone"]
    assert (lossy.mountpoint / "gone").read_bytes() == b"still here"


def test_a_directory_fsynced_after_its_entries_keeps_them(lossy: LossyMount):
    (lossy.mountpoint / "dir").mkdir(mode=0o700)
    write(lossy.mountpoint / "dir" / "inner", b"x", sync=True)
    sync_dir(lossy.mountpoint / "dir")
    sync_dir(lossy.mountpoint)
    os.symlink("/dev/null", lossy.mountpoint / "dir" / "link")
    sync_dir(lossy.mountpoint / "dir")
    cut_and_remount(lossy)
    assert (lossy.mountpoint / "dir" / "inner").read_bytes() == b"x"
    assert os.readlink(lossy.mountpoint / "dir" / "link") == "/dev/null"
    assert oct((lossy.mountpoint / "dir").stat().st_mode & 0o777) == "0o700"


def test_after_a_cut_every_operation_fails_and_the_named_process_is_killed(lossy: LossyMount):
    path = durable_file(lossy, "f", b"x")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    held = os.open(path, os.O_RDWR)
    try:
        answer = lossy.cut(kill=sleeper.pid)
        assert sleeper.wait(5) == -9
        assert answer["killed"] == sleeper.pid
        with pytest.raises(OSError) as failed:
            os.write(held, b"after the cut")
        assert failed.value.errno == errno.EIO
        with pytest.raises(OSError) as failed:
            os.listdir(lossy.mountpoint)
        assert failed.value.errno == errno.EIO
    finally:
        with pytest.raises(OSError):  # close's flush fails too
            os.close(held)
    lossy.remount()
    assert path.read_bytes() == b"x"


def test_an_armed_cut_fires_at_the_nth_matching_operation(lossy: LossyMount):
    durable_file(lossy, "log", b"")
    lossy.arm(["fsync"], r"/log$", nth=3, when="before")
    fd = os.open(lossy.mountpoint / "log", os.O_WRONLY | os.O_APPEND)
    synced = 0
    try:
        for line in range(5):
            os.write(fd, f"{line}\n".encode())
            os.fsync(fd)
            synced += 1
    except OSError as error:
        assert error.errno == errno.EIO
    finally:
        with contextlib.suppress(OSError):  # after the cut, close's flush fails too
            os.close(fd)
    assert synced == 2
    (cut,) = lossy.cuts()
    assert cut["reason"] == "before fsync /log (#3)"
    lossy.remount()
    assert (lossy.mountpoint / "log").read_bytes() == b"0\n1\n"  # the third line never landed


def test_sqlite_in_wal_mode_keeps_its_commits_and_loses_what_it_did_not_sync(lossy: LossyMount):
    """SQLite WAL on the mount (its -shm mapped shared): commits made with synchronous=FULL
    survive a cut; those made with synchronous=OFF (never fsynced) are lost."""
    path = lossy.mountpoint / "j.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    assert db.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (n INTEGER)")
    for n in range(100):
        db.execute("INSERT INTO t VALUES (?)", (n,))
    db.execute("PRAGMA synchronous=OFF")
    for n in range(100, 150):
        db.execute("INSERT INTO t VALUES (?)", (n,))
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 150
    other = sqlite3.connect(path)  # a second connection sees them through the shared -shm
    assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 150
    dropped = lossy.cut()
    assert "/j.sqlite-wal" in dropped["dropped"]["files"]  # type: ignore[index]
    db.close()
    other.close()
    lossy.remount()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*), max(n) FROM t").fetchone() == (100, 99)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def test_a_chmod_and_chown_are_durable_only_after_the_files_fsync(lossy: LossyMount):
    """A file's mode and owner change in memory first, like its bytes: lost at a cut unless
    the file was fsynced after them (the roll-over's 0400, a file handed to the service user).
    Before, an owner never reached the disk at all, fsynced or not."""
    synced = durable_file(lossy, "synced", b"x")
    unsynced = durable_file(lossy, "unsynced", b"x")
    for path in (synced, unsynced):
        os.chmod(path, 0o400)
        os.chown(path, 65534, 65534)
    fd = os.open(synced, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    assert (unsynced.stat().st_mode & 0o777, unsynced.stat().st_uid) == (0o400, 65534)
    cut_and_remount(lossy)
    assert (synced.stat().st_mode & 0o777, synced.stat().st_uid, synced.stat().st_gid) == (
        0o400,
        65534,
        65534,
    )
    assert (unsynced.stat().st_mode & 0o777, unsynced.stat().st_uid) == (0o644, 0)
