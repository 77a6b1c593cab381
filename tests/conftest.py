"""Shared test configuration."""

from __future__ import annotations

import contextlib
import errno
import socket
import warnings
from collections.abc import Iterator

import pytest

from tablectl.controller.common.config import DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT


@pytest.fixture(scope="session", autouse=True)
def default_metrics_port_held() -> Iterator[socket.socket | None]:
    """Hold the daemon's default metrics port (127.0.0.1:8337) for the whole session.

    Tests are hermetic: a daemon or demo under test listens on port 0 (or a port the test
    chose free). A test that leans on the default would pass on an idle machine and fail
    whenever a `make demo` runs beside it; holding the port here makes it fail every time.
    Bound without SO_REUSEADDR and listening, so that the daemon's own bind (http.server sets
    SO_REUSEADDR) cannot share it. When the port is already taken (a demo is running), it is
    held anyway, by someone else.
    """
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind((DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT))
        holder.listen()
    except OSError as error:
        holder.close()
        if error.errno != errno.EADDRINUSE:
            warnings.warn(f"cannot hold the default metrics port: {error}", stacklevel=1)
        yield None
        return
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture(autouse=True)
def fresh_logging() -> Iterator[None]:
    """Each test starts with structlog as a fresh process has it: a test that configured
    logging (a level of "warning", a stream it closed, a table bound in the context) leaves
    nothing behind for the next (capture_logs keeps the configured level's filter, so a test
    of debug lines failed after one that configured "warning")."""
    import structlog

    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def _sweep_stale_faketime_state(shm: str = "/dev/shm") -> None:
    """The `faketime` wrapper creates /dev/shm/sem.faketime_sem_PID and faketime_shm_PID with
    O_EXCL and removes them at its exit; a wrapper killed by a test (-9) leaves them, and a later
    wrapper given the same PID then dies with "faketime: sem_open: File exists". Only the files
    of processes that no longer exist are removed."""
    import os
    import re

    try:
        names = os.listdir(shm)
    except OSError:
        return
    for name in names:
        found = re.fullmatch(r"(?:sem\.faketime_sem_|faketime_shm_)(\d+)", name)
        if found is None:
            continue
        try:
            os.kill(int(found.group(1)), 0)
            continue  # alive (or not ours to signal): keep
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(shm, name))


@pytest.fixture(autouse=True)
def no_stale_faketime_state() -> Iterator[None]:
    _sweep_stale_faketime_state()
    yield
