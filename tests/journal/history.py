"""A table's history made fast, and the real daemon started on it under a memory limit.

`build_history` plays legal rounds (simulators.roundgen) through the table service and its
journal directly, with group commit and no devices: what a season of a busy table leaves on
disk (checkpoints every `checkpoint_rounds` rounds, as the daemon writes them), in seconds.
`start_daemon` runs `tablectl run --config FILE` as a child with a real NOTIFY_SOCKET and
returns the time to READY=1 and the peak resident memory, under `MemoryMax` by whatever
this machine allows: systemd-run, a cgroup (v2 or v1), or RLIMIT_AS as the last resort.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from tablectl.controller.common.config import (
    ARCHIVE_SAME_FILESYSTEM_WORDS,
    DEFAULT_CHECKPOINT_ROUNDS,
    load_config,
)
from tablectl.controller.common.logs import configure_logging
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.record.journal import Journal
from tablectl.controller.service.service import CHECKPOINT_FORMAT
from tablectl.simulators.roundgen import legal_stream

MEMORY_LIMIT = 512 * 1024 * 1024


@dataclass(frozen=True)
class ServiceUser:
    """An unprivileged user the daemon runs as, like the unit's `User=tablectl`."""

    uid: int
    gid: int
    name: str
    group: str
    python: str
    path: str  # PYTHONPATH: this checkout and the test environment's packages

    def prefix(self) -> tuple[str, ...]:
        return ("setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--")

    def environment(self) -> dict[str, str]:
        return {"PYTHONPATH": self.path, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


CONFIG = """
[table]
id = "history"
game = "{game}"
gaming_day_start = "{day_start}"
[table.options]
dealing = "manual_shoe"
[journal]
path = "{journal}"
checkpoint_rounds = {checkpoint_rounds}
sealing = "{sealing}"
{journal_extra}
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{socket}"
group = "{group}"
supervisor_group = "{group}"
"""


#: the configuration's words for an archive on the journal's own filesystem (a test's temp
#: dir is one disk): without them retention and the preflight refuse such an archive
SAME_DISK_SAID = f'archive_same_filesystem = "{ARCHIVE_SAME_FILESYSTEM_WORDS}"'


def write_config(
    directory: Path,
    *,
    game: str = "five_card_hilo",
    checkpoint_rounds: int = DEFAULT_CHECKPOINT_ROUNDS,
    day_start: str = "06:00",
    journal_extra: str = "",
    sealing: str = "off",
    operator_group: str | None = None,
) -> Path:
    """A table's configuration under `directory`; unsealed unless `sealing="on"` (the sealing
    tests set up its key: `run` refuses a sealed table without one)."""
    import grp

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "table.toml"
    path.write_text(
        CONFIG.format(
            game=game,
            journal=directory / "journal.sqlite",
            socket=directory / "op.sock",
            group=operator_group or grp.getgrgid(os.getgid()).gr_name,
            checkpoint_rounds=checkpoint_rounds,
            day_start=day_start,
            journal_extra=journal_extra,
            sealing=sealing,
        )
    )
    return path


def build_history(
    config_path: Path,
    rounds: int,
    *,
    seed: int = 1,
    chunk: int = 500,
    checkpoint_last: bool = True,
) -> tuple[int, int]:
    """Play `rounds` legal rounds into the configured journal: (rounds, rows) it then holds.

    The engine and the journal directly, writing the rows the table service writes (the
    stamped event, its decisions, a checkpoint at the end of every `checkpoint_rounds`-th
    round): the daemon's replay checks them against its own engine, so a row written
    differently here shows as a divergence there. A made history, not a lived one: batches
    are not fsynced and there are no devices, logs or metrics. `checkpoint_last=False`: no
    checkpoint after the last round, so a start replays the rounds since the one before.
    """
    config = load_config(config_path)
    spec = TableSpec.from_dict(config.table_dict())
    engine = Engine(spec)
    rng = random.Random(seed)
    moment = datetime.datetime(2026, 11, 20, 14, 0, 0)
    step = datetime.timedelta(milliseconds=50)
    saved = structlog.get_config()
    configure_logging("warning", mode="json", stream=io.StringIO())
    try:
        with Journal(config.journal_path, max_batch=8192) as journal:
            journal._db.execute("PRAGMA synchronous=OFF")
            if journal.last_seq != 0:
                raise RuntimeError(f"{config.journal_path}: a history is built into a new journal")
            journal.append("table", config.table_dict())
            while engine.round_number < rounds:
                for event in legal_stream(spec, rng, min(chunk, rounds - engine.round_number)):
                    moment += step
                    stamped = {**event, "time": moment.isoformat(timespec="microseconds")}
                    before = engine.round_number
                    seq = journal.append("event", stamped, round_number=before)
                    for decision in engine.handle(stamped, seq):
                        journal.append(
                            "decision", decision.to_dict(), round_number=engine.round_number
                        )
                    ended = event["type"] == "hands_collected"
                    due = ended and engine.round_number % config.checkpoint_rounds == 0
                    if due and (checkpoint_last or engine.round_number < rounds):
                        journal.append(
                            "checkpoint",
                            {
                                "type": "checkpoint",
                                "format": CHECKPOINT_FORMAT,
                                "engine": engine.snapshot(),
                                "service": {
                                    "round_counted": engine.round_number,
                                    "round_voided": False,
                                },
                                "interlocks": {"shoe_locked": [], "shuffler_deck_locked": []},
                            },
                            round_number=engine.round_number,
                        )
            return engine.round_number, journal.last_seq
    finally:
        structlog.configure(**saved)


# --- the daemon under a memory limit ----------------------------------------------------------


@dataclass
class Started:
    process: subprocess.Popen[bytes]
    ready_seconds: float | None
    limit: Limit
    listener: socket.socket
    notify_path: Path
    notifications: list[str] = field(default_factory=list)

    def drain_notifications(self) -> list[str]:
        """The sd_notify messages received since READY (kept open until stop)."""
        self.listener.settimeout(0)
        with contextlib.suppress(BlockingIOError):
            while True:
                self.notifications.append(self.listener.recv(4096).decode())
        return self.notifications

    def peak_rss_mib(self) -> float:
        """VmHWM: the most resident memory the daemon ever had."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM in /proc")

    def stop(self) -> int:
        """SIGTERM (a clean stop), the exit status; the memory limit undone (once)."""
        if self.listener.fileno() == -1:
            return self.process.wait()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self.limit.cleanup()
            self.drain_notifications()
            self.listener.close()
            self.notify_path.unlink(missing_ok=True)

    def stderr(self) -> str:
        """Everything the daemon logged (after it ended)."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


def _own_cgroup_v1(controller: str) -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, where = line.split(":", 2)
        if controller in names.split(","):
            path = Path(f"/sys/fs/cgroup/{controller}{where}")
            return path if path.is_dir() else None
    return None


@dataclass
class Limit:
    """How a child is held under the memory limit, and how to undo it afterwards."""

    prefix: list[str]
    preexec: Callable[[], None] | None
    how: str
    group: Path | None = None

    def cleanup(self) -> None:
        if self.group is None:
            return
        for _ in range(50):
            try:
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def memory_limit(limit: int = MEMORY_LIMIT) -> Limit:
    """systemd-run where systemd runs, else a cgroup (v2, else v1), else RLIMIT_AS."""
    if shutil.which("systemd-run") and Path("/run/systemd/system").is_dir():
        prefix = ["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit}", "--"]
        return Limit(prefix, None, f"systemd-run --scope -p MemoryMax={limit}")
    group: Path | None = None
    limit_file = ""
    name = f"tablectl-test-{uuid.uuid4().hex[:8]}"
    if Path("/sys/fs/cgroup/cgroup.controllers").exists() and os.access("/sys/fs/cgroup", os.W_OK):
        group, limit_file = Path("/sys/fs/cgroup") / name, "memory.max"
    else:
        parent = _own_cgroup_v1("memory")
        if parent is not None and os.access(parent, os.W_OK):
            group, limit_file = parent / name, "memory.limit_in_bytes"
    if group is not None:
        try:
            group.mkdir()
            (group / limit_file).write_text(str(limit))
            if (group / "memory.memsw.limit_in_bytes").exists():
                with contextlib.suppress(OSError):  # swap counted too, where the kernel can
                    (group / "memory.memsw.limit_in_bytes").write_text(str(limit))
            procs = group / "cgroup.procs"

            def enter() -> None:
                procs.write_text(str(os.getpid()))

            return Limit([], enter, f"cgroup {group} {limit_file}={limit}", group)
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()

    def rlimit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit * 2, limit * 2))

    # RLIMIT_AS counts address space, not resident memory: twice the limit leaves room for
    # the thread stacks and mappings a resident set never touches.
    return Limit([], rlimit, f"RLIMIT_AS={limit * 2} (no systemd or writable cgroup here)")


#: Every daemon started here: tests/journal/conftest.py stops what a failed test left running.
STARTED: list[Started] = []


def start_daemon(
    config_path: Path,
    *,
    timeout: float = 60,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    user: ServiceUser | None = None,
) -> Started:
    """`tablectl run` under the memory limit; returns once READY=1 came (or the process ended).

    `user`: run it as that unprivileged user with the unit's UMask=0077 (tests/journal/
    service_user.py), on the system Python with this checkout on its path."""
    notify_path = config_path.parent / f"notify-{uuid.uuid4().hex[:8]}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify_path))
    listener.settimeout(0.05)
    environment = {**os.environ, **(env or {}), "NOTIFY_SOCKET": str(notify_path)}
    python = sys.executable
    if user is not None:
        os.chmod(notify_path, 0o777)  # the user's sd_notify reaches the test's socket
        environment = {**user.environment(), **(env or {}), "NOTIFY_SOCKET": str(notify_path)}
        python = user.python
        # a preload (libfaketime) goes in after the change of user: loaded into setpriv, it
        # would make its shared memory as root, which the user's process cannot open
        preload = environment.pop("LD_PRELOAD", None)
        prefix = (*user.prefix(), *(("env", f"LD_PRELOAD={preload}") if preload else ()), *prefix)
    command = [python, "-m", "tablectl.controller", "run", "--config", str(config_path)]
    command += ["--device-wait", "0", "--log-format", "json", *extra]
    limit = memory_limit()
    started = time.monotonic()
    process = subprocess.Popen(
        [*limit.prefix, *prefix, *command],
        env=environment,
        preexec_fn=limit.preexec,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        umask=0o077 if user is not None else -1,
    )
    result = Started(process, None, limit, listener, notify_path)
    STARTED.append(result)
    while time.monotonic() - started < timeout and process.poll() is None:
        try:
            message = listener.recv(4096).decode()
        except TimeoutError:
            continue
        result.notifications.append(message)
        if "READY=1" in message.splitlines():
            result.ready_seconds = time.monotonic() - started
            break
    return result
