"""A simulated shoe: a card-reading manual shoe, or an automated dealing shoe (ADS).

It deals from the order it was loaded with (a shuffled deck from a ShufflerSim,
or its own seeded shuffle), reports a cut card, stacks of N, and its faults.
"""

from __future__ import annotations

from typing import Any

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Fault, Msg, ResultCode
from tablectl.simulators.cards import composition
from tablectl.simulators.device import OK, SimulatedDevice


class ShoeSim(SimulatedDevice):
    kind = "shoe"
    model = "SIM-SHOE 8"

    def __init__(
        self,
        *,
        automated: bool = False,
        decks: int = 1,
        joker: bool = False,
        stack_size: int = 5,
        cut_card_after: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.automated = automated
        self.decks = decks
        self.joker = joker
        self.stack_size = stack_size
        #: the cut card comes out after this many cards (default: 3/4 of a multi-deck shoe)
        self.cut_card_after = (
            cut_card_after if cut_card_after is not None or decks == 1 else decks * 52 * 3 // 4
        )
        self.cards: list[str] = []
        self.dealt = 0
        self.locked = False
        self.faulted = False
        self._face_up_next = False
        self._jam_next = False
        self.command(Msg.LOCK_DISPENSING, self._cmd_lock)
        self.command(Msg.UNLOCK_DISPENSING, self._cmd_unlock)

    def _cmd_lock(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "LOCK_DISPENSING")
        self.locked = True
        self.later(0, lambda: self.send_frame(Msg.DISPENSING_LOCKED, m.pack_bool(True)))
        return OK

    def _cmd_unlock(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "UNLOCK_DISPENSING")
        if self.faulted:
            return ResultCode.WRONG_STATE, "shoe is faulted: clear the jam first"
        self.locked = False
        self.later(0, lambda: self.send_frame(Msg.DISPENSING_LOCKED, m.pack_bool(False)))
        return OK

    # -- the dealer's hands ----------------------------------------------------

    def load(self, cards: list[str] | None = None, deck: str | None = None) -> None:
        """Cards placed in the shoe: given in order, or the composition in a seeded shuffle."""
        if cards is None:
            cards = composition(self.decks, self.joker)
            self.rng.shuffle(cards)
        self.cards = list(cards)
        self.dealt = 0
        self.faulted = False
        self.send_frame(Msg.SHOE_LOADED, m.pack_deck(deck))

    def _take(self) -> str | None:
        if not self.cards:
            self.send_frame(Msg.SHOE_FAULT, m.pack_fault(Fault.OTHER, "empty"))
            return None
        self.dealt += 1
        return self.cards.pop(0)

    def _after_card(self) -> None:
        if self.cut_card_after is not None and self.dealt == self.cut_card_after:
            self.send_frame(Msg.CUT_CARD_REACHED)

    def draw(self) -> str | None:
        """The dealer draws one card from a manual shoe; None when locked, jammed or empty."""
        if self.locked or self.faulted:
            return None
        if self._jam_next:
            self._jam_now()
            return None
        card = self._take()
        if card is None:
            return None
        face_up, self._face_up_next = self._face_up_next, False
        self.send_frame(Msg.CARD_DRAWN, m.pack_card_drawn(card, face_up))
        self._after_card()
        return card

    def dispense(self, size: int | None = None) -> list[str] | None:
        """An ADS dispenses a stack; None when locked, jammed or empty."""
        if self.locked or self.faulted:
            return None
        size = self.stack_size if size is None else size
        if self._jam_next:
            # jam mid-deal: part of the stack is stuck in the device
            del self.cards[: size // 2]
            self._jam_now()
            return None
        if len(self.cards) < size:
            self.send_frame(Msg.SHOE_FAULT, m.pack_fault(Fault.INCOMPLETE, "not enough cards"))
            self.faulted = True
            return None
        stack = [self._take() for _ in range(size)]
        cards = [c for c in stack if c is not None]
        self.send_frame(Msg.STACK_DISPENSED, m.pack_stack(cards))
        self._after_card()
        return cards

    def _jam_now(self) -> None:
        self._jam_next = False
        self.faulted = True
        self.send_frame(Msg.SHOE_FAULT, m.pack_fault(Fault.JAM))

    # -- faults ----------------------------------------------------------------------

    def jam(self) -> None:
        """The next draw or dispense jams (mid-deal)."""
        self._jam_next = True

    def stop(self) -> None:
        self.faulted = True
        self.send_frame(Msg.SHOE_FAULT, m.pack_fault(Fault.STOPPED))

    def clear_fault(self) -> None:
        self.faulted = False
        self._jam_next = False

    def face_up_next(self) -> None:
        """The next card comes out face up."""
        self._face_up_next = True

    def missing_card(self) -> None:
        """A card is missing from the shoe: the next one is gone."""
        if self.cards:
            self.cards.pop(0)

    def extra_card(self) -> None:
        """A duplicate card sits next in the shoe."""
        if self.cards:
            self.cards.insert(0, self.rng.choice(self.cards))

    def foreign_card(self) -> None:
        """A card not of this deck's composition sits next (a joker in a 52-card game)."""
        self.cards.insert(0, "JK" if not self.joker else "As")
