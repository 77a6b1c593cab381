"""The stub count (S1-S4; 40.7(f), 39.7(f), 31.8(d)): the cards left against the deck.

A count that adds up is a verified count (S1's cadence restarts); one that does not voids
the hands, and removes the deck unless the cards were only misdealt and the deck is whole.
"""

from __future__ import annotations

from typing import Any

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.ledger import (
    BURNED,
    COMMUNITY,
    DISCARD,
    SHOE,
)
from tablectl.controller.engine.round_life import RoundLife
from tablectl.controller.engine.table_state import UNASSIGNED


class StubCount:
    """The stub counted by the dealer (S1-S4)."""

    __slots__ = ("round_life", "table")

    def __init__(self, table: DealGates, round_life: RoundLife) -> None:
        self.table = table
        self.round_life = round_life

    def _on_stub_counted(self, ev: dict[str, Any]) -> list[Decision]:
        deck = self.table._deck()
        if deck.removed:
            return [self.table._rejected("stub_counted: the deck was removed", "C10")]
        count: int = ev["count"]
        hand_counts: dict[str, int] = ev.get("hand_counts", {})
        rnd = self.table.round
        size = self.table.composition.size
        set_aside = deck.ledger.count(DISCARD) + deck.ledger.count(BURNED) if rnd else 0
        stub = self.table.stub_rules.expected(set_aside) if rnd is not None else None
        if stub is not None:
            expected = stub
        elif rnd is not None and rnd.cards_tracked == 0 and rnd.started:
            # hand dealing without a card reader: the cards out are the deal's.
            expected = size - rnd.planned_cards
        else:
            expected = deck.ledger.count(SHOE)
        misdealt: dict[str, int] = {}
        # The cards out of the stub: each hand as the dealer reports it (else as the deal
        # tracked it, else as planned), the board, and the cards set aside. The board is
        # part of the 52 (39.7(e): the stub is counted after the community cards are dealt).
        out = set_aside
        over_dealt = 0
        if rnd is not None:
            for target, n in rnd.expected.items():
                if target == COMMUNITY:
                    continue
                held = hand_counts.get(target)
                if held is None and rnd.cards_tracked and self.table.tracked_counts_are_the_hands:
                    held = rnd.tally.get(target, 0)
                if held is not None and held != n and target not in rnd.flagged:
                    misdealt[target] = held
                if held is None:
                    held = rnd.tally.get(target, 0) if rnd.cards_tracked else n
                out += held
            if self.table.profile.community_cards:
                # the board is in the deck's count (39.7(e): counted after the board is dealt)
                out += (
                    rnd.tally.get(COMMUNITY, 0)
                    if rnd.cards_tracked
                    else self.table.profile.community_cards
                )
            if not hand_counts:
                # a card drawn beyond the deal order lies on some hand: that hand holds
                # more than its count (31.8(d)2, 40.7(f)2, 39.7(f)2), though none says which.
                over_dealt = rnd.tally.get(UNASSIGNED, 0)
                out += over_dealt
        if count == expected:
            self.table._counter(deck).count_verified()  # S1: a verified count
            # the deck is whole; a hand the dealer found misdealt is the game's misdeal
            # rule (40.12(d), 39.12(c), 2C.14(g)), not the stub count's (40.7(f)1).
            decisions: list[Decision] = []
            for target, held in misdealt.items():
                if self.table.state == "void":
                    break
                assert rnd is not None
                rnd.flagged.add(target)
                rnd.check_pending = False  # M7: the hand counts answer the check
                decisions += self.table.deal_rules.misdeal(target, held)
            return decisions
        rule_id = self.table.stub_rule
        whole = self.table.stub_rules.misdeal_keeps_the_deck(
            bool(misdealt) or over_dealt > 0, count + out == size
        )
        if whole:
            if rnd is not None and rnd.void_rule is None and self.table.state != "void":
                return self.round_life._void_round(
                    rule_id, "the cards were misdealt", reshuffle=False
                )
            return []
        return self.round_life._void_and_remove(
            rule_id, f"the stub count {count} does not add up to the {size}-card deck"
        )
