"""What a game changes: the class attributes it sets, and its rules for each of the engine's
rule families (game API 2).

A game is a subclass of the Engine in controller/engine/games/ (one module per game, like
python-chess's variants over its core). Where a game's rules differ, it supplies them for
the family they concern as a subclass of that family's rules: :class:`DealRules` (the deal
and play), :class:`StubRules` (the stub count), :class:`DeckRules` (the decks and shuffles),
:class:`RackRules` (the discard rack), :class:`ReaderRules` (the hole-card reader), named by
the class attributes ``Deal``, ``Stub``, ``Decks``, ``Rack``, ``Reader``; each object reaches
the game's table as ``self.game``. The engine's parts ask the family (``deal_rules.plan``).

A game written for game API 1 overrode the same hooks as methods of the one class
(``_plan``, ``_misdeal``, ...): such a class still works for one release (its hooks are
wrapped into the families, :func:`_adapt_legacy_hooks`) with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

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

G = TypeVar("G", bound="GameHooks")


class Rules(Generic[G]):
    """One rule family's rules for one game; ``self.game`` is the game's table (the Engine)."""

    def __init__(self, game: G) -> None:
        self.game = game


class DealRules(Rules[G]):
    """The deal and the round's play (round_life.py, dealing.py): the deal order, each card,
    a wrong count, a remedy left undone, a restart. The defaults: one card at a time to each
    wagered position, then the dealer; any wrong count voids every hand."""

    def plan(self, rnd: Round) -> None:
        """The deal order of the game's "order of play": by default one card at a time to
        each wagered position and then the dealer, round after round (a game overrides)."""
        players = [str(p) for p in rnd.positions]
        rnd.order = [*players, DEALER] * self.game.profile.cards_per_hand
        rnd.expected = dict.fromkeys(players, self.game.profile.cards_per_hand)
        rnd.expected[DEALER] = self.game.profile.dealer_cards
        rnd.planned_cards = sum(rnd.expected.values()) + self.game.profile.community_cards

    def bets_closed(self, rnd: Round) -> list[Decision]:
        """After "no more bets": plan the deal (a game may first choose a start, A1)."""
        self.plan(rnd)
        return []

    def early_card_is_violation(self) -> bool:
        """C9: a card drawn before "no more bets" (not an expected burn) is a violation."""
        return True

    def next_target(self, rnd: Round) -> str:
        """Where the next card of the deal goes (a game may first deal elsewhere, e.g. G6)."""
        # C3: a card drawn in error without its face exposed is simply the next card of
        # the deal order; nothing here (or anywhere) takes it for a misdeal.
        if rnd.extra_dealer_cards:
            rnd.extra_dealer_cards -= 1  # M2
            return DEALER
        if rnd.order:
            return rnd.order.pop(0)
        return UNASSIGNED

    def burned_instead(self, target: str, card: str) -> list[Decision] | None:
        """A card the rules burn instead of dealing it to ``target`` (e.g. G6), or None."""
        return None

    def card_dealt(self, target: str, card: str) -> list[Decision]:
        """After a card reached ``target``: what the game's rules make of it."""
        return []

    def dealt_face_up(self, target: str, rnd: Round) -> bool:
        """Whether a card dealt to ``target`` lies face up (H7: face-down cards stay hidden)."""
        return False

    def mid_round_block(self) -> str | None:
        """A game's rule that blocks a later card of a round already dealing (C4 after a
        mid-round reshuffle of its own jammed), or None."""
        return None

    def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
        """A card-by-card deal whose count is wrong, no device saying whose hand: the
        decision where it does not depend on whose hand (or asks the dealer), else None
        (each wrong hand is then judged by ``misdeal`` from the deal order)."""
        return None

    def misdeal(self, target: str, count: int) -> list[Decision]:
        """One hand (or the community) holds ``count`` cards, not what the deal expects.

        By default any wrong count voids every hand under the game's ``misdeal_rule``;
        a game whose rule looks at whose hand it is overrides this.
        """
        rnd = self.game.round
        assert rnd is not None
        if rnd.void_rule is not None:
            return []
        what = "the community" if target == COMMUNITY else f"hand {target}"
        return self.game._void_round(
            self.game.misdeal_rule,
            f"{what} was dealt {count} cards",
            reshuffle=self.game.misdeal_reshuffles,
        )

    def unfinished_remedy(self) -> list[Decision]:
        """At the collection of a round played out: a remedy the rules asked for and never
        got (a game's own rule), as decisions that end the round void; none by default."""
        return []

    def resumes_after_restart(self) -> bool:
        """X1: whether a round in play resumes after a restart (cards dealt face up)."""
        return False


class StubRules(Rules[G]):
    """The stub count (stub_count.py, S1-S4): the stub a game's own rule expects, whether a
    wrong count keeps the deck, and whether a counting shuffler exempts the game (S2)."""

    def expected(self, set_aside: int) -> int | None:
        """The stub the game's own rule expects in a round (S4), or None (the ledger's)."""
        return None

    def misdeal_keeps_the_deck(self, misdealt: bool, adds_up: bool) -> bool:
        """S3 (40.7(f)2, 39.7(f)2): a wrong stub count voids the hands and keeps the deck
        only when the cards were misdealt "but 52 cards remain" (count + hands + board +
        set aside make the deck); otherwise the deck is removed."""
        return misdealt and adds_up

    def count_exempts(self) -> bool:
        """S2: whether a counting shuffler exempts this game (and method) from S1."""
        return False


class DeckRules(Rules[G]):
    """The decks and their shuffles (shuffles.py, deck.py): whether every round is shuffled,
    a shoe's next batch in the shuffler, a new shoe or dealer, a shoe run out or jammed."""

    def shuffles_every_round(self) -> bool:
        """D3: whether this table shuffles after every round (a game may make it optional)."""
        return self.game.shuffles_every_round

    def shuffled_whole(self) -> bool:
        """Q1, Q2 compare a whole shuffle with the deal before it: a game whose shoe is never
        shuffled whole (a partial reshuffle into the shoe) says no, and is not watched."""
        return True

    def rack_reshuffled_mid_round(self) -> bool:
        """G5: a shuffle completed mid-round puts the discard rack back in the shoe."""
        return False

    def holds_next_batch(self) -> bool:
        """Whether a shuffle now is of the shuffler's next batch, not of the cards dealt."""
        return False

    def next_batch_completed(self, count: int | None) -> list[Decision]:
        return []

    def load_next_batch(self) -> None:
        """The shuffler's next batch goes into the shoe (games that deal from a shoe)."""

    def new_shoe_or_dealer(self) -> None:
        """A new shoe or a new dealer (G2 burns a card where the game asks it)."""

    def ran_out(self) -> list[Decision] | None:
        """The shoe reported empty mid-round: the game's rule (G5), or None."""
        return None

    def manual_shoe_fault(self, fault: str) -> list[Decision]:
        """A manual (card-reading) shoe reports a fault other than empty or an undecodable
        frame: nothing by default (the cards dealt stand); a game may decide (I6)."""
        return []


class RackRules(Rules[G]):
    """The discard rack (rack.py): the game's own rules on the rack's level (G4, G7)."""

    def level(self, level: int) -> list[Decision]:
        """The game's own rules on the discard rack's level (G4, G7)."""
        return []


class ReaderRules(Rules[G]):
    """The hole-card reader (reader.py): a malfunction (H5) and its state in the status; a
    game without a reader ignores both."""

    def down(self, why: str, rule_id: str = "H5") -> list[Decision]:
        """H5: a malfunctioning reader (a game without a reader ignores it)."""
        return []

    def state(self) -> str:
        """The hole-card reader's state for status (none: the game has no reader)."""
        return "none"


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
    #: the game's rules for each family (a subclass of the family's rules where they differ)
    Deal: ClassVar[type[DealRules[Any]]] = DealRules
    Stub: ClassVar[type[StubRules[Any]]] = StubRules
    Decks: ClassVar[type[DeckRules[Any]]] = DeckRules
    Rack: ClassVar[type[RackRules[Any]]] = RackRules
    Reader: ClassVar[type[ReaderRules[Any]]] = ReaderRules
    deal_rules: DealRules[Any]
    stub_rules: StubRules[Any]
    deck_rules: DeckRules[Any]
    rack_rules: RackRules[Any]
    reader_rules: ReaderRules[Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _adapt_legacy_hooks(cls)

    def _build_rules(self) -> None:
        """The game's rules of each family, each over this table."""
        self.deal_rules = self.Deal(self)
        self.stub_rules = self.Stub(self)
        self.deck_rules = self.Decks(self)
        self.rack_rules = self.Rack(self)
        self.reader_rules = self.Reader(self)

    @classmethod
    def composition_for(cls, options: TableOptions) -> Composition:
        """The cards of one deck (or shoe) of this game: 52 unless the game says otherwise."""
        return standard_deck()

    @classmethod
    def chart(cls) -> MachineDefinition:
        """The game's round chart: the common frame around a deal and its play."""
        return chart(cls.name, cls.round_states, [("complete_deal", ("dealing",), "play", ())])

    def _blocked_round(self) -> bool:
        """A round whose deal was blocked and never started: its steps decide nothing."""
        rnd = self.round
        return rnd is not None and rnd.blocked and not rnd.started

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


#: Game API 1's hooks, methods of the one class: each one's family (the class attribute that
#: names it) and its name there. A game of API 1 overriding them still works, deprecated.
LEGACY_HOOKS: dict[str, tuple[str, str]] = {
    "_plan": ("Deal", "plan"),
    "_bets_closed": ("Deal", "bets_closed"),
    "_early_card_is_violation": ("Deal", "early_card_is_violation"),
    "_next_target": ("Deal", "next_target"),
    "_burned_instead": ("Deal", "burned_instead"),
    "_card_dealt": ("Deal", "card_dealt"),
    "_dealt_face_up": ("Deal", "dealt_face_up"),
    "_mid_round_block": ("Deal", "mid_round_block"),
    "_uncertain_count": ("Deal", "uncertain_count"),
    "_misdeal": ("Deal", "misdeal"),
    "_unfinished_remedy": ("Deal", "unfinished_remedy"),
    "_resumes_after_restart": ("Deal", "resumes_after_restart"),
    "_stub_expected": ("Stub", "expected"),
    "_stub_misdeal_keeps_the_deck": ("Stub", "misdeal_keeps_the_deck"),
    "_count_exempts": ("Stub", "count_exempts"),
    "_shuffles_every_round": ("Decks", "shuffles_every_round"),
    "_shoe_shuffled_whole": ("Decks", "shuffled_whole"),
    "_rack_reshuffled_mid_round": ("Decks", "rack_reshuffled_mid_round"),
    "_shuffler_holds_next_batch": ("Decks", "holds_next_batch"),
    "_next_batch_completed": ("Decks", "next_batch_completed"),
    "_load_next_batch": ("Decks", "load_next_batch"),
    "_new_shoe_or_dealer": ("Decks", "new_shoe_or_dealer"),
    "_shoe_ran_out": ("Decks", "ran_out"),
    "_manual_shoe_fault": ("Decks", "manual_shoe_fault"),
    "_rack_rules": ("Rack", "level"),
    "_reader_down": ("Reader", "down"),
    "_reader_state": ("Reader", "state"),
}


def _legacy_default(family: str, name: str) -> Callable[..., Any]:
    """API 1's default of a hook (what ``super()._plan(rnd)`` reaches): the family's own
    rules, never the wrapper that calls the game's override (which would loop)."""

    def hook(self: GameHooks, *args: Any) -> Any:
        rules = getattr(self, _INSTANCE[family])
        implementation = getattr(type(rules), "legacy_base", type(rules))
        return getattr(implementation, name)(rules, *args)

    return hook


def _legacy_call(old: str) -> Callable[..., Any]:
    def rule(self: Rules[Any], *args: Any) -> Any:
        return getattr(self.game, old)(*args)

    return rule


_INSTANCE = {
    "Deal": "deal_rules",
    "Stub": "stub_rules",
    "Decks": "deck_rules",
    "Rack": "rack_rules",
    "Reader": "reader_rules",
}

for _old, (_family, _name) in LEGACY_HOOKS.items():
    setattr(GameHooks, _old, _legacy_default(_family, _name))


def _adapt_legacy_hooks(cls: type[GameHooks]) -> None:
    """A game class that overrides API 1's hooks (``_plan`` ...): each family it overrides
    becomes a subclass of the game's rules for it that calls the override; one
    DeprecationWarning names them (game API 1 is served for one release, until 0.3)."""
    overridden = [old for old in LEGACY_HOOKS if getattr(cls, old) is not getattr(GameHooks, old)]
    own = [old for old in overridden if old in vars(cls)]
    if not own:
        return
    for family in dict.fromkeys(LEGACY_HOOKS[old][0] for old in own):
        base: type[Rules[Any]] = getattr(cls, family)
        base = getattr(base, "legacy_base", base)
        calls = {
            LEGACY_HOOKS[old][1]: _legacy_call(old)
            for old in overridden
            if LEGACY_HOOKS[old][0] == family
        }
        adapter = type(f"{cls.__name__}{family}Hooks", (base,), {**calls, "legacy_base": base})
        setattr(cls, family, adapter)
    warnings.warn(
        f"game {cls.__qualname__} overrides the engine's methods {', '.join(own)} (game API "
        "1); a game supplies them as its rules of each family (Deal, Stub, Decks, Rack, "
        "Reader; docs/games.md, game API 2): API 1's hooks go in tablectl 0.3",
        DeprecationWarning,
        stacklevel=4,  # the game's class statement (past the two __init_subclass__)
    )
