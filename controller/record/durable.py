"""Durable files: every file the product writes whole (the journal's head file, the sealing
key, the verification key, the floor's passfile and retired days' archives) goes through here,
so that a crash or power cut leaves the old file or the new one, never half of either, and a
rename is always followed by a directory fsync.

What it may import: ``common`` (the fault points). The journal and the seals both use it;
neither imports the other for it.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from tablectl.controller.common.faults import fault_point


def write_private_file(path: Path, text: str | bytes, *, fault: str | None = None) -> None:
    """Replace `path` with `text`, mode 0600, durably: a temporary file fsynced, renamed over
    it, and the directory fsynced, so a crash leaves the old file or the new one, whole (the
    journal's head file, the sealing key, the demo's verification key, the floor's passfile
    and its retired days' archives). A failed write (a full disk) removes its temporary and
    raises OSError: nothing half-written stays behind.
    `fault`: the fault-injection point before the rename (controller/common/faults.py)."""
    temporary = temporary_path(path, "write")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(text.encode() if isinstance(text, str) else text)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if fault is not None:
            fault_point(fault)
        os.replace(temporary, path)
    except OSError:
        wipe_file(temporary)
        raise
    fsync_directory(path.parent)


def fsync_directory(directory: str | Path) -> None:
    """fsync a directory: a rename (or a new file) in it survives a power cut only then."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_file(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def chmod_durably(path: Path, mode: int) -> None:
    """`chmod` and fsync the file: a mode (like an owner) reaches the disk with the file's
    own fsync, not with its directory's, so a file renamed after a bare chmod may come back
    from a power cut under its new name with its old mode (a journal at 0400 that the
    service user cannot open read-write)."""
    os.chmod(path, mode)
    _fsync_file(path)


def wipe_file(path: Path) -> None:
    """Overwrite a file with zeroes, fsync, unlink: for a temporary that may hold a key of an
    erased epoch (unlinking alone leaves its blocks readable on the disk). Zeroes go a
    megabyte at a time: a multi-gigabyte archive copy never needs its size in memory.

    A file with another name (a hard link: retention's copy linked under the segment's name in
    the archive, its temporary name not yet removed when the child was killed) is only
    unlinked: its bytes are that name's, and zeroing them destroyed the archive's copy."""
    try:
        descriptor = os.open(path, os.O_WRONLY)
    except OSError:
        path.unlink(missing_ok=True)
        return
    try:
        found = os.fstat(descriptor)
        if found.st_nlink <= 1:
            _zero(descriptor, found.st_size)
    finally:
        os.close(descriptor)
    with contextlib.suppress(OSError):
        path.unlink()
        fsync_directory(path.parent)


def _zero(descriptor: int, size: int) -> None:
    with contextlib.suppress(OSError):  # a full disk: overwriting in place needs no block
        zeroes = bytes(min(size, _WIPE_CHUNK))
        offset = 0
        while offset < size:
            offset += os.pwrite(descriptor, zeroes[: size - offset], offset)
        os.fsync(descriptor)


_WIPE_CHUNK = 1 << 20

# --- the temporaries every durable write path may leave --------------------------------------

#: Every temporary name a write path of the product uses, by purpose: a writer asks
#: `temporary_path` for its name (it cannot invent one), and the start sweeps whatever matches
#: here (`sweep_temporaries`), so a new write path cannot leave one behind for ever.
#: `write`: write_private_file (head file, sealing and verification keys, the floor's
#: passfile, its retired days' archives); `build`: a new journal file built whole and its
#: rollback journal (journal.create_journal_file); `copy`: a closed segment copied into the
#: archive (journal_upkeep).
TEMPORARY_PATTERNS: dict[str, re.Pattern[str]] = {
    "write": re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.tmp$"),
    "build": re.compile(r"^\.(?P<target>.+)\.new(?:-journal|-wal|-shm)?$"),
    "copy": re.compile(r"^\.(?P<target>.+)\.copy$"),
}


def temporary_path(path: Path, purpose: str) -> Path:
    """The temporary a write of `path` for `purpose` (a key of TEMPORARY_PATTERNS) uses."""
    name = {
        "write": f".{path.name}.{os.getpid()}.tmp",
        "build": f".{path.name}.new",
        "copy": f".{path.name}.copy",
    }[purpose]
    assert TEMPORARY_PATTERNS[purpose].match(name), name
    return path.with_name(name)


def is_temporary(name: str) -> bool:
    """Whether a file name is one of the product's temporaries (TEMPORARY_PATTERNS)."""
    return any(pattern.match(name) for pattern in TEMPORARY_PATTERNS.values())


def is_stale_temporary(name: str) -> bool:
    """A temporary no running writer owns: what a crash or power cut left (what the start
    sweeps). A `write` temporary of a process still running is mid-write, not stale."""
    return is_temporary(name) and not _writer_alive(name)


def _writer_alive(name: str) -> bool:
    """A `write` temporary of a process still running (not this one): it may be mid-write."""
    match = TEMPORARY_PATTERNS["write"].match(name)
    if match is None:
        return False
    pid = int(match.group("pid"))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: a process of another user is running with that number
        return True
    return True


def sweep_temporaries(directory: Path) -> list[Path]:
    """Wipe (overwrite, fsync, unlink: wipe_file) every temporary of TEMPORARY_PATTERNS in
    `directory` that a crash or power cut left; the paths wiped. Every one is wiped, not only
    the keys' (the sealing key, the verification key's seed, the floor's password): a journal
    copy holds face-down cards too. A `write` temporary whose process still runs is left."""
    wiped: list[Path] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return wiped
    for entry in entries:
        if not is_stale_temporary(entry.name):
            continue
        if entry.is_symlink() or not entry.is_file():
            continue
        with contextlib.suppress(OSError):  # a directory this user may not write: left
            wipe_file(entry)
        if not entry.exists():
            wiped.append(entry)
    return wiped
