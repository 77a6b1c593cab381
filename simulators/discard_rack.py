"""A simulated discard-rack sensor: a height in micrometres turned into cards by calibration."""

from __future__ import annotations

from typing import Any

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Fault, Msg, ResultCode
from tablectl.simulators.device import OK, SimulatedDevice


class DiscardRackSim(SimulatedDevice):
    kind = "discard_rack"
    model = "SIM-RACK 1"

    def __init__(self, *, um_per_card: int = 300, noise_um: int = 100, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.um_per_card = um_per_card
        self.noise_um = noise_um
        self.cards = 0
        self.command(Msg.READ_LEVEL, self._cmd_read)

    def on_handshake(self) -> None:
        self.report()

    def _cmd_read(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "READ_LEVEL")
        self.later(0, self.report)
        return OK

    def reading(self) -> tuple[int, int]:
        """(cards, height_um) as the sensor sees them: the true height plus seeded noise."""
        noise = self.rng.randint(-self.noise_um, self.noise_um) if self.cards else 0
        height = max(0, self.cards * self.um_per_card + noise)
        return round(height / self.um_per_card), height

    def report(self) -> None:
        cards, height = self.reading()
        self.send_frame(Msg.RACK_LEVEL, m.pack_rack_level(cards, height, self.um_per_card))

    def add(self, cards: int) -> None:
        """Cards placed in the rack as a round ends."""
        self.cards += cards
        self.report()

    def fault(self, fault: Fault = Fault.SENSOR, text: str = "sensor blocked") -> None:
        """The sensor fails (blocked, out of calibration): it reports a fault, not a level."""
        self.send_frame(Msg.RACK_FAULT, m.pack_fault(fault, text))

    def clear(self) -> None:
        """The rack was emptied."""
        self.cards = 0
        self.send_frame(Msg.RACK_CLEARED)
        self.report()
