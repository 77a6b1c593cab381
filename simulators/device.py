"""The device side of the reference protocol, shared by every simulator.

A SimulatedDevice is a DeviceSide (simulators.link): an attachment calls
``connect``, ``receive`` and ``disconnect`` on one asyncio loop's thread, and
the device answers through ``send``. It runs the same sans-I/O link layer as
the drivers, answers the handshake with its identity, and dispatches commands
to its kind. Timers (retransmission, shuffle cycles) use the running loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, ClassVar

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import Frame
from tablectl.drivers.protocol.link import Link, LinkFailure, LinkSettings
from tablectl.drivers.protocol.messages import Identity, Msg, ResultCode

CommandHandler = Callable[[bytes], tuple[ResultCode, str]]


class SimulatedDevice:
    """A reference-protocol device; subclasses add their kind's behaviour."""

    kind: ClassVar[str]
    model: ClassVar[str]

    def __init__(
        self,
        *,
        seed: int = 0,
        serial: str | None = None,
        firmware: str = "1.4.2",
        firmware_image: bytes | None = None,
        versions: tuple[int, int] = m.PROTOCOL_VERSIONS,
        link_settings: LinkSettings | None = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.identity = Identity(
            kind=self.kind,
            model=self.model,
            serial=serial or f"SIM-{self.kind.upper()}-{seed:04d}",
            firmware=firmware,
            firmware_sha256=m.firmware_hash(
                firmware_image or f"{self.model} firmware {firmware}".encode()
            ),
        )
        self.versions = versions
        self.link = Link(link_settings or LinkSettings(ack_timeout=0.2, max_retransmissions=3))
        self.handshaken = False
        self.connected = False
        #: seconds to wait before answering anything (fault: slow answers)
        self.answer_delay = 0.0
        self._send: Callable[[bytes], None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.TimerHandle] = set()
        self.received: list[Frame] = []  # every data frame from the host, for tests
        self._commands: dict[int, CommandHandler] = {}

    # -- DeviceSide ------------------------------------------------------------

    def connect(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self.connected = True
        self.handshaken = False
        self.link.reset()

    def receive(self, data: bytes) -> None:
        if not self.connected:
            return
        if self.answer_delay > 0:
            self.later(self.answer_delay, lambda: self._receive_now(data))
        else:
            self._receive_now(data)

    def disconnect(self) -> None:
        self.connected = False
        self.handshaken = False
        self._send = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for handle in self._tasks:
            handle.cancel()
        self._tasks.clear()
        self.on_disconnect()

    # -- timers ------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def later(self, delay: float, action: Callable[[], Any]) -> asyncio.TimerHandle:
        """Run ``action`` after ``delay`` seconds unless the link goes down first."""

        def fire() -> None:
            self._tasks.discard(handle)
            action()

        handle = self.loop.call_later(delay, fire)
        self._tasks.add(handle)
        return handle

    # -- link ------------------------------------------------------------------

    def _receive_now(self, data: bytes) -> None:
        if not self.connected:
            return
        frames = self.link.receive(data, self.loop.time())
        self._flush()
        for frame in frames:
            self.received.append(frame)
            self._dispatch(frame)

    def _flush(self) -> None:
        out = self.link.take_output()
        if out and self._send is not None:
            self._send(out)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.link.next_deadline()
        if deadline is not None and self.connected:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.link.poll(self.loop.time())
        except LinkFailure:
            # the host is gone; a real device drops what it was sending and waits
            self.link.reset()
            self.handshaken = False
            return
        self._flush()

    def send_frame(self, msg: Msg, payload: bytes = b"") -> None:
        """Send a message to the host (dropped when no session, as a real device would)."""
        if not (self.connected and self.handshaken):
            return
        self.link.send(msg, payload, self.loop.time())
        self._flush()

    def _dispatch(self, frame: Frame) -> None:
        if frame.type == Msg.HELLO:
            self._on_hello(frame)
            return
        if not self.handshaken:
            self._result_now(frame.seq, ResultCode.NOT_READY, "no HELLO yet")
            return
        if frame.type == Msg.PING:
            return
        handler = self._commands.get(frame.type)
        if handler is None:
            self.send_frame(
                Msg.RESULT,
                m.pack_result(frame.seq, ResultCode.UNKNOWN_MESSAGE, f"type {frame.type:#04x}"),
            )
            return
        try:
            code, text = handler(frame.payload)
        except m.PayloadError as bad:
            code, text = ResultCode.BAD_PAYLOAD, str(bad)
        self.send_frame(Msg.RESULT, m.pack_result(frame.seq, code, text))

    def _result_now(self, ref_seq: int, code: ResultCode, text: str) -> None:
        self.link.send(Msg.RESULT, m.pack_result(ref_seq, code, text), self.loop.time())
        self._flush()

    def _on_hello(self, frame: Frame) -> None:
        self.link.reset_sending()
        try:
            low, high = m.unpack_hello(frame.payload)
        except m.PayloadError as bad:
            self._result_now(frame.seq, ResultCode.BAD_PAYLOAD, str(bad))
            return
        mine_low, mine_high = self.versions
        version = min(high, mine_high)
        if version < max(low, mine_low):
            self._result_now(
                frame.seq,
                ResultCode.VERSION_UNSUPPORTED,
                f"device speaks {mine_low}..{mine_high}, host {low}..{high}",
            )
            return
        self.handshaken = True
        self.link.send(Msg.IDENTITY, m.pack_identity(version, self.identity), self.loop.time())
        self._flush()
        self.on_handshake()

    def command(self, msg: Msg, handler: CommandHandler) -> None:
        self._commands[msg] = handler

    # -- hooks for kinds -------------------------------------------------------

    def on_handshake(self) -> None:
        """A host opened a session (send current status here)."""

    def on_disconnect(self) -> None:
        """The link went down."""

    def impersonate(self, serial: str | None = None, firmware_sha256: str | None = None) -> None:
        """Fault: claim another identity at the next handshake (an impostor device)."""
        ident = self.identity
        self.identity = Identity(
            ident.kind,
            ident.model,
            serial or ident.serial,
            ident.firmware,
            firmware_sha256 or m.firmware_hash(b"impostor firmware " + ident.serial.encode()),
        )


OK = (ResultCode.OK, "")
