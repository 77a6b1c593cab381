"""Shared by the crash, clock and disk-full tests: a real clock under libfaketime, keys, logs.

`faketime_env(offset)` preloads libfaketime into the daemon with its wall clock `offset`
from the real one, read from a file the test may rewrite while the daemon runs (a clock
step); the elapsed-time clocks (CLOCK_MONOTONIC, CLOCK_BOOTTIME) stay real, as a step of the
wall clock leaves them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
