"""The Acme CS-9 shoe simulated: tablectl's shoe model behind the CS-9's own wire.

The cards, the cut card, jams and locks are tablectl's ``ShoeSim`` (so ``tablectl demo``'s
automatic dealer can deal from it like from any shoe); everything on the wire is the CS-9's:
``send_frame`` turns the model's reports into ``acme_shoe.protocol`` frames, sent one at a
time until ACKed (again on NAK or after ``ACK_TIMEOUT``), and ``receive`` answers the host's
commands. Served on a pty by ``tablectl sim shoe --driver acme-cs9``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from acme_shoe import protocol as p
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Msg, ResultCode
from tablectl.simulators.shoe import ShoeSim


class AcmeShoeSim(ShoeSim):
    """A CS-9 shoe; takes ``ShoeSim``'s keywords (seed, decks, joker, automated, ...)."""

    model = "ACME CS-9"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("firmware", "3.2.0")
        super().__init__(**kwargs)
        self.deframer = p.Deframer()
        self._queue: deque[bytes] = deque()  # events not yet ACKed, the first in flight
        self._tries = 0
        self._retry: Any = None
        self._last_reply: bytes | None = None
        self.dropped_events = 0

    # -- DeviceSide ----------------------------------------------------------------------

    def connect(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self.connected = True
        self.handshaken = False
        self.deframer = p.Deframer()
        self._queue.clear()

    def disconnect(self) -> None:
        self._queue.clear()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        super().disconnect()

    def _receive_now(self, data: bytes) -> None:
        """The host's bytes (``SimulatedDevice.receive`` calls this, late if ``answer_delay``)."""
        if not self.connected:
            return
        for kind, text in self.deframer.feed(data):
            if kind == "ack":
                self._acked()
            elif kind == "nak":
                self._again()
            elif kind == "bad":
                self._raw(bytes((p.NAK,)))
            else:
                self._command(text.split(","))

    # -- the host's commands -----------------------------------------------------------

    def _command(self, fields: list[str]) -> None:
        letter = fields[0]
        if letter == "V":
            ident = self.identity
            self.handshaken = True
            self._reply(f"I,{ident.model},{ident.serial},{ident.firmware},{ident.firmware_sha256}")
            self.on_handshake()
        elif not self.handshaken:
            self._reply(f"E,{letter},NR,identify first")
        elif letter == "S":
            fault = "JM" if self.faulted else "0"
            self._reply(f"T,{int(self.locked)},{fault}")
        elif letter == "L" and len(fields) == 2 and fields[1] in ("0", "1"):
            handler = self._cmd_lock if fields[1] == "1" else self._cmd_unlock
            code, text = handler(b"")
            if code == ResultCode.OK:
                self._reply(f"A,L,{fields[1]}")
            else:
                self._reply(f"E,L,WS,{_clean(text)}")
        else:
            self._reply(f"E,{letter},UC,unknown command")

    def _reply(self, text: str) -> None:
        self._last_reply = p.frame(text)
        self._raw(self._last_reply)

    def _raw(self, data: bytes) -> None:
        if self._send is not None and self.connected:
            self._send(data)

    # -- the model's reports, as CS-9 events ----------------------------------------------

    def send_frame(self, msg: Msg, payload: bytes = b"") -> None:
        if not (self.connected and self.handshaken):
            return
        text = _event_text(msg, payload)
        if text is None:
            return
        self._queue.append(p.frame(text))
        if len(self._queue) == 1:
            self._transmit()

    def _transmit(self) -> None:
        self._tries = 1
        self._raw(self._queue[0])
        self._arm()

    def _arm(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        self._retry = self.loop.call_later(p.ACK_TIMEOUT, self._again)

    def _acked(self) -> None:
        if not self._queue:
            return
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._queue.popleft()
        if self._queue:
            self._transmit()

    def _again(self) -> None:
        """NAK or no ACK in time: the event in flight once more, or given up after MAX_TRIES."""
        self._retry = None
        if not self._queue:
            if self._last_reply is not None:
                self._raw(self._last_reply)  # the host NAKed a reply
            return
        if self._tries >= p.MAX_TRIES:
            self.dropped_events += 1
            self._queue.popleft()
            if self._queue:
                self._transmit()
            return
        self._tries += 1
        self._raw(self._queue[0])
        self._arm()


def _clean(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) < 0x7F and c != "," else " " for c in text)


def _event_text(msg: Msg, payload: bytes) -> str | None:
    """The CS-9 frame text of one of ShoeSim's reports (None: the CS-9 has no such report)."""
    if msg == Msg.CARD_DRAWN:
        card, face_up = m.unpack_card_drawn(payload)
        return f"C,{p.card_to_wire(card)},{'F' if face_up else 'B'}"
    if msg == Msg.STACK_DISPENSED:
        cards = m.unpack_stack(payload)
        return ",".join(["K", str(len(cards)), *(p.card_to_wire(c) for c in cards)])
    if msg == Msg.CUT_CARD_REACHED:
        return "X"
    if msg == Msg.SHOE_LOADED:
        return f"N,{m.unpack_deck(payload, 'SHOE_LOADED') or '-'}"
    if msg == Msg.SHOE_FAULT:
        code, text = m.unpack_fault(payload, "SHOE_FAULT")
        word = m.fault_name(code, text)
        return f"F,{p.FAULT_CODES.get(word, 'OT')},{_clean(text)}"
    if msg == Msg.DISPENSING_LOCKED:
        return f"D,{int(m.unpack_bool(payload, 'DISPENSING_LOCKED'))}"
    return None
