"""One deck, or one shoe of decks: one of the Engine's rule families, one object per deck.

Its card ledger (every card's place), its shuffle state (D1, D3, C4, C6), its removal and new
cards (C10) and its stub-count cadence (S1). With two decks alternating (39.2(b), 40.2(b)) each
has its own: a removal, a fault or a count of one says nothing of the other. Which deck is
dealt, and when, is the table's (controller/engine/core.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tablectl.controller.engine.cards import Composition
from tablectl.controller.engine.ledger import DISCARD, REMOVED, SHOE, Ledger

#: the places that are not the layout: a card there is in no hand
OFF_LAYOUT = (SHOE, DISCARD, REMOVED)


@dataclass
class Deck:
    """One deck (or one shoe of decks): its ledger and what the rules track of it."""

    name: str
    ledger: Ledger
    shuffled: bool = True
    fresh: bool = False  # received, not yet shuffled (C10)
    removed: bool = False  # C10
    faulted: bool = False  # C4: its last shuffle did not complete
    reshuffle_rule: str | None = None  # a rule that demands a reshuffle before the next deal
    manual_shuffle_refused: bool = False  # C6
    rounds_since_count: int = 0  # S1
    shuffling: bool = False

    @classmethod
    def received(cls, name: str, composition: Composition) -> Deck:
        """C10: new cards, inspected at receipt (a verified count), to be shuffled first."""
        return cls(name, Ledger(composition), shuffled=False, fresh=True)

    def state(self, in_play: bool) -> str:
        """The deck's state for the status (``in_play``: a round is dealt from it now)."""
        if self.removed:
            return "removed"
        if self.shuffling:
            return "shuffling"
        if self.faulted:
            return "shuffle_failed"
        if self.fresh or not self.shuffled:
            return "needs_shuffle"
        if self.reshuffle_rule:
            return f"reshuffle_due ({self.reshuffle_rule})"
        return "in_play" if in_play else "shuffled"

    def layout_places(self) -> list[str]:
        """The places of its cards on the layout: hands, the board, burned."""
        return [p for p in self.ledger.places if p not in OFF_LAYOUT]

    def layout_count(self) -> int:
        """How many of its cards lie on the layout."""
        return sum(self.ledger.count(p) for p in self.layout_places())

    def collect_layout(self) -> int:
        """Its layout's cards go to the discard rack; returns how many moved."""
        moved = 0
        for place in self.layout_places():
            moved += self.ledger.move_all(place, DISCARD)
        return moved

    def layout_to_shuffler(self) -> None:
        """Its layout's cards go into the shuffler with it (C5: reshuffled with the deck)."""
        for place in self.layout_places():
            self.ledger.move_all(place, SHOE)

    def remove(self) -> None:
        """C10: every card of it leaves the table (13:69E-1.18); no deal until new cards."""
        self.ledger.gather(REMOVED, keep=())
        self.removed = True
        self.shuffled = False

    def shuffle_done(self) -> None:
        """A shuffle of it completed: dealable again as far as its shuffle goes."""
        self.shuffled = True
        self.fresh = False
        self.faulted = False
        self.reshuffle_rule = None
        self.manual_shuffle_refused = False

    def count_verified(self) -> None:
        """S1: a verified count (a stub count that adds up, a counting shuffler's full
        count, S2) restarts the cadence."""
        self.rounds_since_count = 0

    def round_dealt(self) -> int:
        """S1: one more round dealt since its last verified count; returns how many."""
        self.rounds_since_count += 1
        return self.rounds_since_count
