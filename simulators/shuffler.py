"""A simulated automated card shuffler (ASD): seeded shuffles that take time, counting.

The shuffled order stays inside: it is never sent, and no command asks for it.
``take_deck()`` is the dealer lifting the shuffled cards out (for a simulated
table that then loads them into a shoe).
"""

from __future__ import annotations

import functools
from typing import Any

import tablectl.simulators.shuffles as shuffles
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Fault, Msg, ResultCode
from tablectl.simulators.cards import composition
from tablectl.simulators.device import OK, SimulatedDevice


class ShufflerSim(SimulatedDevice):
    kind = "shuffler"
    model = "SIM-ASD 300"

    def __init__(
        self,
        *,
        decks: int = 1,
        joker: bool = False,
        counting: bool = True,
        shuffle_seconds: float = 0.4,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.decks = decks
        self.joker = joker
        self.counting = counting
        self.shuffle_seconds = shuffle_seconds
        self.cards: list[str] = composition(decks, joker)
        self.state = "idle"  # idle | shuffling | ready | faulted
        self.locked = False
        self.door_open = False
        self.deck_label: str | None = None
        self.shuffles = 0
        self._armed_fault: Fault | None = None
        self._cycle: list[Any] = []
        #: how a cycle orders the cards: uniform, or a fault mode (set_shuffle_fault)
        self.shuffle: shuffles.Shuffle = shuffles.uniform
        self.command(Msg.START_SHUFFLE, self._cmd_start)
        self.command(Msg.LOCK_DECK, self._cmd_lock)
        self.command(Msg.RELEASE_DECK, self._cmd_release)

    def on_handshake(self) -> None:
        self.send_status()

    def send_status(self) -> None:
        self.send_frame(Msg.SHUFFLER_STATUS, m.pack_shuffler_status(self.door_open, not self.cards))

    # -- commands --------------------------------------------------------------

    def _cmd_start(self, payload: bytes) -> tuple[ResultCode, str]:
        deck = m.unpack_deck(payload, "START_SHUFFLE")
        if self.state == "shuffling":
            return ResultCode.WRONG_STATE, "a shuffle is already running"
        if self.state == "faulted":
            return ResultCode.WRONG_STATE, "shuffler is faulted: clear it first"
        if self.door_open:
            return ResultCode.WRONG_STATE, "door open"
        if not self.cards:
            return ResultCode.WRONG_STATE, "no cards in the shuffler"
        if self.locked and self.state == "ready":
            # docs/protocol.md: refused "while the previous shuffled deck is locked in"; a lock
            # set with no shuffled deck inside holds the next one (RELEASE_DECK needs a deck)
            return ResultCode.WRONG_STATE, "the shuffled deck is locked in"
        self.deck_label = deck
        self.later(0, self._begin)
        return OK

    def _cmd_lock(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "LOCK_DECK")
        self.locked = True
        self.later(0, lambda: self.send_frame(Msg.DECK_LOCKED))
        return OK

    def _cmd_release(self, payload: bytes) -> tuple[ResultCode, str]:
        m.require_empty(payload, "RELEASE_DECK")
        if self.state != "ready":
            return ResultCode.WRONG_STATE, f"no shuffled deck to release (state {self.state})"
        self.locked = False
        self.later(0, lambda: self.send_frame(Msg.DECK_RELEASED))
        return OK

    def press_start(self, deck: str | None = None) -> None:
        """The dealer presses the shuffler's start button (the same checks as START_SHUFFLE)."""
        code, text = self._cmd_start(m.pack_deck(deck))
        if code != ResultCode.OK:
            raise RuntimeError(f"shuffler refused to start: {text}")

    # -- the shuffle cycle -------------------------------------------------------

    def _begin(self) -> None:
        self.state = "shuffling"
        self.send_frame(Msg.SHUFFLE_STARTED, m.pack_deck(self.deck_label))
        step = self.shuffle_seconds / 4
        self._cycle = [
            self.later(step * i, functools.partial(self._progress, 25 * i)) for i in (1, 2, 3)
        ]
        self._cycle.append(self.later(self.shuffle_seconds, self._complete))

    def _progress(self, percent: int) -> None:
        if percent == 50 and self._armed_fault is not None:
            self.fault(self._armed_fault)
            return
        self.send_frame(Msg.SHUFFLE_PROGRESS, m.pack_progress(percent))

    def _complete(self) -> None:
        self.cards = self.shuffle(self.cards, self.rng)
        self.state = "ready"
        self.shuffles += 1
        count = len(self.cards) if self.counting else None
        self.send_frame(Msg.SHUFFLE_COMPLETED, m.pack_shuffle_completed(self.deck_label, count))

    # -- the physical world and faults ---------------------------------------------

    def fault(self, fault: Fault, text: str = "") -> None:
        """Jam, stop or fail to complete: now if shuffling, else at the next shuffle's midpoint."""
        if self.state != "shuffling":
            self._armed_fault = fault
            return
        self._armed_fault = None
        for handle in self._cycle:
            handle.cancel()
        self._cycle = []
        self.state = "faulted"
        self.send_frame(Msg.SHUFFLER_FAULT, m.pack_fault(fault, text))

    def set_shuffle_fault(self, mode: str) -> None:
        """From now on every cycle completes but shuffles as ``mode`` says (simulators/
        shuffles.py: none, one_riffle, strip_cut, replay; uniform is honest again): the
        frauds and failures docs/shuffle-integrity.md's detectors look for."""
        self.shuffle = shuffles.by_name(mode)

    def clear_fault(self) -> None:
        """A technician cleared the jam; the batch must be shuffled again."""
        self.state = "idle"
        self._armed_fault = None

    def set_door(self, door_open: bool) -> None:
        self.door_open = door_open
        self.send_status()

    def take_deck(self) -> list[str]:
        """The dealer lifts the shuffled cards out (refused while locked or not shuffled)."""
        if self.locked:
            raise RuntimeError("the shuffled deck is locked in the shuffler")
        if self.state != "ready":
            raise RuntimeError(f"no shuffled deck to take (state {self.state})")
        cards, self.cards = self.cards, []
        self.state = "idle"
        self.send_status()
        return cards

    def load(self, cards: list[str] | None = None) -> None:
        """Cards put into the shuffler (default: its full composition)."""
        self.cards = list(cards) if cards is not None else composition(self.decks, self.joker)
        self.state = "idle"
        self.send_status()

    def missing_card(self) -> None:
        self.cards.pop(self.rng.randrange(len(self.cards)))

    def extra_card(self) -> None:
        self.cards.append(self.rng.choice(self.cards))

    def foreign_card(self) -> None:
        self.cards.append("JK" if not self.joker else self.rng.choice(self.cards))

    def on_disconnect(self) -> None:
        if self.state == "shuffling":
            # power lost mid-cycle: the batch did not complete
            self._cycle = []
            self.state = "faulted"
