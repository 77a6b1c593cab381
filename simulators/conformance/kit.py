"""The conformance kit: every check a driver of a kind must pass, run against a device.

The driver under test runs exactly as the daemon runs it (its transport is a real pyserial
port; its events arrive through ``DeviceDriver.start``). The device is its simulator on a
pseudo-terminal, or a real device on ``port`` reached through a relay on a pty: either way
the kit sits on the wire between them (``TapWire``), so it can pull the cable, throw garbage
or half a frame at the driver, and see every byte the device sent. Each check is a row of the
report (``Report.markdown``), which a vendor attaches to a submission to a lab.

Stimuli (deal a card, jam the shoe, ...) need the simulator's hands; on a real device they
are asked of the person at the device when ``interactive``, else those rows are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import platform
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from tablectl.controller import __version__
from tablectl.controller.engine.events import CARD, CARDS, EVENT_TYPES, EventError, Field
from tablectl.drivers.base import (
    AllowList,
    DeviceDriver,
    DriverError,
    DriverSettings,
)
from tablectl.drivers.protocol.messages import Fault
from tablectl.drivers.registry import _import, get_driver_class
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.registry import simulator_class

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
_CARD = re.compile(r"^(?:[A2-9TJQK][cdhs]|JK)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

#: Seconds a driver may take for each step (generous: a loaded CI machine is not a slow driver)
EVENT_WAIT = 5.0
LOST_WAIT = 5.0
RECONNECT_WAIT = 10.0
#: A command's answer must come within this (the daemon holds a deal on it), milliseconds
MAX_RESPONSE_MS = 250.0
TIMING_SAMPLES = 10


# -- the event contract (docs/events.md and docs/protocol.md) ------------------------------------


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _percent(value: Any) -> bool:
    return _int(value) and value <= 100


Check = Callable[[Any], bool]
Contract = tuple[dict[str, Check], dict[str, Check]]
#: the fields every event gets from tablectl, not from the driver's own code: checked apart
_ADDED_FIELDS = frozenset({"device", "kind", "time"})


def _field_check(field: Field) -> Check:
    """The event language's own check of `field`; a card must come canonical from a driver."""

    def check(value: Any) -> bool:
        try:
            clean = field.type.check(field.name, value)
        except EventError:
            return False
        return clean == value or field.type not in (CARD, CARDS)

    return check


def _language(name: str) -> Contract:
    """An event the engine takes: its fields as docs/events.md (EVENT_TYPES) gives them."""
    fields = [f for f in EVENT_TYPES[name].fields if f.name not in _ADDED_FIELDS]
    return (
        {f.name: _field_check(f) for f in fields if f.required},
        {f.name: _field_check(f) for f in fields if not f.required},
    )


#: event -> (required fields, optional fields), each with its check: the engine's events from
#: the event language itself, the status reports (drivers.base.STATUS_EVENTS) from here
_FAULT: Contract = ({"fault": _text}, {"detail": _text})
_IDENTITY: dict[str, Check] = {
    "model": _text,
    "serial": _text,
    "firmware": _text,
    "firmware_sha256": lambda v: isinstance(v, str) and bool(_SHA256.match(v)),
}
EVENT_FIELDS: dict[str, dict[str, Contract]] = {
    "shuffler": {
        "shuffle_started": _language("shuffle_started"),
        "shuffle_progress": ({"percent": _percent}, {}),
        "shuffle_completed": _language("shuffle_completed"),
        "shuffler_fault": _language("shuffler_fault"),
        "shuffler_status": ({"door_open": _bool, "empty": _bool}, {}),
        "deck_locked": ({}, {}),
        "deck_released": ({}, {}),
    },
    "shoe": {
        "card_drawn": _language("card_drawn"),
        "stack_dispensed": _language("stack_dispensed"),
        "cut_card_reached": _language("cut_card_reached"),
        "shoe_loaded": _language("shoe_loaded"),
        "shoe_fault": _language("shoe_fault"),
        "dispensing_locked": ({"locked": _bool}, {}),
    },
    "hole_card_reader": {
        "reader_inserted": _language("reader_inserted"),
        "reader_result": _language("reader_result"),
        "reader_fault": _language("reader_fault"),
        "reader_self_test": ({"passed": _bool, "code": _int}, {}),
    },
    "discard_rack": {
        "rack_level": _language("rack_level"),
        "rack_cleared": _language("rack_cleared"),
        "rack_fault": _language("rack_fault"),
    },
}
#: every kind's session events, added by tablectl's DeviceDriver
SESSION_EVENTS: dict[str, Contract] = {
    "device_connected": (_IDENTITY, {}),
    "device_lost": ({}, {}),
    "device_refused": ({"reason": _text}, {**_IDENTITY, "claimed_kind": _text}),
}


def event_problems(kind: str, event: Mapping[str, Any]) -> list[str]:
    """What is wrong with one event by the contract of its kind (empty when nothing)."""
    etype = event.get("type")
    spec = EVENT_FIELDS[kind].get(str(etype)) or SESSION_EVENTS.get(str(etype))
    if spec is None:
        return [f"{etype!r} is not an event of a {kind}"]
    required, optional = spec
    problems = []
    if event.get("kind") != kind:
        problems.append(f"{etype}: kind is {event.get('kind')!r}, not {kind!r}")
    if not _text(event.get("device")):
        problems.append(f"{etype}: no device name")
    for name, check in required.items():
        if name not in event:
            problems.append(f"{etype}: field {name!r} missing")
        elif not check(event[name]):
            problems.append(f"{etype}: field {name!r} has a value of the wrong form")
    for name in set(event) - set(required) - set(optional) - {"type", "device", "kind"}:
        problems.append(f"{etype}: field {name!r} is not in the event's contract")
    for name, check in optional.items():
        if name in event and not check(event[name]):
            problems.append(f"{etype}: field {name!r} has a value of the wrong form")
    return problems


# -- the report -----------------------------------------------------------------------------


@dataclass
class Row:
    check: str
    result: str
    detail: str
    seconds: float = 0.0


@dataclass
class Report:
    kind: str
    driver: str
    driver_class: str
    device: str
    identity: dict[str, Any] | None = None
    rows: list[Row] = field(default_factory=list)
    started: str = field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    )

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(row.result != FAIL for row in self.rows)

    def failed(self) -> list[Row]:
        return [row for row in self.rows if row.result == FAIL]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "driver": self.driver,
            "driver_class": self.driver_class,
            "device": self.device,
            "identity": self.identity,
            "tablectl": __version__,
            "python": platform.python_version(),
            "started": self.started,
            "passed": self.passed,
            "rows": [row.__dict__ for row in self.rows],
        }

    def markdown(self) -> str:
        ident = self.identity or {}
        lines = [
            f"# tablectl conformance: {self.kind} driver `{self.driver}`",
            "",
            f"- driver class: `{self.driver_class}`",
            f"- device: {self.device}",
            f"- identity: model {ident.get('model', '?')}, serial {ident.get('serial', '?')}, "
            f"firmware {ident.get('firmware', '?')} (sha256 {ident.get('firmware_sha256', '?')})",
            f"- tablectl {__version__}, Python {platform.python_version()}, {self.started}",
            f"- result: **{'PASS' if self.passed else 'FAIL'}** "
            f"({sum(r.result == PASS for r in self.rows)} passed, {len(self.failed())} failed, "
            f"{sum(r.result == SKIP for r in self.rows)} skipped)",
            "",
            "| check | result | detail | seconds |",
            "| --- | --- | --- | --- |",
        ]
        for row in self.rows:
            detail = row.detail.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {row.check} | {row.result} | {detail} | {row.seconds:.2f} |")
        return "\n".join(lines) + "\n"


# -- the wire between driver and device -------------------------------------------------------


class TapWire(FaultyWire):
    """FaultyWire that also keeps what the device sent, so a frame can be replayed cut short."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.chunks: list[bytes] = []

    def _to_host(self, data: bytes) -> None:
        if data:
            self.chunks.append(bytes(data))
            del self.chunks[:-50]
        super()._to_host(data)


class RelayDevice:
    """A real device on ``port``, relayed to the pty the driver opens (a DeviceSide)."""

    def __init__(self, port: str, line: Mapping[str, Any]) -> None:
        self.transport = SerialTransport(port, **line)
        self._send: Callable[[bytes], None] | None = None
        self.lost: Exception | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        await self.transport.open(loop, self._from_device, self._on_lost)

    def _from_device(self, data: bytes) -> None:
        if self._send is not None:
            self._send(data)

    def _on_lost(self, exc: Exception | None) -> None:
        self.lost = exc or OSError("the device's port closed")

    def connect(self, send: Callable[[bytes], None]) -> None:
        self._send = send

    def receive(self, data: bytes) -> None:
        if self.transport.is_open:
            self.transport.write(data)

    def disconnect(self) -> None:
        self._send = None

    async def close(self) -> None:
        await self.transport.close()


# -- capturing the driver's log lines ----------------------------------------------------------


@contextlib.contextmanager
def captured_logs() -> Iterator[list[str]]:
    """Every structlog line (debug and up) rendered as JSON, while the block runs."""
    lines: list[str] = []
    saved = structlog.get_config()

    def keep(_logger: Any, _method: str, event_dict: Any) -> Any:
        lines.append(json.dumps(event_dict, default=str, sort_keys=True))
        raise structlog.DropEvent

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            keep,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    try:
        yield lines
    finally:
        structlog.configure(**saved)


# -- what each kind is put through -----------------------------------------------------------


@dataclass
class Stimulus:
    """Something done at the device that must produce ``expect`` (checked by ``verify``)."""

    name: str
    prompt: str
    act: Callable[[Any], Any]  # on the simulator; returns what verify needs
    expect: str
    verify: Callable[[dict[str, Any], Any], str | None] = lambda event, acted: None
    fault: bool = False


def _same_card(event: dict[str, Any], card: Any) -> str | None:
    return None if event.get("card") == card else "the card reported is not the card drawn"


def _face_up(event: dict[str, Any], _card: Any) -> str | None:
    return None if event.get("face_up") is True else "a face-up card reported face down"


def _same_stack(event: dict[str, Any], stack: Any) -> str | None:
    return None if event.get("cards") == stack else "the stack reported is not the stack dealt"


def _fault_is(word: str) -> Callable[[dict[str, Any], Any], str | None]:
    def verify(event: dict[str, Any], _acted: Any) -> str | None:
        got = event.get("fault")
        return None if got == word else f"fault reported as {got!r}, not {word!r}"

    return verify


def _shoe_draw_face_up(sim: Any) -> Any:
    sim.face_up_next()
    return sim.draw()


def _shoe_jam(sim: Any) -> None:
    sim.jam()
    sim.draw()


def _shoe_cut(sim: Any) -> None:
    sim.cut_card_after = sim.dealt + 1
    sim.draw()


def _shuffler_fault(sim: Any) -> None:
    sim.fault(Fault.JAM)
    sim.press_start()


def _reader_insert(sim: Any) -> None:
    sim.insert("As", "Kh")


STIMULI: dict[str, list[Stimulus]] = {
    "shoe": [
        Stimulus("shoe_loaded", "load a deck into the shoe", lambda s: s.load(), "shoe_loaded"),
        Stimulus("card_drawn", "draw one card", lambda s: s.draw(), "card_drawn", _same_card),
        Stimulus(
            "card_drawn face up",
            "draw one card face up",
            _shoe_draw_face_up,
            "card_drawn",
            _face_up,
        ),
        Stimulus(
            "stack_dispensed",
            "dispense a stack of five",
            lambda s: s.dispense(5),
            "stack_dispensed",
            _same_stack,
        ),
        Stimulus("cut_card_reached", "draw the cut card", _shoe_cut, "cut_card_reached"),
        Stimulus("shoe_fault jam", "jam the shoe", _shoe_jam, "shoe_fault", _fault_is("jam"), True),
    ],
    "shuffler": [
        Stimulus("shuffle_started", "press start", lambda s: s.press_start(), "shuffle_started"),
        Stimulus("shuffle_completed", "let it finish", lambda s: None, "shuffle_completed"),
        Stimulus(
            "shuffler_fault jam",
            "jam the shuffler mid-shuffle",
            _shuffler_fault,
            "shuffler_fault",
            _fault_is("jam"),
            True,
        ),
    ],
    "hole_card_reader": [
        Stimulus("reader_inserted", "insert a card", _reader_insert, "reader_inserted"),
        Stimulus("reader_result", "wait for the result", lambda s: None, "reader_result"),
        Stimulus(
            "reader_fault",
            "make the reader fail to read",
            lambda s: s.fault(Fault.SENSOR),
            "reader_fault",
            _fault_is("sensor"),
            True,
        ),
    ],
    "discard_rack": [
        Stimulus("rack_level", "put ten cards in the rack", lambda s: s.add(10), "rack_level"),
        Stimulus("rack_cleared", "empty the rack", lambda s: s.clear(), "rack_cleared"),
        Stimulus(
            "rack_fault",
            "make the rack's sensor fail",
            lambda s: s.fault(Fault.SENSOR),
            "rack_fault",
            _fault_is("sensor"),
            True,
        ),
    ],
}


def _after_fault(kind: str, sim: Any) -> None:
    """The technician clears the fault so the checks after it start from a working device."""
    if kind == "shoe":
        sim.clear_fault()
    elif kind == "shuffler":
        sim.clear_fault()
        sim.load()
    elif kind == "hole_card_reader":
        sim.repair()


#: (command name, method, its status event or None); the first is the timing probe
COMMANDS: dict[str, list[tuple[str, str, str | None]]] = {
    "shoe": [
        ("lock_dispensing", "lock_dispensing", "dispensing_locked"),
        ("unlock_dispensing", "unlock_dispensing", "dispensing_locked"),
    ],
    "shuffler": [("lock_deck", "lock_deck", "deck_locked")],
    "hole_card_reader": [("self_test", "self_test", "reader_self_test")],
    "discard_rack": [("read_level", "read_level", "rack_level")],
}


def _reset_after_commands(kind: str, sim: Any) -> None:
    if kind == "shuffler":
        sim.locked = False  # the deck lock the command set, lifted by hand (no deck inside)


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Target:
    """What is tested: the driver class, its name, and where the device is."""

    kind: str
    driver: str
    driver_class: type[DeviceDriver]
    simulator: type[SimulatedDevice] | None
    port: str | None
    line: dict[str, Any]


def resolve(
    kind: str,
    driver: str,
    port: str | None = None,
    simulator: str | None = None,
    line: Mapping[str, Any] | None = None,
) -> Target:
    """The target of a run: ``driver`` is a registered name or ``module:Class``."""
    cls = _import(driver) if ":" in driver else get_driver_class(kind, driver)
    if getattr(cls, "kind", None) != kind:
        raise DriverError(f"{driver!r} drives a {getattr(cls, 'kind', '?')}, not a {kind}")
    sim: type[SimulatedDevice] | None = None
    if port is None:
        sim = simulator_class(kind, simulator or driver)
    merged = {**dict(cls.serial_defaults), **dict(line or {})}
    return Target(kind, driver, cls, sim, port, merged)


class Run:
    """One conformance run: the device on a tapped pty, the driver over a serial port."""

    def __init__(
        self,
        target: Target,
        workdir: Path,
        *,
        interactive: bool = False,
        ask: Callable[[str], None] | None = None,
        max_response_ms: float = MAX_RESPONSE_MS,
        seed: int = 0,
    ) -> None:
        self.t = target
        self.workdir = workdir
        self.interactive = interactive
        self.ask = ask or (lambda text: None)
        self.max_response_ms = max_response_ms
        self.rng = random.Random(seed)
        self.sim: Any = None
        self.relay: RelayDevice | None = None
        self.wire: TapWire | None = None
        self.attachment: PtyAttachment | None = None
        self.link = workdir / "device"
        self.events: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        desc = (
            target.port or f"simulator {target.simulator.__qualname__ if target.simulator else ''}"
        )
        self.report = Report(
            target.kind,
            target.driver,
            f"{target.driver_class.__module__}.{target.driver_class.__qualname__}",
            f"{desc} (serial line {_line_text(target.line)})",
        )
        self.cards_seen: set[str] = set()

    # -- plumbing -------------------------------------------------------------------------

    async def plug(self) -> None:
        loop = asyncio.get_running_loop()
        if self.t.simulator is not None:
            self.sim = self.t.simulator(seed=self.rng.randrange(10_000))
            if self.t.kind == "shoe":
                self.sim.load()
            inner: Any = self.sim
        else:
            assert self.t.port is not None
            self.relay = RelayDevice(self.t.port, self.t.line)
            await self.relay.open()
            inner = self.relay
        self.wire = TapWire(inner)
        self.attachment = PtyAttachment(self.wire, loop, link_path=self.link)
        self.attachment.plug()

    async def unplug(self) -> None:
        if self.attachment is not None:
            self.attachment.unplug()
        if self.relay is not None:
            await self.relay.close()

    def driver(self, allow_list: AllowList | None = None) -> DeviceDriver:
        transport = SerialTransport(str(self.link), **self.t.line)
        settings = DriverSettings(
            handshake_timeout=2.0, command_timeout=2.0, backoff_initial=0.1, backoff_max=0.5
        )
        return self.t.driver_class(
            transport, name=f"conformance-{self.t.kind}", allow_list=allow_list, settings=settings
        )

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))
        for key in ("card", "cards"):
            value = event.get(key)
            for card in value if isinstance(value, list) else [value]:
                if isinstance(card, str) and _CARD.match(card):
                    self.cards_seen.add(card)
        self._arrived.set()

    async def wait_for(self, etype: str, since: int, timeout: float) -> dict[str, Any] | None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for event in self.events[since:]:
                if event.get("type") == etype:
                    return event
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return None
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    def row(self, check: str, result: str, detail: str, started: float) -> Row:
        row = Row(check, result, detail, time.monotonic() - started if started else 0.0)
        self.report.rows.append(row)
        return row

    # -- checks ---------------------------------------------------------------------------

    async def run(self) -> Report:
        with captured_logs() as logs:
            await self.plug()
            try:
                await self._check_allow_list()
                # a fresh pty for the run proper, as after a power cycle: the refused session
                # leaves nothing behind (and some kernels refuse re-setting a pty's parity)
                assert self.attachment is not None
                self.attachment.replug()
                driver = self.driver()
                started = time.monotonic()
                await driver.start(asyncio.get_running_loop(), self.on_event)
                try:
                    if not await self._check_identity(driver, started):
                        return self.report
                    await self._check_stimuli()
                    await self._check_commands(driver)
                    await self._check_garbage(driver)
                    await self._check_truncated(driver)
                    await self._check_timing(driver)
                    await self._check_replug(driver)
                finally:
                    await driver.stop()
            finally:
                await self.unplug()
        self._check_fields()
        self._check_logs(logs)
        return self.report

    async def _check_identity(self, driver: DeviceDriver, started: float) -> bool:
        connected = await driver.wait_connected(EVENT_WAIT)
        event = await self.wait_for("device_connected", 0, 0.5)
        if not connected or driver.identity is None or event is None:
            why = f" (last error: {driver.last_error})" if driver.last_error else ""
            self.row("identity at handshake", FAIL, f"no accepted handshake{why}", started)
            return False
        ident = driver.identity.as_dict()
        self.report.identity = ident
        problems = event_problems(self.t.kind, event)
        if ident.get("kind") != self.t.kind:
            problems.append(f"the device says it is a {ident.get('kind')}")
        if self.sim is not None and driver.identity != self.sim.identity:
            problems.append("the identity reported is not the device's")
        ms = (time.monotonic() - started) * 1000
        self.row(
            "identity at handshake",
            FAIL if problems else PASS,
            "; ".join(problems)
            or f"serial {ident['serial']}, firmware {ident['firmware']}, {ms:.0f} ms to accept",
            started,
        )
        return not problems

    async def _check_allow_list(self) -> None:
        started = time.monotonic()
        driver = self.driver(AllowList.of(serials=["NOT-THIS-DEVICE"]))
        since = len(self.events)
        await driver.start(asyncio.get_running_loop(), self.on_event)
        try:
            refused = await self.wait_for("device_refused", since, EVENT_WAIT)
            connected = any(e["type"] == "device_connected" for e in self.events[since:])
        finally:
            await driver.stop()
        del self.events[since:]  # the refused session's events are not the device's run
        if refused is None or connected or driver.up:
            self.row(
                "allow-list refusal",
                FAIL,
                "a serial number not on the allow-list was "
                + ("accepted" if connected else "neither refused nor accepted (no handshake?)"),
                started,
            )
        else:
            self.row("allow-list refusal", PASS, f"refused: {refused.get('reason')}", started)

    async def _stimulate(self, stimulus: Stimulus) -> tuple[dict[str, Any] | None, Any, str]:
        """Do ``stimulus`` (on the simulator, or asked of a person); its event, or why not."""
        since = len(self.events)
        acted: Any = None
        if self.sim is not None:
            acted = stimulus.act(self.sim)
        elif self.interactive:
            self.ask(f"{stimulus.prompt} (waiting {EVENT_WAIT * 6:.0f} s)")
        else:
            return None, None, "skip"
        timeout = EVENT_WAIT if self.sim is not None else EVENT_WAIT * 6
        return await self.wait_for(stimulus.expect, since, timeout), acted, ""

    async def _check_stimuli(self) -> None:
        for stimulus in STIMULI[self.t.kind]:
            started = time.monotonic()
            name = ("fault: " if stimulus.fault else "event: ") + stimulus.name
            event, acted, skipped = await self._stimulate(stimulus)
            if skipped:
                self.row(name, SKIP, "a real device without --interactive", started)
                continue
            if event is None:
                self.row(name, FAIL, f"no {stimulus.expect} within {EVENT_WAIT:.0f} s", started)
            else:
                problems = event_problems(self.t.kind, event)
                wrong = stimulus.verify(event, acted) if self.sim is not None else None
                if wrong:
                    problems.append(wrong)
                self.row(
                    name,
                    FAIL if problems else PASS,
                    "; ".join(problems) or _fields_text(event),
                    started,
                )
            if stimulus.fault and self.sim is not None:
                _after_fault(self.t.kind, self.sim)
        if not any(s.fault for s in STIMULI[self.t.kind]):
            self.row("fault reporting", SKIP, f"a {self.t.kind} has no fault report", 0.0)
        await asyncio.sleep(0.2)

    async def _command(self, driver: DeviceDriver, method: str) -> tuple[str | None, float]:
        started = time.monotonic()
        try:
            await getattr(driver, method)()
        except DriverError as error:
            return f"{method}: {error}", time.monotonic() - started
        return None, time.monotonic() - started

    async def _check_commands(self, driver: DeviceDriver) -> None:
        for name, method, status in COMMANDS[self.t.kind]:
            started = time.monotonic()
            since = len(self.events)
            error, _ = await self._command(driver, method)
            if (
                error is None
                and status is not None
                and await self.wait_for(status, since, EVENT_WAIT) is None
            ):
                error = f"no {status} after {name}"
            self.row(f"command: {name}", FAIL if error else PASS, error or "done", started)
        if self.sim is not None:
            _reset_after_commands(self.t.kind, self.sim)

    async def _still_works(self, driver: DeviceDriver, since: int) -> str | None:
        """After an injected fault: up, no session lost, no invented event, a command works."""
        await asyncio.sleep(0.3)
        name, method, _ = COMMANDS[self.t.kind][0]
        error, _ = await self._command(driver, method)
        invented = [
            e["type"]
            for e in self.events[since:]
            if e["type"] not in ("device_lost", "device_connected")
            and e["type"] not in {c[2] for c in COMMANDS[self.t.kind]}
        ]
        if any(e["type"] == "device_lost" for e in self.events[since:]) and not driver.up:
            return "the session was lost and not recovered"
        if invented:
            return f"events invented from noise: {', '.join(invented)}"
        if error:
            return f"{name} failed afterwards: {error}"
        if self.sim is not None:
            _reset_after_commands(self.t.kind, self.sim)
        return None

    async def _check_garbage(self, driver: DeviceDriver) -> None:
        assert self.wire is not None
        started = time.monotonic()
        since = len(self.events)
        noise = bytes(self.rng.randrange(256) for _ in range(200))
        self.wire.garbage(noise)
        problem = await self._still_works(driver, since)
        self.row(
            "garbage input",
            FAIL if problem else PASS,
            problem or "200 random bytes: ignored, the session goes on",
            started,
        )

    async def _check_truncated(self, driver: DeviceDriver) -> None:
        assert self.wire is not None
        started = time.monotonic()
        frames = [c for c in self.wire.chunks if len(c) >= 4]
        if not frames:
            self.row("truncated input", SKIP, "the device sent nothing to cut short", started)
            return
        since = len(self.events)
        longest = max(frames, key=len)
        self.wire.garbage(longest[: len(longest) // 2])
        problem = await self._still_works(driver, since)
        self.row(
            "truncated input",
            FAIL if problem else PASS,
            problem or f"the first {len(longest) // 2} of {len(longest)} bytes of a frame: ignored",
            started,
        )

    async def _check_timing(self, driver: DeviceDriver) -> None:
        started = time.monotonic()
        name, method, _ = COMMANDS[self.t.kind][0]
        times: list[float] = []
        for _ in range(TIMING_SAMPLES):
            error, seconds = await self._command(driver, method)
            if error:
                self.row("response time", FAIL, error, started)
                return
            times.append(seconds * 1000)
        if self.sim is not None:
            _reset_after_commands(self.t.kind, self.sim)
        slowest = max(times)
        text = (
            f"{name} x{len(times)}: median {statistics.median(times):.1f} ms, "
            f"max {slowest:.1f} ms (limit {self.max_response_ms:.0f} ms)"
        )
        self.row("response time", FAIL if slowest > self.max_response_ms else PASS, text, started)

    async def _check_replug(self, driver: DeviceDriver) -> None:
        assert self.attachment is not None
        started = time.monotonic()
        before = driver.identity
        since = len(self.events)
        self.attachment.unplug()
        lost = await self.wait_for("device_lost", since, LOST_WAIT)
        if lost is None:
            self.attachment.plug()
            self.row("unplug and replug", FAIL, f"no device_lost within {LOST_WAIT:.0f} s", started)
            return
        await asyncio.sleep(0.2)
        since = len(self.events)
        self.attachment.plug()
        back = await self.wait_for("device_connected", since, RECONNECT_WAIT)
        if back is None or not driver.up:
            self.row(
                "unplug and replug",
                FAIL,
                f"device_lost, then no device_connected within {RECONNECT_WAIT:.0f} s",
                started,
            )
        elif driver.identity != before:
            self.row("unplug and replug", FAIL, "another identity after the replug", started)
        else:
            self.row(
                "unplug and replug",
                PASS,
                f"device_lost, then device_connected after {time.monotonic() - started:.1f} s",
                started,
            )

    def _check_fields(self) -> None:
        problems = sorted({p for event in self.events for p in event_problems(self.t.kind, event)})
        kinds = sorted({str(e.get("type")) for e in self.events})
        self.row(
            "every event's fields",
            FAIL if problems else PASS,
            "; ".join(problems) or f"{len(self.events)} events of {len(kinds)} types",
            0.0,
        )

    def _check_logs(self, logs: list[str]) -> None:
        cards = set(self.cards_seen)
        if self.sim is not None and self.t.kind == "hole_card_reader":
            cards |= {"As", "Kh"}
        leaks: list[str] = []
        for line in logs:
            for card in cards:
                if re.search(rf"(?<![A-Za-z0-9]){card}(?![A-Za-z0-9])", line):
                    leaks.append(json.loads(line).get("event", "?"))
                    break
        if not logs:
            self.row("no card in any log line", FAIL, "no log line captured at all", 0.0)
        elif leaks:
            shown = ", ".join(sorted(set(leaks)))
            self.row(
                "no card in any log line",
                FAIL,
                f"{len(leaks)} of {len(logs)} log lines name a card (rule H7): {shown}",
                0.0,
            )
        else:
            self.row(
                "no card in any log line",
                PASS,
                f"{len(logs)} log lines, none names any of the {len(cards)} cards dealt",
                0.0,
            )


def _line_text(line: Mapping[str, Any]) -> str:
    return (
        f"{line.get('baudrate', 115200)} {line.get('bytesize', 8)}{line.get('parity', 'N')}"
        f"{line.get('stopbits', 1)}"
    )


def _fields_text(event: Mapping[str, Any]) -> str:
    shown = {
        k: ("<card>" if k == "card" else "<cards>" if k == "cards" else v)
        for k, v in event.items()
        if k not in ("type", "device", "kind")
    }
    return f"{event['type']} {json.dumps(shown)}" if shown else str(event["type"])


async def run_conformance(
    target: Target,
    *,
    interactive: bool = False,
    ask: Callable[[str], None] | None = None,
    max_response_ms: float = MAX_RESPONSE_MS,
    seed: int = 0,
) -> Report:
    """Run every check of ``target``'s kind; the report (never raises for a failed check)."""
    with tempfile.TemporaryDirectory(prefix="tablectl-conformance-") as tmp:
        run = Run(
            target,
            Path(tmp),
            interactive=interactive,
            ask=ask,
            max_response_ms=max_response_ms,
            seed=seed,
        )
        return await run.run()


def conformance(kind: str, driver: str, port: str | None = None, **options: Any) -> Report:
    """Synchronous front: resolve the target and run it on a new event loop."""
    simulator = options.pop("simulator", None)
    line = options.pop("line", None)
    target = resolve(kind, driver, port, simulator, line)
    return asyncio.run(run_conformance(target, **options))
