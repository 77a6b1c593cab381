"""The driver base shared by every device kind, and one abstract class per kind.

The base owns what every driver needs whatever its protocol: the connection
supervisor (open, handshake, reconnect with exponential backoff), health
(``up``, ``device_lost`` / ``device_connected``), the allow-list and identity
pinning, structlog logging that never carries a card, and driver-level
prometheus metrics. A concrete driver supplies the protocol: how to hold a
session over the transport and how frames become docs/events.md events.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import structlog
from prometheus_client import Counter

from tablectl.controller.common.logs import RepeatedFailure
from tablectl.controller.engine.events import UNDECODABLE_FRAME
from tablectl.drivers.protocol.link import LinkSettings
from tablectl.drivers.protocol.messages import Identity
from tablectl.drivers.transport.base import Transport, TransportError

Event = dict[str, Any]
EventCallback = Callable[[Event], None]

log = structlog.get_logger("tablectl.drivers")

#: The driver API this tablectl provides (docs/drivers.md, "The driver API version"): the
#: classes and methods a driver subclasses and calls. MAJOR changes when a driver written for
#: the last one could misbehave (a method renamed, a contract changed); MINOR when something
#: is added that a driver may use (a driver of 1.3 needs tablectl's 1.3 or later 1.x).
DRIVER_API_VERSION = "1.0"

# Driver-level metrics on the default registry. Labels: device and error kind only.
FRAMES_RECEIVED = Counter(
    "tablectl_driver_frames_received_total", "Valid frames received from a device", ["device"]
)
FRAMES_SENT = Counter(
    "tablectl_driver_frames_sent_total", "Frames written to a device (ACKs included)", ["device"]
)
RETRANSMISSIONS = Counter(
    "tablectl_driver_retransmissions_total", "Frames sent again for want of an ACK", ["device"]
)
ERRORS = Counter(
    "tablectl_driver_errors_total",
    "Link and protocol errors by kind (crc, garbage, header, payload, timeout, refused, ...)",
    ["device", "error"],
)
RECONNECTS = Counter(
    "tablectl_driver_reconnect_attempts_total", "Attempts to reopen and handshake", ["device"]
)
#: A link that was up and dropped: what "keeps reconnecting" means (TablectlDeviceReconnecting).
#: Not the attempts above, which climb every retry while a device is simply absent.
LINK_LOSSES = Counter(
    "tablectl_device_link_losses_total",
    "Sessions lost after an accepted handshake (the link to the device dropped)",
    ["device"],
)
#: Errors of the wire itself (frames lost or damaged, answers missing), as the
#: TablectlDeviceLinkErrors alert counts them; the framing's DecodeError words among them.
LINK_ERRORS = (
    "garbage",
    "header",
    "version",
    "length",
    "crc",
    "nak_received",
    "duplicate",
    "timeout",
    "payload",
    "link_failure",
)
#: Errors of the session around the link (connecting, identity, the driver itself).
SESSION_ERRORS = (
    "transport_lost",
    "connect_failed",
    "refused",
    "driver_error",
    "before_handshake",
    "unknown_message",
    "command_refused",
)

#: Events the drivers add to docs/events.md (docs/protocol.md): device status for the status
#: interface, metrics and logs, not round events; the round engine does not take them.
STATUS_EVENTS: frozenset[str] = frozenset(
    {
        "shuffle_progress",
        "shuffler_status",
        "deck_locked",
        "deck_released",
        "dispensing_locked",
        "reader_self_test",
        "device_fault",
    }
)
#: Each kind's fault event (docs/events.md): every kind has one, the discard rack's sensor's
#: included. `device_fault` (a status event: journaled and alarmed by the daemon, not given
#: to the round engine) remains for a driver of a kind added later without one.
FAULT_EVENTS: dict[str, str] = {
    "shuffler": "shuffler_fault",
    "shoe": "shoe_fault",
    "hole_card_reader": "reader_fault",
    "discard_rack": "rack_fault",
}
DEVICE_FAULT = "device_fault"

#: The driver's alarm: a device refused (allow-list, changed identity, kind, version).
ALARM_EVENTS: frozenset[str] = frozenset({"device_refused"})

#: Seconds a driver's stop() waits for its supervisor to end, and again for the transport to
#: close: every stop is bounded, so SIGTERM ends a start in a handshake within 2 s.
STOP_DEADLINE = 0.5
#: ... and for the transport to close (a serial port drains what is queued for up to 1 s).
TEARDOWN_DEADLINE = 1.2

#: Event fields that may carry a face-down card (docs/rules.md H7): never logged.
CARD_FIELDS: frozenset[str] = frozenset({"card", "cards", "hole_card"})


def loggable(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event without card identities: a stack keeps only its size (docs/rules.md H7)."""
    out = {k: v for k, v in event.items() if k not in CARD_FIELDS}
    if isinstance(event.get("cards"), list):
        out["card_count"] = len(event["cards"])
    return out


class DriverError(Exception):
    """Base of the errors a driver's API raises."""


class DeviceUnavailable(DriverError):
    """The device is not connected (no session), so the command cannot be sent."""


class DeviceTimeout(DriverError):
    """The device did not answer in time."""


class CommandRefused(DriverError):
    """The device answered a command with an error code."""

    def __init__(self, command: str, code: int, code_name: str, text: str) -> None:
        super().__init__(f"{command} refused by the device: {code_name} ({code}) {text}".strip())
        self.command = command
        self.code = code
        self.code_name = code_name
        self.text = text


class DeviceRefused(DriverError):
    """The device's identity is not acceptable (allow-list, kind, or changed identity)."""

    def __init__(self, reason: str, identity: Identity | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.identity = identity


@dataclass(frozen=True)
class AllowList:
    """Devices a table accepts: serial numbers and firmware SHA-256 hashes.

    ``None`` for a set means "not restricted" (only for probing and development;
    the daemon's configuration always gives both).
    """

    serials: frozenset[str] | None = None
    firmware_sha256: frozenset[str] | None = None

    def refusal(self, identity: Identity) -> str | None:
        """Why ``identity`` is refused, or None when it is allowed."""
        if self.serials is not None and identity.serial not in self.serials:
            return f"serial {identity.serial!r} is not on the allow-list"
        if (
            self.firmware_sha256 is not None
            and identity.firmware_sha256.lower() not in self.firmware_sha256
        ):
            return f"firmware hash {identity.firmware_sha256} is not on the allow-list"
        return None

    @classmethod
    def of(cls, serials: Any = None, firmware_sha256: Any = None) -> AllowList:
        return cls(
            None if serials is None else frozenset(str(s) for s in serials),
            None if firmware_sha256 is None else frozenset(str(h).lower() for h in firmware_sha256),
        )


@dataclass(frozen=True)
class DriverSettings:
    """Timeouts and backoff; all in seconds."""

    handshake_timeout: float = 2.0
    command_timeout: float = 2.0
    #: a PING after this long without a frame from the device; None: never
    heartbeat_interval: float | None = 5.0
    backoff_initial: float = 0.1
    backoff_factor: float = 2.0
    backoff_max: float = 10.0
    link: LinkSettings = field(default_factory=LinkSettings)

    def backoff(self, attempt: int) -> float:
        """Delay before reconnection attempt ``attempt`` (1-based), exponential and capped."""
        return min(self.backoff_max, self.backoff_initial * self.backoff_factor ** (attempt - 1))


class DeviceDriver(abc.ABC):
    """A device kind's driver: session supervision shared, protocol left to subclasses."""

    #: device kind, one of drivers.usb_ids.DEVICE_KINDS
    kind: ClassVar[str]

    #: The driver API the driver was written for, "MAJOR.MINOR" (DRIVER_API_VERSION when it
    #: was written): the registry refuses a driver of another major version, or of a later
    #: minor one, by name. Declared by each driver itself, never inherited from this class.
    driver_api: ClassVar[str]

    #: JSON Schema (draft 2020-12) of the driver's `[devices.NAME.settings]` table, checked by
    #: `tablectl check-config` and at start. The default accepts no setting at all.
    settings_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }

    #: The serial line the device's manual gives (`bytesize`, `parity`, `stopbits`, ...):
    #: shown by `tablectl probe --list` and used by `tablectl conformance` when none is given.
    serial_defaults: ClassVar[Mapping[str, Any]] = {"baudrate": 115200}

    #: USB (vendor id, product id) pairs of this driver's devices, for `tablectl probe --list`.
    usb_ids: ClassVar[tuple[tuple[int, int], ...]] = ()

    @classmethod
    def settings_problems(cls, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """What is wrong with ``settings`` by ``settings_schema``: (dotted key, message) pairs."""
        schema = cls.settings_schema
        if not settings and not schema.get("required") and not schema.get("minProperties"):
            # Nothing configured and nothing asked for: every table without `settings` starts
            # without importing jsonschema (82-133 ms and 8 MiB of a 300 ms, 40 MiB start).
            return []
        import jsonschema

        validator = jsonschema.Draft202012Validator(cls.settings_schema)
        problems: list[tuple[str, str]] = []
        for error in sorted(validator.iter_errors(dict(settings)), key=lambda e: list(e.path)):
            key = ".".join(str(part) for part in error.path)
            if error.validator == "additionalProperties":
                allowed = sorted(cls.settings_schema.get("properties", {}))
                extra = sorted(set(error.instance) - set(allowed))
                for name in extra:
                    problems.append(
                        (
                            ".".join(filter(None, (key, name))),
                            "unknown setting for this driver; allowed: "
                            + (", ".join(allowed) or "none"),
                        )
                    )
                continue
            problems.append((key, error.message))
        return problems

    def __init__(
        self,
        transport: Transport,
        *,
        name: str | None = None,
        allow_list: AllowList | None = None,
        settings: DriverSettings | None = None,
        device_settings: Mapping[str, Any] | None = None,
    ) -> None:
        #: `[devices.NAME.settings]` as configured (valid by ``settings_schema``)
        self.device_settings: dict[str, Any] = dict(device_settings or {})
        self.transport = transport
        self.name = name or self.kind
        self.allow_list = allow_list or AllowList()
        self.settings = settings or DriverSettings()
        self.identity: Identity | None = None  # pinned at the first accepted handshake
        self.up = False
        self.log = log.bind(device=self.name, kind=self.kind)
        self._connect_failures = RepeatedFailure()
        # A filtered-out debug line still costs its fields (loggable copies every event); the
        # bound logger's level is fixed when it is bound, so asking once is asking always.
        is_enabled_for = getattr(self.log, "is_enabled_for", None)
        self._log_events = is_enabled_for is None or bool(is_enabled_for(logging.DEBUG))
        # Every series at 0 from the start, so an alert's increase() sees the first error.
        for counter in (FRAMES_RECEIVED, FRAMES_SENT, RETRANSMISSIONS, RECONNECTS, LINK_LOSSES):
            counter.labels(self.name)
        for error in (*LINK_ERRORS, *SESSION_ERRORS):
            ERRORS.labels(self.name, error)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_event: EventCallback | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._lost: asyncio.Event | None = None
        self._connected: asyncio.Event | None = None
        self._stopping = False
        self._last_refusal: str | None = None
        self.sessions = 0  # accepted handshakes so far
        self.last_error: str | None = None
        self.connected_at: float | None = None  # wall-clock time of the current session

    # -- public API ----------------------------------------------------------

    async def start(self, loop: asyncio.AbstractEventLoop, on_event: EventCallback) -> None:
        """Start connecting in the background; events go to ``on_event`` on ``loop``."""
        if self._supervisor is not None:
            raise DriverError(f"{self.name}: driver already started")
        self._loop = loop
        self._on_event = on_event
        self._stopping = False
        self._lost = asyncio.Event()
        self._connected = asyncio.Event()
        self._supervisor = loop.create_task(self._supervise(), name=f"driver:{self.name}")

    async def wait_connected(self, timeout: float) -> bool:
        """True once the device has handshaken and been accepted, False after ``timeout``."""
        if self._connected is None:
            raise DriverError(f"{self.name}: driver not started")
        try:
            async with asyncio.timeout(timeout):
                await self._connected.wait()
        except TimeoutError:
            return False
        return True

    @property
    def health(self) -> dict[str, Any]:
        """The driver's state for status output and logs (never a card)."""
        return {
            "device": self.name,
            "kind": self.kind,
            "up": self.up,
            "identity": self.identity.as_dict() if self.identity else None,
            "sessions": self.sessions,
            "connected_at": self.connected_at,
            "last_error": self.last_error,
        }

    async def stop(self) -> None:
        """Stop supervising and close the transport; idempotent."""
        self._stopping = True
        task, self._supervisor = self._supervisor, None
        if task is not None:
            task.cancel()
            # Bounded: a supervisor that does not end within the deadline (a vendor driver
            # catching CancelledError) is left behind, logged, rather than hanging the stop.
            done, _ = await asyncio.wait({task}, timeout=STOP_DEADLINE)
            if not done:
                self.log.error("driver_stop_overran", seconds=STOP_DEADLINE)
            elif not task.cancelled() and task.exception() is not None:
                self.log.warning("driver_stopped_with_error", error=repr(task.exception()))
        try:
            async with asyncio.timeout(TEARDOWN_DEADLINE):
                await self._teardown("driver stopped")
        except TimeoutError:
            self.log.error("driver_teardown_overran", seconds=TEARDOWN_DEADLINE)
        self.up = False

    # -- for subclasses ------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise DeviceUnavailable(f"{self.name}: driver not started")
        return self._loop

    def emit(self, event_type: str, **fields: Any) -> None:
        """Deliver an event (docs/events.md), naming the device and its kind; logged card-free."""
        event: Event = {"type": event_type, **fields, "device": self.name, "kind": self.kind}
        if self._log_events:
            self.log.debug("device_event", **loggable(event))
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                self.log.exception("on_event_failed", event_type=event_type)

    def undecodable_frame(self, message: str) -> None:
        """A frame that arrived intact but cannot be decoded: the kind's fault event.

        `message` names the frame's type only: its payload is never echoed (it may be a card).
        """
        self.emit(
            FAULT_EVENTS.get(self.kind, DEVICE_FAULT),
            fault=UNDECODABLE_FRAME,
            detail=f"a {message} frame the driver cannot decode",
        )

    def session_lost(self, reason: str) -> None:
        """The session is over (transport lost, link failure, device reset)."""
        if self._lost is not None and not self._lost.is_set():
            self.last_error = reason
            self.log.warning("session_lost", reason=reason)
            self._lost.set()

    def count_error(self, error: str, n: int = 1) -> None:
        ERRORS.labels(self.name, error).inc(n)

    @abc.abstractmethod
    async def open_session(self) -> Identity:
        """Handshake over the open transport; the device's identity, or an exception."""

    @abc.abstractmethod
    def session_accepted(self) -> None:
        """The identity passed the checks and device_connected went out: events may flow."""

    @abc.abstractmethod
    def on_data(self, data: bytes) -> None:
        """Bytes from the transport (loop thread)."""

    @abc.abstractmethod
    def close_session(self, reason: str) -> None:
        """Forget the session: fail pending commands with DeviceUnavailable, stop timers."""

    # -- supervision ---------------------------------------------------------

    def _on_transport_lost(self, exc: Exception | None) -> None:
        self.count_error("transport_lost")
        self.session_lost(f"transport lost: {exc}" if exc else "transport lost")

    async def _teardown(self, reason: str) -> None:
        self.close_session(reason)
        with contextlib.suppress(Exception):
            await self.transport.close()

    def _check_identity(self, identity: Identity) -> None:
        if identity.kind != self.kind:
            raise DeviceRefused(f"device is a {identity.kind}, expected a {self.kind}", identity)
        if self.identity is not None and identity != self.identity:
            raise DeviceRefused(
                f"identity changed mid-session: was serial {self.identity.serial} firmware "
                f"{self.identity.firmware_sha256}, now serial {identity.serial} firmware "
                f"{identity.firmware_sha256}",
                identity,
            )
        reason = self.allow_list.refusal(identity)
        if reason is not None:
            raise DeviceRefused(reason, identity)

    async def _connect_once(self) -> None:
        assert self._lost is not None
        self._lost.clear()
        RECONNECTS.labels(self.name).inc()
        await self.transport.open(self.loop, self.on_data, self._on_transport_lost)
        identity = await self.open_session()
        self._check_identity(identity)
        self.identity = identity

    async def _supervise(self) -> None:
        assert self._lost is not None and self._connected is not None
        attempt = 0
        while not self._stopping:
            try:
                await self._connect_once()
            except DeviceRefused as refused:
                self.count_error("refused")
                self.last_error = refused.reason
                self.log.error(
                    "device_refused",
                    reason=refused.reason,
                    **(refused.identity.as_dict() if refused.identity else {}),
                )
                if refused.reason != self._last_refusal:
                    # one alarm per distinct refusal, not one per retry
                    self._last_refusal = refused.reason
                    alarm: Event = {"reason": refused.reason}
                    if refused.identity is not None:
                        alarm.update(refused.identity.as_dict())
                        alarm["claimed_kind"] = alarm.pop("kind")
                    self.emit("device_refused", **alarm)
                await self._teardown(refused.reason)
            except (TransportError, DriverError, OSError) as exc:
                self.count_error("connect_failed")
                self.last_error = str(exc)
                # an absent device fails every retry: logged once, then at growing intervals
                # with the count (the metric and `status` count every one)
                repeated = self._connect_failures.record(str(exc))
                if repeated is not None:
                    self.log.warning(
                        "connect_failed", error=str(exc), attempt=attempt + 1, repeated=repeated
                    )
                await self._teardown(str(exc))
            except Exception as exc:
                # a bug in a (vendor) driver must not end supervision: log, back off, retry
                self.count_error("driver_error")
                self.last_error = repr(exc)
                self.log.exception("driver_error", error=repr(exc))
                await self._teardown(repr(exc))
            else:
                attempt = 0
                self._last_refusal = None
                self._connect_failures.reset()
                self.sessions += 1
                self.connected_at = time.time()
                self.up = True
                self._connected.set()
                assert self.identity is not None
                self.log.info("device_connected", **self.identity.as_dict())
                self.emit("device_connected", **self.identity.as_dict())
                self.session_accepted()
                await self._lost.wait()
                self.up = False
                self.connected_at = None
                self._connected.clear()
                await self._teardown("session lost")
                LINK_LOSSES.labels(self.name).inc()
                self.emit("device_lost")
                # first retry comes quickly; the backoff grows only while attempts fail
            attempt += 1
            await asyncio.sleep(self.settings.backoff(attempt - 1) if attempt > 1 else 0)


class Shuffler(DeviceDriver):
    """An automated card shuffler (ASD). Never asked for, and never sends, the shuffled order."""

    kind: ClassVar[str] = "shuffler"

    @abc.abstractmethod
    async def start_shuffle(self, deck: str | None = None) -> None:
        """Start a shuffle cycle (``deck`` A/B with two decks alternating)."""

    @abc.abstractmethod
    async def lock_deck(self) -> None:
        """Keep the shuffled deck in the device (it may not be dealt)."""

    @abc.abstractmethod
    async def release_deck(self) -> None:
        """Let the dealer take the shuffled deck."""


class Shoe(DeviceDriver):
    """A card-reading manual shoe or an automated dealing shoe (ADS)."""

    kind: ClassVar[str] = "shoe"

    @abc.abstractmethod
    async def lock_dispensing(self) -> None:
        """Block the shoe: no card may leave it."""

    @abc.abstractmethod
    async def unlock_dispensing(self) -> None:
        """Allow dealing again."""


class HoleCardReader(DeviceDriver):
    """A 3C21 dealer hole-card reader: answers blackjack yes/no, never the card."""

    kind: ClassVar[str] = "hole_card_reader"

    @abc.abstractmethod
    async def self_test(self) -> bool:
        """Run the reader's self-test; True when it passed."""


class DiscardRack(DeviceDriver):
    """A discard-rack sensor estimating the cards in the rack."""

    kind: ClassVar[str] = "discard_rack"

    @abc.abstractmethod
    async def read_level(self) -> int:
        """Ask for a fresh level reading; the number of cards (also emitted as rack_level)."""


KIND_CLASSES: dict[str, type[DeviceDriver]] = {
    cls.kind: cls for cls in (Shuffler, Shoe, HoleCardReader, DiscardRack)
}
