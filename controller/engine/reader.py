"""The hole-card reader (13:69E-1.10D(f); 13:69F-2C.14(k), (l)): one of the Engine's rule
families.

Its daily inspection (H1), its time out of service (H5, interpretation I4) and the state the
status shows. Which table has a reader, and what its answers mean for a round (H2-H4, H6), is
the game's (controller/engine/games/three_card_21.py); this class keeps the reader's own days.
"""

from __future__ import annotations

from datetime import date

from tablectl.controller.engine.interpretations import Interpretations

Day = date | str  # a gaming day, or "untimed" for events without a time


class HoleCardReader:
    """The reader's inspection and service days; the snapshot carries each field by the
    engine's name for it (``reader_inspected_day``, ``reader_disabled``, ``reader_fault_day``)."""

    __slots__ = ("disabled", "fault_day", "inspected_day", "interp")

    def __init__(self, interp: Interpretations) -> None:
        self.interp = interp
        self.inspected_day: Day | None = None
        self.disabled = False
        self.fault_day: Day | None = None  # H5: the gaming day it went out

    def inspected(self, day: Day) -> bool:
        """The floorperson inspected it on ``day``; whether it is (back) in service."""
        self.inspected_day = day
        if self.disabled and not self._reinspection_restores(day):
            return False  # H5 (I4): out for the rest of the gaming day it went out on
        self.disabled = False  # H5: re-inspected
        self.fault_day = None
        return True

    def _reinspection_restores(self, day: Day) -> bool:
        """H5 (interpretation I4): a faulted reader is out "for the rest of the gaming day";
        with no repair recorded, only an inspection of a later gaming day returns it."""
        fault = self.fault_day
        if self.interp.reader_reinspection_same_day_restores or fault is None:
            return True
        if isinstance(fault, date) and isinstance(day, date):
            return day > fault
        return day != fault

    def went_out(self, day: Day) -> None:
        """H5: it malfunctioned on ``day``; out until re-inspected on a later gaming day."""
        self.disabled = True
        self.fault_day = day

    def inspected_on(self, day: Day | None) -> bool:
        """H1 (1.10D(f)): inspected on the gaming day ``day`` (untimed events share one)."""
        inspected = self.inspected_day
        if inspected is None:
            return False
        return day in (None, "untimed") or inspected in (day, "untimed")

    def state(self) -> str:
        """For the status: disabled, inspected or not_inspected."""
        if self.disabled:
            return "disabled"
        return "inspected" if self.inspected_day is not None else "not_inspected"
