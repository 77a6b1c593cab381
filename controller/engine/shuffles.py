"""The shuffles and the decks' comings and goings: a shuffle started, completed or failed
(C4, C6, C7, L3, S2), a deck loaded into the shoe, new cards received (C10), a house
reshuffle. Each deck's own state is deck.py's; this is what the table does with them.
"""

from __future__ import annotations

from typing import Any

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.ledger import (
    DISCARD,
    SHOE,
)
from tablectl.controller.engine.round_life import RoundLife


class Shuffles:
    """The shuffles of each deck and its comings and goings: loaded, received, removed."""

    __slots__ = ("round_life", "table")

    def __init__(self, table: DealGates, round_life: RoundLife) -> None:
        self.table = table
        self.round_life = round_life

    def _on_shuffle_started(self, ev: dict[str, Any]) -> list[Decision]:
        if ev.get("deck") is not None and ev["deck"] not in self.table.decks:
            return [self.table._rejected(f"deck: {ev['deck']!r}: this table has one deck, A")]
        if self.table.deck_rules.holds_next_batch():
            self.table.next_batch = "shuffling"
            return []
        deck = self.table._deck_for_shuffle(ev.get("deck"))
        if self.table._round_open() and not self.table._model.trigger(
            "shuffle_mid_round", deck.name
        ):
            return [self._shuffle_refused(deck)]
        ended = self.round_life._void_round_to_shuffler(deck)
        deck.shuffling = True
        deck.shuffled = False
        self.table.rack.shuffled(deck.name)
        if self.table.state == "idle" and not self.table.options.dual_deck:
            self.table._fire("start_shuffle")
        return ended

    def _shuffle_refused(self, deck: Deck) -> Decision:
        """L3: a shuffle of the deck whose round is in play is not taken."""
        assert self.table.round is not None
        return self.table._rejected(
            f"deck {deck.name}: its cards are in round {self.table.round.number}'s hands "
            "until the round is collected or void; they are not shuffled now",
            "L3",
        )

    def _on_shuffle_completed(self, ev: dict[str, Any]) -> list[Decision]:
        if ev.get("deck") is not None and ev["deck"] not in self.table.decks:
            return [self.table._rejected(f"deck: {ev['deck']!r}: this table has one deck, A")]
        if self.table.deck_rules.holds_next_batch():
            return self.table.deck_rules.next_batch_completed(ev.get("count"))
        deck = self.table._deck_for_shuffle(ev.get("deck"))
        if deck.removed:
            return [
                self.table._rejected(
                    f"shuffle_completed: deck {deck.name} was removed; deck_received first", "C10"
                )
            ]
        count: int | None = ev.get("count")
        size = self.table.composition.size
        miscounted = (
            count is not None
            and count != size
            and (
                self.table.counts_the_stub
                or self.table.interp.count_mismatch_removes_deck_everywhere
            )
        )
        if (
            not miscounted
            and self.table._round_open()
            and not self.table._model.trigger("shuffle_mid_round", deck.name)
        ):
            return [self._shuffle_refused(deck)]  # L3 (a wrong count is C7's, below)
        deck.shuffling = False
        ended: list[Decision] = []
        if not miscounted:
            ended = self.round_life._void_round_to_shuffler(
                deck
            )  # its cards are in this shuffle (C5)
        if self.table.state == "shuffling":
            self.table._fire("finish_shuffle")
        self.table.rack.shuffled(deck.name)
        if miscounted:
            # C7: the counting shuffler found other than the full deck.
            return self.round_life._void_and_remove_if_current(
                deck, "C7", f"the shuffler counted {count} cards, not {size}"
            )
        manual = ev.get("method") == "manual" or self.table.asd_removed
        if (
            manual
            and self.table.options.shuffler != "none"
            and not self.table._asd_may_be_replaced()
        ):
            # C6: another shuffling method while the ASD is still at the table.
            deck.manual_shuffle_refused = True
            return ended
        if self.table.deck_rules.rack_reshuffled_mid_round():
            # G5: the discard rack, reshuffled mid-round, goes back in the shoe.
            deck.ledger.move_all(DISCARD, SHOE)
            if self.table.round is not None:
                self.table.round.rack_reshuffled = True
            self._new_shoe_order(deck.name, whole=False)
        else:
            deck.ledger.gather(SHOE)
            self._new_shoe_order(deck.name, whole=True)
        deck.shuffle_done()
        self.table.bart_carter_flagged = False
        if not manual:
            self.table.asd_faulted = False
        if count == size and self.table._counting_exemption():
            self.table._counter(deck).count_verified()  # S2: a full count is a verified count
        return ended

    def _new_shoe_order(self, deck: str, whole: bool) -> None:
        """Q1, Q2: a shuffled deck goes into play. Only a whole deck's shuffle is compared with
        the deal before it (G5's reshuffled rack is a part: its pairs tell nothing)."""
        self.table.integrity.new_order(deck, whole)

    def _on_shuffler_fault(self, ev: dict[str, Any]) -> list[Decision]:
        return self._shuffler_failed(f"the shuffler reported {ev['fault']}")

    def _shuffler_failed(self, why: str) -> list[Decision]:
        """C4: a jam, a stop or an incomplete cycle: reshuffle; the batch may not be dealt."""
        if self.table.deck_rules.holds_next_batch():
            # C4 for the next batch in the shuffler: the shoe in play shuffled fine and deals on.
            self.table.next_batch = "faulted"
            self.table.device_faults["shuffler"] = why
            return [
                self.table._d("reshuffle", "C4", f"{why}: the batch in the shuffler is reshuffled")
            ]
        deck = self.table._deck_for_shuffle(None)
        deck.shuffling = False
        deck.faulted = True
        deck.shuffled = False
        self.table.asd_faulted = True
        self.table.device_faults["shuffler"] = why
        if self.table.state == "shuffling":
            self.table._fire("fault_shuffle")
        return [self.table._d("reshuffle", "C4", f"{why}: the cards must be reshuffled")]

    def _on_shoe_loaded(self, ev: dict[str, Any]) -> list[Decision]:
        named = ev.get("deck")
        if named is not None:
            if named not in self.table.decks:
                return [self.table._rejected(f"deck: {named!r}: this table has one deck, A")]
            rnd = self.table.round
            if rnd is not None and named != rnd.deck:
                # L: the round's cards (a void one's too, until collected) are of its deck
                if rnd.started or not self.table._in_round():
                    return [self.table._rejected("shoe_loaded: another deck mid-round")]
                rnd.deck = named  # no card dealt yet: the round is dealt from it
            self.table.current = named
            self.table.explicit_deck = True
        if not self.table._round_open():
            # between rounds only: a round in play (suspended too) deals on from the shoe it
            # has; the shuffler's next batch is loaded after it (2C.4(i)2)
            self.table.deck_rules.load_next_batch()
        if self.table.asd_removed and self.table.options.shuffler != "none":
            # C6: cards loaded after the ASD left were shuffled by another method.
            self.table._deck().manual_shuffle_refused = not self.table._asd_may_be_replaced()
        self.table.deck_rules.new_shoe_or_dealer()
        return []

    def _on_dealer_changed(self, ev: dict[str, Any]) -> list[Decision]:
        self.table.deck_rules.new_shoe_or_dealer()
        return []

    def _on_deck_received(self, ev: dict[str, Any]) -> list[Decision]:
        named = ev.get("deck") or ("A" if not self.table.options.dual_deck else None)
        if named is None:
            removed = [d.name for d in self.table.decks.values() if d.removed]
            named = removed[0] if removed else self.table.current
        if named not in self.table.decks:
            return [self.table._rejected(f"deck: {named!r}: this table has one deck, A")]
        if self.table.deck_rules.holds_next_batch():
            self.table.next_batch = "fresh"  # new cards for the shuffler's next batch
            return []
        if self.table._in_round() and named == self.table.current:
            return [self.table._rejected("deck_received: a round is in play with that deck")]
        rnd = self.table.round
        if rnd is not None and self.table.state == "suspended" and rnd.deck == named:
            # a suspended round resumes with its cards (a device back): its deck stays in play
            return [
                self.table._rejected(
                    f"deck_received: round {rnd.number} is suspended with deck {named}'s "
                    "cards out; it resumes or is voided first"
                )
            ]
        if rnd is not None and self.table.state == "void" and rnd.deck == named:
            if self.table.interp.deck_receipt_waits_for_void_collection:
                # I2 (configured): the void round's cards are collected before new cards
                return [
                    self.table._rejected(
                        f"deck_received: void round {rnd.number}'s cards of deck {named} "
                        "are still on the layout; hands_collected first"
                    )
                ]
            # I2: the void round's cards stay the old deck's, on the layout until collected;
            # they still go to the discard rack (D2, R1 count them then)
            rnd.layout_left += self.table.decks[named].layout_count()
        # C10: new cards, inspected at receipt (a verified count), to be shuffled first.
        self.table.decks[named] = Deck.received(named, self.table.composition)
        self.table.blocked_without_round = 0
        if self.table.state == "deck_removed" and self.table.C10_another_deck_in_place():
            self.table._fire("receive_deck")  # C10 per deck: a deck is in place again
        return []

    def _on_reshuffle_requested(self, ev: dict[str, Any]) -> list[Decision]:
        rule_id = self.table.house_reshuffle_rule
        deck = self.table._deck()
        if not deck.removed:
            deck.reshuffle_rule = rule_id
        return [self.table._d("reshuffle", rule_id, "the house reshuffles at its discretion")]
