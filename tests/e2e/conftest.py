"""The e2e harness: the daemon as a process (`tablectl run`), its hardware a rig process.

Each `Table` owns a rig (tests/e2e/rig.py: simulators on ptys behind stable symlinks), the
table's TOML, a NOTIFY_SOCKET datagram socket standing in for systemd, and the daemon process.
Operator events go through the operator socket's client; the metrics are scraped over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.record.journal import read_rows
from tablectl.controller.service.operator_client import request
from tests.e2e.tables import table_toml

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 15.0


def tablectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "tablectl.controller", *args]


class Table:
    """One simulated table: rig process, configuration, systemd's notify socket, the daemon."""

    def __init__(
        self, game: str, shuffle_seconds: float = 0.05, metrics_port: int = 0, **daemon_env: str
    ) -> None:
        """`metrics_port`: 0 (the kernel's, read back at each start), or one a scraper
        configured before the daemon starts (tests/ops/test_prometheus_live.py)."""
        self.game = game
        # A directory others may traverse (the stranger test connects as nobody).
        self.dir = Path(tempfile.mkdtemp(prefix=f"tablectl-e2e-{game}-"))
        self.dir.chmod(0o755)
        self.rig = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.e2e.rig",
                "--game",
                game,
                "--dir",
                str(self.dir),
                "--shuffle-seconds",
                str(shuffle_seconds),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self._rig_line(10.0)
        self.devices: dict[str, dict[str, Any]] = first["devices"]
        # the kernel gives the daemon its port when it binds (and it holds it): a number
        # probed, closed and written here could be taken by then (issue 34); `start` reads
        # the port the daemon bound from its `ready` line
        self.metrics_port = metrics_port
        self._ready_lines = 0  # `ready` lines in the daemon's log so far (one a start)
        self.config_path = self.dir / "table.toml"
        self.config_path.write_text(
            table_toml(game, self.dir, self.devices, metrics_port=metrics_port)
        )
        self.journal = self.dir / "journal.sqlite"
        self.socket_path = self.dir / "operator.sock"
        self.notify_path = self.dir / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notices: list[str] = []
        self.daemon_env = daemon_env
        # Put before the daemon's command line (e.g. prlimit, to give it the unit's LimitNOFILE).
        self.command_prefix: list[str] = []
        self.daemon: subprocess.Popen[bytes] | None = None
        self.stderr_path = self.dir / "daemon.log"
        self.ready_seconds = 0.0

    # -- the daemon ---------------------------------------------------------------------------

    def start(self, *extra: str) -> float:
        """Start `tablectl run` and wait for READY=1 on the notify socket; seconds it took."""
        env = {**os.environ, "NOTIFY_SOCKET": str(self.notify_path), **self.daemon_env}
        env.pop("JOURNAL_STREAM", None)
        started = time.monotonic()
        with open(self.stderr_path, "ab") as stderr:
            self.daemon = subprocess.Popen(
                [
                    *self.command_prefix,
                    *tablectl("run", "--config", str(self.config_path)),
                    "--log-format",
                    "json",
                    *extra,
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self.wait_notice(lambda n: "READY=1" in n, READY_TIMEOUT)
        self.ready_seconds = time.monotonic() - started
        self.metrics_port = self.bound_metrics_port()
        return self.ready_seconds

    def bound_metrics_port(self, timeout: float = 10.0) -> int:
        """The metrics port in this start's `ready` line (logged just after READY=1)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log()
            # whole lines only: the daemon may be writing the ready line as it is read
            lines = text[: text.rfind("\n") + 1].splitlines()
            ready = [json.loads(ln) for ln in lines if '"ready"' in ln and ln.startswith("{")]
            ready = [entry for entry in ready if entry.get("event") == "ready"]
            if len(ready) > self._ready_lines:
                self._ready_lines = len(ready)
                return int(str(ready[-1]["metrics"]).rpartition(":")[2])
            assert time.monotonic() < deadline, f"no ready line: {self.log()[-2000:]}"
            time.sleep(0.02)

    def wait_notice(self, match: Any, timeout: float = 5.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.notify], [], [], 0.05)
            if ready:
                notice = self.notify.recv(4096).decode()
                self.notices.append(notice)
                if match(notice):
                    return notice
            elif self.daemon is not None and self.daemon.poll() is not None:
                raise AssertionError(f"the daemon exited {self.daemon.returncode}: {self.log()}")
        raise AssertionError(f"no matching notification in {timeout} s: {self.notices}")

    def drain_notices(self) -> list[str]:
        """Read every notification waiting (as systemd does): a notify socket holds only
        net.unix.max_dgram_qlen of them (10), and a daemon's READY=1 or STOPPING=1 waits for
        room; the ones read are kept in `notices`."""
        read: list[str] = []
        while select.select([self.notify], [], [], 0)[0]:
            read.append(self.notify.recv(4096).decode())
        self.notices += read
        return read

    def stop(self) -> int:
        """SIGTERM; the exit status."""
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGTERM)
        code = self.daemon.wait(15)
        self.daemon = None
        return code

    def kill9(self) -> None:
        assert self.daemon is not None
        self.daemon.kill()
        self.daemon.wait(5)
        self.daemon = None

    def log(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.kill()
            self.daemon.wait(5)
        if self.rig.poll() is None:
            assert self.rig.stdin is not None
            self.rig.stdin.close()
            try:
                self.rig.wait(5)
            except subprocess.TimeoutExpired:
                self.rig.kill()
                self.rig.wait(5)
        self.notify.close()

    # -- talking to it ------------------------------------------------------------------------

    def op(self, kind: str, **fields: Any) -> list[dict[str, Any]]:
        """An operator event; its decisions (a reply other than decisions fails the test)."""
        reply = request(self.socket_path, {"type": kind, **fields})
        assert reply.get("reply") == "decisions", reply
        decisions: list[dict[str, Any]] = reply["decisions"]
        return decisions

    def status(self) -> dict[str, Any]:
        reply = request(self.socket_path, {"type": "status"})
        status: dict[str, Any] = reply["status"]
        return status

    def until(self, predicate: Any, timeout: float = 5.0, what: str = "") -> dict[str, Any]:
        """Poll the status until `predicate(status)`; the status."""
        deadline = time.monotonic() + timeout
        status = self.status()
        while not predicate(status):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what or 'condition'} not reached: {status}")
            time.sleep(0.02)
            status = self.status()
        return status

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value (0 when absent)."""
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def sim(self, action: str, device: str | None = None, **fields: Any) -> Any:
        """A request to the rig; its result."""
        assert self.rig.stdin is not None
        message = {"do": action, **({"device": device} if device else {}), **fields}
        self.rig.stdin.write(json.dumps(message) + "\n")
        self.rig.stdin.flush()
        reply = self._rig_line(10.0)
        assert reply["ok"], reply
        return reply["result"]

    def _rig_line(self, timeout: float) -> dict[str, Any]:
        assert self.rig.stdout is not None
        ready, _, _ = select.select([self.rig.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("the rig did not answer")
        line = self.rig.stdout.readline()
        if not line:
            raise AssertionError(f"the rig exited {self.rig.poll()}")
        result: dict[str, Any] = json.loads(line)
        return result

    def rows(self) -> list[Any]:
        return list(read_rows(self.journal))

    def decisions(self) -> list[dict[str, Any]]:
        return [row.body for row in self.rows() if row.kind == "decision"]

    def events(self) -> list[dict[str, Any]]:
        return [row.body for row in self.rows() if row.kind == "event"]


@pytest.fixture
def make_table() -> Iterator[Any]:
    tables: list[Table] = []

    def make(game: str, **options: Any) -> Table:
        table = Table(game, **options)
        tables.append(table)
        return table

    yield make
    for table in tables:
        table.close()
