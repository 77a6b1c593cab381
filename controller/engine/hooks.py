"""What a game changes: the class attributes it sets and the hooks it overrides.

A game is a subclass of the Engine in controller/engine/games/ (one module per game, like
python-chess's variants over its core); the parts of the engine call these hooks where a
game's rules differ, and refuse the events of another game's steps here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tablectl.controller.engine.cards import Composition, standard_deck
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.ledger import COMMUNITY, DEALER
from tablectl.controller.engine.machine import (
    MachineDefinition,
    chart,
)
from tablectl.controller.engine.rules import Citation, Rule
from tablectl.controller.engine.table import GameOption, GameProfile, TableOptions
from tablectl.controller.engine.table_state import GAME_API_VERSION, UNASSIGNED, Round, TableState


class GameHooks(TableState):
    """What a game sets (the class attributes) and overrides (the hooks): the defaults are
    those of a face-down game dealt one card at a time and shuffled after every round."""

    #: the game's name in a table spec; a subclass with a name registers itself
    name: ClassVar[str] = ""
    #: the game API the game was written for (an installed game of another major, or of a
    #: later minor, is refused by the registry)
    game_api: ClassVar[str] = GAME_API_VERSION
    profile: GameProfile
    #: options only this game knows, each with its default and values (table.py checks
    #: them and refuses them for other games)
    game_options: ClassVar[tuple[GameOption, ...]] = ()
    #: the game's own rules (docs/rules.md), found by ID in the catalogue (rules.py)
    rules: ClassVar[tuple[Rule, ...]] = ()
    #: the game's citation of a rule, or one per dealing method (rules.citation)
    citations: ClassVar[Mapping[str, Citation]] = {}
    #: the round's states between "no more bets" and the collection (the chart's middle)
    round_states: ClassVar[tuple[str, ...]] = ("dealing", "play")
    #: S1-S3: the dealer counts the stub (else stub_counted is refused)
    counts_the_stub: ClassVar[bool] = False
    #: D3: the deck is shuffled after every round
    shuffles_every_round: ClassVar[bool] = True
    #: the rule a house reshuffle (reshuffle_requested) is ordered under
    house_reshuffle_rule: ClassVar[str] = "D3"
    #: the deal goes to every position, wagered or not (a misdeal report may name any)
    deals_every_position: ClassVar[bool] = False
    #: a card-reading shoe's tally per hand counts as the dealer's report at the stub count
    tracked_counts_are_the_hands: ClassVar[bool] = False
    #: the rule (and whether it orders a reshuffle) for a hand dealt a wrong count
    misdeal_rule: ClassVar[str] = "M4"
    misdeal_reshuffles: ClassVar[bool] = True
    #: the rule of a stub count that does not add up
    stub_rule: ClassVar[str] = "S3"
    #: C6: the shuffler may be replaced only once a supervisor saw it empty
    replacing_the_shuffler_needs_empty_check: ClassVar[bool] = False

    @classmethod
    def composition_for(cls, options: TableOptions) -> Composition:
        """The cards of one deck (or shoe) of this game: 52 unless the game says otherwise."""
        return standard_deck()

    @classmethod
    def chart(cls) -> MachineDefinition:
        """The game's round chart: the common frame around a deal and its play."""
        return chart(cls.name, cls.round_states, [("complete_deal", ("dealing",), "play", ())])

    def _plan(self, rnd: Round) -> None:
        """The deal order of the game's "order of play": by default one card at a time to
        each wagered position and then the dealer, round after round (a game overrides)."""
        players = [str(p) for p in rnd.positions]
        rnd.order = [*players, DEALER] * self.profile.cards_per_hand
        rnd.expected = dict.fromkeys(players, self.profile.cards_per_hand)
        rnd.expected[DEALER] = self.profile.dealer_cards
        rnd.planned_cards = sum(rnd.expected.values()) + self.profile.community_cards

    def _next_target(self, rnd: Round) -> str:
        """Where the next card of the deal goes (a game may first deal elsewhere, e.g. G6)."""
        # C3: a card drawn in error without its face exposed is simply the next card of
        # the deal order; nothing here (or anywhere) takes it for a misdeal.
        if rnd.extra_dealer_cards:
            rnd.extra_dealer_cards -= 1  # M2
            return DEALER
        if rnd.order:
            return rnd.order.pop(0)
        return UNASSIGNED

    def _misdeal(self, target: str, count: int) -> list[Decision]:
        """One hand (or the community) holds ``count`` cards, not what the deal expects.

        By default any wrong count voids every hand under the game's ``misdeal_rule``;
        a game whose rule looks at whose hand it is overrides this.
        """
        rnd = self.round
        assert rnd is not None
        if rnd.void_rule is not None:
            return []
        what = "the community" if target == COMMUNITY else f"hand {target}"
        return self._void_round(
            self.misdeal_rule, f"{what} was dealt {count} cards", reshuffle=self.misdeal_reshuffles
        )

    def _shuffles_every_round(self) -> bool:
        """D3: whether this table shuffles after every round (a game may make it optional)."""
        return self.shuffles_every_round

    def _shoe_shuffled_whole(self) -> bool:
        """Q1, Q2 compare a whole shuffle with the deal before it: a game whose shoe is never
        shuffled whole (a partial reshuffle into the shoe) says no, and is not watched."""
        return True

    def _blocked_round(self) -> bool:
        """A round whose deal was blocked and never started: its steps decide nothing."""
        rnd = self.round
        return rnd is not None and rnd.blocked and not rnd.started

    def _reader_state(self) -> str:
        """The hole-card reader's state for status (none: the game has no reader)."""
        return "none"

    def _bets_closed(self, rnd: Round) -> list[Decision]:
        """After "no more bets": plan the deal (a game may first choose a start, A1)."""
        self._plan(rnd)
        return []

    def _early_card_is_violation(self) -> bool:
        """C9: a card drawn before "no more bets" (not an expected burn) is a violation."""
        return True

    def _burned_instead(self, target: str, card: str) -> list[Decision] | None:
        """A card the rules burn instead of dealing it to ``target`` (e.g. G6), or None."""
        return None

    def _card_dealt(self, target: str, card: str) -> list[Decision]:
        """After a card reached ``target``: what the game's rules make of it."""
        return []

    def _dealt_face_up(self, target: str, rnd: Round) -> bool:
        """Whether a card dealt to ``target`` lies face up (H7: face-down cards stay hidden)."""
        return False

    def _uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
        """A card-by-card deal whose count is wrong, no device saying whose hand: the
        decision where it does not depend on whose hand (or asks the dealer), else None
        (each wrong hand is then judged by ``_misdeal`` from the deal order)."""
        return None

    def _stub_expected(self, set_aside: int) -> int | None:
        """The stub the game's own rule expects in a round (S4), or None (the ledger's)."""
        return None

    def _stub_misdeal_keeps_the_deck(self, misdealt: bool, adds_up: bool) -> bool:
        """S3 (40.7(f)2, 39.7(f)2): a wrong stub count voids the hands and keeps the deck
        only when the cards were misdealt "but 52 cards remain" (count + hands + board +
        set aside make the deck); otherwise the deck is removed."""
        return misdealt and adds_up

    def _count_exempts(self) -> bool:
        """S2: whether a counting shuffler exempts this game (and method) from S1."""
        return False

    def _rack_reshuffled_mid_round(self) -> bool:
        """G5: a shuffle completed mid-round puts the discard rack back in the shoe."""
        return False

    def _shuffler_holds_next_batch(self) -> bool:
        """Whether a shuffle now is of the shuffler's next batch, not of the cards dealt."""
        return False

    def _next_batch_completed(self, count: int | None) -> list[Decision]:
        return []

    def _load_next_batch(self) -> None:
        """The shuffler's next batch goes into the shoe (games that deal from a shoe)."""

    def _new_shoe_or_dealer(self) -> None:
        """A new shoe or a new dealer (G2 burns a card where the game asks it)."""

    def _shoe_ran_out(self) -> list[Decision] | None:
        """The shoe reported empty mid-round: the game's rule (G5), or None."""
        return None

    def _reader_down(self, why: str, rule_id: str = "H5") -> list[Decision]:
        """H5: a malfunctioning reader (a game without a reader ignores it)."""
        return []

    def _rack_rules(self, level: int) -> list[Decision]:
        """The game's own rules on the discard rack's level (G4, G7)."""
        return []

    def _resumes_after_restart(self) -> bool:
        """X1: whether a round in play resumes after a restart (cards dealt face up)."""
        return False

    def _unfinished_remedy(self) -> list[Decision]:
        """At the collection of a round played out: a remedy the rules asked for and never
        got (a game's own rule), as decisions that end the round void; none by default."""
        return []

    def _mid_round_block(self) -> str | None:
        """A game's rule that blocks a later card of a round already dealing (C4 after a
        mid-round reshuffle of its own jammed), or None."""
        return None

    def _manual_shoe_fault(self, fault: str) -> list[Decision]:
        """A manual (card-reading) shoe reports a fault other than empty or an undecodable
        frame: nothing by default (the cards dealt stand); a game may decide (I6)."""
        return []

    # What a game's rules may call: the round's life (round_life.py) and shuffle integrity.

    def _void_round(self, rule_id: str, why: str, reshuffle: bool = True) -> list[Decision]:
        """Every hand of the round in play void under ``rule_id`` (and a reshuffle ordered)."""
        return self.round_life._void_round(rule_id, why, reshuffle)

    def _complete_deal(self) -> list[Decision]:
        """The deal is over: each hand checked against the plan (M1-M4, M6), then play."""
        return self.round_life._complete_deal()

    def _new_shoe_order(self, deck: str, whole: bool) -> None:
        """Q1, Q2: a shuffled deck (``whole``, or a part of it) goes into play."""
        self.integrity.new_order(deck, whole)

    def deal_fulfilled(self) -> bool:
        """Every card or stack the deal of the round in play planned has been read."""
        return self.round_life.deal_fulfilled()

    # Events of another game's steps: refused, naming the step this game does not have.

    def _on_bonus_settled(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"bonus_settled: {self.game} has no bonus step")]

    def _on_insurance_closed(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"insurance_closed: {self.game} has no insurance")]

    def _on_dealer_turn(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"dealer_turn: {self.game} has no dealer's turn")]

    def _on_cut_card_reached(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"cut_card_reached: {self.game} has no cut card in the shoe")]

    def _on_starting_position(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"starting_position: {self.game} has no starting position")]

    def _on_dealer_card_exposed(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"dealer_card_exposed: {self.game} has no such irregularity")]

    def _on_reader_inserted(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_inserted: this table has no hole-card reader")]

    def _on_reader_result(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_result: this table has no hole-card reader")]

    def _on_reader_fault(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_fault: this table has no hole-card reader")]
