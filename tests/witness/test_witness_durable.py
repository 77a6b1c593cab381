"""The witness's memory survives kill -9 and power cuts: `tablectl witness serve` as its own
process, tables submitting concurrently, the process killed mid-write (and, on lossyfs, the
power cut at an fsync of its state with everything unsynced dropped); after the restart it
holds, for every table, at least the largest checkpoint it ever answered 200 for, so it can
never be made to cosign a smaller or different tree than one a table holds a cosignature for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tablectl.controller.record.note import open_note, parse_checkpoint
from tests.powercut.lossyfs import LossyMount
from tests.witness.logs import MemoryLog, latest, post

TABLES = 6


class WitnessProcess:
    def __init__(self, state: Path, key: Path, logs: list[str]) -> None:
        """`logs`: each table's `--log` value ([ORIGIN=]VKEY)."""
        command = [
            sys.executable,
            "-m",
            "tablectl.controller",
            "witness",
            "serve",
            "--state",
            str(state),
            "--listen",
            "127.0.0.1:0",
            "--key",
            str(key),
            *(f"--log={log}" for log in logs),
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until it listens (or exits: "")
        assert "listening on http://127.0.0.1:" in line, line
        self.port = int(line.split("listening on http://127.0.0.1:")[1].split()[0])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "witness.key"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tablectl.controller",
            "witness",
            "setup-key",
            "--key",
            str(path),
            "--name",
            "regulator.example/w1",
        ],
        check=True,
        capture_output=True,
    )
    return path


@pytest.fixture
def tables() -> list[MemoryLog]:
    return [MemoryLog.new(f"casino.example/tablectl/t{i:02d}") for i in range(TABLES)]


def log_keys(tables: list[MemoryLog]) -> list[str]:
    return [f"{t.origin}={t.key.vkey}" for t in tables]


class Submitters:
    """One thread per table: grow its log, submit, note each size answered 200, until told."""

    def __init__(self, port: int, tables: list[MemoryLog]) -> None:
        self.acknowledged = {t.origin: 0 for t in tables}
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._table, args=(port, t), daemon=True) for t in tables
        ]
        for thread in self.threads:
            thread.start()

    def _table(self, port: int, table: MemoryLog) -> None:
        old = 0
        while not self.stop.is_set():
            table.grow(3)
            try:
                status, _, body = post(port, table.request(old))
            except OSError:
                return  # the witness is gone
            if status == 409:
                old = int(body)
                continue
            assert status == 200, body
            old = table.size
            self.acknowledged[table.origin] = old

    def count(self) -> int:
        return sum(1 for size in self.acknowledged.values() if size > 0)

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def wait_for(condition, seconds: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def check_after_restart(port: int, tables: list[MemoryLog], acknowledged: dict[str, int]) -> None:
    for table in tables:
        status, text = latest(port, table.origin)
        if acknowledged[table.origin] == 0 and status == 404:
            continue
        assert status == 200, (table.origin, text)
        opened = open_note(text, [table.key.verifier])
        size = parse_checkpoint(opened.text).size
        assert size >= acknowledged[table.origin], (table.origin, size, acknowledged)
        # and an older, acknowledged checkpoint is never cosigned again over it
        if acknowledged[table.origin] < size:
            smaller = table.fork(acknowledged[table.origin], "older")
            assert post(port, smaller.request(acknowledged[table.origin]))[0] == 409


def test_kill_9_mid_write_loses_no_cosigned_checkpoint(
    tmp_path: Path, key: Path, tables: list[MemoryLog]
) -> None:
    state = tmp_path / "state"
    for kill in range(3):
        witness = WitnessProcess(state, key, log_keys(tables))
        submitters = Submitters(witness.port, tables)
        # killed while every table is submitting: some answers in flight, some commits open
        enough = 60 * (kill + 1)
        wait_for(
            lambda s=submitters, n=enough: (  # type: ignore[misc]
                s.count() == TABLES and sum(s.acknowledged.values()) > n
            )
        )
        os.kill(witness.process.pid, signal.SIGKILL)
        witness.process.wait(10)
        submitters.join()
        again = WitnessProcess(state, key, log_keys(tables))
        try:
            check_after_restart(again.port, tables, submitters.acknowledged)
        finally:
            again.stop()
        for table in tables:  # the next round starts from what the witness holds
            table.grow(1)


@pytest.mark.parametrize("nth", [7, pytest.param(40, marks=pytest.mark.long)])
def test_power_cut_at_an_fsync_of_its_state_loses_no_cosigned_checkpoint(
    tmp_path: Path, key: Path, tables: list[MemoryLog], nth: int
) -> None:
    from tests.powercut.conftest import need_fuse

    need_fuse()
    mount = LossyMount(tmp_path / "disk", tmp_path / "mnt")
    mount.mount()
    try:
        state = mount.mountpoint / "state"
        witness = WitnessProcess(state, key, log_keys(tables))
        submitters = Submitters(witness.port, tables)
        mount.arm(["fsync"], r"witness\.sqlite", nth=nth, when="before", kill=witness.process.pid)
        wait_for(lambda: bool(mount.cuts()))
        witness.process.wait(10)
        submitters.join()
        assert any(submitters.acknowledged.values())
        mount.remount()
        again = WitnessProcess(state, key, log_keys(tables))
        try:
            check_after_restart(again.port, tables, submitters.acknowledged)
        finally:
            again.stop()
    finally:
        mount.unmount()
