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
from pathlib import Path

from tablectl.controller.common.faults import fault_point


def write_private_file(path: Path, text: str | bytes, *, fault: str | None = None) -> None:
    """Replace `path` with `text`, mode 0600, durably: a temporary file fsynced, renamed over
    it, and the directory fsynced, so a crash leaves the old file or the new one, whole (the
    journal's head file, the sealing key, the demo's verification key, the floor's passfile
    and its retired days' archives). A failed write (a full disk) removes its temporary and
    raises OSError: nothing half-written stays behind.
    `fault`: the fault-injection point before the rename (controller/common/faults.py)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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


def wipe_file(path: Path) -> None:
    """Overwrite a file with zeroes, fsync, unlink: for a temporary that may hold a key of an
    erased epoch (unlinking alone leaves its blocks readable on the disk)."""
    try:
        descriptor = os.open(path, os.O_WRONLY)
    except OSError:
        path.unlink(missing_ok=True)
        return
    try:
        size = os.fstat(descriptor).st_size
        with contextlib.suppress(OSError):  # a full disk: overwriting in place needs no block
            os.pwrite(descriptor, bytes(size), 0)
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    with contextlib.suppress(OSError):
        path.unlink()
        fsync_directory(path.parent)
