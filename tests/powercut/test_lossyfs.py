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
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.journal.service_user import shared_dir  # noqa: F401 (a fixture)
from tests.powercut.conftest import need_fuse
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


def test_a_directory_fsync_after_a_rename_does_not_make_the_files_new_mode_durable(
    lossy: LossyMount,
):
    """The roll-over's order: chmod 0400, rename, fsync the directory. Without the file's own
    fsync the rename survives the cut and the mode does not (POSIX makes the entry durable,
    not the inode's change); a new file's entry carries the mode it was created with. Before,
    the directory's fsync wrote the file's current mode onto its durable inode."""
    path = durable_file(lossy, "live", b"x")
    os.chmod(path, 0o400)
    os.chown(path, 65534, 65534)
    os.rename(path, lossy.mountpoint / "closed")
    fd = os.open(lossy.mountpoint / "new", os.O_WRONLY | os.O_CREAT, 0o640)
    os.close(fd)
    os.chmod(lossy.mountpoint / "new", 0o444)
    sync_dir(lossy.mountpoint)
    cut_and_remount(lossy)
    closed = (lossy.mountpoint / "closed").stat()
    assert not (lossy.mountpoint / "live").exists()
    assert (closed.st_mode & 0o777, closed.st_uid) == (0o644, 0)
    assert (lossy.mountpoint / "new").stat().st_mode & 0o777 == 0o640


def test_other_users_reach_an_allow_other_mount_as_its_modes_say(shared_dir: Path):  # noqa: F811
    """`--allow-other` (the daemon as its service user): another user uses the mount, the
    kernel checking each access against the modes and owners lossyfs reports; without it,
    the mount is root's alone. A directory and a socket that user makes keep their owner
    and mode on the disk once their directory is fsynced (before, they came back root's:
    the restarted daemon could not replace its device links)."""
    need_fuse()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")

    NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")

    def as_nobody(mount: LossyMount, name: str, script: str = "") -> int:
        script = script or f"open({str(mount.mountpoint / name)!r}).read()"
        done = subprocess.run(
            [*NOBODY, sys.executable, "-I", "-c", script],
            capture_output=True,
            check=False,
        )
        return done.returncode

    for allow in (True, False):
        mount = LossyMount(
            shared_dir / f"disk{allow}", shared_dir / f"mnt{allow}", allow_other=allow
        ).mount()
        try:
            mount.backing.chmod(0o755)
            public = durable_file(mount, "public", b"x")
            os.chmod(public, 0o644)
            private = durable_file(mount, "private", b"x")
            os.chmod(private, 0o600)
            theirs = durable_file(mount, "theirs", b"x")
            os.chmod(theirs, 0o600)
            os.chown(theirs, 65534, 65534)
            if allow:
                assert (as_nobody(mount, "public"), as_nobody(mount, "theirs")) == (0, 0)
                assert as_nobody(mount, "private") != 0
                shared = mount.mountpoint / "shared"
                shared.mkdir(mode=0o777)
                shared.chmod(0o777)
                sync_dir(shared)
                sync_dir(mount.mountpoint)
                made = f"""
import os, socket
os.mkdir({str(shared / "sub")!r}, 0o750)
socket.socket(socket.AF_UNIX).bind({str(shared / "sock")!r})
fd = os.open({str(shared)!r}, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
"""
                assert as_nobody(mount, "", made) == 0
                mount.cut()
                mount.remount()
                for name, mode in (("sub", 0o750), ("sock", None)):
                    found = (shared / name).lstat()
                    assert (found.st_uid, found.st_gid) == (65534, 65534), name
                    assert mode is None or found.st_mode & 0o777 == mode, name
            else:
                assert as_nobody(mount, "public") != 0
        finally:
            mount.unmount()


# -- partial persistence (lossyfs --partial SEED) ----------
#
# A cut keeps, of what was never fsynced, a random prefix of each file's operations (the first
# write past it torn at 4 KiB blocks) and of each directory's entry changes, drawn from the
# mount's seed; the cut's answer says what was kept ("k/n": the first k of n). Each test below
# cuts the same history on mounts of fixed seeds, one after the other, until it has seen every
# outcome it names (the draws are a function of the seed and the operations: the same seeds
# give the same outcomes on every run), and holds every outcome to be one a disk could give.

PARTIAL_SEEDS = range(1, 25)


def _partial_mount(tmp_path: Path, seed: int) -> LossyMount:
    mount = LossyMount(tmp_path / f"disk{seed}", tmp_path / f"mnt{seed}", partial=seed)
    return mount.mount()


def _kept(cut: dict[str, object], kind: str, path: str) -> tuple[int, int, list[int]]:
    """The cut's draw for one file or directory: (kept, of, torn blocks)."""
    text = cut["kept"][kind][path]  # type: ignore[index]
    counts, _, torn = str(text).partition(" torn ")
    kept, of = (int(n) for n in counts.split("/"))
    return kept, of, [int(b) for b in torn.strip("[]").split(",") if b.strip()]


def test_partial_a_file_keeps_a_prefix_of_its_unsynced_writes_and_its_fsynced_ones(
    tmp_path: Path,
):
    """Five unsynced appends and a chmod between them: after the cut the file is its durable
    bytes plus the first k of them, in order (never a later one without an earlier one), its
    mode the chmod's only when the chmod is in the prefix; a file fsynced after its writes
    keeps them all. None, all, a prefix before the chmod and one after are met."""
    need_fuse()
    lines = [f"line {n}\n".encode() for n in range(1, 6)]
    seen: set[int] = set()
    for seed in PARTIAL_SEEDS:
        lossy = _partial_mount(tmp_path, seed)
        try:
            log = durable_file(lossy, "log", b"durable\n")
            synced = durable_file(lossy, "synced", b"durable\n")
            fd = os.open(log, os.O_WRONLY | os.O_APPEND)
            try:
                for n, line in enumerate(lines):
                    os.write(fd, line)
                    if n == 1:
                        os.chmod(log, 0o600)  # the third operation of six
            finally:
                os.close(fd)
            with open(synced, "ab") as f:
                f.write(b"".join(lines))
                f.flush()
                os.fsync(f.fileno())
            cut = cut_and_remount(lossy)
            kept, of, torn = _kept(cut, "files", "/log")
            assert (of, torn) == (6, [])  # five writes and a chmod; one block each
            writes = kept - (1 if kept >= 3 else 0)
            assert log.read_bytes() == b"durable\n" + b"".join(lines[:writes]), cut
            assert log.stat().st_mode & 0o777 == (0o600 if kept >= 3 else 0o644), cut
            assert synced.read_bytes() == b"durable\n" + b"".join(lines)
            assert "/synced" not in cut["kept"]["files"]  # type: ignore[index]
            seen.add(kept)
        finally:
            lossy.unmount()
        if {0, 6} <= seen and seen & {1, 2} and seen & {3, 4, 5}:
            break
    # none, all, a prefix before the chmod and one with it
    assert {0, 6} <= seen and seen & {1, 2} and seen & {3, 4, 5}, sorted(seen)


def test_partial_a_write_past_the_prefix_is_torn_at_block_boundaries(tmp_path: Path):
    """One unsynced 16 KiB write over a durable 16 KiB file: after the cut each 4 KiB block is
    wholly old or wholly new, as drawn; a torn outcome (some blocks new, some old) is met."""
    need_fuse()
    old, new = b"o" * 16384, b"n" * 16384
    outcomes: set[str] = set()
    for seed in PARTIAL_SEEDS:
        lossy = _partial_mount(tmp_path, seed)
        try:
            path = durable_file(lossy, "pages", old)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, new, 0)
            finally:
                os.close(fd)
            cut = cut_and_remount(lossy)
            kept, of, torn = _kept(cut, "files", "/pages")
            assert of == 1
            after = path.read_bytes()
            assert len(after) == 16384
            blocks = [after[b * 4096 : (b + 1) * 4096] for b in range(4)]
            expect = [new[:4096] if kept == 1 or b in torn else old[:4096] for b in range(4)]
            assert blocks == expect, cut
            outcomes.add("all" if kept == 1 else "torn" if torn else "none")
        finally:
            lossy.unmount()
        if outcomes == {"all", "torn", "none"}:
            break
    assert outcomes == {"all", "torn", "none"}, outcomes


def test_partial_a_directory_keeps_a_prefix_of_its_unsynced_entries(tmp_path: Path):
    """Four files created in order (their bytes fsynced, the directory never): after the cut
    the directory holds the first k of them, never a later one without an earlier one; a
    rename over a durable file without the directory's fsync is undone or kept whole (never
    neither name: the rename is one change)."""
    need_fuse()
    names = ["a", "b", "c", "d"]
    seen: set[int] = set()
    renames: set[str] = set()
    for seed in PARTIAL_SEEDS:
        lossy = _partial_mount(tmp_path, seed)
        try:
            (lossy.mountpoint / "dir").mkdir()
            sync_dir(lossy.mountpoint)
            durable_file(lossy, "dir/head", b"old")
            sync_dir(lossy.mountpoint / "dir")
            for name in names:
                write(lossy.mountpoint / "dir" / name, name.encode(), sync=True)
            write(lossy.mountpoint / "dir" / "head.tmp", b"new", sync=True)
            os.replace(lossy.mountpoint / "dir" / "head.tmp", lossy.mountpoint / "dir" / "head")
            cut = cut_and_remount(lossy)
            kept, of, _ = _kept(cut, "directories", "/dir")
            assert of == 6  # a b c d, head.tmp, the rename
            listed = sorted(os.listdir(lossy.mountpoint / "dir"))
            expect = {"head", *names[:kept]} | ({"head.tmp"} if kept == 5 else set())
            assert listed == sorted(expect), cut
            for name in names[:kept]:
                assert (lossy.mountpoint / "dir" / name).read_bytes() == name.encode()
            head = (lossy.mountpoint / "dir" / "head").read_bytes()
            assert head == (b"new" if kept == 6 else b"old"), cut
            seen.add(kept)
            renames.add("renamed" if kept == 6 else "temporary" if kept == 5 else "undone")
        finally:
            lossy.unmount()
        if len(renames) == 3 and seen - {0, 5, 6}:
            break
    assert renames == {"renamed", "temporary", "undone"} and seen - {0, 5, 6}, seen
