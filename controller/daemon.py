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
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tablectl.controller import metrics
from tablectl.controller.config import DeviceConfig, TableConfig
from tablectl.controller.events import SCHEMA
from tablectl.controller.journal import Journal, JournalError, JournalRow, read_rows
from tablectl.controller.logs import get_logger
from tablectl.controller.metrics import MetricsServer, start_metrics_server
from tablectl.controller.operator import (
    OPERATOR_EVENTS,
    OperatorError,
    OperatorServer,
    PeerCredentials,
)
from tablectl.controller.sdnotify import SdNotifier, Watchdog
from tablectl.controller.service import ServiceError, TableService
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
#: Exit statuses of `run_daemon`.
EXIT_OK = 0
EXIT_FAILED = 1

# Device reports that are not EVENTS.md events (the hardware confirming a lock, a status
# reading): journaled as notes for the audit trail, never given to the engine. The drivers
# own the list (drivers.base.STATUS_EVENTS), so a new report needs no change here.
AUDITED_DEVICE_REPORTS = STATUS_EVENTS
# The EVENTS.md events a device may send (operator events come from the operator socket only).
DEVICE_EVENTS = frozenset(SCHEMA) - OPERATOR_EVENTS - {"controller_restarted"}
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
        names = {d.get("decision") for d in decisions}
        if "rejected" in names or names & set(SHOE_LOCKING):
            return
        kind = event.get("type")
        if kind == "bets_closed":
            self.shoe -= {"deal_blocked", "round_void", "hands_dead"}
        if kind == "deck_received":
            self.shoe.discard("deck_removed")
            self.shuffler.discard("deck_removed")


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
        self._commands: dict[str, asyncio.Queue[tuple[str, Callable[[], Any]]]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._last_status = ""
        self._applied: dict[str, str] = {}  # device -> the last hold command it acknowledged
        self._log = get_logger("daemon", table=config.table_id)

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
        self._consumer = loop.create_task(self._consume(), name="daemon:events")
        for name, driver in self.drivers.items():
            queue: asyncio.Queue[tuple[str, Callable[[], Any]]] = asyncio.Queue()
            self._commands[name] = queue
            self._workers.append(
                loop.create_task(self._command_worker(driver, queue), name=f"commands:{name}")
            )
            await driver.start(loop, self._events.put_nowait)
        operator = OperatorServer(
            self.config.operator_socket,
            allowed_group=self.config.operator_group,
            handle_event=self.operator_event,
            status=self.status,
        )
        await operator.start()
        self.operator = operator
        self.service.publish = operator.publish
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
        """Wait until every device has handshaken, at most `timeout` s; the absent ones' names."""
        if self.drivers:
            await asyncio.wait(
                [
                    asyncio.ensure_future(driver.wait_connected(timeout))
                    for driver in self.drivers.values()
                ]
            )
        return [name for name, driver in self.drivers.items() if not driver.up]

    async def announce_ready(self, absent: list[str]) -> None:
        """READY=1 with the round's state; absent devices raise an alarm and show in STATUS."""
        await self.drain()
        self.ready_seconds = time.monotonic() - self.started_at
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
            absent=absent,
            metrics=f"{self.config.metrics_host}:{self.port}",
        )

    @property
    def port(self) -> int | None:
        """The metrics port actually bound (the configured one, or the free one for port 0)."""
        return self.metrics_server.port if self.metrics_server is not None else None

    async def close(self) -> None:
        """Stop serving, drain events already received, stop drivers, close the journal."""
        if self.operator is not None:
            await self.operator.close()
            self.operator = None
        self.service.publish = None
        for driver in self.drivers.values():
            with contextlib.suppress(Exception):
                await driver.stop()
        await self.drain()
        for task in [*self._workers, *([self._consumer] if self._consumer else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []
        self._consumer = None
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None
        self.service.close()

    # -- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The public status: the service's (engine, devices) plus identities and interlocks."""
        status = self.service.status()
        status["device_identities"] = {
            name: driver.health.get("identity") for name, driver in self.drivers.items()
        }
        status["interlocks"] = self.interlocks.as_dict()
        if self.refusals:
            status["refused_devices"] = dict(self.refusals)
        return status

    def status_line(self) -> str:
        """One line for systemd's STATUS=: the round, its state, and any device down."""
        engine = self.service.engine_status()
        down = sorted(name for name, up in self.service.devices_up.items() if not up)
        devices = f"down: {', '.join(down)}" if down else "all devices up"
        return f"round {engine.get('round', 0)} {engine.get('state', '?')}; {devices}"

    def _update_status(self) -> None:
        line = self.status_line()
        if self.ready.is_set() and line != self._last_status:
            self._last_status = line
            self.notifier.status(line)

    # -- events ------------------------------------------------------------------------------

    async def _consume(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle_device_event(event)
            except Exception:  # one bad event must not end the table's event loop
                self._log.exception("device_event_failed", type=event.get("type"))
            finally:
                self._events.task_done()

    async def drain(self) -> None:
        """Wait until every device event received so far is handled (tests, the demo dealer)."""
        if self._consumer is not None and not self._consumer.done():
            await self._events.join()

    async def _handle_device_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in IGNORED_DEVICE_REPORTS:
            return
        async with self._lock:
            if kind == "device_refused":
                await self._device_refused(event)
            elif kind not in DEVICE_EVENTS:
                # A status report (or a driver claiming an operator's event, which only the
                # operator socket may send): kept for the audit trail, never decided on.
                if kind not in AUDITED_DEVICE_REPORTS:
                    self._log.warning("device_event_not_decided", type=kind)
                body = {k: v for k, v in event.items() if k != "type"}
                self.service.journal.append(
                    "note",
                    {"type": "device_report", "report": kind, **body},
                    round_number=self.service.engine.round_number,
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
            self._update_status()

    async def operator_event(
        self, event: dict[str, Any], peer: PeerCredentials | None = None
    ) -> list[dict[str, Any]]:
        """An operator event, as from the socket (in-process callers: the demo's dealer)."""
        async with self._lock:
            decisions = await self.service.handle_operator_event(event, peer)
            self._follow(event, decisions)
            self._update_status()
            return decisions

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

    def rebuild_interlocks(self, rows: Iterable[JournalRow]) -> None:
        """The holds in force at the end of the journal's `rows` (replayed: no commands)."""
        event: Mapping[str, Any] | None = None
        decisions: list[dict[str, Any]] = []
        for row in rows:
            if row.kind == "event":
                if event is not None:
                    self.interlocks.lift(event, decisions)
                event, decisions = row.body, []
            elif row.kind == "decision":
                decisions.append(row.body)
                self.interlocks.hold(row.body)
        if event is not None:
            self.interlocks.lift(event, decisions)

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


async def run_daemon(
    config: TableConfig,
    *,
    stop: asyncio.Event | None = None,
    usb_backend: object | None = None,
    notify: SdNotifier | None = None,
    on_ready: Callable[[Daemon], None] | None = None,
    device_wait: float = DEFAULT_DEVICE_WAIT,
    handle_signals: bool = True,
    **service_options: Any,
) -> int:
    """Run one table in the current event loop until `stop` is set or SIGTERM/SIGINT; exit status.

    `usb_backend`: a pyusb backend handed to every USB transport (tests and `tablectl demo`
    pass `simulators.usb_backend.SimulatedUsbBackend`); None: libusb. `notify`: the sd_notify
    writer (default: from NOTIFY_SOCKET). `on_ready(daemon)` is called once READY was sent;
    `daemon.service`, `daemon.drivers`, `daemon.port` and `daemon.status()` are then usable.
    `service_options` go to `TableService` (e.g. `group_commit=True`, `random_source=`).
    Returns 0 after a clean stop, 1 when the table cannot start (the error is logged).
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    notifier = notify if notify is not None else SdNotifier()
    log = get_logger("daemon", table=config.table_id)
    started = time.monotonic()
    installed: list[signal.Signals] = []
    if handle_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (RuntimeError, ValueError):  # not the main thread: the caller owns signals
                break
    watchdog = Watchdog(notifier, loop)
    watchdog.start()
    daemon: Daemon | None = None
    try:
        try:
            journal = Journal(config.journal_path)
        except (JournalError, OSError) as error:
            log.error("cannot_start", error=str(error))
            return EXIT_FAILED
        service = TableService(config, journal, **service_options)
        daemon = Daemon(config, service, notifier=notifier, usb_backend=usb_backend)
        daemon.started_at = started
        try:
            daemon.build_drivers()
            # The journal is read once for both: the holds first; then the replay's restart
            # decisions (controller_restarted) go through the device-command seam like any
            # other, so a void locks the shoe.
            rows = list(read_rows(journal.path))
            daemon.rebuild_interlocks(rows)
            service.device_commands = daemon._device_commands
            await service.start(rows)
            await daemon.start()
        except (DaemonError, OperatorError, ServiceError, OSError) as error:
            log.error("cannot_start", error=str(error))
            return EXIT_FAILED
        waiting = loop.create_task(daemon.wait_for_devices(device_wait))
        stopping = loop.create_task(stop.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if waiting.done():
            stopping.cancel()
            await daemon.announce_ready(waiting.result())
            if on_ready is not None:
                on_ready(daemon)
            await stop.wait()
        else:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        notifier.stopping("stopping")
        log.info("stopping")
        return EXIT_OK
    finally:
        watchdog.stop()
        if daemon is not None:
            await daemon.close()
        for sig in installed:
            loop.remove_signal_handler(sig)
        if notify is None:
            notifier.close()
