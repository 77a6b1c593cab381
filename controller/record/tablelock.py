"""One daemon per table: an exclusive `flock` on a lock file beside the journal.

`run` (and `demo` on a state directory) takes the lock before it touches anything else: the
journal, the serial ports, the operator socket, the metrics port. A second instance on the same
table finds the lock held and stops at once, naming the lock file and the PID that holds it.

The lock is the kernel's (`flock(2)` on an open file description), not the file's existence:
it ends with the process however the process ends, so a lock file left behind by `kill -9`
never blocks the restart. The holder's PID is written into the file for the message only.

The lock file's path is derived from the journal's path (`journal.sqlite` -> `journal.sqlite.lock`)
by `lock_path_for`, so every layout of the journal (one file, or a directory of segments) keeps
one lock per table whatever it names its files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_SUFFIX = ".lock"


class TableLocked(RuntimeError):
    """Another process holds the table's lock; the message names the lock file and its PID."""

    def __init__(self, path: Path, holder: int | None) -> None:
        who = f"PID {holder}" if holder is not None else "another process (PID unknown)"
        super().__init__(
            f"{path}: this table is already run by {who}: one daemon per table "
            "(stop that one first, or give this configuration its own journal path)"
        )
        self.path = path
        self.holder = holder


class LockError(RuntimeError):
    """The lock file cannot be created or opened; the message names it and why."""


def lock_path_for(journal_path: str | Path) -> Path:
    """The table's lock file: beside the journal, named after it."""
    journal = Path(journal_path)
    return journal.with_name(journal.name + LOCK_SUFFIX)


class TableLock:
    """A held table lock; `release()` (or process exit, however it happens) gives it up."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: int | None = descriptor

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def release(self) -> None:
        """Unlock and close; the file stays (removing it would race a starting instance)."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)

    def __enter__(self) -> TableLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def holder_pid(path: str | Path) -> int | None:
    """The PID written in a lock file (for messages only: the lock itself is the flock)."""
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def acquire_table_lock(journal_path: str | Path) -> TableLock:
    """Take the table's lock without waiting; TableLocked when another process holds it.

    Creates the journal's directory (0700) and the lock file (0600) when missing. The
    descriptor is close-on-exec, so a child process never inherits the table.
    """
    path = lock_path_for(journal_path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise LockError(f"{path}: cannot open the table's lock file: {error.strerror}") from error
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise TableLocked(path, holder_pid(path)) from None
    except OSError as error:
        os.close(descriptor)
        raise LockError(f"{path}: cannot lock: {error.strerror}") from error
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same; the message will lack the PID
    return TableLock(path, descriptor)


def running_holder(journal_path: str | Path) -> int | None:
    """The PID of the daemon running this table now (0 when unknown), or None when none is.

    Read-only: creates nothing (a shared lock is tried on an existing lock file and dropped).
    `check-config` uses it so that a running table's own port and socket are not reported.
    """
    path = lock_path_for(journal_path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder_pid(path) or 0
    except OSError:
        return None
    finally:
        os.close(descriptor)  # closing drops a lock taken here
    return None
