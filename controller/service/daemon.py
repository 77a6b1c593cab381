"""The daemon: one asyncio loop wiring drivers, the table service, the operator socket and metrics.

`run_daemon` is the whole of `tablectl run` after the configuration is loaded (and what
`tablectl demo` runs over simulated devices). On start it:

1. opens the table service (journal replay; `controller_restarted` decisions journaled);
2. builds each configured device's driver from the registry over its transport, with the
   configured allow-list, and starts it (drivers connect and reconnect on their own);
3. serves the operator socket (group checked with peer credentials) and binds the metrics port;
4. waits until every device has handshaken, at most `device_wait` seconds, then says READY.

A device absent at start does not hold the daemon back for ever: after `device_wait` seconds
(default 20 s, below the unit's TimeoutStartSec=60 s) it says READY anyway, with STATUS naming
the absent devices, `tablectl_device_up{device}` at 0 (the "device down" alert fires) and an
alarm to operator subscribers. A daemon that never became READY would be killed and restarted
by systemd in a loop, taking the operator socket and metrics with it, so nobody at the table
could see why; the engine's rules already cover dealing without a device (C4, C5, C6, H3).

Events from every driver go into one queue, consumed by one task; operator events take the
same lock, so the engine sees one event at a time in arrival order. The driver callback only
enqueues: nothing a device does blocks the loop. Device commands that follow from decisions
are journaled durably by the service before `device_commands` is called, and are sent by one
worker task per device, so an unacknowledged command never stalls event handling.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tablectl.controller.common import metrics
from tablectl.controller.common.config import ConfigError, DeviceConfig, TableConfig, load_config
from tablectl.controller.common.logs import get_logger
from tablectl.controller.common.metrics import MetricsServer, start_metrics_server
from tablectl.controller.common.process_clock import seconds_since_process_start
from tablectl.controller.engine.cards import mask_card_words
from tablectl.controller.engine.events import DEVICE_EVENTS, UNDECODABLE_FRAME
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.record.checkpoints import (
    CheckpointSigner,
    identity_key_path,
)
from tablectl.controller.record.journal import (
    Journal,
    JournalError,
    JournalRow,
    highest_seq_written,
    recover_at_start,
)
from tablectl.controller.record.journal_upkeep import (
    ClockStep,
    ClockWatch,
    JournalUpkeep,
    StartDamage,
    check_before_start,
)
from tablectl.controller.record.journal_verifier import BackgroundVerifier
from tablectl.controller.record.note import NoteError, load_identity_key
from tablectl.controller.record.sealing import Sealer, SealingError
from tablectl.controller.record.tablelock import (
    LockError,
    TableLock,
    TableLocked,
    acquire_table_lock,
)
from tablectl.controller.record.witnessed import witnessed_dir
from tablectl.controller.service.eager import start_eagerly
from tablectl.controller.service.operator import (
    NotDealing,
    OperatorError,
    OperatorServer,
    PeerCredentials,
    stamp_in_process,
)
from tablectl.controller.service.preflight import WARN_FREE_BYTES, free_bytes
from tablectl.controller.service.sdnotify import SdNotifier, Watchdog
from tablectl.controller.service.service import (
    DEVICE_FAULT_EVENTS,
    Publisher,
    ServiceError,
    TableService,
)
from tablectl.controller.service.witness_client import (
    DaemonWitnesses,
    Refusal,
    witness_anchor_damage,
)
from tablectl.drivers.base import (
    STATUS_EVENTS,
    AllowList,
    DeviceDriver,
    DriverError,
    DriverSettings,
)
from tablectl.drivers.registry import DriverNotFound, create_driver, get_driver_class
from tablectl.drivers.transport import TransportConfigError, make_transport

#: Seconds to wait for every device's handshake before READY is sent regardless.
DEFAULT_DEVICE_WAIT = 20.0
#: Exit statuses of `run_daemon` (and `tablectl run`; docs/operations.md lists them).
EXIT_OK = 0
#: Failed while running (an unexpected error); systemd restarts it (Restart=on-failure).
EXIT_FAILED = 1
#: Refused to start: the configuration, the preflight, the table's lock (another daemon runs
#: it), or the journal cannot be opened. Nothing was changed.
EXIT_REFUSED = 2
#: Stopped dealing: a journal write failed (full disk, I/O error). The dispensing devices were
#: locked and an alarm raised; systemd restarts it, and the restart replays the journal.
EXIT_STOPPED_DEALING = 3
#: Seconds the daemon lingers after stopping dealing, devices locked, still answering `status`
#: and /metrics (so Prometheus scrapes the cause) before it exits EXIT_STOPPED_DEALING.
DEFAULT_FAIL_STOP_LINGER = 20.0
#: Seconds between readings of the free space under the journal and the journal's size.
DEFAULT_HEALTH_INTERVAL = 30.0
#: Seconds a stop gives the event consumer to finish the events already received.
DRAIN_DEADLINE = 1.0
#: The supervisor's acknowledgement of a clock step (handled here, never by the engine).
CLOCK_STEP_ACKNOWLEDGED = "clock_step_acknowledged"
#: The supervisor's decision to deal on after the floor's copy diverged (handled here too).
FLOOR_DIVERGENCE_ACKNOWLEDGED = "floor_divergence_acknowledged"
#: The hold on the shoe and the shuffler while a divergence waits for a supervisor.
FLOOR_DIVERGED_HOLD = "floor_diverged"
#: Seconds within which repeats of one alarm are folded into one message with a count.
ALARM_COALESCE_SECONDS = 5.0
#: The journal failed its start check (docs/journal.md): refused like any other start problem;
#: `--accept-damaged-journal` starts anyway.
EXIT_JOURNAL_DAMAGED = EXIT_REFUSED
#: How much longer systemd should wait, told every REPLAY_PROGRESS_EVERY events of a replay.
REPLAY_EXTEND_USEC = 30_000_000
#: Seconds beyond the device wait asked of systemd for the rest of the start (READY follows
#: within a drain of the events the devices sent).
DEVICE_WAIT_MARGIN = 10.0
#: The last rows of the live segment the operator socket reads its answers to client ids from
#: (a retry after a restart is answered, not applied twice): bounded, whatever the history.
OPERATOR_MEMORY_ROWS = 8192

# Device reports that are not docs/events.md events (the hardware confirming a lock, a status
# reading): journaled as notes for the audit trail, never given to the engine. The drivers
# own the list (drivers.base.STATUS_EVENTS), so a new report needs no change here.
AUDITED_DEVICE_REPORTS = STATUS_EVENTS
# Reports too frequent and too meaningless to journal.
IGNORED_DEVICE_REPORTS = frozenset({"shuffle_progress"})


class DaemonError(RuntimeError):
    """The daemon cannot start; the message names the device or file and what is wrong."""


@dataclass
class Interlocks:
    """Why each device is held (a set of reasons per hold); a hold lasts while a reason does.

    The shoe's dispensing is locked while a deal is blocked, after a void round, dead hands or a
    deck removal, until the next round opens (an accepted `bets_closed`) or new cards arrive
    (`deck_received`). The shuffler keeps its deck locked in after `remove_deck` until new cards
    are received. A failed shuffle (C4) needs no hold: it left no shuffled deck to take, and the
    engine refuses any deal from the deck until it is reshuffled.
    """

    shoe: set[str] = field(default_factory=set)
    shuffler: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, list[str]]:
        return {"shoe_locked": sorted(self.shoe), "shuffler_deck_locked": sorted(self.shuffler)}

    def hold(self, decision: Mapping[str, Any]) -> None:
        """A decision that holds a device (durable in the journal before this is called)."""
        name = decision.get("decision")
        reason = SHOE_LOCKING.get(str(name))
        if reason is not None:
            self.shoe.add(reason)
        if name == "remove_deck":
            self.shuffler.add("deck_removed")

    def lift(self, event: Mapping[str, Any], decisions: list[dict[str, Any]]) -> None:
        """After an event and its decisions: the holds whose reason has passed are lifted."""
        kind = event.get("type")
        if kind not in LIFTING_EVENTS:
            return  # nearly every event: nothing to lift
        names = {d.get("decision") for d in decisions}
        if "rejected" in names or not names.isdisjoint(SHOE_LOCKING):
            return
        if kind == "bets_closed":
            # "device_fault": a hold of journals written before X2, restored from a checkpoint
            self.shoe -= {"deal_blocked", "round_void", "hands_dead", "device_fault"}
        if kind == "deck_received":
            self.shoe -= {"deck_removed", "device_fault"}
            self.shuffler.discard("deck_removed")


#: the events after which `Interlocks.lift` may lift a hold
LIFTING_EVENTS = frozenset({"bets_closed", "deck_received"})
#: a release command -> the hold it lifts
RELEASES = {"release_deck": "lock_deck", "unlock_dispensing": "lock_dispensing"}
SHOE_LOCKING = {
    "deal_blocked": "deal_blocked",
    "void_round": "round_void",
    "hands_dead": "hands_dead",
    "remove_deck": "deck_removed",
}


def _driver_settings(device: DeviceConfig) -> DriverSettings:
    """The driver's timeouts: those of `[devices.NAME.transport]`, else the driver's own."""
    timeouts, default = device.transport.timeouts, DriverSettings()
    return DriverSettings(
        handshake_timeout=timeouts.handshake_timeout or default.handshake_timeout,
        command_timeout=timeouts.command_timeout or default.command_timeout,
    )


class AlarmCoalescer:
    """Repeats of one alarm within a window become one message with a count.

    The first alarm of a cause (its name or decision, rule and device) goes out at once; the
    repeats within `window` seconds are counted and sent as one `repeated` alarm when the
    window closes, so a flood (a card drawn again and again while the deal is blocked) does
    not bury the cause that matters. Other messages pass unchanged.
    """

    def __init__(self, publish: Publisher, window: float = ALARM_COALESCE_SECONDS) -> None:
        self.publish = publish
        self.window = window
        self._open: dict[tuple[str, str, str], int] = {}
        self._timers: dict[tuple[str, str, str], asyncio.TimerHandle] = {}
        self._sending: set[asyncio.Future[None]] = set()

    @staticmethod
    def cause(message: Mapping[str, Any]) -> tuple[str, str, str]:
        name = message.get("alarm") or message.get("decision") or "alarm"
        return (str(name), str(message.get("rule_id") or ""), str(message.get("device") or ""))

    async def __call__(self, message: Mapping[str, Any]) -> None:
        if message.get("message") != "alarm":
            await self.publish(message)
            return
        key = self.cause(message)
        if key in self._open:
            self._open[key] += 1
            metrics.ALARMS_COALESCED.labels(alarm=metrics.label_value(key[0])).inc()
            return
        self._open[key] = 0
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(self.window, self._close_window, key)
        await self.publish(message)

    def _close_window(self, key: tuple[str, str, str]) -> None:
        self._timers.pop(key, None)
        count = self._open.pop(key, 0)
        if count:
            name, rule_id, device = key
            summary: dict[str, Any] = {
                "message": "alarm",
                "alarm": "repeated",
                "of": name,
                "count": count,
                "within_seconds": self.window,
                "reason": f"{name} repeated {count} more time(s) in {self.window:g} s",
            }
            if rule_id:
                summary["rule_id"] = rule_id
            if device:
                summary["device"] = device
            task = asyncio.ensure_future(self.publish(summary))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._open.clear()


class Daemon:
    """The running table: the service, its drivers, the operator socket and the metrics server."""

    def __init__(
        self,
        config: TableConfig,
        service: TableService,
        *,
        notifier: SdNotifier,
        usb_backend: object | None = None,
    ) -> None:
        self.config = config
        self.service = service
        self.notifier = notifier
        self.usb_backend = usb_backend
        self.drivers: dict[str, DeviceDriver] = {}
        self.device_configs: dict[str, DeviceConfig] = {d.name: d for d in config.devices}
        self.operator: OperatorServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.interlocks = Interlocks()
        self.refusals: dict[str, str] = {}
        self.ready = asyncio.Event()
        self.started_at = time.monotonic()
        self.ready_seconds: float | None = None
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lock = asyncio.Lock()
        self._consumer: asyncio.Task[None] | None = None
        # Device events handled at once that suspended, finishing in tasks (`_device_event`).
        self._unfinished: set[asyncio.Task[None]] = set()
        self._commands: dict[str, asyncio.Queue[tuple[str, Callable[[], Any]]]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._last_status = ""
        self._applied: dict[str, str] = {}  # device -> the last hold command it acknowledged
        self._replayed_event: Mapping[str, Any] | None = None
        self._replayed_decisions: list[dict[str, Any]] = []
        self.upkeep: JournalUpkeep | None = None
        self._start_step: ClockStep | None = None  # a step seen at start, before the upkeep
        self.journal_damage: StartDamage | None = None
        #: The walk of every segment after READY (journal_verifier): damage found there.
        self.background: BackgroundVerifier | None = None
        # The journal as read at start: the operator socket's answers to client ids come from
        # it (a retry after a restart is answered, not applied twice); dropped once used.
        self.journal_rows: list[JournalRow] = []
        self._log = get_logger("daemon", table=config.table_id)
        # The floor store's shipper (docs/floor.md), when [floor] is configured: its own
        # thread, woken by the journal's commits; the table never waits for it.
        self.floor: FloorShipper | None = None
        if config.floor is not None:
            self.floor = FloorShipper(config.table_id, service.journal.path, config.floor)
            service.journal.commit_listeners.append(self.floor.notify)
            # the day's summaries counted here, from every row the journal appends from now
            # on and the live engine's round ends (every event goes through
            # service.handle_event): the shipper neither parses nor replays them
            counted = self.floor.hand_over_summaries(service.journal.last_seq + 1)
            if counted is not None:
                service.journal.row_listeners.append(counted.row_appended)
                service.round_ends = counted.handled
        self._alarms: AlarmCoalescer | None = None
        #: The table's witnesses (`[witness]`), once the checkpoint signer runs.
        self.witnesses: DaemonWitnesses | None = None
        self._health: asyncio.Task[None] | None = None
        self._floor_gauges: asyncio.Task[None] | None = None
        self._health_round = -1
        self._space_low = False
        #: Set when dealing stopped (fail-stop): {"reason", "since"}; status and STATUS= say it.
        self.dealing_stopped: dict[str, str] | None = None
        #: Set while a divergence from the floor's copy holds dealing (on_divergence's default):
        #: {"reason", "since"}, until a supervisor sends floor_divergence_acknowledged
        self.floor_divergence: dict[str, str] | None = None
        self.exit_code = EXIT_OK
        #: Called once when dealing stops (run_daemon ends the process after a linger).
        self.on_stopped_dealing: Callable[[], None] | None = None

    # -- assembly ----------------------------------------------------------------------------

    def build_drivers(self) -> None:
        """One driver per configured device, from the registry, over its configured transport."""
        for device in self.config.devices:
            options = device.transport.transport_options()
            if device.transport.type == "usb" and self.usb_backend is not None:
                options["backend"] = self.usb_backend
            where = f"{self.config.source}: devices.{device.name}"
            try:
                # the driver's own schema first: a driver may read its settings as it is built
                wrong = get_driver_class(device.kind, device.driver).settings_problems(
                    device.settings
                )
                if wrong:
                    raise DaemonError(
                        "; ".join(
                            f"{where}.settings{'.' + key if key else ''}: {message}"
                            for key, message in wrong
                        )
                    )
                transport = make_transport(device.transport.type, **options)
                driver = create_driver(
                    device.kind,
                    device.driver,
                    transport,
                    name=device.name,
                    allow_list=AllowList.of(device.allowed_serials, device.allowed_firmware_sha256),
                    settings=_driver_settings(device),
                    device_settings=device.settings,
                )
            except (TransportConfigError, DriverNotFound) as error:
                raise DaemonError(f"{where}: {error}") from error
            self.drivers[device.name] = driver

    async def start(self) -> None:
        """Wire the service, start the event consumer, drivers, operator socket and metrics."""
        loop = asyncio.get_running_loop()
        self.service.device_commands = self._device_commands
        if self.floor is not None:
            shipper = self.floor
            # told on the shipper's thread: handled on the loop, under the event lock

            def diverged(why: str) -> None:
                loop.call_soon_threadsafe(self._on_divergence, why)

            shipper.on_diverged = diverged
            shipper.start()
            self._floor_gauges = loop.create_task(self._floor_gauge_loop(), name="daemon:floor")
        self._consumer = loop.create_task(self._consume(), name="daemon:events")
        for name, driver in self.drivers.items():
            queue: asyncio.Queue[tuple[str, Callable[[], Any]]] = asyncio.Queue()
            self._commands[name] = queue
            self._workers.append(
                loop.create_task(self._command_worker(driver, queue), name=f"commands:{name}")
            )
            await driver.start(loop, self._device_event)
        operator = OperatorServer(
            self.config.operator_socket,
            allowed_group=self.config.operator_group,
            supervisor_group=self.config.supervisor_group,
            limits=self.config.operator_limits,
            handle_event=self.operator_event,
            record_refusal=self.operator_refused,
            status=self.status,
        )
        operator.remember(self.journal_rows)
        self.journal_rows = []
        await operator.start()
        self.operator = operator
        self._alarms = AlarmCoalescer(operator.publish)
        self.service.publish = self._alarms
        self.service.subscribed = operator.has_subscribers
        try:
            self.metrics_server = start_metrics_server(
                self.config.metrics_host, self.config.metrics_port
            )
        except OSError as error:
            raise DaemonError(
                f"{self.config.source}: metrics.listen: cannot bind "
                f"{self.config.metrics_host}:{self.config.metrics_port}: {error.strerror}"
            ) from error

    async def wait_for_devices(self, timeout: float) -> list[str]:
        """Wait until every device has handshaken, at most `timeout` s; the absent ones' names.

        While it waits, systemd is told what for (STATUS=, shown by `systemctl status` and
        `systemctl start`'s wait) and that the start needs that long (EXTEND_TIMEOUT_USEC)."""
        started = time.monotonic()
        pending = {
            asyncio.ensure_future(driver.wait_connected(timeout))
            for driver in self.drivers.values()
        }
        while pending:
            self._say_waiting(timeout - (time.monotonic() - started))
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        return [name for name, driver in self.drivers.items() if not driver.up]

    def _say_waiting(self, seconds_left: float) -> None:
        waiting = [name for name, driver in self.drivers.items() if not driver.up]
        if not waiting or seconds_left <= 0:
            return
        self.notifier.notify(
            f"STATUS=waiting for {', '.join(waiting)} to handshake (at most {seconds_left:.0f} s "
            "more, then ready without them)",
            f"EXTEND_TIMEOUT_USEC={int((seconds_left + DEVICE_WAIT_MARGIN) * 1_000_000)}",
            drop_when_busy=True,
        )

    async def announce_ready(self, absent: list[str]) -> None:
        """READY=1 with the round's state; absent devices raise an alarm and show in STATUS."""
        await self.drain()
        since_run = time.monotonic() - self.started_at
        # from the process's start: the interpreter, the imports and the journal's verification
        # are part of a start as systemd and the floor see it (issue 33)
        since_process = seconds_since_process_start()
        self.ready_seconds = since_process if since_process is not None else since_run
        for name in absent:
            self._log.error("device_absent_at_start", device=name)
            await self._publish(
                {
                    "message": "alarm",
                    "alarm": "device_absent",
                    "device": name,
                    "reason": f"{name} did not handshake at start; running without it",
                }
            )
        self.notifier.ready(self.status_line())
        self._last_status = self.status_line()
        self.ready.set()
        self._log.info(
            "ready",
            seconds=round(self.ready_seconds, 4),
            since_run_seconds=round(since_run, 4),
            absent=absent,
            metrics=f"{self.config.metrics_host}:{self.port}",
        )

    @property
    def port(self) -> int | None:
        """The metrics port actually bound (the configured one, or the free one for port 0)."""
        return self.metrics_server.port if self.metrics_server is not None else None

    async def close(self) -> None:
        """Stop serving, drain events already received, stop drivers, close the journal.

        Every step is bounded (drivers in parallel, each within its own deadline; the drain
        and each task's cancellation within DRAIN_DEADLINE), so a stop never hangs on a device.
        """
        if self._health is not None:
            self._health.cancel()
            self._health = None
        if self._floor_gauges is not None:
            self._floor_gauges.cancel()
            self._floor_gauges = None
        if self.operator is not None:
            await self.operator.close()
            self.operator = None
        self.service.publish = None
        if self._alarms is not None:
            self._alarms.close()
        if self.drivers:
            await asyncio.gather(
                *(driver.stop() for driver in self.drivers.values()), return_exceptions=True
            )
        try:
            async with asyncio.timeout(DRAIN_DEADLINE):
                await self.drain()
        except TimeoutError:
            self._log.error("drain_overran", seconds=DRAIN_DEADLINE, left=self._events.qsize())
        if self.background is not None:
            await self.background.stop()
            self.background = None
        if self.service.checkpoint_signer is not None:
            await self.service.checkpoint_signer.stop()
        if self.witnesses is not None:
            await self.witnesses.stop()
            self.witnesses = None
        if self.upkeep is not None:
            await self.upkeep.stop()
            self.upkeep = None
            async with self._lock:
                self._journal_at_stop()
        tasks = [*self._workers, *self._unfinished, *([self._consumer] if self._consumer else [])]
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=DRAIN_DEADLINE)
            for task in stuck:
                self._log.error("task_stop_overran", task=task.get_name())
        self._workers = []
        self._consumer = None
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None
        self.service.close()
        if self.floor is not None:
            # after the journal's last commit: what is left goes now, or at the next start
            await asyncio.get_running_loop().run_in_executor(None, self.floor.stop)

    def _journal_at_stop(self) -> None:
        """A clean stop: a checkpoint when between rounds (a fast next start), then a seal."""
        if self.service.journal.failure is not None:
            return  # dealing stopped on a failed write: nothing more is written
        try:
            if self.service.between_rounds():
                self.service.checkpoint()
            self.service.seal()
            if self.service.checkpoint_signer is not None:
                self.service.checkpoint_signer.sign()  # the tree as the table stops
        except Exception as error:  # the stop goes on: the journal is closed below regardless
            self._log.exception("journal_stop_failed", error=str(error))

    async def journal_damage_accepted(self, damage: StartDamage) -> None:
        """Started on purpose on a damaged journal: the fact journaled, an alarm, a metric."""
        self.journal_damage = damage
        self.service.journal.append(
            "note",
            {
                "type": "journal_damage_accepted",
                "reason": damage.message,
                "first_bad_seq": damage.first_bad_seq,
            },
            round_number=self.service.engine.round_number,
            durable=True,
        )
        metrics.JOURNAL_START_DAMAGE.set(1)
        self._log.error(
            "journal_damage_accepted", reason=damage.message, first_bad_seq=damage.first_bad_seq
        )
        await self._publish(
            {
                "message": "alarm",
                "alarm": "journal_damaged",
                "reason": f"started on a damaged journal on purpose: {damage.message}",
                "first_bad_seq": damage.first_bad_seq,
            }
        )

    async def witness_refused(self, refusal: Refusal) -> None:
        """A witness refuses the journal's checkpoints: it cosigned another history than the
        journal now holds (cut, restored from an older copy, rewritten). Journaled, a critical
        alarm; dealing goes on (the live record verified at start), compliance decides."""
        body = {
            "type": "witness_refused",
            "witness": refusal.witness,
            "url": refusal.url,
            "status": refusal.status,
            "reason": refusal.reason,
            "size": refusal.size,
        }
        async with self._lock:
            if self.service.journal.failure is None:
                with contextlib.suppress(JournalError):  # a failed write stops dealing itself
                    self.service.journal.append(
                        "note", body, round_number=self.service.engine.round_number, durable=True
                    )
        await self._publish(
            {
                "message": "alarm",
                "alarm": "witness_refused",
                "severity": "critical",
                "witness": refusal.witness,
                "reason": f"witness {refusal.witness} refuses the journal: {refusal.reason}",
            }
        )

    def start_background_verifier(self) -> None:
        """After READY: every segment walked end to end by a child at the lowest priority."""
        journal = self.service.journal
        self.background = BackgroundVerifier(
            journal.path,
            lambda: journal.last_seq,
            self.background_damage,
            table=self.config.table_id,
        )
        self.background.start()

    async def background_damage(self, verdict: Mapping[str, Any]) -> None:
        """The background walk found damage in the history: journaled, a critical alarm.

        Dealing goes on: the live record is sound (the start verified it); what is damaged is
        history, which the operator takes to compliance (docs/journal.md).
        """
        reason = str(verdict.get("message"))
        first_bad = verdict.get("first_bad_seq")
        async with self._lock:
            if self.service.journal.failure is None:
                with contextlib.suppress(JournalError):  # a failed write stops dealing itself
                    self.service.journal.append(
                        "note",
                        {
                            "type": "journal_damage_found",
                            "reason": reason,
                            "first_bad_seq": first_bad,
                            "found_by": "background_verifier",
                        },
                        round_number=self.service.engine.round_number,
                        durable=True,
                    )
        await self._publish(
            {
                "message": "alarm",
                "alarm": "journal_damaged",
                "severity": "critical",
                "reason": f"the background walk of the journal found damage: {reason}",
                "first_bad_seq": first_bad,
            }
        )

    # -- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The public status: the service's (engine, devices) plus identities and interlocks."""
        status = self.service.status()
        status["device_identities"] = {
            name: driver.health.get("identity") for name, driver in self.drivers.items()
        }
        status["interlocks"] = self.interlocks.as_dict()
        status["journal"] = self.journal_status()
        if self.refusals:
            status["refused_devices"] = dict(self.refusals)
        if self.floor is not None:
            status["floor"] = self.floor.status()
        if self.witnesses is not None:
            status["witnesses"] = self.witnesses.status()
        status["dealing"] = "stopped" if self.dealing_stopped else "allowed"
        if self.dealing_stopped:
            status["dealing_stopped"] = dict(self.dealing_stopped)
        if self.floor_divergence:
            status["floor_divergence"] = dict(self.floor_divergence)
        since = status.pop("devices_since", {})
        status["devices_down"] = {
            name: {"since": since.get(name), "reason": self.why_down(name)}
            for name, state in status["devices"].items()
            if state != "up"
        }
        return status

    def journal_status(self) -> dict[str, Any]:
        """The journal's state for `tablectl status`: where it is, sealed or not, damaged."""
        journal = self.service.journal
        sealer = self.service.sealer
        return {
            "last_seq": journal.last_seq,
            "gaming_day": self.upkeep.segment_day.isoformat() if self.upkeep else None,
            "sealed": sealer is not None,
            "last_sealed_epoch": sealer.last_sealed_epoch if sealer is not None else None,
            "started_damaged": self.journal_damage is not None,
            "background_damage": (
                self.background.damage["message"]
                if self.background is not None and self.background.damage is not None
                else None
            ),
            "clock_step": self._clock_step_status(),
        }

    def _clock_step_status(self) -> dict[str, Any] | None:
        watch = self.upkeep.clock_watch if self.upkeep is not None else None
        step = watch.step if watch is not None else self._start_step
        return None if step is None else step.note()

    def why_down(self, name: str) -> str:
        """Why a device is down, in the words of its driver (refusal, transport error ...)."""
        if name in self.refusals:
            return f"refused: {self.refusals[name]}"
        driver = self.drivers.get(name)
        if driver is None:
            return "not started"
        if driver.last_error:
            return str(driver.last_error)
        if driver.sessions == 0:
            return "has not answered the handshake since the daemon started"
        return "lost, reconnecting"

    def status_line(self) -> str:
        """One line for systemd's STATUS=: why dealing stopped, or the round, state, devices."""
        if self.dealing_stopped:
            return f"STOPPED DEALING: {self.dealing_stopped['reason']}; devices locked"
        engine = self.service.engine  # round and state only: no status built per event
        down = sorted(name for name, up in self.service.devices_up.items() if not up)
        devices = f"down: {', '.join(down)}" if down else "all devices up"
        line = f"round {engine.round_number} {engine.state}; {devices}"
        if self.interlocks.shoe:  # why the shoe deals no card now
            line += f"; dealing held: {', '.join(sorted(self.interlocks.shoe))}"
        return line

    # -- fail-stop ---------------------------------------------------------------------------

    def stop_dealing(self, reason: str, *, cause: str = "journal_write_failed") -> None:
        """Fail-stop: the record failed, so the table deals no more (called once; idempotent).

        Locks the dispensing devices with commands that need no journal, counts it, raises an
        alarm, says it in STATUS= and `status`, and asks run_daemon to end the process
        (non-zero: systemd restarts it, and the restart replays the journal as it is). No event
        is handled after this: the engine is never ahead of its journal.
        """
        if self.dealing_stopped is not None:
            return
        since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.dealing_stopped = {"reason": reason, "cause": cause, "since": since}
        self.exit_code = EXIT_STOPPED_DEALING
        metrics.DEALING_STOPPED.labels(reason=cause).set(1)
        self._log.critical("dealing_stopped", cause=cause, reason=reason)
        self.interlocks.shoe.add(cause)
        self.interlocks.shuffler.add(cause)
        self._sync()
        self._last_status = self.status_line()
        self.notifier.status(self._last_status)
        with contextlib.suppress(RuntimeError):  # no running loop: nobody to tell
            asyncio.get_running_loop().create_task(
                self._publish(
                    {
                        "message": "alarm",
                        "alarm": "dealing_stopped",
                        "cause": cause,
                        "reason": f"dealing stopped, devices locked: {reason}",
                    }
                )
            )
        if self.on_stopped_dealing is not None:
            self.on_stopped_dealing()

    # -- health ------------------------------------------------------------------------------

    async def _floor_gauge_loop(self) -> None:
        """The floor's rows and seconds behind, from this side, whatever its shipper does."""
        from tablectl.controller.floor.shipper import GAUGE_SECONDS

        while self.floor is not None:
            self.floor.refresh()
            await asyncio.sleep(GAUGE_SECONDS)

    def start_health(self, interval: float) -> None:
        """Read the journal's size and the free space under it now and every `interval` s."""
        self.update_health()
        if interval > 0:
            self._health = asyncio.get_running_loop().create_task(
                self._health_loop(interval), name="daemon:health"
            )

    async def _health_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.update_health()

    def update_health(self) -> None:
        journal = self.service.journal
        self._health_round = self.service.engine.round_number
        free = free_bytes(journal.path)
        if free is not None:
            metrics.JOURNAL_FREE_BYTES.set(free)
            low = free < WARN_FREE_BYTES
            if low and not self._space_low:
                self._log.warning(
                    "journal_space_low", free_bytes=free, warning_below=WARN_FREE_BYTES
                )
            self._space_low = low
        metrics.JOURNAL_SIZE_BYTES.set(journal.size_on_disk())
        # The live segment's size over the rounds it holds (a roll-over begins a new file):
        # with none yet, the last figure stands (see metrics.JOURNAL_BYTES_PER_ROUND).
        rounds = self.service.segment_rounds
        if rounds > 0 and self.dealing_stopped is None:
            logical = journal.logical_size()
            if logical:
                metrics.JOURNAL_BYTES_PER_ROUND.set(logical / rounds)

    def _update_status(self) -> None:
        if self.service.engine.round_number != self._health_round:
            self.update_health()  # the journal's growth per round, measured as rounds go by
        line = self.status_line()
        if self.ready.is_set() and line != self._last_status:
            self._last_status = line
            self.notifier.status(line)

    # -- events ------------------------------------------------------------------------------

    def _device_event(self, event: dict[str, Any]) -> None:
        """The drivers' event callback: an event with nothing ahead of it is handled at once.

        With the queue empty, no handler suspended and the lock free (no operator event or
        journal upkeep under way), the event is handled here, inside the driver's callback,
        rather than by the consumer task on the loop's next turn: that turn was 25-35 us of
        the daemon's own ~120 us per card (issue 16, docs/performance.md). Any other time it
        is queued behind what is ahead of it, so device and operator events keep one order.
        The journal's commit still comes before any command or reply the event causes.
        """
        consumer = self._consumer
        if (
            consumer is None
            or consumer.done()
            or self._unfinished
            or self._lock.locked()
            or not self._events.empty()
        ):
            self._events.put_nowait(event)
            return
        start_eagerly(self._handle_and_log(event), self._unfinished)

    async def _consume(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle_and_log(event)
            finally:
                self._events.task_done()

    async def _handle_and_log(self, event: dict[str, Any]) -> None:
        try:
            await self._handle_device_event(event)
        except JournalError as error:  # the journal told stop_dealing already
            self._log.error("device_event_not_recorded", type=event.get("type"), error=str(error))
        except Exception:  # one bad event must not end the table's event loop
            self._log.exception("device_event_failed", type=event.get("type"))

    async def drain(self) -> None:
        """Wait until every device event received so far is handled (tests, the demo dealer)."""
        while self._unfinished:
            await asyncio.wait(set(self._unfinished))
        if self._consumer is not None and not self._consumer.done():
            await self._events.join()

    async def _handle_device_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in IGNORED_DEVICE_REPORTS:
            return
        if self.dealing_stopped is not None:
            # Nothing more can be recorded, so nothing more is decided (type only: H7).
            self._log.warning("device_event_not_handled", type=kind, device=event.get("device"))
            return
        async with self._lock:
            if self.upkeep is not None:
                # a new gaming day's roll-over before the event too: a round whose first
                # event comes after the day's start, with no event between it and the round
                # before, begins in the new day's segment, not the closed one
                self.upkeep.between_events()
            if kind == "device_refused":
                await self._device_refused(event)
            elif kind not in DEVICE_EVENTS:
                # A status report (or a driver claiming an operator's event, which only the
                # operator socket may send): kept for the audit trail, never decided on.
                if kind not in AUDITED_DEVICE_REPORTS:
                    self._log.warning("device_event_not_decided", type=kind)
                body = {k: v for k, v in event.items() if k != "type"}
                # Durable like any event: a device's confirmation (dispensing_locked) is evidence.
                self.service.journal.append(
                    "note",
                    {"type": "device_report", "report": kind, **body},
                    round_number=self.service.engine.round_number,
                    durable=True,
                )
            else:
                decisions = await self.service.handle_event(event, source="device")
                self._follow(event, decisions)
                if kind == "device_connected":
                    self.refusals.pop(str(event.get("device")), None)
                    self._sync(only=str(event.get("device")))
                elif kind in ("shuffle_completed", "shoe_loaded"):
                    self._sync(only=str(event.get("device")))
                elif kind == "device_lost":
                    # it may come back reset: tell it again when it reconnects
                    self._applied.pop(str(event.get("device")), None)
                    await self._device_lost(event)
            if event.get("fault") == UNDECODABLE_FRAME:
                await self._undecodable_frame(event)
            self._update_status()
            if self.upkeep is not None:
                self.upkeep.between_events()  # a new gaming day's roll-over, between rounds

    async def operator_event(
        self, event: dict[str, Any], peer: PeerCredentials | None = None
    ) -> list[dict[str, Any]]:
        """An operator event, as from the socket (in-process callers: the demo's dealer).

        NotDealing when dealing has stopped (or stops on this event's journal write): the
        operator is told, and the event counts as not taken; an event journaled whose record
        failed right after it (its checkpoint) is acted on, and the reply says it was recorded.
        """
        if peer is None:  # from inside the process: the service user, and journaled so
            event = stamp_in_process(event)
        async with self._lock:
            if self.dealing_stopped is not None:
                raise NotDealing(f"dealing stopped: {self.dealing_stopped['reason']}")
            if event.get("type") == CLOCK_STEP_ACKNOWLEDGED:
                return self._acknowledge_clock(event)
            if event.get("type") == FLOOR_DIVERGENCE_ACKNOWLEDGED:
                return self._acknowledge_divergence(event)
            if self.floor_divergence is not None and event.get("type") == "bets_closed":
                raise NotDealing(
                    f"dealing held: {self.floor_divergence['reason']}; a supervisor sends "
                    f"{FLOOR_DIVERGENCE_ACKNOWLEDGED} to deal on without the floor's copy"
                )
            self.service.recorded_then_failed = None
            if self.upkeep is not None:
                self.upkeep.between_events()  # the roll-over before the event too (see above)
            try:
                decisions = await self.service.handle_operator_event(event, peer)
            except JournalError as error:
                raise NotDealing(f"not recorded, dealing stopped: {error}") from error
            self._follow(event, decisions)
            self._update_status()
            if self.upkeep is not None:
                self.upkeep.between_events()  # a new gaming day's roll-over, between rounds
            failed_after = self.service.recorded_then_failed
            if failed_after is not None:
                seq, why = failed_after
                raise NotDealing(
                    f"recorded (journal row {seq}) and acted on, but the record failed right "
                    f"after it, so dealing stopped: {why}"
                )
            return decisions

    # -- clock steps (docs/journal.md, "Clock steps") ---------------------------------------

    def clock_stepped(self, step: ClockStep) -> None:
        """A clock step: journaled (durable), seals, retention and roll-over held, counted, an
        alarm to operator subscribers."""
        self.service.seals_held = step.reason()
        self.service.journal.append(
            "note", step.note(), round_number=self.service.engine.round_number, durable=True
        )
        metrics.CLOCK_STEP.set(1)
        metrics.CLOCK_STEPS.labels(direction=step.direction).inc()
        self._log.error("clock_step", **{k: v for k, v in step.note().items() if k != "type"})
        self._schedule_publish(
            {"message": "alarm", "alarm": "clock_step", **step.note(), "reason": step.reason()}
        )

    def on_clock(self, change: str, step: ClockStep) -> None:
        """The upkeep's clock watch: a new step while running, or a held one agreeing again."""
        if change == "step":
            self.clock_stepped(step)
        else:
            self._clock_resolved(step, "the clock agrees again", None)

    def _clock_resolved(self, step: ClockStep, how: str, caller: Any) -> None:
        note: dict[str, Any] = {"type": "clock_step_resolved", "how": how, "step": step.note()}
        if caller is not None:
            note["caller"] = caller
        self.service.journal.append(
            "note", note, round_number=self.service.engine.round_number, durable=True
        )
        self.service.seals_held = None
        metrics.CLOCK_STEP.set(0)
        self._log.warning("clock_step_resolved", how=how, direction=step.direction)
        self._schedule_publish(
            {"message": "notice", "notice": "clock_step_resolved", "how": how, **step.note()}
        )

    def _acknowledge_clock(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A supervisor accepts the clock as it is now (`clock_step_acknowledged`)."""
        watch = self.upkeep.clock_watch if self.upkeep is not None else None
        if watch is None or watch.step is None:
            raise NotDealing("clock_step_acknowledged: no clock step is held (nothing to do)")
        step = watch.step
        caller = event.get("caller") or {"user": event.get("by")}
        try:
            self._clock_resolved(step, "acknowledged", caller)
        except JournalError as error:
            raise NotDealing(f"not recorded, dealing stopped: {error}") from error
        watch.acknowledge()
        sealer = self.service.sealer
        if sealer is not None:
            # the supervisor says the clock is right: the epochs it skipped are gone unsealed
            sealer.catch_up(datetime.datetime.now(datetime.UTC))
        return []

    # -- divergence from the floor's copy (docs/floor.md, "Divergence") ----------------------

    def _on_divergence(self, why: str) -> None:
        task = asyncio.get_running_loop().create_task(self.floor_diverged(why))
        self._unfinished.add(task)
        task.add_done_callback(self._unfinished.discard)

    async def floor_diverged(self, why: str) -> None:
        """The journal no longer matches the floor's copy (at start or while running): a
        `divergence` note, a critical alarm, and, unless `[floor] on_divergence = "keep
        dealing"`, dealing held (the shoe and the shuffler locked, no round opened) until a
        supervisor acknowledges."""
        floor = self.config.floor
        hold = floor is None or floor.stop_on_divergence
        dealing = (
            f"held until a supervisor sends {FLOOR_DIVERGENCE_ACKNOWLEDGED}"
            if hold
            else 'goes on (on_divergence = "keep dealing")'
        )
        since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        async with self._lock:
            if self.service.journal.failure is None:
                with contextlib.suppress(JournalError):  # a failed write stops dealing itself
                    self.service.journal.append(
                        "note",
                        {"type": "divergence", "reason": why, "dealing": dealing},
                        round_number=self.service.engine.round_number,
                        durable=True,
                    )
            if hold:
                self.floor_divergence = {"reason": why, "since": since}
                self.interlocks.shoe.add(FLOOR_DIVERGED_HOLD)
                self.interlocks.shuffler.add(FLOOR_DIVERGED_HOLD)
                self._sync()
                self._update_status()
        self._log.critical("floor_divergence", reason=why, dealing=dealing)
        await self._publish(
            {
                "message": "alarm",
                "alarm": "floor_diverged",
                "severity": "critical",
                "reason": f"the journal no longer matches the floor's copy: {why}",
                "dealing": dealing,
            }
        )

    def _acknowledge_divergence(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A supervisor lets the table deal on without the floor's copy (journaled, who)."""
        held = self.floor_divergence
        if held is None:
            raise NotDealing(
                f"{FLOOR_DIVERGENCE_ACKNOWLEDGED}: no divergence holds dealing (nothing to do)"
            )
        caller = event.get("caller") or {"user": event.get("by")}
        try:
            self.service.journal.append(
                "note",
                {"type": "divergence_acknowledged", "reason": held["reason"], "caller": caller},
                round_number=self.service.engine.round_number,
                durable=True,
            )
        except JournalError as error:
            raise NotDealing(f"not recorded, dealing stopped: {error}") from error
        self.floor_divergence = None
        self.interlocks.shoe.discard(FLOOR_DIVERGED_HOLD)
        self.interlocks.shuffler.discard(FLOOR_DIVERGED_HOLD)
        self._sync()
        self._update_status()
        self._log.warning("floor_divergence_acknowledged", reason=held["reason"])
        self._schedule_publish(
            {"message": "notice", "notice": "floor_divergence_acknowledged", **held}
        )
        return []

    def _schedule_publish(self, message: Mapping[str, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # no running loop: nobody to tell
            asyncio.get_running_loop().create_task(self._publish(message))

    async def _device_lost(self, event: Mapping[str, Any]) -> None:
        """A device lost mid-run: an operator alarm at once (the metric alone is not seen)."""
        device = str(event.get("device"))
        await self._publish(
            {
                "message": "alarm",
                "alarm": "device_lost",
                "device": device,
                "reason": f"{device} stopped answering; reconnecting",
            }
        )

    async def _undecodable_frame(self, event: Mapping[str, Any]) -> None:
        """A frame the driver could not decode: counted, logged and alarmed.

        The shoe's is the engine's to decide (X2: the round void and the cards reshuffled,
        so the shoe is held by that decision like any other); the other kinds' fault events
        are decided by their own rules (C4, H5).
        """
        device = str(event.get("device"))
        if event.get("type") not in DEVICE_FAULT_EVENTS:  # the service counts those
            metrics.record_device_fault(device, UNDECODABLE_FRAME)
        self._log.error("device_fault", device=device, fault=UNDECODABLE_FRAME)
        # the device's own words, card-shaped ones masked: an alarm reaches every terminal (H7)
        said = mask_card_words(str(event.get("detail") or "an undecodable frame"))
        await self._publish(
            {
                "message": "alarm",
                "alarm": "device_fault",
                "device": device,
                "fault": UNDECODABLE_FRAME,
                "reason": f"{device}: {said}; "
                + (
                    "a card may have left it unread: the cards must be reshuffled and the "
                    "round in play is void (X2; C5 for an automated shoe)"
                    if event.get("kind") == "shoe"
                    else "check the device"
                ),
            }
        )

    async def operator_refused(self, refusal: Mapping[str, Any]) -> None:
        """An operator event refused for its caller: journaled durably with who asked, an alarm."""
        async with self._lock:
            try:
                self.service.journal.append(
                    "note",
                    {"type": "operator_refused", **refusal},
                    round_number=self.service.engine.round_number,
                    durable=True,
                )
            except JournalError as error:
                raise NotDealing(f"not recorded, dealing stopped: {error}") from error
        await self._publish({"message": "alarm", "alarm": "operator_refused", **refusal})

    async def _device_refused(self, event: Mapping[str, Any]) -> None:
        """An identity refused at the handshake: journaled durably, counted, an operator alarm."""
        device = str(event.get("device"))
        reason = str(event.get("reason"))
        self.refusals[device] = reason
        self.service.journal.append(
            "note",
            {"type": "device_refused", **event},
            round_number=self.service.engine.round_number,
            durable=True,
        )
        metrics.record_device_fault(device, "refused")
        self._log.error("device_refused", device=device, reason=reason)
        await self._publish({"message": "alarm", "alarm": "device_refused", **event})

    async def _publish(self, message: Mapping[str, Any]) -> None:
        if self.service.publish is not None:
            await self.service.publish(message)

    # -- decisions to device commands -------------------------------------------------------

    def _follow(self, event: Mapping[str, Any], decisions: list[dict[str, Any]]) -> None:
        """Lift holds whose reason has passed (holds are set by `hold`), then sync the devices."""
        self.interlocks.lift(event, decisions)
        self._sync()

    async def _device_commands(self, decision: Mapping[str, Any]) -> None:
        """The service's seam: called after the decision is durable in the journal."""
        self.interlocks.hold(decision)
        self._sync()
        if decision.get("decision") == "reader_disabled":
            # The reference protocol has no "disable" command: the engine refuses the reader's
            # results from now on (H5) and the alarm tells the dealer; logged for the record.
            self._log.warning("reader_disabled", reason=decision.get("reason"))

    def restore_interlocks(self, checkpoint: Mapping[str, Any]) -> None:
        """The holds in force at a checkpoint (its `interlocks`, as `Interlocks.as_dict`)."""
        held = checkpoint.get("interlocks", {})
        # a divergence's hold is the shipper's to raise again at this start, not the record's
        self.interlocks.shoe = set(held.get("shoe_locked", ())) - {FLOOR_DIVERGED_HOLD}
        self.interlocks.shuffler = set(held.get("shuffler_deck_locked", ())) - {FLOOR_DIVERGED_HOLD}

    def replay_row(self, row: JournalRow) -> None:
        """One journaled row of the replay, folded into the holds (streamed: row by row)."""
        if row.kind == "event":
            if self._replayed_event is not None:
                self.interlocks.lift(self._replayed_event, self._replayed_decisions)
            self._replayed_event, self._replayed_decisions = row.body, []
        elif row.kind == "decision":
            self._replayed_decisions.append(row.body)
            self.interlocks.hold(row.body)

    def replay_done(self) -> None:
        if self._replayed_event is not None:
            self.interlocks.lift(self._replayed_event, self._replayed_decisions)
        self._replayed_event, self._replayed_decisions = None, []

    def replay_progress(self, events: int, seq: int, last_seq: int) -> None:
        """A long replay: say how far it is and ask systemd for more time (sd_notify)."""
        self.notifier.notify(
            f"STATUS=replaying the journal: row {seq} of {last_seq} ({events} events)",
            f"EXTEND_TIMEOUT_USEC={REPLAY_EXTEND_USEC}",
            drop_when_busy=True,  # the next progress notice says it again
        )

    def _sync(self, only: str | None = None) -> None:
        """Send each connected device the hold state it should be in, when it differs."""
        for name, driver in self.drivers.items():
            if only is not None and name != only:
                continue
            if driver.kind == "shoe":
                wanted = "lock_dispensing" if self.interlocks.shoe else "unlock_dispensing"
            elif driver.kind == "shuffler":
                wanted = "lock_deck" if self.interlocks.shuffler else "release_deck"
            else:
                continue
            known = self._applied.get(name)
            if known == wanted:
                continue
            if known is None and wanted == "release_deck":
                continue  # never locked by us: nothing to release (a release needs a deck)
            self._send(name, wanted)

    def _send(self, name: str, command: str) -> None:
        driver = self.drivers[name]
        queue = self._commands.get(name)
        if queue is None or not driver.up:
            # Sent when the device connects (`_sync` on device_connected).
            self._log.info("device_command_deferred", device=name, command=command)
            return
        self._applied[name] = command  # what it will be told; a failure forgets it below
        queue.put_nowait((command, getattr(driver, command)))

    async def _command_worker(
        self, driver: DeviceDriver, queue: asyncio.Queue[tuple[str, Callable[[], Any]]]
    ) -> None:
        while True:
            command, method = await queue.get()
            try:
                await method()
                self._log.info("device_command", device=driver.name, command=command)
            except DriverError as error:
                self._log.warning(
                    "device_command_failed", device=driver.name, command=command, error=str(error)
                )
                if command in RELEASES:
                    # still held as far as we know (a shuffler with no shuffled deck, a jammed
                    # shoe): tried again when the device has a deck or is loaded again
                    self._applied[driver.name] = RELEASES[command]
                elif self._applied.get(driver.name) == command:
                    del self._applied[driver.name]  # not in force: sent again on reconnection


def config_on_disk(running: TableConfig) -> dict[str, Any]:
    """The configuration file as it is now, next to the one the daemon runs with (SIGHUP).

    Nothing is applied: `changed` names the settings a restart between rounds would change,
    `problems` what would refuse that restart (exit 2).
    """
    said: dict[str, Any] = {
        "file": running.source,
        "reason": "the configuration is read at start only: restart between rounds to apply it",
    }
    try:
        on_disk = load_config(running.source)
    except ConfigError as error:
        said["problems"] = list(error.problems)
        return said
    said["changed"] = sorted(
        name
        for name in (f.name for f in fields(TableConfig))
        if getattr(on_disk, name) != getattr(running, name)
    )
    return said


async def run_daemon(
    config: TableConfig,
    *,
    stop: asyncio.Event | None = None,
    usb_backend: object | None = None,
    notify: SdNotifier | None = None,
    on_ready: Callable[[Daemon], None] | None = None,
    device_wait: float = DEFAULT_DEVICE_WAIT,
    handle_signals: bool = True,
    accept_damaged_journal: bool = False,
    lock: TableLock | None = None,
    fail_stop_linger: float = DEFAULT_FAIL_STOP_LINGER,
    health_interval: float = DEFAULT_HEALTH_INTERVAL,
    **service_options: Any,
) -> int:
    """Run one table in the current event loop until `stop` is set or SIGTERM/SIGINT; exit status.

    `usb_backend`: a pyusb backend handed to every USB transport (tests and `tablectl demo`
    pass `simulators.usb_backend.SimulatedUsbBackend`); None: libusb. `notify`: the sd_notify
    writer (default: from NOTIFY_SOCKET). `on_ready(daemon)` is called once READY was sent;
    `daemon.service`, `daemon.drivers`, `daemon.port` and `daemon.status()` are then usable.
    `lock`: the table's lock when the caller took it (`tablectl run` takes it before its
    preflight); otherwise it is taken here, before anything else is touched.
    `service_options` go to `TableService` (e.g. `group_commit=True`, `random_source=`).
    Returns EXIT_OK after a clean stop, EXIT_REFUSED when the table cannot start (the error is
    logged; also when the journal fails its start check: `accept_damaged_journal=True` starts
    anyway, the fact journaled, an alarm raised, sequence numbers going on after the highest
    ever written), EXIT_STOPPED_DEALING after a journal write failed (fail-stop).
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    log = get_logger("daemon", table=config.table_id)
    started = time.monotonic()
    if lock is None:
        try:
            lock = acquire_table_lock(config.journal_path)
        except (TableLocked, LockError) as error:
            log.error("cannot_start", error=str(error))
            return EXIT_REFUSED
    notifier = notify if notify is not None else SdNotifier()
    installed: list[signal.Signals] = []
    if handle_signals:

        def on_signal(sig: signal.Signals) -> None:
            if stop.is_set():
                # A second signal: the operator wants it gone now (the journal is fsynced per
                # event; the lock and ports go with the process).
                log.error("second_signal_exit_now", signal=sig.name)
                os._exit(128 + sig.value)
            log.info("signal", signal=sig.name)
            stop.set()

        def on_hangup() -> None:
            # SIGHUP's default action ends the process, and systemd takes that for a clean
            # exit (no restart): a habit's `kill -HUP` would leave the table down. The
            # configuration is the daemon's for its whole run (a game's options never change
            # mid-round); the file on disk is checked and what a restart would change is said.
            log.warning("signal_hup_ignored", **config_on_disk(config))

        for sig, handler, args in (
            (signal.SIGTERM, on_signal, (signal.SIGTERM,)),
            (signal.SIGINT, on_signal, (signal.SIGINT,)),
            (signal.SIGHUP, on_hangup, ()),
        ):
            try:
                loop.add_signal_handler(sig, handler, *args)
                installed.append(sig)
            except (RuntimeError, ValueError):  # not the main thread: the caller owns signals
                break
    watchdog = Watchdog(notifier, loop)
    watchdog.start()
    daemon: Daemon | None = None
    try:
        try:
            # the other directories a durable write of this table's may leave a temporary in
            swept = [witnessed_dir(config.journal_path)]
            if config.archive_dir is not None:
                swept.append(config.archive_dir)
            if config.floor is not None and config.floor.passfile is not None:
                swept.append(config.floor.passfile.parent)
            for done in recover_at_start(
                config.journal_path, config.sealing_key_path, also_sweep=swept
            ):
                log.warning("journal_recovered_at_start", what=done)
            journal = Journal(config.journal_path)
        except (JournalError, OSError) as error:
            log.error("cannot_start", error=str(error))
            notifier.status(f"refusing to start: {error}")
            return EXIT_REFUSED
        service = TableService(config, journal, **service_options)
        daemon = Daemon(config, service, notifier=notifier, usb_backend=usb_backend)
        daemon.started_at = started
        running = daemon

        def stopped_dealing() -> None:
            loop.call_later(fail_stop_linger, stop.set)

        daemon.on_stopped_dealing = stopped_dealing
        journal.on_failure = lambda error: running.stop_dealing(str(error))
        try:
            daemon.build_drivers()
            notifier.status("verifying the journal")
            damage = check_before_start(journal)
            if damage is None and config.witness is not None:
                notifier.status("checking the journal against its witnesses")
                anchored = await loop.run_in_executor(
                    None, witness_anchor_damage, config, journal.path, log
                )
                if anchored is not None:
                    damage = StartDamage(anchored.message, anchored.first_bad_seq)
            if damage is not None and not accept_damaged_journal:
                log.error(
                    "journal_damaged", error=damage.message, first_bad_seq=damage.first_bad_seq
                )
                notifier.status(f"refusing to start: journal damaged: {damage.message}")
                journal.discard()
                return EXIT_JOURNAL_DAMAGED
            if damage is not None:
                # sequence numbers are never reused: not those cut from the tail, nor those of
                # a closed segment this live file does not follow
                journal.continue_after(
                    max(damage.cut_from or 0, highest_seq_written(config.journal_path))
                )
            clock_watch = ClockWatch(config.clock_step_hours * 3600.0)
            tail = journal.tail_rows(1)
            stepped = clock_watch.at_start(tail[0].recorded_at if tail else None)
            if stepped is not None:
                daemon._start_step = stepped
                daemon.clock_stepped(stepped)  # before any seal: the key must not jump
            service.sealer = open_sealer(config, log)
            service.seal_unsealed_at_start()
            service.checkpoint_signer = open_checkpoint_signer(config, journal, log)
            service.checkpoint_parts["interlocks"] = daemon.interlocks.as_dict
            # The journal is streamed once for both: the holds, then the replay's restart
            # decisions (controller_restarted) go through the device-command seam like any
            # other, so a void locks the shoe.
            daemon.journal_rows = journal.tail_rows(OPERATOR_MEMORY_ROWS)
            service.device_commands = daemon._device_commands
            notifier.status("replaying the journal")
            await service.start(
                on_row=daemon.replay_row,
                on_checkpoint=daemon.restore_interlocks,
                progress=daemon.replay_progress,
            )
            daemon.replay_done()
            await daemon.start()
            if damage is not None:
                await daemon.journal_damage_accepted(damage)
            if stepped is not None:  # the alarm once subscribers can be told
                await daemon._publish(
                    {
                        "message": "alarm",
                        "alarm": "clock_step",
                        **stepped.note(),
                        "reason": stepped.reason(),
                    }
                )
            daemon.upkeep = JournalUpkeep(service, daemon._lock)
            daemon.upkeep.clock_watch = clock_watch
            daemon.upkeep.on_clock = daemon.on_clock
            if daemon.floor is not None:
                daemon.upkeep.floor_confirmed_seq = daemon.floor.confirmed_seq
            daemon.upkeep.start()
            if service.checkpoint_signer is not None:
                service.checkpoint_signer.start()
                if config.witness is not None:
                    daemon.witnesses = DaemonWitnesses(
                        config.witness, service.checkpoint_signer, daemon.witness_refused
                    )
                    daemon.witnesses.start()
                    # the journal as it starts, shown to the witnesses now (not at the round's
                    # end): a history they cannot cosign is said at once
                    service.checkpoint_signer.request()
            daemon.start_health(health_interval)
        except (
            DaemonError,
            OperatorError,
            ServiceError,
            JournalError,
            SealingError,
            NoteError,
            OSError,
        ) as error:
            log.error("cannot_start", error=str(error))
            return EXIT_REFUSED
        waiting = loop.create_task(daemon.wait_for_devices(device_wait))
        stopping = loop.create_task(stop.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if waiting.done():
            stopping.cancel()
            await daemon.announce_ready(waiting.result())
            daemon.start_background_verifier()
            if on_ready is not None:
                on_ready(daemon)
            await stop.wait()
        else:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        notifier.stopping(daemon.status_line() if daemon.dealing_stopped else "stopping")
        log.info("stopping", exit_code=daemon.exit_code)
    finally:
        watchdog.stop()
        if daemon is not None:
            await daemon.close()
        for sig in installed:
            loop.remove_signal_handler(sig)
        if notify is None:
            notifier.close()
        lock.release()
    # A clean stop writes a checkpoint and a seal (Daemon.close): when that write of the
    # record fails, the stop is not clean (exit 3, like any failed write of the record).
    assert daemon is not None
    return daemon.exit_code


def open_checkpoint_signer(
    config: TableConfig, journal: Journal, log: Any
) -> CheckpointSigner | None:
    """The table's identity key, when `journal setup-keys` wrote one: the daemon signs its
    Merkle log's checkpoints (None: it signs none, and says so)."""
    path = identity_key_path(config.sealing_key_path)
    if not path.exists():
        log.warning("checkpoints_unsigned", reason=f"no identity key at {path} (setup-keys)")
        return None
    return CheckpointSigner(journal, load_identity_key(path))


def open_sealer(config: TableConfig, log: Any) -> Sealer | None:
    """The sealing key, when `journal setup-keys` wrote one (None: the journal goes unsealed)."""
    path = config.sealing_key_path
    if not config.sealing:
        log.warning("journal_unsealed", reason='sealing = "off" in the configuration')
        return None
    if not path.exists():  # `tablectl run` refused this in its preflight; a caller in process
        log.error("journal_unsealed", reason=f"no sealing key at {path} (journal setup-keys)")
        return None
    sealer = Sealer(path)
    for what in sealer.repaired:  # a format-1 key converted, or an erased key's slot wiped
        log.warning("sealing_key_repaired", what=what)
    return sealer
