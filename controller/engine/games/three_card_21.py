"""Three Card 21 "N" Done (N.J.A.C. 13:69F-2C; 13:69E-1.10D): dealt face up from a
shoe of 6 to 8 decks, with a bonus step, insurance on an ace, a hole-card reader, the
dealer's turn, burn cards (G2, G5, G6), a cut card (G3) and Bart Carter (G4).

Everything this game adds to the core engine is here: its rules of each family (``Deal``,
``Decks``, ``Rack``, ``Reader``), its chart's conditions and the handlers of its own steps.
"""

from __future__ import annotations

from datetime import date
from typing import Any, ClassVar

from tablectl.controller.engine.cards import (
    Composition,
    dealer_stands,
    hand_total,
    is_ten_or_ace,
    multi_deck_shoe,
)
from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.hooks import DealRules, DeckRules, RackRules, ReaderRules
from tablectl.controller.engine.ledger import BURNED, DEALER, DISCARD, SHOE
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.rules import Citation, Rule
from tablectl.controller.engine.table import GameOption, GameProfile, TableOptions

PLAYER_HIT = "player"  # a hit: no device says which position took it
READERS = ("none", "concealed", "revealing")

#: the rules of this game alone (docs/rules.md: M6, H, G)
RULES = (
    Rule("M6", "3C21: a player given no initial cards", "13:69F-2C.14(e), (g)"),
    Rule("H1", "the hole-card reader used before its daily inspection", "13:69E-1.10D(f)"),
    Rule("H2", "hole card inserted with an up card other than A, K, Q, J, 10", "13:69F-2C.14(k)"),
    Rule("H3", "hole card inserted before insurance closed (ace up)", "13:69F-2C.7(a)2"),
    Rule("H4", "the reader used before the bonus wagers are settled", "13:69F-2C.6(e)"),
    Rule("H5", "the reader malfunctioned: play continues without it", "13:69F-2C.14(l)"),
    Rule(
        "H6",
        "the reader contradicted the hole card read by the shoe: a malfunction",
        "13:69F-2C.14(l) (interpretation)",
    ),
    Rule("G1", "a Three Card 21 shoe holds 6 to 8 decks", "13:69F-2C.2(a)"),
    Rule("G2", "the first card after loading the shoe or a new dealer is burned", "13:69F-2C.6(c)"),
    Rule("G3", "the cut card: complete the round, then reshuffle", "13:69F-2C.4(h)"),
    Rule("G4", "Bart Carter: reshuffle once the rack holds about a deck", "13:69F-2C.4(h)2"),
    Rule("G5", "the shoe ran out mid-round: reshuffle the rack, burn, complete", "13:69F-2C.14(f)"),
    Rule(
        "G6", "a card the dealer draws on a standing total is burned", "13:69F-2C.11(b), 2C.14(d)"
    ),
    Rule("G7", "the discard rack holds more than the shoe's cards", "13:69E-1.10D(e)"),
    Rule("G8", "the house reshuffles after a round at its discretion", "13:69F-2C.4(h)1"),
    Rule(
        "G9",
        "the manual dealing shoe jammed mid-round: the dealt cards stand, the round goes on",
        "13:69F-2C.14(e), (g) by analogy (interpretation)",
    ),
)
#: this game's citations of the core's rules (subchapter 2C; 13:69E-1.10D the table)
CITATIONS: dict[str, Citation] = {
    "C1": "13:69F-2C.14(a)",
    "C2": "13:69F-2C.14(a)",
    "C3": "13:69F-2C.14(b)",
    "C4": "13:69F-2C.14(i)",
    "C5": "13:69F-2C.14(h) by analogy (interpretation)",
    "C6": "13:69F-2C.14(j)",
    "C7": "13:69E-1.18 (interpretation)",
    "C9": "13:69F-2C.6(d) (interpretation)",
    "C11": "13:69E-1.10D(a)",
    "R1": "13:69E-1.10D(e) (interpretation)",
    "X1": "13:69F-2C.14(h) by analogy (interpretation)",
    "X2": "13:69F-2C.14(h) by analogy (interpretation)",
    "Q1": "13:69F-2C.4(a); 13:69E-1.18 (interpretation)",
    "Q2": "13:69F-2C.4(a); 13:69E-1.18 (interpretation)",
    "Q3": "13:69F-2C.4(a); 13:69E-1.18 (interpretation)",
    "L1": "13:69F-2C.5(f)",
    "L2": "13:69F-2C.14(g) (interpretation)",
    "L3": "13:69F-2C.4(a), (h)",
}

ROUND_STATES = ("dealing", "bonus", "insurance", "players", "dealer_turn")


class ThreeCard21(Engine):
    """Three Card 21 "N" Done."""

    name = "three_card_21"
    profile = GameProfile(
        "three_card_21", 'Three Card 21 "N" Done', 6, 3, 2, 0, ("manual_shoe",), False
    )
    game_options: ClassVar[tuple[GameOption, ...]] = (
        GameOption("decks", 6, low=6, high=8, rule="G1", note="6 to 8 decks (G1)."),
        GameOption("bart_carter", False, note="The Bart Carter shuffle (G4; no burn card, G2)."),
        GameOption("dealer_hits_soft_17", False, note="The dealer hits soft 17 (G6)."),
        GameOption(
            "reader",
            "concealed",
            choices=READERS,
            note="Hole-card reader: none, concealed (players cannot learn the hole card) "
            "or revealing (H2).",
        ),
    )
    rules = RULES
    citations = CITATIONS
    round_states = ROUND_STATES
    shuffles_every_round = False  # a shoe of decks, reshuffled at the cut card (G3)
    house_reshuffle_rule = "G8"  # G8: 2C.4(h)1, the house's call, not the cut card (G3)
    misdeal_rule = "M6"
    replacing_the_shuffler_needs_empty_check = True  # C6 (2C.14(j))

    @classmethod
    def composition_for(cls, options: TableOptions) -> Composition:
        return multi_deck_shoe(options.decks)  # G1: 6 to 8 decks (2C.2(a))

    @classmethod
    def chart(cls) -> MachineDefinition:
        return chart(
            cls.name,
            ROUND_STATES,
            [
                ("complete_deal", ("dealing",), "bonus", ()),
                # H3: with an ace up, insurance comes before the reader
                ("settle_bonus_ace_up", ("bonus",), "insurance", ()),
                ("settle_bonus", ("bonus",), "players", ()),
                ("close_insurance", ("insurance",), "players", ()),
                ("start_dealer_turn", ("bonus", "insurance", "players"), "dealer_turn", ()),  # G6
                # G5 then C4: the reshuffled rack's burn card (and every card after it) only
                # once its reshuffle completed (2C.14(f), (i))
                ("burn_rack_card", ROUND_STATES, "=", ("C4_shuffle_completed",)),
                (
                    "insert_reader",
                    ROUND_STATES,
                    "=",
                    (
                        "H1_reader_inspected_today",
                        "H5_reader_in_service",
                        "H4_bonus_settled",
                        "H3_insurance_closed_on_an_ace",
                    ),
                ),
            ],
        )

    # ------------------------------------------------------------------ the deal

    def _on_stub_counted(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("stub_counted: Three Card 21 has no stub count")]

    # ------------------------------------------------------------------ shoe and shuffler

    # ------------------------------------------------------------------ play, reader, batches

    def _dealer_stands(self) -> bool:
        """G6: hard 17+, soft 18+, and soft 17 unless the table hits soft 17 (2C.11(b))."""
        rnd = self.round
        if rnd is None or len(rnd.dealer_cards) < 2:
            return False
        return dealer_stands(rnd.dealer_cards, self.options.dealer_hits_soft_17)

    def _on_bonus_settled(self, ev: dict[str, Any]) -> list[Decision]:
        decisions: list[Decision] = []
        if self._blocked_round():
            return []
        if self.state == "dealing":
            decisions += self._complete_deal()
        if self.state != "bonus":
            return decisions or [self._rejected(f"bonus_settled: not expected in {self.state}")]
        rnd = self.round
        ace_up = rnd is not None and rnd.up_card is not None and rnd.up_card[0] == "A"
        self._fire("settle_bonus_ace_up" if ace_up else "settle_bonus")
        return decisions

    def _on_insurance_closed(self, ev: dict[str, Any]) -> list[Decision]:
        if self._blocked_round():
            return []
        if self.state == "insurance":
            self._fire("close_insurance")
            return []
        if self.state in ("players", "dealer_turn"):
            return []
        return [self._rejected(f"insurance_closed: not expected in {self.state}")]

    def _on_dealer_turn(self, ev: dict[str, Any]) -> list[Decision]:
        decisions: list[Decision] = []
        if self._blocked_round():
            return []
        if self.state == "dealing":
            decisions += self._complete_deal()
        if self.state in ("bonus", "insurance", "players"):
            self._fire("start_dealer_turn")
            rnd = self.round
            if rnd is not None:
                for entry in self.dealt:
                    if entry["to"] == DEALER:
                        entry["face_up"] = True  # 2C.6(i): the hole card is revealed
            return decisions
        return decisions or [self._rejected(f"dealer_turn: not expected in {self.state}")]

    # The reader's H rules that gate its use: conditions on the chart's insert_reader.

    def H1_reader_inspected_today(self, day: date | str | None = None) -> bool:
        """H1 (1.10D(f)): the reader is used only on a gaming day it was inspected."""
        return self.reader.inspected_on(day)

    def H5_reader_in_service(self, day: date | str | None = None) -> bool:
        """H5: a malfunctioning reader stays out until repaired and re-inspected."""
        return not self.reader_disabled

    def H4_bonus_settled(self, day: date | str | None = None) -> bool:
        """H4 (2C.6(e)): the hole card goes in only after the bonus wagers are settled."""
        return self.state not in ("dealing", "bonus")

    def H3_insurance_closed_on_an_ace(self, day: date | str | None = None) -> bool:
        """H3 (2C.7(a)2): with an ace up, insurance closes before the hole card goes in."""
        rnd = self.round
        up = rnd.up_card if rnd is not None else None
        ace_up = up is not None and up[0] == "A"
        return not (ace_up and self.state in ("dealing", "bonus", "insurance"))

    def _on_reader_inserted(self, ev: dict[str, Any]) -> list[Decision]:
        if self.options.reader == "none":
            return super()._on_reader_inserted(ev)
        rnd = self.round
        if rnd is None or not self._in_round():
            return [self._rejected("reader_inserted: no round is in play")]
        day = self._gaming_day(ev.get("time"))
        rnd.reader_ignored = False
        rnd.reader_inserted = True
        decisions: list[Decision] = []
        # the chart's insert_reader carries H1, H5, H4 and H3; refused, say which failed
        if not self._model.trigger("insert_reader", day):
            decisions = self._reader_refusals(rnd, day)
        up = rnd.up_card
        if up is not None and not is_ten_or_ace(up):
            # H2: the up card does not allow a peek.
            decisions.append(
                self._notify(
                    "H2", "the hole card was inserted with an up card other than A, K, Q, J or 10"
                )
            )
            if self.options.reader == "revealing":
                decisions.append(
                    self._d(
                        "hands_dead",
                        "H2",
                        "the reader in use could let a "
                        "player learn the hole card: all hands dead, wagers "
                        "returned",
                    )
                )
                self._void_hands_dead()
            else:
                decisions.append(
                    self._d(
                        "continue_play",
                        "H2",
                        "the reader in use lets no player learn the hole card",
                    )
                )
        return decisions

    def _reader_refusals(self, rnd: Round, day: date | str) -> list[Decision]:
        """The decisions of the H rules the chart's insert_reader found failing."""
        decisions: list[Decision] = []
        if not self.H1_reader_inspected_today(day):
            rnd.reader_ignored = True
            decisions += [
                self._d(
                    "reader_disabled",
                    "H1",
                    "the reader was not inspected this gaming day; its result is ignored",
                ),
                self._notify("H1", "the hole-card reader was used without its daily inspection"),
            ]
        elif not self.H5_reader_in_service(day):
            rnd.reader_ignored = True  # H5: disabled until repaired and re-inspected
            decisions.append(
                self._d(
                    "reader_disabled", "H5", "the reader is out of service; its result is ignored"
                )
            )
        if not self.H4_bonus_settled(day):
            decisions += [
                self._d(
                    "procedure_violation",
                    "H4",
                    "the reader was used before the bonus wagers were settled",
                ),
                self._notify("H4", "hole card inserted before the bonus was settled"),
            ]
        if not self.H3_insurance_closed_on_an_ace(day):
            decisions += [
                self._d(
                    "procedure_violation",
                    "H3",
                    "the hole card was inserted before insurance closed",
                ),
                self._notify("H3", "hole card inserted before insurance closed"),
            ]
        return decisions

    def _void_hands_dead(self) -> None:
        rnd = self.round
        if rnd is not None:
            rnd.void_rule = "H2"
        self._fire("void")

    def _on_reader_result(self, ev: dict[str, Any]) -> list[Decision]:
        if self.options.reader == "none":
            return super()._on_reader_result(ev)
        rnd = self.round
        if self.reader_disabled:
            return []
        inserted = rnd is not None and rnd.reader_inserted
        if not inserted and self.interp.reader_answer_without_insertion_is_malfunction:
            # I5: an answer with no hole card inserted is no reading: a malfunction (H5), as
            # a contradicting one is (H6)
            return [
                *self.reader_rules.down("the reader answered with no hole card inserted", "H6"),
                self._notify("H6", "the hole-card reader answered with nothing inserted"),
            ]
        if rnd is None or rnd.reader_ignored:
            return []
        if rnd.up_card is None or rnd.hole_card is None:
            return []
        actual = hand_total([rnd.up_card, rnd.hole_card])[0] == 21
        if actual != ev["blackjack"] and self.interp.reader_contradiction_is_malfunction:
            # H6: the answer contradicts the shoe's reading: treated as a malfunction (H5).
            return [
                *self.reader_rules.down(
                    "the reader's answer contradicts the card the shoe read", rule_id="H6"
                ),
                self._notify("H6", "the hole-card reader contradicted the shoe"),
            ]
        return []

    def _on_reader_fault(self, ev: dict[str, Any]) -> list[Decision]:
        if self.options.reader == "none":
            return super()._on_reader_fault(ev)
        return self.reader_rules.down(f"the reader reported {ev['fault']}")

    def _on_cut_card_reached(self, ev: dict[str, Any]) -> list[Decision]:
        # G3: complete the round in play, then reshuffle; no new deal before it.
        self._deck().reshuffle_rule = "G3"
        when = "after this round" if self._in_round() else "before the next round"
        return [self._d("reshuffle", "G3", f"the cut card came out: reshuffle {when}")]

    class Deal(DealRules["ThreeCard21"]):
        """Three Card 21's deal and play: the order of 2C.6(d), the dealer's draw (G6), M6."""

        def plan(self, rnd: Round) -> None:
            """2C.6(d): a card to each, the up card, a second each, the hole card, a third each."""
            players = [str(p) for p in rnd.positions]
            rnd.order = [*players, DEALER, *players, DEALER, *players]
            rnd.expected = dict.fromkeys(players, 3)
            rnd.expected[DEALER] = 2
            rnd.planned_cards = sum(rnd.expected.values())

        def early_card_is_violation(self) -> bool:
            return self.game.interp.three_card_21_early_card_is_violation

        def next_target(self, rnd: Round) -> str:
            if not rnd.extra_dealer_cards and self.game.state == "dealer_turn":
                return DEALER
            target = super().next_target(rnd)
            return PLAYER_HIT if target == "unassigned" else target

        def burned_instead(self, target: str, card: str) -> list[Decision] | None:
            if target == DEALER and self.game.state == "dealer_turn" and self.game._dealer_stands():
                # G6: a card drawn on a standing total is burned, not part of the hand.
                self.game._deck().ledger.move(card, SHOE, BURNED)
                self.game._record(card, BURNED, True)
                return [self.game._d("burn_card", "G6", "the dealer drew on a standing total")]
            return None

        def card_dealt(self, target: str, card: str) -> list[Decision]:
            rnd = self.game.round
            assert rnd is not None
            if target == DEALER:
                rnd.dealer_cards.append(card)
                if rnd.up_card is None:
                    rnd.up_card = card
                elif rnd.hole_card is None:
                    rnd.hole_card = card
            if self.game._deck().ledger.count(SHOE) == 0:
                return self.game.deck_rules.ran_out() or []
            return []

        def misdeal(self, target: str, count: int) -> list[Decision]:
            """M6 (2C.14(g)): a player with no initial cards is dead; short hands get theirs
            later."""
            rnd = self.game.round
            assert rnd is not None
            if target != DEALER and count == 0:
                # M6: a player with no initial cards is dead and joins the next deal.
                position = int(target)
                rnd.void_hands.add(position)
                return [
                    self.game._d(
                        "void_hand",
                        "M6",
                        f"position {position} was dealt no initial cards: dead this round",
                        position=position,
                    )
                ]
            # M6: one or two cards, or the dealer short: no void, the rest come later.
            missing = rnd.expected.get(target, 0) - count
            if missing > 0:
                rnd.order.extend([target] * missing)
            return []

        def mid_round_block(self) -> str | None:
            """C4 after G5: the rack's reshuffle mid-round jammed; no card (not even the burn) is
            drawn from it until a reshuffle completes (the chart's burn_rack_card)."""
            if self.game.burn_pending != "G5" or self.game._model.trigger("burn_rack_card"):
                return None
            return "C4"

        def resumes_after_restart(self) -> bool:
            state = self.game.suspended_from if self.game.state == "suspended" else self.game.state
            if state == "insurance" and not self.game.interp.restart_with_insurance_open_resumes:
                return False  # I8 (configured): insurance open at the restart voids the round
            return self.game.interp.restart_resumes_three_card_21  # X1: dealt face up

        def dealt_face_up(self, target: str, rnd: Round) -> bool:
            if target == DEALER:
                # the up card and the dealer's draws are face up; the hole card is not (until
                # the dealer's turn reveals it).
                return rnd.up_card is None or rnd.hole_card is not None
            return True

    class Decks(DeckRules["ThreeCard21"]):
        """Three Card 21's shoe: a batch in the shuffler while the shoe deals, burn cards
        (G2, G5), the shoe run out or jammed (G5, G9)."""

        def new_shoe_or_dealer(self) -> None:
            if self.game.burn_pending == "G5":
                return  # G5 (2C.14(f)): the reshuffled rack loaded mid-round; its burn is G5's
            if not self.game.options.bart_carter:
                self.game.burn_pending = (
                    "G2"  # G2: a new shoe's or a new dealer's first card is burned
                )

        def manual_shoe_fault(self, fault: str) -> list[Decision]:
            """I6: the manual shoe jammed or stopped mid-round with partial hands."""
            if not self.game._in_round() or self.game.round is None or not self.game.round.started:
                return []  # no hand holds a card yet: nothing to decide
            why = f"the dealing shoe reported {fault} mid-round"
            if self.game.interp.three_card_21_manual_shoe_jam_voids_round:
                return self.game._void_round("C5", why)  # as an automated shoe's (configured)
            # G9: the cards dealt lie face up and stand; the missing ones come once the shoe
            # deals again, after the others (2C.14(e), (g) by analogy); a supervisor is told
            return [self.game._notify("G9", f"{why}: the dealt cards stand; the round goes on")]

        def rack_reshuffled_mid_round(self) -> bool:
            return self.game._in_round()

        def ran_out(self) -> list[Decision] | None:
            """G5: no void; the discard rack is reshuffled, its first card burned."""
            if self.game.burn_pending == "G5":
                # the same run-out, told again (the last card dealt, then the shoe's own `empty`)
                return []
            deck = self.game._deck()
            deck.ledger.move_all(DISCARD, SHOE)
            self.game.rack_baseline = (
                None  # R1: the rack was emptied into the shoe; no baseline left
            )
            self.game.burn_pending = "G5"
            if self.game.round is not None:
                self.game.round.rack_reshuffled = False  # its reshuffle is still to come
            return [
                self.game._d(
                    "reshuffle",
                    "G5",
                    "the shoe ran out: reshuffle the discard rack, burn "
                    "one card and complete the round",
                )
            ]

        def holds_next_batch(self) -> bool:
            """2C.4(i)2: a shuffle while a round is dealt from the shoe is the next batch's.

            "The cards shall be stacked and placed into the automated shuffling device to be
            shuffled. The batch of cards already in the shuffler shall then be removed": the
            shuffler holds a batch of its own while the shoe deals. Its C4 fault or C7 count
            concerns that batch, not the round in play; only the shoe running out (G5) makes
            a mid-round shuffle the shoe's. The one place that tells the two apart.
            """
            return (
                self.game.options.shuffler != "none"
                and self.game._round_open()  # the shoe suspended too: the batch is the shuffler's
                and self.game.round is not None
                and self.game.round.started
                # G5: until the rack's reshuffle completes, a shuffle is of the shoe's cards
                and not (self.game.burn_pending == "G5" and not self.game.round.rack_reshuffled)
            )

        def next_batch_completed(self, count: int | None) -> list[Decision]:
            """The shuffler finished the next batch while the shoe deals (2C.4(i)2)."""
            size = self.game.composition.size
            if (
                count is not None
                and count != size
                and self.game.interp.count_mismatch_removes_deck_everywhere
            ):
                # C7 for the batch: remove it; the round in play goes on (C10 blocks the batch).
                self.game.next_batch = "removed"
                return [
                    self.game._d(
                        "remove_deck",
                        "C7",
                        f"the batch in the shuffler counted {count} cards, not {size}: removed; "
                        "the round in play goes on",
                        deck=self.game.current,
                    )
                ]
            self.game.next_batch = "ready"
            self.game.device_faults.pop("shuffler", None)
            return []

        def shuffled_whole(self) -> bool:
            # the Bart Carter shuffle (2C.4(h)2) reshuffles about a deck into the shoe, never all
            return not self.game.options.bart_carter

        def load_next_batch(self) -> None:
            """The shuffler's batch goes into the shoe; a faulted or removed one blocks."""
            batch, self.game.next_batch = self.game.next_batch, None
            deck = self.game._deck()
            if batch == "ready":
                # a whole shuffled batch: the reshuffle the shoe was due (G3, G4) is done
                deck.ledger.gather(SHOE)
                self.game._new_shoe_order(deck.name, whole=True)
                deck.shuffled, deck.faulted, deck.reshuffle_rule = True, False, None
                self.game.bart_carter_flagged = False
            elif batch == "fresh":
                self.game.decks[deck.name] = Deck.received(deck.name, self.game.composition)
            elif batch == "faulted":
                deck.faulted = True  # C4: the batch never completed its shuffle
                deck.shuffled = False
            elif batch == "removed":
                deck.removed = True  # C10: the removed batch is not dealt; new cards first
                deck.shuffled = False

    class Rack(RackRules["ThreeCard21"]):
        """Three Card 21's rules on the discard rack's level (G4, G7)."""

        def level(self, level: int) -> list[Decision]:
            decisions: list[Decision] = []
            size = self.game.composition.size
            if level > size:
                # G7: more cards in the rack than the shoe's decks hold.
                decisions.append(
                    self.game._notify(
                        "G7",
                        f"the discard rack reads {level} cards, more than the {size} of the shoe",
                    )
                )
            if (
                self.game.options.bart_carter
                and level > self.game.interp.bart_carter_rack_threshold
                and not self.game.bart_carter_flagged
            ):
                # G4: Bart Carter reshuffles once the rack holds about one deck.
                self.game.bart_carter_flagged = True
                self.game._deck().reshuffle_rule = "G4"
                decisions.append(
                    self.game._d(
                        "reshuffle",
                        "G4",
                        "the discard rack holds more than about one deck: "
                        "reshuffle after the round",
                    )
                )
            return decisions

    class Reader(ReaderRules["ThreeCard21"]):
        """Three Card 21's hole-card reader: out of service (H5), and its state."""

        def down(self, why: str, rule_id: str = "H5") -> list[Decision]:
            """H5: a malfunctioning reader is out for the day or until re-inspected."""
            if self.game.options.reader == "none":
                return []
            self.game.reader.went_out(
                self.game._gaming_day(self.game._time)
            )  # H5 (I4): out for that day
            self.game.device_faults["hole_card_reader"] = why
            if self.game.round is not None:
                self.game.round.reader_ignored = True
            return [
                self.game._d(
                    "reader_disabled", rule_id, f"{why}: play continues without the reader"
                )
            ]

        def state(self) -> str:
            return "none" if self.game.options.reader == "none" else self.game.reader.state()
