"""The cards: each card drawn and each stack dispensed, to the place the deal order gives it.

Where a card may not be dealt (C10, C6, A1, C9 and the gates of the deal), the face-up
card (C1, C2), the burn card (G2, G5), a foreign card (C8) and a stack of the wrong size;
the round around them is round_life.py's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tablectl.controller.engine.cards import JOKER
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.ledger import (
    BURNED,
    DEALER,
    DISCARD,
    SHOE,
)
from tablectl.controller.engine.round_life import RoundLife
from tablectl.controller.engine.table_state import UNASSIGNED


class Dealing:
    """Each card drawn from the shoe, or stack dispensed, to its place."""

    __slots__ = ("round_life", "table")

    def __init__(self, table: DealGates, round_life: RoundLife) -> None:
        self.table = table
        self.round_life = round_life

    def _on_card_drawn(self, ev: dict[str, Any]) -> list[Decision]:
        table = self.table
        card: str = ev["card"]
        face_up: bool = ev.get("face_up", False)
        state = table.state
        if state == "deck_removed" or table._deck().removed or self._due_deck_removed():
            return self._blocked_c10()
        if state == "void":
            self._discard_unusable(card)
            rule_id = (table.round.void_rule if table.round else None) or "C2"
            return [table._d("deal_blocked", rule_id, "the round is void: no more cards")]
        if state == "suspended":
            return [table._rejected("card_drawn: the shoe is suspended until it reconnects")]
        if table._another_method(stack=False):
            self._discard_unusable(card)
            return [table._d("deal_blocked", "C6", table._block_reason("C6"))]
        if table.round is None or state not in table._definition.round_states:
            foreign = self._foreign_card(card, ev.get("deck"))
            return foreign if foreign is not None else self._card_outside_round(card, face_up)
        if state == "starting_position":
            # A1: the deal starts only once the starting position is known.
            self._discard_unusable(card)
            return [
                table._d("procedure_violation", "A1", "a card dealt before the starting position"),
                table._notify("A1", "a card was dealt before the starting position was chosen"),
            ]
        decisions: list[Decision] = []
        if not table.round.started:
            decisions = self.round_life._start_deal()
            if not table.round.started:
                self._discard_unusable(card)
                return decisions
        blocked = table.deal_rules.mid_round_block()
        if blocked is not None:
            # a game's rule that stops the round's later cards too (C4 after a mid-round
            # reshuffle that jammed): the card is not dealt, nor taken for the burn card
            self._discard_unusable(card)
            return [
                *decisions,
                table._d("deal_blocked", blocked, table._block_reason(blocked)),
            ]
        foreign = self._foreign_card(card, ev.get("deck"))
        if foreign is not None:
            return decisions + foreign
        if face_up:
            return decisions + self._face_up_card(card)
        if table.burn_pending is not None:
            return decisions + self._burn(card)
        return decisions + self._deal_one(card)

    def _due_deck_removed(self) -> bool:
        """C10 per deck: no round open and the deck due next (two decks) is removed."""
        return self.table.round is None and self.table.decks[self.table._due_deck()].removed

    def _blocked_c10(self) -> list[Decision]:
        """C10: a deal from a removed deck; with no round open, counted (hands_collected)."""
        if self.table.round is None:
            self.table.blocked_without_round += 1
        return [self.table._d("deal_blocked", "C10", self.table._block_reason("C10"))]

    def _card_outside_round(self, card: str, face_up: bool) -> list[Decision]:
        if self.table.burn_pending is not None and not face_up:
            rule_id = self.table._deal_block()
            if rule_id is not None:
                # the burn card is drawn from the shoe like any other: same blocks
                self._discard_unusable(card)
                return [self.table._d("deal_blocked", rule_id, self.table._block_reason(rule_id))]
            return self._burn(card)
        if face_up:
            return self._face_up_card(card)
        if not self.table.deal_rules.early_card_is_violation():
            self._discard_unusable(card)
            return []
        self._discard_unusable(card)
        return self._before_bets("a card was drawn")

    def _before_bets(self, what: str) -> list[Decision]:
        """C9: a card drawn or a stack dispensed before "no more bets"."""
        # C9: the one place; an expected burn card (G2) never reaches here.
        return [
            self.table._d("procedure_violation", "C9", f"{what} before 'no more bets'"),
            self.table._notify("C9", f"{what} before 'no more bets'"),
        ]

    def _face_up_card(self, card: str) -> list[Decision]:
        """C1 and C2: cards found face up in the shoe while dealing."""
        self._discard_unusable(card)
        rnd = self.table.round
        found = 1
        if rnd is not None:
            rnd.face_up_found += 1
            found = rnd.face_up_found
        if found == 1:
            # C1: the first face-up card is not used; the next card takes its place.
            return [
                self.table._d(
                    "discard_card", "C1", "a card was found face up in the shoe", card=card
                )
            ]
        # C2: a second face-up card in the same round voids it.
        return self.round_life._void_round("C2", "a second card was found face up in the shoe")

    def _burn(self, card: str) -> list[Decision]:
        """G2 (new shoe or new dealer) and G5 (shoe reshuffled mid-round): burn one card."""
        rule_id = self.table.burn_pending or "G2"
        self.table.burn_pending = None
        # 2C.6(c): the burn card goes face down to the discard rack at once (so a rack
        # reading after it already holds it: R1 must not count it again).
        self.table._deck().ledger.move(card, SHOE, DISCARD)
        self.table.rack.direct += 1
        self.table._record(card, BURNED, False)
        why = {
            "G2": "the first card after the shoe is loaded or a new dealer comes is burned",
            "G5": "the first card after the mid-round reshuffle is burned",
        }[rule_id]
        return [self.table._d("burn_card", rule_id, why)]

    def _deal_one(self, card: str) -> list[Decision]:
        table = self.table
        rnd = table.round
        assert rnd is not None
        deck = table._deck()
        decisions: list[Decision] = []
        target = table.deal_rules.next_target(rnd)
        burned = table.deal_rules.burned_instead(target, card)
        if burned is not None:
            return burned
        deck.ledger.move(card, SHOE, target)
        rnd.cards_tracked += 1
        rnd.tally[target] = rnd.tally.get(target, 0) + 1
        table._record(card, target, table.deal_rules.dealt_face_up(target, rnd))
        decisions += table.deal_rules.card_dealt(target, card)
        return decisions

    def _on_stack_dispensed(self, ev: dict[str, Any]) -> list[Decision]:
        cards: list[str] = ev["cards"]
        if self.table.method != "automated_shoe":
            return [
                self.table._rejected(
                    f"cards: a stack needs dealing automated_shoe, not {self.table.method}"
                )
            ]
        state = self.table.state
        if state == "deck_removed" or self.table._deck().removed or self._due_deck_removed():
            return self._blocked_c10()
        if self.table._another_method(stack=True):
            return [self.table._d("deal_blocked", "C6", "the automated dealing shoe was removed")]
        if state == "void":
            for card in cards:
                self._discard_unusable(card)
            rule_id = (self.table.round.void_rule if self.table.round else None) or "C5"
            return [self.table._d("deal_blocked", rule_id, "the round is void: no more cards")]
        if state == "suspended":
            return [self.table._rejected("cards: the shoe is suspended until it reconnects")]
        stack = Counter(cards)
        if self.table.round is None or state not in self.table._definition.round_states:
            for card, copies in stack.items():
                foreign = self._foreign_card(card, None, copies)
                if foreign is not None:
                    return foreign
            for card in cards:
                self._discard_unusable(card)
            return self._before_bets("a stack was dispensed")
        rnd = self.table.round
        decisions: list[Decision] = []
        if not rnd.started:
            decisions = self.round_life._start_deal()
            if not rnd.started:
                for card in cards:
                    self._discard_unusable(card)
                return decisions
        for card, copies in stack.items():
            foreign = self._foreign_card(card, None, copies)
            if foreign is not None:
                return decisions + foreign
        if rnd.extra_dealer_cards:
            target, size = DEALER, rnd.extra_dealer_cards
            rnd.extra_dealer_cards = 0
        elif rnd.stacks:
            target, size = rnd.stacks.pop(0)
        else:
            target, size = UNASSIGNED, 0
        deck = self.table._deck()
        for card in cards:
            deck.ledger.move(card, SHOE, target)
            self.table._record(card, target, False)
        rnd.cards_tracked += len(cards)
        rnd.tally[target] = rnd.tally.get(target, 0) + len(cards)
        if len(cards) != size and target != UNASSIGNED:
            rnd.flagged.add(target)
            decisions += self.table.deal_rules.misdeal(target, len(cards))
        return decisions

    def _foreign_card(
        self, card: str, deck_field: str | None, copies: int = 1
    ) -> list[Decision] | None:
        """C8: a card not in the composition, of the other deck, or one copy too many."""
        table = self.table
        # C8: the ledger knows every card left in the shoe; a draw it cannot make is foreign.
        deck = table._deck()
        if card == JOKER and not table.composition.holds(JOKER):
            why = "a joker in a 52-card game"
        elif deck_field is not None and deck_field != deck.name:
            why = f"a card of deck {deck_field} while deck {deck.name} is in play"
        elif deck.ledger.holds(SHOE, card) < copies:
            # H7: the card may be face down; the reason does not name it.
            why = "a card seen more often than the composition holds since the last shuffle"
        else:
            return None
        return self.round_life._void_and_remove("C8", why, notify=True)

    def _discard_unusable(self, card: str) -> None:
        deck = self.table._deck()
        if not deck.removed and deck.ledger.holds(SHOE, card) > 0:
            deck.ledger.move(card, SHOE, DISCARD)
            self.table._record(card, DISCARD, False)
