"""The base of a vendor's simulator: tablectl's model of a device behind the vendor's wire.

A vendor simulates its device for `tablectl sim`, `demo --driver` and the conformance kit by
keeping tablectl's model of the device's kind (the cards, jams and locks of `ShoeSim`,
`ShufflerSim`, `HoleCardReaderSim`, `DiscardRackSim`: the automatic dealer and the kit play
their hands) and putting its own wire in front of it. `VendorSimulator` is that seam, mixed
in before the model::

    class AcmeShoeSim(VendorSimulator, ShoeSim):
        def on_connect(self): ...            # the host opened the line: reset the framing
        def on_bytes(self, data): ...        # the host's bytes: answer with self.write(...)
        def on_report(self, report): ...     # the model reports: put it on the wire

and calls `write(data)`, `identified()` once the host has asked who it is, and
`do(command)` for the model's own commands (`lock_dispensing` ...). Reports come in
docs/events.md's words (`Report("card_drawn", {"card": "AS", "face_up": False})`): a vendor
never decodes tablectl's own reference protocol, nor overrides a private method. Documented
in docs/drivers.md, "The simulator".
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tablectl.drivers.protocol.frame import Frame
from tablectl.drivers.protocol.messages import Msg, ResultCode
from tablectl.drivers.reference import FRAME_EVENTS
from tablectl.simulators.device import SimulatedDevice


@dataclass(frozen=True)
class Report:
    """Something the device's model reports, as docs/events.md names it and its fields."""

    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)


#: The model's commands by their docs/protocol.md names (what a host asks of the device).
COMMANDS: dict[str, Msg] = {
    "start_shuffle": Msg.START_SHUFFLE,
    "lock_deck": Msg.LOCK_DECK,
    "release_deck": Msg.RELEASE_DECK,
    "lock_dispensing": Msg.LOCK_DISPENSING,
    "unlock_dispensing": Msg.UNLOCK_DISPENSING,
    "self_test": Msg.SELF_TEST,
    "read_level": Msg.READ_LEVEL,
}


class VendorSimulator(SimulatedDevice, abc.ABC):
    """A device of tablectl's model on a vendor's wire; the vendor overrides the `on_*`
    (`on_bytes` and `on_report` are abstract: a simulator without them cannot be made)."""

    # -- what a vendor overrides -----------------------------------------------------------

    def on_connect(self) -> None:
        """The host opened the line: reset the wire's state (framing, queues)."""

    @abc.abstractmethod
    def on_bytes(self, data: bytes) -> None:
        """Bytes from the host, as they arrive (late by `answer_delay` when a test asks)."""

    @abc.abstractmethod
    def on_report(self, report: Report) -> None:
        """The model reports something once the host has identified the device: send it."""

    # -- what a vendor calls ---------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Bytes to the host (dropped while the line is down, as a real line drops them)."""
        if self._send is not None and self.connected:
            self._send(data)

    def identified(self) -> None:
        """The host asked who the device is and got its identity: the session starts, the
        model sends its current state (`on_report`) from now on."""
        self.handshaken = True
        self.on_handshake()

    def do(self, command: str, payload: bytes = b"") -> tuple[bool, str]:
        """Run one of the model's commands by name (COMMANDS): (done, the model's words)."""
        msg = COMMANDS.get(command)
        handler: Callable[[bytes], tuple[ResultCode, str]] | None = (
            self._commands.get(msg) if msg is not None else None
        )
        if handler is None:
            return False, f"no command {command!r} on a {self.kind}"
        code, text = handler(payload)
        return code == ResultCode.OK, text

    # -- tablectl's side of the seam (a vendor leaves these alone) ---------------------------

    def connect(self, send: Callable[[bytes], None]) -> None:
        super().connect(send)
        self.on_connect()

    def _receive_now(self, data: bytes) -> None:
        if self.connected:
            self.on_bytes(data)

    def send_frame(self, msg: Msg, payload: bytes = b"") -> None:
        """The model's report in tablectl's protocol, turned into a Report for the vendor."""
        if not (self.connected and self.handshaken):
            return
        decoded = FRAME_EVENTS[self.kind](Frame(type=int(msg), seq=0, payload=payload))
        if decoded is not None:
            self.on_report(Report(*decoded))
