"""The Acme CS-9 shoe simulated: tablectl's shoe model behind the CS-9's own wire.

The cards, the cut card, jams and locks are tablectl's ``ShoeSim`` (so ``tablectl demo``'s
automatic dealer can deal from it like from any shoe); everything on the wire is the CS-9's.
``VendorSimulator`` (tablectl.simulators.vendor) is the seam: ``on_bytes`` answers the host's
commands, ``on_report`` turns the model's reports (docs/events.md's words) into CS-9 events,
sent one at a time until ACKed (again on NAK or after ``ACK_TIMEOUT``). Served on a pty by
``tablectl sim shoe --driver acme-cs9``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from acme_shoe import protocol as p
from tablectl.simulators import Report, ShoeSim, VendorSimulator


class AcmeShoeSim(VendorSimulator, ShoeSim):
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

    # -- the line ------------------------------------------------------------------------

    def on_connect(self) -> None:
        self.deframer = p.Deframer()
        self._queue.clear()

    def on_disconnect(self) -> None:
        self._queue.clear()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        super().on_disconnect()

    def on_bytes(self, data: bytes) -> None:
        for kind, text in self.deframer.feed(data):
            if kind == "ack":
                self._acked()
            elif kind == "nak":
                self._again()
            elif kind == "bad":
                self.write(bytes((p.NAK,)))
            else:
                self._command(text.split(","))

    # -- the host's commands -----------------------------------------------------------

    def _command(self, fields: list[str]) -> None:
        letter = fields[0]
        if letter == "V":
            ident = self.identity
            self._reply(f"I,{ident.model},{ident.serial},{ident.firmware},{ident.firmware_sha256}")
            self.identified()
        elif not self.handshaken:
            self._reply(f"E,{letter},NR,identify first")
        elif letter == "S":
            fault = "JM" if self.faulted else "0"
            self._reply(f"T,{int(self.locked)},{fault}")
        elif letter == "L" and len(fields) == 2 and fields[1] in ("0", "1"):
            done, text = self.do("lock_dispensing" if fields[1] == "1" else "unlock_dispensing")
            if done:
                self._reply(f"A,L,{fields[1]}")
            else:
                self._reply(f"E,L,WS,{_clean(text)}")
        else:
            self._reply(f"E,{letter},UC,unknown command")

    def _reply(self, text: str) -> None:
        self._last_reply = p.frame(text)
        self.write(self._last_reply)

    # -- the model's reports, as CS-9 events ----------------------------------------------

    def on_report(self, report: Report) -> None:
        text = _event_text(report)
        if text is None:
            return
        self._queue.append(p.frame(text))
        if len(self._queue) == 1:
            self._transmit()

    def _transmit(self) -> None:
        self._tries = 1
        self.write(self._queue[0])
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
                self.write(self._last_reply)  # the host NAKed a reply
            return
        if self._tries >= p.MAX_TRIES:
            self.dropped_events += 1
            self._queue.popleft()
            if self._queue:
                self._transmit()
            return
        self._tries += 1
        self.write(self._queue[0])
        self._arm()


def _clean(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) < 0x7F and c != "," else " " for c in text)


def _event_text(report: Report) -> str | None:
    """The CS-9 frame text of one of the model's reports (None: the CS-9 has no such event)."""
    fields = report.fields
    if report.type == "card_drawn":
        return f"C,{p.card_to_wire(fields['card'])},{'F' if fields.get('face_up') else 'B'}"
    if report.type == "stack_dispensed":
        cards = list(fields["cards"])
        return ",".join(["K", str(len(cards)), *(p.card_to_wire(c) for c in cards)])
    if report.type == "cut_card_reached":
        return "X"
    if report.type == "shoe_loaded":
        return f"N,{fields.get('deck') or '-'}"
    if report.type == "shoe_fault":
        detail = str(fields.get("detail") or "")
        return f"F,{p.FAULT_CODES.get(str(fields['fault']), 'OT')},{_clean(detail)}"
    if report.type == "dispensing_locked":
        return f"D,{int(bool(fields['locked']))}"
    return None
