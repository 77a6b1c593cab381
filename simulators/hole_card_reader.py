"""A simulated 3C21 dealer hole-card reader: it answers blackjack yes/no, never the card."""

from __future__ import annotations

from typing import Any

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Fault, Msg, ResultCode
from tablectl.simulators.cards import is_blackjack
from tablectl.simulators.device import OK, SimulatedDevice


class HoleCardReaderSim(SimulatedDevice):
    kind = "hole_card_reader"
    model = "SIM-PEEK 2"

    def __init__(
        self, *, read_seconds: float = 0.05, self_test_seconds: float = 0.05, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.read_seconds = read_seconds
        self.self_test_seconds = self_test_seconds
        self.broken = False
        self._hole_card: str | None = None
        self.command(Msg.SELF_TEST, self._cmd_self_test)

    def _cmd_self_test(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "SELF_TEST")
        self.later(
            self.self_test_seconds,
            lambda: self.send_frame(
                Msg.SELF_TEST_RESULT, m.pack_self_test(not self.broken, int(self.broken))
            ),
        )
        return OK

    def insert(self, up_card: str, hole_card: str) -> None:
        """The dealer slides the hole card in; the reader peeks and answers after a moment."""
        m.check_card(up_card)
        self._hole_card = m.check_card(hole_card)
        self.send_frame(Msg.READER_INSERTED)
        self.later(self.read_seconds, lambda: self._answer(up_card, hole_card))

    def _answer(self, up_card: str, hole_card: str) -> None:
        if self.broken:
            self.send_frame(Msg.READER_FAULT, m.pack_fault(Fault.SENSOR, "no read"))
            return
        self.send_frame(Msg.READER_RESULT, m.pack_bool(is_blackjack(up_card, hole_card)))

    def fault(self, fault: Fault = Fault.SENSOR, text: str = "") -> None:
        """The reader breaks: a fault now, and faults for reads and self-tests until repaired."""
        self.broken = True
        self.send_frame(Msg.READER_FAULT, m.pack_fault(fault, text))

    def repair(self) -> None:
        self.broken = False
