"""The reference drivers: the project's own protocol (docs/protocol.md) for every kind.

``ReferenceSession`` holds a session over any Transport with the sans-I/O
link layer (drivers.protocol.link): handshake, commands awaiting their RESULT,
retransmission timers and a heartbeat. Each reference driver adds how its
kind's frames become docs/events.md events and how its commands are sent.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from typing import Any

from tablectl.drivers.base import (
    DRIVER_API_VERSION,
    FRAMES_RECEIVED,
    FRAMES_SENT,
    RETRANSMISSIONS,
    CommandRefused,
    DeviceDriver,
    DeviceRefused,
    DeviceTimeout,
    DeviceUnavailable,
    DiscardRack,
    DriverSettings,
    HoleCardReader,
    Shoe,
    Shuffler,
)
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import Frame
from tablectl.drivers.protocol.link import Link, LinkFailure
from tablectl.drivers.protocol.messages import Identity, Msg, PayloadError, ResultCode
from tablectl.drivers.transport.base import Transport

EventFields = tuple[str, dict[str, Any]]


class ReferenceSession(DeviceDriver):
    """A session of the reference protocol over the driver's transport."""

    driver_api = DRIVER_API_VERSION

    def __init__(self, transport: Transport, **kwargs: Any) -> None:
        super().__init__(transport, **kwargs)
        self.link = Link(self.settings.link)
        self.protocol_version: int | None = None
        self._in_session = False
        self._hello: asyncio.Future[tuple[int, Identity]] | None = None
        self._pending: dict[int, asyncio.Future[tuple[int, str]]] = {}
        self._waiters: dict[int, list[asyncio.Future[Frame]]] = {}
        #: frames after IDENTITY, held until the identity is accepted
        self._early: list[Frame] | None = None
        self._link_timer: asyncio.TimerHandle | None = None
        self._heartbeat: asyncio.TimerHandle | None = None
        self._last_heard = 0.0  # loop time of the last frame from the device
        #: the ACKs of frames just delivered, written from the loop right after them
        self._ack_handle: asyncio.Handle | None = None
        self._frames_sent = FRAMES_SENT.labels(self.name)
        self._frames_received = FRAMES_RECEIVED.labels(self.name)
        self._retransmissions = RETRANSMISSIONS.labels(self.name)
        self._seen: tuple[int, int, int, dict[str, int]] = (
            0,
            0,
            0,
            {},
        )  # counters already copied into the metrics

    # -- session -------------------------------------------------------------

    async def open_session(self) -> Identity:
        self.link.reset()
        self._in_session = False
        self._early = None
        hello: asyncio.Future[tuple[int, Identity]] = self.loop.create_future()
        self._hello = hello
        self.send(Msg.HELLO, m.pack_hello(*m.PROTOCOL_VERSIONS))
        timeout = self.settings.handshake_timeout
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives with the result (CPython gh-86296), and stop() would wait for ever.
            async with asyncio.timeout(timeout):
                version, identity = await hello
        except TimeoutError:
            self.count_error("timeout")
            raise DeviceTimeout(
                f"{self.name}: no handshake answer on {self.transport.name} within {timeout}s"
            ) from None
        finally:
            self._hello = None
        low, high = m.PROTOCOL_VERSIONS
        if not low <= version <= high:
            raise DeviceRefused(f"device chose protocol version {version}, not {low}..{high}", None)
        self.protocol_version = version
        return identity

    def session_accepted(self) -> None:
        """Deliver what the device sent right after its IDENTITY, then run normally."""
        self._in_session = True
        early, self._early = self._early, None
        for frame in early or []:
            self._handle(frame)
        self._last_heard = self.loop.time()
        self._arm_heartbeat()

    def session_lost(self, reason: str) -> None:
        super().session_lost(reason)
        if self._hello is not None and not self._hello.done():
            # lost while handshaking: fail now rather than at the handshake timeout
            self._hello.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))

    def close_session(self, reason: str) -> None:
        self._in_session = False
        self._early = None
        for handle in (self._link_timer, self._heartbeat, self._ack_handle):
            if handle is not None:
                handle.cancel()
        self._link_timer = self._heartbeat = self._ack_handle = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))

    # -- bytes in and out ----------------------------------------------------

    def send(self, msg: Msg, payload: bytes = b"") -> int:
        seq = self.link.send(msg, payload, self.loop.time())
        self._flush()
        return seq

    def _flush(self) -> None:
        out = self.link.take_output()
        if out and self.transport.is_open:
            self.transport.write(out)
        self._sync_metrics()
        self._arm_link_timer()

    def _sync_metrics(self) -> None:
        sent, received, retrans, errors = self._seen
        link = self.link
        if link.frames_sent != sent:
            self._frames_sent.inc(link.frames_sent - sent)
        if link.frames_received != received:
            self._frames_received.inc(link.frames_received - received)
        if link.retransmissions != retrans:
            self._retransmissions.inc(link.retransmissions - retrans)
        for error, count in link.errors.items():
            if count != errors.get(error, 0):
                self.count_error(error, count - errors.get(error, 0))
        errors = dict(link.errors)
        self._seen = (link.frames_sent, link.frames_received, link.retransmissions, errors)

    def _arm_link_timer(self) -> None:
        if self._link_timer is not None:
            self._link_timer.cancel()
            self._link_timer = None
        deadline = self.link.next_deadline()
        if deadline is not None or self.link.failed:
            when = self.loop.time() if deadline is None else deadline
            self._link_timer = self.loop.call_at(when, self._on_link_timer)

    def _on_link_timer(self) -> None:
        self._link_timer = None
        try:
            self.link.poll(self.loop.time())
        except LinkFailure as failure:
            self._sync_metrics()
            self.count_error("link_failure")
            self.session_lost(str(failure))
            return
        self._flush()

    def _arm_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        interval = self.settings.heartbeat_interval
        if interval is not None and self._in_session:
            self._heartbeat = self.loop.call_at(self._last_heard + interval, self._beat)

    def _beat(self) -> None:
        """A PING after `heartbeat_interval` without a frame from the device.

        Frames received meanwhile only move `_last_heard`: the timer, when it fires early,
        re-arms itself for the rest of the silence (no cancel and re-arm per frame).
        """
        self._heartbeat = None
        interval = self.settings.heartbeat_interval
        if not self._in_session or interval is None:
            return
        if self.loop.time() < self._last_heard + interval:
            self._heartbeat = self.loop.call_at(self._last_heard + interval, self._beat)
            return
        if self.link.idle:
            self.send(Msg.PING)
        self._last_heard = self.loop.time()
        self._arm_heartbeat()

    def on_data(self, data: bytes) -> None:
        frames = self.link.receive(data, self.loop.time())
        if not frames:
            self._flush()  # a NAK, the next queued frame after an ACK, the error counts
            return
        # Deliver first and acknowledge from the loop right after: the ACK's write (a syscall
        # that wakes the device's side) is then off the path from a frame to its event being
        # handled (and journaled) while still going out in the same loop cycle, far inside
        # the device's ACK timeout (LinkSettings.ack_timeout).
        for frame in frames:
            self._handle(frame)
        self._last_heard = self.loop.time()  # the heartbeat counts silence from here
        if self._ack_handle is None:
            self._ack_handle = self.loop.call_soon(self._send_acks)

    def _send_acks(self) -> None:
        self._ack_handle = None
        self._flush()

    def _handle(self, frame: Frame) -> None:
        try:
            if frame.type == Msg.IDENTITY:
                self._on_identity(frame)
            elif frame.type == Msg.RESULT:
                self._on_result(frame)
            elif self._early is not None:
                self._early.append(frame)
            elif not self._in_session:
                self.count_error("before_handshake")
            else:
                event = self.frame_event(frame)
                if event is None:
                    self.count_error("unknown_message")
                    self.log.warning("unknown_message", msg_type=frame.type)
                else:
                    self.emit(event[0], **event[1])
        except PayloadError as bad:
            # Arrived intact (the link layer acknowledged it) but undecodable: a device fault,
            # never a frame dropped as fine: a card may have left the shoe unseen.
            self.count_error("payload")
            try:
                name = Msg(frame.type).name
            except ValueError:
                name = f"0x{frame.type:02x}"
            self.log.warning("bad_payload", msg_type=name, error=str(bad))
            if self._in_session:  # a handshake frame fails the handshake instead
                self.undecodable_frame(name)

    def _on_identity(self, frame: Frame) -> None:
        version, identity = m.unpack_identity(frame.payload)
        if self._hello is not None and not self._hello.done():
            self._early = []
            self._hello.set_result((version, identity))
        elif self._in_session:
            # an IDENTITY nobody asked for: the device restarted and lost our session
            self.session_lost("device sent a new IDENTITY mid-session (it restarted)")

    def _on_result(self, frame: Frame) -> None:
        ref_seq, code, text = m.unpack_result(frame.payload)
        if code == ResultCode.VERSION_UNSUPPORTED and self._hello is not None:
            if not self._hello.done():
                self._hello.set_exception(
                    DeviceRefused(f"no common protocol version: {text}", None)
                )
            return
        if code == ResultCode.NOT_READY:
            self.session_lost(f"device has no session: {text}")
        future = self._pending.pop(ref_seq, None)
        if future is not None and not future.done():
            future.set_result((code, text))

    # -- commands ------------------------------------------------------------

    async def command(self, msg: Msg, payload: bytes = b"") -> None:
        """Send a command and wait for its RESULT; CommandRefused on an error code."""
        if not self._in_session:
            raise DeviceUnavailable(f"{self.name}: not connected, cannot send {msg.name}")
        seq = self.send(msg, payload)
        future: asyncio.Future[tuple[int, str]] = self.loop.create_future()
        self._pending[seq] = future
        timeout = self.settings.command_timeout
        try:
            async with asyncio.timeout(timeout):
                code, text = await future
        except TimeoutError:
            self._pending.pop(seq, None)
            self.count_error("timeout")
            raise DeviceTimeout(
                f"{self.name}: no RESULT for {msg.name} within {timeout}s"
            ) from None
        if code != ResultCode.OK:
            try:
                code_name = ResultCode(code).name
            except ValueError:
                code_name = "UNKNOWN_CODE"
            self.count_error("command_refused")
            raise CommandRefused(msg.name, code, code_name, text)

    async def command_then(self, msg: Msg, answer: Msg, payload: bytes = b"") -> Frame:
        """A command whose outcome arrives later as the frame ``answer``."""
        waiter: asyncio.Future[Frame] = self.loop.create_future()
        self._waiters.setdefault(answer, []).append(waiter)
        try:
            await self.command(msg, payload)
            async with asyncio.timeout(self.settings.command_timeout):
                return await waiter
        except TimeoutError:
            self.count_error("timeout")
            raise DeviceTimeout(f"{self.name}: no {answer.name} after {msg.name}") from None
        finally:
            if waiter in self._waiters.get(answer, []):
                self._waiters[answer].remove(waiter)

    def _wake(self, frame: Frame) -> None:
        for waiter in self._waiters.pop(frame.type, []):
            if not waiter.done():
                waiter.set_result(frame)

    @abc.abstractmethod
    def frame_event(self, frame: Frame) -> EventFields | None:
        """The docs/events.md event for a device frame, or None for a type this kind lacks."""


def _deck(deck: str | None) -> dict[str, Any]:
    return {} if deck is None else {"deck": deck}


def _fault(frame: Frame, what: str) -> dict[str, Any]:
    code, text = m.unpack_fault(frame.payload, what)
    out: dict[str, Any] = {"fault": m.fault_name(code, text)}
    if text:
        out["detail"] = text
    return out


def shuffler_frame_event(frame: Frame) -> EventFields | None:
    """The docs/events.md event of a shuffler frame (None: a type it lacks); pure, shared
    with the vendor simulators' reports (simulators.vendor)."""
    t, p = frame.type, frame.payload
    if t == Msg.SHUFFLE_STARTED:
        return "shuffle_started", _deck(m.unpack_deck(p, "SHUFFLE_STARTED"))
    if t == Msg.SHUFFLE_PROGRESS:
        return "shuffle_progress", {"percent": m.unpack_progress(p)}
    if t == Msg.SHUFFLE_COMPLETED:
        deck, count = m.unpack_shuffle_completed(p)
        return "shuffle_completed", _deck(deck) | ({} if count is None else {"count": count})
    if t == Msg.SHUFFLER_FAULT:
        return "shuffler_fault", _fault(frame, "SHUFFLER_FAULT")
    if t == Msg.SHUFFLER_STATUS:
        door_open, empty = m.unpack_shuffler_status(p)
        return "shuffler_status", {"door_open": door_open, "empty": empty}
    if t == Msg.DECK_LOCKED:
        m.require_empty(p, "DECK_LOCKED")
        return "deck_locked", {}
    if t == Msg.DECK_RELEASED:
        m.require_empty(p, "DECK_RELEASED")
        return "deck_released", {}
    return None


class ReferenceShuffler(ReferenceSession, Shuffler):
    """The reference shuffler driver."""

    def frame_event(self, frame: Frame) -> EventFields | None:
        return shuffler_frame_event(frame)

    async def start_shuffle(self, deck: str | None = None) -> None:
        await self.command(Msg.START_SHUFFLE, m.pack_deck(deck))

    async def lock_deck(self) -> None:
        await self.command(Msg.LOCK_DECK)

    async def release_deck(self) -> None:
        await self.command(Msg.RELEASE_DECK)


def shoe_frame_event(frame: Frame) -> EventFields | None:
    """The docs/events.md event of a shoe frame (None: a type it lacks); pure, shared
    with the vendor simulators' reports (simulators.vendor)."""
    t, p = frame.type, frame.payload
    if t == Msg.CARD_DRAWN:
        card, face_up = m.unpack_card_drawn(p)
        return "card_drawn", {"card": card, "face_up": face_up}
    if t == Msg.STACK_DISPENSED:
        return "stack_dispensed", {"cards": m.unpack_stack(p)}
    if t == Msg.CUT_CARD_REACHED:
        m.require_empty(p, "CUT_CARD_REACHED")
        return "cut_card_reached", {}
    if t == Msg.SHOE_LOADED:
        return "shoe_loaded", _deck(m.unpack_deck(p, "SHOE_LOADED"))
    if t == Msg.SHOE_FAULT:
        return "shoe_fault", _fault(frame, "SHOE_FAULT")
    if t == Msg.DISPENSING_LOCKED:
        return "dispensing_locked", {"locked": m.unpack_bool(p, "DISPENSING_LOCKED")}
    return None


class ReferenceShoe(ReferenceSession, Shoe):
    """The reference shoe driver (manual card-reading shoe or ADS)."""

    def frame_event(self, frame: Frame) -> EventFields | None:
        return shoe_frame_event(frame)

    async def lock_dispensing(self) -> None:
        await self.command(Msg.LOCK_DISPENSING)

    async def unlock_dispensing(self) -> None:
        await self.command(Msg.UNLOCK_DISPENSING)


def reader_frame_event(frame: Frame) -> EventFields | None:
    """The docs/events.md event of a hole-card reader frame (None: a type it lacks); pure, shared
    with the vendor simulators' reports (simulators.vendor)."""
    t, p = frame.type, frame.payload
    if t == Msg.READER_INSERTED:
        m.require_empty(p, "READER_INSERTED")
        return "reader_inserted", {}
    if t == Msg.READER_RESULT:
        return "reader_result", {"blackjack": m.unpack_bool(p, "READER_RESULT")}
    if t == Msg.READER_FAULT:
        return "reader_fault", _fault(frame, "READER_FAULT")
    if t == Msg.SELF_TEST_RESULT:
        passed, code = m.unpack_self_test(p)
        return "reader_self_test", {"passed": passed, "code": code}
    return None


class ReferenceHoleCardReader(ReferenceSession, HoleCardReader):
    """The reference hole-card reader driver: yes/no only, the card never crosses the wire."""

    def frame_event(self, frame: Frame) -> EventFields | None:
        if frame.type == Msg.SELF_TEST_RESULT:
            self._wake(frame)
        return reader_frame_event(frame)

    async def self_test(self) -> bool:
        answer = await self.command_then(Msg.SELF_TEST, Msg.SELF_TEST_RESULT)
        return m.unpack_self_test(answer.payload)[0]


def rack_frame_event(frame: Frame) -> EventFields | None:
    """The docs/events.md event of a discard-rack frame (None: a type it lacks); pure, shared
    with the vendor simulators' reports (simulators.vendor)."""
    t, p = frame.type, frame.payload
    if t == Msg.RACK_LEVEL:
        cards, height_um, um_per_card = m.unpack_rack_level(p)
        return "rack_level", {
            "cards": cards,
            "height_um": height_um,
            "um_per_card": um_per_card,
        }
    if t == Msg.RACK_CLEARED:
        m.require_empty(p, "RACK_CLEARED")
        return "rack_cleared", {}
    if t == Msg.RACK_FAULT:
        return "rack_fault", _fault(frame, "RACK_FAULT")
    return None


class ReferenceDiscardRack(ReferenceSession, DiscardRack):
    """The reference discard-rack sensor driver."""

    def frame_event(self, frame: Frame) -> EventFields | None:
        if frame.type == Msg.RACK_LEVEL:
            self._wake(frame)
        return rack_frame_event(frame)

    async def read_level(self) -> int:
        answer = await self.command_then(Msg.READ_LEVEL, Msg.RACK_LEVEL)
        return m.unpack_rack_level(answer.payload)[0]


REFERENCE_DRIVERS: dict[str, type[ReferenceSession]] = {
    "shuffler": ReferenceShuffler,
    "shoe": ReferenceShoe,
    "hole_card_reader": ReferenceHoleCardReader,
    "discard_rack": ReferenceDiscardRack,
}

__all__ = [
    "REFERENCE_DRIVERS",
    "DriverSettings",
    "ReferenceDiscardRack",
    "ReferenceHoleCardReader",
    "ReferenceSession",
    "ReferenceShoe",
    "ReferenceShuffler",
]


#: device kind -> its frames' events (simulators.vendor decodes a model's reports with them)
FRAME_EVENTS: dict[str, Callable[[Frame], EventFields | None]] = {
    "shuffler": shuffler_frame_event,
    "shoe": shoe_frame_event,
    "hole_card_reader": reader_frame_event,
    "discard_rack": rack_frame_event,
}
