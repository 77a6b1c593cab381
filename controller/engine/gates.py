"""The rules that gate a step, as the ``transitions`` conditions of the chart (machine.py).

Each condition is a method named after its rule ID (``S1_stub_counted_in_time``), defined
here once; the machine calls it on the chart's trigger, the diagram shows it, and the parts
of the engine ask :meth:`DealGates._deal_block` which rule refused a deal and why.
"""

from __future__ import annotations

from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.hooks import GameHooks
from tablectl.controller.engine.machine import (
    DEAL_CONDITIONS,
)
from tablectl.controller.engine.table_state import Round


class DealGates(GameHooks):
    """The rule conditions of the chart, each once and named after its rule, and what the
    deal asks of them: the first that fails, the deck due, whose rounds are counted."""

    # The rules that gate the deal (machine.DEAL_CONDITIONS, on the chart's start_deal):
    # each is defined here once and named after its rule.

    def C10_deck_not_removed(self) -> bool:
        """C10: a removed deck is not dealt until new cards are received and shuffled."""
        return not self._deck().removed

    def C6_no_other_method_at_the_table(self) -> bool:
        """C6: not shuffled by another method while the shuffler was still at the table."""
        return not self._deck().manual_shuffle_refused

    def D4_hand_deal_has_a_working_shuffler(self) -> bool:
        """D4: dealing from the hand needs a working automated shuffling device."""
        return not (self.method == "hand" and (self.asd_removed or self.asd_faulted))

    def C4_shuffle_completed(self) -> bool:
        """C4: a batch whose shuffle did not complete is not dealt."""
        return not self._deck().faulted

    def C10_new_cards_shuffled(self) -> bool:
        """C10: new cards are shuffled before their first deal."""
        return not self._deck().fresh

    def reshuffle_done(self) -> bool:
        """The reshuffle a rule ordered (C2, C5, G3, G4, M3, M4, M5 ...) came first."""
        return self._deck().reshuffle_rule is None

    def D1_D3_shuffled_since_the_last_round(self) -> bool:
        """D3: shuffled after every round; D1: with two decks, the other deck, shuffled."""
        if not self.deck_rules.shuffles_every_round():
            return True
        deck = self._deck()
        if self.options.dual_deck:
            return deck.name != self.last_round_deck and deck.shuffled
        return deck.shuffled

    def S1_stub_counted_in_time(self) -> bool:
        """S1: no sixth round of a deck without a verified stub count."""
        if not self.counts_the_stub:
            return True
        return self._counter(self._deck()).rounds_since_count < self.interp.stub_count_interval

    def C10_the_rounds_deck_in_place(self, positions: list[int] | None = None) -> bool:
        """C10: "no more bets" once the cards are in the shoe (40.7(a)-(b), 40.9(b),
        39.7(a)-(b), 31.8(a)): not while the deck the round would be dealt from is removed."""
        return self.state != "deck_removed" and not self.decks[self._due_deck()].removed

    def C11_positions_within_the_table(self, positions: list[int] | None = None) -> bool:
        """C11: never more positions than the game and the table have."""
        if positions is None:
            return True
        allowed = self.options.positions
        return len(positions) <= self.profile.max_positions and all(p <= allowed for p in positions)

    # The conservation law's gates (docs/rules.md, L): a round ends only with an outcome
    # the journal records, completed (collected once its deal is complete) or void.

    def C10_another_deck_in_place(self) -> bool:
        """C10 per deck: removing one of two decks leaves the other to deal (39.2(b))."""
        return any(not d.removed for d in self.decks.values())

    def L1_no_round_in_play(self, positions: list[int] | None = None) -> bool:
        """L1: "no more bets" once a round; the round in play ends (collected or void)
        before another opens, so a second call can neither replace it nor drop its cards."""
        return not self._round_open()

    def L2_deal_complete(self) -> bool:
        """L2: a round in play is collected only once its deal is complete (or it is void):
        a collection mid-deal would end it with its hands neither completed nor void."""
        state = self.suspended_from if self.state == "suspended" else self.state
        return state not in self._definition.deal_states

    def L3_the_rounds_cards_stay_out_of_the_shuffle(self, deck: str | None = None) -> bool:
        """L3: the deck of a round in play is shuffled only once the round ends; a game may
        shuffle mid-round where its own rule says so (``_rack_reshuffled_mid_round``)."""
        rnd = self.round
        if rnd is None or not rnd.started or (deck is not None and deck != rnd.deck):
            return True
        return self._in_round() and self.deck_rules.rack_reshuffled_mid_round()

    # ------------------------------------------------------------------ what the gates decide

    def _deal_block(self) -> str | None:
        """The rule that forbids dealing from the deck in play, if any (the first that fails)."""
        for name in DEAL_CONDITIONS:
            if not getattr(self, name)():
                if name == "reshuffle_done":
                    return self._deck().reshuffle_rule
                if name == "D1_D3_shuffled_since_the_last_round":
                    return "D1" if self.options.dual_deck else "D3"
                return name.split("_", 1)[0]
        return None

    def _block_reason(self, rule_id: str) -> str:
        reasons = {
            "C10": "the deck was removed or is new and unshuffled: no deal until new cards "
            "are received and shuffled",
            "C6": "the cards were shuffled or dealt by another method while the device "
            "was still at the table",
            "D4": "dealing from the hand needs a working automated shuffling device",
            "C4": "the shuffler did not complete its shuffle of these cards",
            "D1": "with two decks, each round must use the other deck, shuffled",
            "D3": "the deck was not shuffled since its last round",
            "S1": "the stub has not been counted for five rounds of this deck",
            "G3": "the cut card came out: the cards must be reshuffled first",
            "G8": "the house ordered a reshuffle: the cards must be reshuffled first",
            "G4": "the discard rack holds about a deck: Bart Carter reshuffle first",
        }
        return reasons.get(rule_id, "the cards must be reshuffled before the next deal")

    def _counts_in_alternation(self, rnd: Round) -> bool:
        """D1 (interpretation I3): a void round is its deck's turn unless configured not to."""
        void = self.state == "void" or rnd.void_rule is not None
        return not void or self.interp.void_round_counts_in_alternation

    def _due_deck(self) -> str:
        """The deck the next round is dealt from: the one loaded by name, else with two decks
        the other of the last round's (39.2(b), 40.2(b)); a void round ending now counts."""
        rnd = self.round
        ending = rnd if rnd is not None and self.state == "void" else None
        last = self.last_round_deck
        if ending is not None and self._counts_in_alternation(ending):
            last = ending.deck
        explicit = self.explicit_deck and ending is None
        if self.options.dual_deck and not explicit and last:
            return "B" if last == "A" else "A"
        return self.current

    def _counter(self, deck: Deck) -> Deck:
        """S1: whose rounds are counted: the deck's own, or the table's (interpretation)."""
        return deck if self.interp.stub_count_per_deck else self.decks["A"]

    def _another_method(self, stack: bool) -> bool:
        """C6: a deal by another method than the table's ADS while the ADS is still there
        (a card by hand or manual shoe), or by the ADS after it was removed."""
        # C6: dealing; shuffles by another method are judged by _asd_may_be_replaced.
        if stack:
            return self.ads_removed
        extra_dealer_card = self.round is not None and self.round.extra_dealer_cards > 0  # M2
        return self.method == "automated_shoe" and not self.ads_removed and not extra_dealer_card

    def _asd_may_be_replaced(self) -> bool:
        """C6: removed (and, where the game asks it, seen empty by a supervisor)."""
        if self.replacing_the_shuffler_needs_empty_check:
            return self.asd_removed and self.shuffler_emptied
        return self.asd_removed

    def _counting_exemption(self) -> bool:
        """S2: a counting shuffler in place exempts from the stub count where the game
        allows it (``_count_exempts``)."""
        if self.options.shuffler != "counting" or self.asd_removed:
            return False
        return self.stub_rules.count_exempts()
