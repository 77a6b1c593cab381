"""The round's life: open ("no more bets"), deal, play, collect, void.

One round at a time (L1); it opens on ``bets_closed``, its deal starts at its first card
(the chart's ``start_deal``, gated by the rules of gates.py), the deal completes into play
(each hand checked against the plan: M1-M4, M6), and it ends collected (L2: only once its
deal is complete) or void, its cards then to the discard rack or back to the shuffler.
"""

from __future__ import annotations

from typing import Any

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.ledger import (
    DEALER,
)
from tablectl.controller.engine.table_state import UNASSIGNED, Round


class RoundLife:
    """The round in play from "no more bets" to its collection or its void."""

    __slots__ = ("table",)

    def __init__(self, table: DealGates) -> None:
        self.table = table

    # ------------------------------------------------------------------ open

    def _on_bets_closed(self, ev: dict[str, Any]) -> list[Decision]:
        positions: list[int] = ev["positions"]
        allowed = self.table.options.positions
        if not self.table.C11_positions_within_the_table(positions):
            # C11 (the chart's condition on close_bets), checked before the last round ends
            profile = self.table.profile
            return [
                self.table._rejected(
                    f"positions: {positions} names more than the {allowed} positions of this "
                    f"{profile.title} table (the game allows {profile.max_positions})",
                    "C11",
                )
            ]
        if not self.table.L1_no_round_in_play(positions):
            # L1 (the chart's condition on close_bets): the round in play is not replaced
            rnd = self.table.round
            assert rnd is not None
            return [
                self.table._rejected(
                    f"bets_closed: round {rnd.number} is in play ({self.table.state}); it ends "
                    "with hands_collected once played out, or void, before another opens",
                    "L1",
                )
            ]
        if not self.table.C10_the_rounds_deck_in_place(positions):
            # C10 (the chart's condition on close_bets): nothing to deal, so no round opens
            return [
                self.table._rejected(
                    f"bets_closed: deck {self.table._due_deck()} was removed; no round opens until "
                    "new cards are received and shuffled",
                    "C10",
                )
            ]
        self.table.blocked_without_round = 0
        decisions: list[Decision] = []
        if self.table.round is not None or self.table.state == "void":
            decisions += self._end_round()  # the void round's cards were collected
        if self.table.state == "shuffling":
            self.table._deck_for_shuffle(None).shuffling = False
        if (
            self.table.options.dual_deck
            and not self.table.explicit_deck
            and self.table.last_round_deck
        ):
            self.table.current = "B" if self.table.last_round_deck == "A" else "A"
        self.table.round_number += 1
        rnd = Round(self.table.round_number, self.table.current, positions)
        self.table.round = rnd
        self.table.rack.round_opened()
        self.table._fire("close_bets", positions)
        return decisions + self.table.deal_rules.bets_closed(rnd)

    # ------------------------------------------------------------------ deal

    def _start_deal(self) -> list[Decision]:
        """The first card or stack of a round: check the deck may be dealt (S1 cadence)."""
        rnd = self.table.round
        assert rnd is not None
        deck = self.table._deck()
        # the chart's start_deal carries the rules that may refuse it (DEAL_CONDITIONS)
        allowed = self.table._model.trigger("start_deal") if self.table.state == "dealing" else None
        rule_id = None if allowed else self.table._deal_block()
        if rule_id is not None:
            rnd.blocked = True
            return [self.table._d("deal_blocked", rule_id, self.table._block_reason(rule_id))]
        rnd.started = True
        if self.table.deck_rules.shuffles_every_round():
            deck.shuffled = False
        decisions: list[Decision] = []
        if self.table.counts_the_stub:
            # S1: per deck, the fifth round since the last verified count needs a count.
            counter = self.table._counter(deck)
            if counter.round_dealt() == self.table.interp.stub_count_interval:
                extra = {"deck": deck.name} if self.table.options.dual_deck else {}
                decisions.append(
                    self.table._d(
                        "stub_count_required",
                        "S1",
                        f"deck {deck.name}: fifth round since its last verified count",
                        **extra,
                    )
                )
        return decisions

    def _on_deal_completed(self, ev: dict[str, Any]) -> list[Decision]:
        if self.table.state != "dealing" or self.table.round is None:
            return [
                self.table._rejected(
                    f"deal_completed: no deal in progress (state {self.table.state})"
                )
            ]
        return self._complete_deal()

    def _complete_deal(self) -> list[Decision]:
        """Compare what each hand received with the deal (M1-M4, M6, S4), then play on."""
        rnd = self.table.round
        assert rnd is not None
        decisions: list[Decision] = []
        if not rnd.started:
            if rnd.blocked:
                return []  # the cards were blocked already; this is not a deal (F5)
            if self.table.method != "hand":
                # L2: a shoe that reads every card read none: nothing was dealt, so the
                # round would be "played" with empty hands; it is dealt, or collected (void)
                return [
                    self.table._rejected(
                        f"deal_completed: the shoe read no card of round {rnd.number}; "
                        "nothing was dealt",
                        "L2",
                    )
                ]
            # dealt from the hand with no card reader: the deal itself is this event.
            decisions = self._start_deal()
            if not rnd.started:
                return decisions
        if rnd.cards_tracked:
            decisions += self._deal_count_check(rnd)
        if self.table.state == "dealing":
            self.table._fire("complete_deal")
        return decisions

    def _deal_count_check(self, rnd: Round) -> list[Decision]:
        """At the end of the deal: the cards each target got against the deal's plan.

        A stack's size is certain (the ADS says which stack went where). A card-by-card
        count is not: a skipped position and a short last hand give the same tally, so
        where the decision depends on whose hand is wrong the dealer is asked to check.
        """
        wrong = [
            (target, rnd.tally.get(target, 0))
            for target, n in rnd.expected.items()
            if rnd.tally.get(target, 0) != n and target not in rnd.flagged
        ]
        over = rnd.tally.get(UNASSIGNED, 0)
        if not wrong and not over:
            return []
        if self.table.method != "automated_shoe":
            dealt = rnd.cards_tracked
            planned = sum(rnd.expected.values())
            uncertain = self.table.deal_rules.uncertain_count(
                rnd, f"the shoe read {dealt} cards for {planned}"
            )
            if uncertain is not None:
                return uncertain
        decisions: list[Decision] = []
        for target, got in wrong:
            rnd.flagged.add(target)
            decisions += self.table.deal_rules.misdeal(target, got)
            if self.table.state != "dealing":
                break
        return decisions

    def _on_misdeal_reported(self, ev: dict[str, Any]) -> list[Decision]:
        rnd = self.table.round
        if rnd is None or not self.table._in_round():
            return [self.table._rejected("misdeal_reported: no round is in play")]
        target = str(ev["position"])
        if (
            target != DEALER
            and int(target) not in rnd.positions
            and not self.table.deals_every_position
        ):
            return [self.table._rejected(f"position: {target} has no wager this round")]
        count: int = ev["cards"]
        if count == rnd.expected.get(target, -1):
            return [self.table._rejected(f"cards: {count} is the right number for {target}")]
        rnd.flagged.add(target)
        rnd.check_pending = False  # M7: the dealer answered the check
        return self.table.deal_rules.misdeal(target, count)

    # ------------------------------------------------------------------ collect

    def _on_hands_collected(self, ev: dict[str, Any]) -> list[Decision]:
        if self.table.round is None and self.table.blocked_without_round:
            # C10: the dealer dealt (every card blocked) after bets_closed was refused: say so
            return [
                self.table._rejected(
                    "hands_collected: no round is in play: the deck was removed, no round "
                    "opened and every card drawn since was blocked",
                    "C10",
                )
            ]
        if self.table.round is None and self.table.state not in ("void", "suspended"):
            return []
        decisions: list[Decision] = []
        if self.table.state == "dealing" and self.deal_fulfilled():
            # every card the deal planned was read: the collection ends the deal first, and
            # each hand is checked against it as deal_completed would
            decisions = self._complete_deal()
        if not self.table.L2_deal_complete():
            # L2 (the chart's condition on collect): a round collected mid-deal (or before
            # its deal began, say blocked) holds hands of the wrong count: it ends void
            rnd = self.table.round
            assert rnd is not None
            how = " (its deal was blocked)" if rnd.blocked and not rnd.started else ""
            decisions += self._void_round(
                "L2",
                f"round {rnd.number} was collected before its deal was complete{how}",
                reshuffle=False,
            )
        elif self.table.state != "void":
            # a remedy asked for and not carried out (the chart's game rules on collect)
            decisions += self.table.deal_rules.unfinished_remedy()
        return decisions + self._end_round()

    def deal_fulfilled(self) -> bool:
        """Every card or stack the deal of the round in play planned has been read."""
        rnd = self.table.round
        if rnd is None or not rnd.started or rnd.extra_dealer_cards:
            return False
        return not (rnd.stacks if self.table.method == "automated_shoe" else rnd.order)

    def _end_round(self) -> list[Decision]:
        """The round's cards are collected (hands_collected, or implied by a new round)."""
        decisions: list[Decision] = []
        rnd = self.table.round
        # the round's own deck: with two decks the other may be in the shoe already (a void
        # round's cards wait for the collection while the next deck is loaded)
        deck = self.table.decks[rnd.deck] if rnd is not None else self.table._deck()
        if rnd is not None and not deck.removed:
            # D2, R1: a void round's cards of a deck replaced since (deck_received) are the
            # old deck's; they reach the rack all the same
            moved = self._collect_layout(deck) + rnd.layout_left
            decisions += self.table.rack.collected(deck.name, moved)
            if self.table._counts_in_alternation(rnd):
                self.table.last_round_deck = deck.name
        if rnd is not None:
            decisions += self._shuffle_findings(deck.name, rnd.number)
        self.table.round = None
        self.table.dealt = []
        self.table.explicit_deck = False
        if self.table.state == "deck_removed":
            return decisions
        if self.table.state == "suspended":
            self.table.suspended_from = None
        self.table._fire("collect")
        return decisions

    def _collect_layout(self, deck: Deck) -> int:
        """Move the layout's cards to the discard rack; returns how many moved."""
        return deck.collect_layout()

    def _shuffle_findings(self, deck: str, round_number: int) -> list[Decision]:
        """Q1, Q2: the ended round's cards, in the order they left the shoe, to the watch.

        Only an ended round's cards go in (never the round in play: H7), and a finding names
        rounds and a statistic, never a card. It blocks nothing: surveillance is told.
        """
        integrity = self.table.integrity
        if integrity.ended is not None:  # a round end handed on (the floor's summaries)
            integrity.ended.append([dict(entry) for entry in self.table.dealt])
        if integrity.watch is None:
            return []
        cards = [entry["card"] for entry in self.table.dealt]
        return self.table.integrity.round_ended(deck, round_number, cards)

    # ------------------------------------------------------------------ void

    def _void_round(self, rule_id: str, why: str, reshuffle: bool = True) -> list[Decision]:
        decisions = [self.table._d("void_round", rule_id, f"all hands void: {why}")]
        if self.table.round is not None:
            self.table.round.void_rule = rule_id
        if reshuffle:
            self.table._deck().reshuffle_rule = rule_id
            decisions.append(self.table._d("reshuffle", rule_id, "the cards must be reshuffled"))
        if self.table.state != "void":
            if self.table.state == "suspended":
                self.table._model.state = self.table.suspended_from or "dealing"
            self.table._fire("void")
        return decisions

    def _void_and_remove(self, rule_id: str, why: str, notify: bool = False) -> list[Decision]:
        deck = self.table._deck()
        decisions: list[Decision] = []
        rnd = self.table.round
        if rnd is not None and rnd.void_rule is None and self.table._round_open():
            # L: the round cannot go on without its deck; dealt or not, it ends void
            decisions.append(self.table._d("void_round", rule_id, f"all hands void: {why}"))
        decisions.append(self._remove(deck, rule_id, why))
        if notify:
            decisions.append(self.table._notify(rule_id, f"deck {deck.name} removed: {why}"))
        return decisions

    def _remove(self, deck: Deck, rule_id: str, why: str) -> Decision:
        deck.remove()
        in_play = deck.name == self.table.current
        if in_play and self.table.state != "deck_removed":
            rnd = self.table.round
            if rnd is not None and rnd.deck == deck.name:
                self.table.last_round_deck = deck.name  # D1: its round (void now) was its turn
            self.table.round = None
            self.table.explicit_deck = False
            # C10 per deck: the chart's remove_deck leaves the table dealing while another
            # deck is in place (C10_another_deck_in_place), else it waits for new cards
            self.table._fire("remove_deck")
        extra = {"deck": deck.name} if self.table.options.dual_deck or rule_id == "C7" else {}
        return self.table._d("remove_deck", rule_id, f"deck {deck.name} removed: {why}", **extra)

    def _void_and_remove_if_current(self, deck: Deck, rule_id: str, why: str) -> list[Decision]:
        if deck.name == self.table.current:
            return self._void_and_remove(rule_id, why)
        return [self._remove(deck, rule_id, why)]

    def _void_round_to_shuffler(self, deck: Deck) -> list[Decision]:
        """A void round whose deck goes back to the shuffler is over; nothing reached the rack.

        C5 (40.12(f), 39.12(f)): "the cards in the device are reshuffled with the cards
        already dealt", so D2 (cards of one deck in the rack) and R1 never see them.
        """
        rnd = self.table.round
        if rnd is None or self.table.state != "void" or rnd.deck != deck.name:
            return []
        if self.table._counts_in_alternation(rnd):
            self.table.last_round_deck = deck.name
        ended = self._shuffle_findings(deck.name, rnd.number)  # over: tested like any round
        deck.layout_to_shuffler()  # its cards go into the shuffler with the deck
        self.table.round = None
        self.table.dealt = []
        self.table.explicit_deck = False
        self.table.rack.expected_min = None
        self.table._fire("collect")
        return ended

    def _on_controller_restarted(self, ev: dict[str, Any]) -> list[Decision]:
        """X1: a round in progress resumes where its cards allow it, else it is void."""
        # X1: a game dealt face up may resume (_resumes_after_restart); face down, void.
        rnd = self.table.round
        if rnd is None or not (self.table._in_round() or self.table.state == "suspended"):
            return []
        if not rnd.started or self.table.deal_rules.resumes_after_restart():
            return [
                self.table._d("continue_play", "X1", "the controller restarted; the round resumes")
            ]
        return self._void_round("X1", "the controller restarted with face-down cards out")
