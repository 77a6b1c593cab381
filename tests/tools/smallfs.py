"""A real, small filesystem for tests that need the disk to fill up (ENOSPC from the kernel).

`small_filesystem(mib)` mounts a size-limited tmpfs on a fresh directory (root, or a user
allowed to mount); where tmpfs mounts are refused it tries an ext4 image on a loop device; where
both are refused the test is skipped with the reason (never a simulated ENOSPC: the point is
to see what SQLite, the kernel and the daemon do when the space really runs out).
`fill(directory)` then takes every free byte with a file, and `free_bytes` reads what is left.

    with small_filesystem(96) as mount:
        ... start something writing under mount ...
        filler = fill(mount)      # the disk is now full
        filler.unlink()           # space comes back
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHUNK = 1 << 20


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def small_filesystem(mib: int) -> Iterator[Path]:
    """A mounted filesystem of `mib` MiB on a new directory (world-traversable); unmounted after."""
    mount = Path(tempfile.mkdtemp(prefix="tablectl-smallfs-"))
    mount.chmod(0o755)
    image: Path | None = None
    reasons: list[str] = []
    mounted = False
    if shutil.which("mount"):
        result = _run("mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0755", "tmpfs", str(mount))
        mounted = result.returncode == 0
        if not mounted:
            reasons.append(f"tmpfs: {result.stderr.strip()}")
        if not mounted and shutil.which("mkfs.ext4"):
            image = Path(tempfile.mkstemp(prefix="tablectl-smallfs-", suffix=".img")[1])
            os.truncate(image, mib * CHUNK)
            made = _run("mkfs.ext4", "-q", "-m", "0", str(image))
            result = (
                _run("mount", "-o", "loop", str(image), str(mount)) if not made.returncode else made
            )
            mounted = result.returncode == 0
            if not mounted:
                reasons.append(f"ext4 loop: {result.stderr.strip()}")
    else:
        reasons.append("no mount command")
    if not mounted:
        mount.rmdir()
        if image is not None:
            image.unlink()
        why = "cannot mount a small filesystem here (needs root): " + "; ".join(reasons)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)  # CI runs as root: a skipped disk-full test there hides a gap
        pytest.skip(why)
    try:
        mount.chmod(0o755)
        yield mount
    finally:
        for _ in range(20):
            if _run("umount", str(mount)).returncode == 0:
                break
            _run("sleep", "0.2")  # a process may still be closing a file there
        else:
            _run("umount", "-l", str(mount))
        with contextlib.suppress(OSError):
            mount.rmdir()
        if image is not None:
            image.unlink()


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def fill(directory: Path, leave: int = 0, name: str = "filler") -> Path:
    """Write a file under `directory` until the filesystem is full (less `leave` bytes)."""
    filler = directory / name
    chunk = b"\xa5" * CHUNK
    with open(filler, "wb", buffering=0) as out:
        while True:
            room = free_bytes(directory) - leave
            if room <= 0:
                break
            try:
                out.write(chunk[: min(CHUNK, room)])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
        with contextlib.suppress(OSError):
            os.fsync(out.fileno())
    return filler
