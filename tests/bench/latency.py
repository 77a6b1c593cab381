"""One event end to end through the running daemon, next to its two floors, in the same run.

- ``end to end``: `run_daemon` in this process with one device, a simulated manual shoe on a
  real pty (pyserial); the shoe draws a card and the clock starts when the CARD_DRAWN frame's
  bytes are written to the pty. The daemon's own path follows: the reference codec, link and
  driver, the daemon's event queue, the TableService (journal append, engine, decisions, the
  commit with synchronous=FULL), metrics, logs, interlocks and the systemd status line. The
  clock stops when the daemon has finished with the event (its consumer returns).
- ``pty floor``: the same frame from a second simulated shoe on its own pty to the
  ReferenceShoe driver's event callback (pty wake-up, pyserial read, codec, link, driver): what
  reading the frame costs before the daemon does anything.
- ``durable-commit floor``: one plain INSERT of a journal-sized row, autocommitted by SQLite in
  WAL mode with synchronous=FULL, in the same directory (so on the same filesystem): what
  making one event durable costs before the journal does anything. Its -wal is brought to
  SQLite's steady state first (past one checkpoint, so commits overwrite the -wal rather than
  grow it), as the journal's is at open.

The three take turns sample by sample (an event, a floor frame, a floor commit, the next
event ...), each after both links have gone quiet: a neighbour's load on this shared machine
then falls on all three alike, and each floor runs in the rhythm the daemon's own frame and
commit run in (one per event, between other work), not back to back. Measured back to back in
blocks of 100 in the same minute, the floors came out 20-37% lower (a hot CPU and disk queue
that no table gives the daemon), while the journal's own commit inside the end-to-end samples
(`e2e_journal_commit` in details.json) matched the turn-taking commit floor within 7%.

The goals are ratios (DESIGN.md): end-to-end median <= 1.25x (pty floor median + commit floor
median), p99 <= 2x (pty floor p99 + commit floor p99).
The wire time of the frame at 115200 baud stays as a line of information.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import GENESIS_HASH, verify_journal
from tablectl.controller.service.daemon import Daemon, run_daemon
from tablectl.drivers.base import DriverSettings
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import OVERHEAD, wire_time
from tablectl.drivers.reference import ReferenceShoe
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.simulators.cards import composition
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.shoe import ShoeSim

#: The end-to-end sample cut at the driver's event, the consumer's start and the commit.
STAGES = (
    "frame_to_driver_event",  # pty, pyserial, codec, link, driver (the pty floor's path)
    "driver_event_to_consumer",  # the daemon's queue: the loop's next turn
    "consumer_to_commit",  # lock, time stamp, journal append, engine, decision rows
    "commit",  # the journal's commit (fsync), the commit floor's part
    "commit_to_done",  # metrics, logs, interlocks, STATUS=, the lock released
)
HILO_POSITIONS = [1, 2, 3, 4, 5, 6, 7]
CARDS_PER_ROUND = 5 * (len(HILO_POSITIONS) + 1)

CONFIG = """
[table]
id = "bench"
game = "five_card_hilo"
log_level = "info"
[table.options]
dealing = "manual_shoe"
[devices.shoe]
kind = "shoe"
driver = "reference"
allowed_serials = ["{serial}"]
allowed_firmware_sha256 = ["{firmware}"]
[devices.shoe.transport]
type = "serial"
port = "{port}"
[journal]
path = "{directory}/journal.sqlite"
sealing = "off"
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{directory}/operator.sock"
group = "root"
supervisor_group = "root"
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def figures_us(samples: list[float]) -> dict[str, float]:
    """Median and p99 in µs of samples in seconds."""
    return {
        "median_us": round(statistics.median(samples) * 1e6, 1),
        "p99_us": round(percentile(samples, 0.99) * 1e6, 1),
    }


def _timed_writes(sim: ShoeSim) -> list[float]:
    """Record when each frame's bytes go to the pty (the clock's start)."""
    written: list[float] = []
    write_to_pty = sim._send
    assert write_to_pty is not None

    def timed_write(data: bytes) -> None:
        written.append(time.perf_counter())
        write_to_pty(data)

    sim._send = timed_write
    return written


async def _ack_back(sim: ShoeSim) -> None:
    while not sim.link.idle:  # the previous frame's ACK is back: the link is quiet
        await asyncio.sleep(0)


class DaemonRig:
    """`run_daemon` with one simulated manual shoe on a pty; deals 5 Card Hi-Lo rounds."""

    #: appended to the table's configuration (the witnessed rig's [witness] section)
    extra_config = ""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.sim = ShoeSim(seed=1)
        self.stop = asyncio.Event()
        self.daemon: Daemon | None = None
        self.finished: asyncio.Future[float] | None = None
        self.drawn = CARDS_PER_ROUND
        self.rounds = 0
        self.rng = random.Random(7)
        self.decisions = 0
        self.commits: list[float] = []  # seconds in Journal.flush during the samples
        self._task: asyncio.Task[int] | None = None
        self._attachment: PtyAttachment | None = None
        self._written: list[float] = []
        # when the sample's card passed each stage (perf_counter), and each sample's stages
        self.marks: dict[str, float] = {}
        self.stages: list[dict[str, float]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._attachment = PtyAttachment(self.sim, loop, link_path=self.directory / "shoe")
        path = self.directory / "table.toml"
        path.write_text(
            CONFIG.format(
                serial=self.sim.identity.serial,
                firmware=self.sim.identity.firmware_sha256,
                port=self._attachment.plug(),
                directory=self.directory,
            )
            + self.extra_config
        )
        ready: list[Daemon] = []
        self._task = loop.create_task(
            run_daemon(
                load_config(path),
                stop=self.stop,
                on_ready=ready.append,
                device_wait=5,
                handle_signals=False,
            )
        )
        async with asyncio.timeout(10):
            while not ready:
                if self._task.done():
                    raise RuntimeError(f"the bench daemon did not start: {self._task.result()}")
                await asyncio.sleep(0.005)
        self.daemon = ready[0]
        handle = self.daemon._handle_device_event
        marks = self.marks

        async def timed(event: dict[str, Any]) -> None:
            marks["consumer"] = time.perf_counter()
            await handle(event)
            waiting = self.finished
            if event.get("type") == "card_drawn" and waiting is not None and not waiting.done():
                waiting.set_result(time.perf_counter())

        # the driver's event callback (the daemon's queue): when the event left the driver
        driver = self.daemon.drivers["shoe"]
        deliver = driver._on_event
        assert deliver is not None

        def emitted(event: dict[str, Any]) -> None:
            marks["emitted"] = time.perf_counter()
            deliver(event)

        driver._on_event = emitted

        # the daemon's consumer calls this per event: the clock stops when it returns
        self.daemon._handle_device_event = timed  # type: ignore[method-assign]
        # the journal's commits inside the e2e samples, to set beside the commit floor
        journal = self.daemon.service.journal
        flush = journal.flush

        def timed_flush() -> None:
            rows, started = journal.pending, time.perf_counter()
            flush()
            if rows and self.finished is not None and not self.finished.done():
                marks["commit_started"], marks["committed"] = started, time.perf_counter()
                self.commits.append(marks["committed"] - started)

        journal.flush = timed_flush  # type: ignore[method-assign]
        self.service_observer()
        self._written = _timed_writes(self.sim)

    def service_observer(self) -> None:
        assert self.daemon is not None

        def count(event: Any, decisions: list[dict[str, Any]], seconds: float, src: str) -> None:
            self.decisions += len(decisions)

        self.daemon.service.observers.append(count)

    async def _operator(self, kind: str, **fields: Any) -> None:
        assert self.daemon is not None
        await self.daemon.operator_event({"type": kind, **fields})

    async def _next_round(self) -> None:
        if self.rounds:
            await self._operator("deal_completed")
            await self._operator("stub_counted", count=52 - CARDS_PER_ROUND)
            await self._operator("hands_collected")
        await self._operator("shuffle_started")
        await self._operator("shuffle_completed", count=52)
        await self._operator("bets_closed", positions=HILO_POSITIONS)
        self.sim.cards = composition(1)
        self.rng.shuffle(self.sim.cards)
        self.drawn = 0
        self.rounds += 1

    async def sample(self) -> float:
        """One card drawn: seconds from its frame on the pty to the daemon done with it."""
        if self.drawn == CARDS_PER_ROUND:
            await self._next_round()
        await _ack_back(self.sim)
        loop = asyncio.get_running_loop()
        self.finished = loop.create_future()
        self._written.clear()
        self.marks.clear()
        if self.sim.draw() is None:
            raise RuntimeError("the bench shoe did not deal (locked: a decision held it)")
        start = self._written[0]
        end = await self.finished
        self.drawn += 1
        self._stages(start, end)
        return end - start

    def _stages(self, start: float, end: float) -> None:
        """Where this sample's time went, in µs (STAGES), when every mark was taken."""
        at = self.marks
        if all(k in at for k in ("emitted", "consumer", "commit_started", "committed")):
            points = [start, at["emitted"], at["consumer"], at["commit_started"]]
            points += [at["committed"], end]
            self.stages.append(
                {n: (b - a) * 1e6 for n, a, b in zip(STAGES, points[:-1], points[1:], strict=True)}
            )

    async def close(self) -> bool:
        """Stop the daemon; True when its journal verifies."""
        self.stop.set()
        if self._task is not None:
            await self._task
        if self._attachment is not None:
            self._attachment.close()
        return verify_journal(self.directory / "journal.sqlite").ok


class PtyFloor:
    """A second simulated shoe on its own pty straight into a ReferenceShoe driver."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.sim = ShoeSim(seed=2)
        self.arrived: asyncio.Future[float] | None = None
        self.driver: ReferenceShoe | None = None
        self._attachment: PtyAttachment | None = None
        self._written: list[float] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._attachment = PtyAttachment(self.sim, loop, link_path=self.directory / "floor-shoe")
        self.driver = ReferenceShoe(
            SerialTransport(self._attachment.plug()),
            settings=DriverSettings(heartbeat_interval=None),
        )

        def on_event(event: dict[str, Any]) -> None:
            waiting = self.arrived
            if event["type"] == "card_drawn" and waiting is not None and not waiting.done():
                waiting.set_result(time.perf_counter())

        await self.driver.start(loop, on_event)
        if not await self.driver.wait_connected(5):
            raise RuntimeError("the floor's shoe did not handshake")
        self._written = _timed_writes(self.sim)

    async def sample(self) -> float:
        if not self.sim.cards:
            self.sim.cards = composition(1)
        await _ack_back(self.sim)
        self.arrived = asyncio.get_running_loop().create_future()
        self._written.clear()
        self.sim.draw()
        start = self._written[0]
        end = await self.arrived
        return end - start

    async def close(self) -> None:
        if self.driver is not None:
            await self.driver.stop()
        if self._attachment is not None:
            self._attachment.close()


class CommitFloor:
    """Plain SQLite: one journal-sized row per autocommit, WAL, synchronous=FULL."""

    BODY = '{"card":"As","device":"shoe","face_up":false,"time":"2026-01-01T00:00:00.000000",'
    BODY += '"type":"card_drawn"}'

    def __init__(self, directory: Path) -> None:
        self.path = directory / "floor.sqlite"
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE rows (seq INTEGER PRIMARY KEY, kind TEXT, round INTEGER,"
            " recorded_at TEXT, body TEXT, prev_hash TEXT, hash TEXT)"
        )
        self.seq = 0
        # Past one checkpoint: from then on SQLite overwrites its -wal from the start.
        pages = int(self.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        for _ in range(pages + 50):
            self._commit()

    def _commit(self) -> None:
        self.seq += 1
        self.db.execute(
            "INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self.seq,
                "event",
                1,
                "2026-01-01T00:00:00.000000+00:00",
                self.BODY,
                GENESIS_HASH,
                GENESIS_HASH,
            ),
        )

    def sample(self) -> float:
        start = time.perf_counter()
        self._commit()
        return time.perf_counter() - start

    def close(self) -> None:
        self.db.close()


async def measure(samples: int = 2000, warmup: int = 100) -> dict[str, Any]:
    """End to end and its floors in alternating blocks; figures, ratios and the raw samples."""
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        directory = Path(tmp)
        rig, pty = DaemonRig(directory), PtyFloor(directory)
        await rig.start()
        await pty.start()
        commit = CommitFloor(directory)
        e2e: list[float] = []
        pty_samples: list[float] = []
        commit_samples: list[float] = []

        async def settle() -> None:
            """Both links quiet (every ACK delivered), so no sample pays for another's work."""
            while not (rig.sim.link.idle and pty.sim.link.idle):
                await asyncio.sleep(0)
            await asyncio.sleep(0)

        for _ in range(warmup):
            await rig.sample()
            await pty.sample()
        for _ in range(samples):
            await settle()
            e2e.append(await rig.sample())
            await settle()
            pty_samples.append(await pty.sample())
            await settle()
            commit_samples.append(commit.sample())
        commit.close()
        await pty.close()
        decisions, rounds, commits = rig.decisions, rig.rounds, rig.commits[-len(e2e) :]
        stages = rig.stages[-len(e2e) :]
        intact = await rig.close()
    return summarize(e2e, pty_samples, commit_samples) | {
        # each stage's median over the samples (they need not add up to the e2e median)
        "e2e_stages_median_us": {
            name: round(statistics.median(s[name] for s in stages), 1) for name in STAGES
        }
        if stages
        else {},
        "rounds_dealt": rounds,
        "decisions_made": decisions,
        "journal_verified": intact,
        # the journal's own commit inside the e2e samples (same seconds as the floor's?)
        "e2e_journal_commit": figures_us(commits),
    }


def summarize(e2e: list[float], pty: list[float], commit: list[float]) -> dict[str, Any]:
    """The ratios of the goals, with every figure they are made of (µs)."""
    frame_size = OVERHEAD + len(m.pack_card_drawn("As", False))
    wire = wire_time(frame_size, 115200)
    e2e_f, pty_f, commit_f = figures_us(e2e), figures_us(pty), figures_us(commit)
    floors_median = pty_f["median_us"] + commit_f["median_us"]
    floors_p99 = pty_f["p99_us"] + commit_f["p99_us"]
    return {
        "samples": len(e2e),
        "e2e": e2e_f,
        "pty_floor": pty_f,
        "commit_floor": commit_f,
        "floors_median_us": round(floors_median, 1),
        "floors_p99_us": round(floors_p99, 1),
        "e2e_median_vs_floors": round(e2e_f["median_us"] / floors_median, 3),
        "e2e_p99_vs_floors": round(e2e_f["p99_us"] / floors_p99, 3),
        "overhead_median_us": round(e2e_f["median_us"] - floors_median, 1),
        "frame_bytes": frame_size,
        "wire_time_us": round(wire * 1e6, 1),
        "e2e_median_vs_wire": round(e2e_f["median_us"] / (wire * 1e6), 4),
        "e2e_p99_vs_wire": round(e2e_f["p99_us"] / (wire * 1e6), 4),
        "latencies_us": [round(x * 1e6, 1) for x in e2e],
    }
