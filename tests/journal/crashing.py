"""Shared by the crash, clock and disk-full tests: a real clock under libfaketime, keys, logs.

`faketime_env(offset)` preloads libfaketime into the daemon with its wall clock `offset`
from the real one, read from a file the test may rewrite while the daemon runs (a clock
step); the elapsed-time clocks (CLOCK_MONOTONIC, CLOCK_BOOTTIME) stay real, as a step of the
wall clock leaves them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.record.sealing import VerificationKey, read_key_file
from tests.journal.history import Started

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def libfaketime() -> str:
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    if not found:
        if in_ci():
            pytest.fail("libfaketime is missing: tests/tools/install-system-tools.sh installs it")
        pytest.skip("faketime is not installed (apt-get install faketime)")
    return str(found[0])


def faketime_env(clock_file: Path, offset: str = "+0") -> dict[str, str]:
    """The daemon's wall clock `offset` (libfaketime syntax: +65d, -2d, +3600) from now,
    re-read from `clock_file` at every reading: rewrite it to step the clock."""
    clock_file.write_text(f"{offset}\n")
    return {
        "LD_PRELOAD": libfaketime(),
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # the elapsed-time clocks stay real
        "TZ": "UTC",
    }


def setup_keys(config: Path, interval: int = 3600) -> VerificationKey:
    """The table's sealing key, and its configuration sealed (tables are written unsealed by
    default for the tests that are not about sealing: tests/unsealed.py)."""
    text = config.read_text()
    if 'sealing = "off"' in text:
        config.write_text(text.replace('sealing = "off"', 'sealing = "on"'))
    made = subprocess.run(
        [*TABLECTL, "journal", "setup-keys", "--config", str(config), "--interval", str(interval)],
        capture_output=True,
        text=True,
        check=True,
    )
    return VerificationKey.parse(made.stdout)


def log_of(started: Started) -> list[dict[str, Any]]:
    return [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]


def held_key(config: Path) -> dict[str, Any]:
    data: dict[str, Any] = read_key_file(config.parent / "sealing-key").as_dict()
    return data


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    return subprocess.run(
        [*TABLECTL, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**environment, **(env or {})},
        timeout=60,
    )


def demo_dealing_before(
    moment: datetime.datetime,
    state: Path,
    *extra: str,
    leads: tuple[float, ...] = (6.0, 20.0, 45.0),
    timeout: float = 60.0,
) -> subprocess.Popen[bytes]:
    """The demo dealing non-stop (`--fast`, its log in `state`/daemon.log), its wall clock
    (libfaketime, TZ=UTC) a few seconds before `moment` as it starts, its journal's first row
    written before `moment`.

    The clock's offset is fixed before the process starts: on a loaded machine the start can
    take longer than the lead, so the run is made again from an empty `state` with the next,
    longer lead until the first row comes before `moment`.
    """
    from tablectl.controller.record.journal import JournalError, read_rows
    from tests.demo.demo_helpers import demo_command

    for lead in leads:
        offset = int((moment - datetime.datetime.now(datetime.UTC)).total_seconds() - lead)
        env = {**os.environ, "LD_PRELOAD": libfaketime(), "FAKETIME": f"{offset:+d}", "TZ": "UTC"}
        env.pop("NOTIFY_SOCKET", None)
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(parents=True)
        demo = subprocess.Popen(
            demo_command(state, "--rounds", "100000", *extra),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        first: datetime.datetime | None = None
        deadline = time.monotonic() + timeout
        while first is None and time.monotonic() < deadline and demo.poll() is None:
            with contextlib.suppress(JournalError, StopIteration):
                row = next(read_rows(state / "journal.sqlite"))
                first = datetime.datetime.fromisoformat(row.recorded_at)
            time.sleep(0.1)
        if first is not None and first < moment:
            return demo
        demo.send_signal(signal.SIGTERM)
        _, errors = demo.communicate(timeout=60)
        if first is None:
            pytest.fail(f"the demo wrote no row in {timeout} s: {errors.decode()[-2000:]}")
    pytest.fail(f"the demo never started before {moment} (leads {leads} s)")
