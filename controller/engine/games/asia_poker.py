"""Asia Poker (N.J.A.C. 13:69F-31): 53 cards (52 and the joker), seven cards to every
position, wagered or not, from a manual shoe, starting where the dice or a number say
(31.11, A1); four cards left in the stub (31.8(d), S4).

Everything this game adds to the core engine is here, as hooks the core calls by name.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tablectl.controller.engine.cards import Composition, deck_with_joker
from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import DealRules, DeckRules, StubRules
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.rules import Citation, Rule
from tablectl.controller.engine.table import GameOption, GameProfile, TableOptions, TableSpec

ROUND_STATES = ("starting_position", "dealing", "play")
A1_RANGES = {"dice": (3, 18), "number": (1, 7)}  # 31.11(b): three dice; a number 1-7
# Asia Poker's irregularities are 13:69F-31.14, cited by number (its text is not among the
# texts the project was given).
AP_IRREGULARITIES = "13:69F-31.14 (interpretation; text not in regs/)"

#: the rules of this game alone (docs/rules.md: S4, A1)
RULES = (
    Rule(
        "S4",
        "Asia Poker: exactly four cards remain after seven to each of seven positions",
        "13:69F-31.8(d)",
    ),
    Rule(
        "A1",
        "Asia Poker: the starting position, counted counterclockwise with the dealer as one",
        "13:69F-31.11(b), (c)",
    ),
)
#: this game's citations of the core's rules (subchapter 31)
CITATIONS: dict[str, Citation] = {
    "C1": AP_IRREGULARITIES,
    "C2": AP_IRREGULARITIES,
    "C3": AP_IRREGULARITIES,
    "C4": AP_IRREGULARITIES,
    "C5": AP_IRREGULARITIES,
    "C6": AP_IRREGULARITIES,
    "C7": "13:69E-1.18 (interpretation)",
    "C9": "13:69F-31.8(a)",
    "C11": "13:69F-31.8(c)",
    "D3": "13:69F-31.8(a) (interpretation)",
    "R1": "13:69F-31.8(d) intent (interpretation)",
    "X1": "13:69F-31.8(d)2 by analogy (interpretation)",
    "X2": "13:69F-31.8(d)2 by analogy (interpretation)",
    "Q1": "13:69F-31 shuffle, by analogy with 40.4(a) (interpretation; text not in regs/)",
    "Q2": "13:69F-31 shuffle, by analogy with 40.4(a) (interpretation; text not in regs/)",
    "Q3": "13:69F-31 shuffle, by analogy with 40.4(a) (interpretation; text not in regs/)",
    "L1": "13:69F-31.8(a) (interpretation)",
    "L2": "13:69F-31.8(d)2",
    "L3": "13:69F-31.8(a) (interpretation)",
}


class AsiaPoker(Engine):
    """Asia Poker."""

    name = "asia_poker"
    profile = GameProfile("asia_poker", "Asia Poker", 6, 7, 7, 0, ("manual_shoe",), False)
    game_options: ClassVar[tuple[GameOption, ...]] = (
        GameOption(
            "ap_start",
            "operator",
            choices=("operator", "computer"),
            note='Who selects the deal\'s starting position (31.11, A1): "operator" (dice or a '
            'number sent as starting_position) or "computer" (the controller draws it).',
        ),
        GameOption(
            "ap_numbering",
            "from_dealer_left",
            choices=("from_dealer_left", "from_dealer_right"),
            note="How the betting positions are numbered (A1).",
        ),
    )
    rules = RULES
    citations = CITATIONS
    round_states = ROUND_STATES
    deals_every_position = True  # 31.8(c)
    tracked_counts_are_the_hands = True  # S4 decides alike whoever holds the wrong count
    stub_rule = "S4"
    misdeal_rule = "S4"
    misdeal_reshuffles = False

    def __init__(self, spec: TableSpec, random_source: Any = None) -> None:
        if random_source is None and spec.options.ap_start == "computer":
            raise ValueError("ap_start computer: the engine needs a random_source (A1, 31.11(c))")
        super().__init__(spec, random_source)

    @classmethod
    def composition_for(cls, options: TableOptions) -> Composition:
        return deck_with_joker()

    @classmethod
    def chart(cls) -> MachineDefinition:
        return chart(
            cls.name,
            ROUND_STATES,
            [
                # A1: no card before the start is known; then 31.8(c)'s deal from it
                ("choose_start", ("starting_position",), "dealing", ("A1_start_in_range",)),
                # I7: determined again before any card, only where the table allows it
                (
                    "choose_start",
                    ("dealing",),
                    "dealing",
                    ("A1_start_in_range", "A1_start_may_be_determined_again"),
                ),
                ("complete_deal", ("dealing",), "play", ()),
            ],
            first_state="starting_position",
        )

    def A1_start_in_range(self, key: str = "number", value: int = 1) -> bool:
        """A1 (31.11(b)): three dice total 3 to 18; a number is 1 to 7."""
        low, high = A1_RANGES[key]
        return low <= value <= high

    def A1_start_may_be_determined_again(self, key: str = "number", value: int = 1) -> bool:
        """A1 (interpretation I7): 31.8(b) determines the start once, before the deal; a
        second determination before any card replaces it only where the table allows it."""
        rnd = self.round
        return (
            self.interp.asia_poker_start_redetermined_before_first_card
            and rnd is not None
            and not rnd.started
            and not rnd.blocked
        )

    def _on_starting_position(self, ev: dict[str, Any]) -> list[Decision]:
        key = "dice" if "dice" in ev else "number"
        value: int = ev[key]
        if self.options.ap_start == "computer":
            return [
                self._rejected(
                    "starting_position: this table draws it itself (ap_start computer)", "A1"
                )
            ]
        again = self.state == "dealing" and self.A1_start_may_be_determined_again(key, value)
        if self.state != "starting_position" and not again:
            if self.state == "dealing" and self.round is not None and not self.round.started:
                # I7: the start was determined for this deal; the first determination stands
                return [
                    self._rejected(
                        "starting_position: the deal's starting position was already "
                        "determined (31.8(b)); it stands",
                        "A1",
                    )
                ]
            return [
                self._rejected(
                    f"starting_position: expected after bets_closed, state is {self.state}", "A1"
                )
            ]
        return self._set_start(
            key, value, f"dice total {value}" if key == "dice" else f"number {value}"
        )

    def _set_start(self, key: str, value: int, source: str) -> list[Decision]:
        """A1: count counterclockwise from the dealer as one; deal clockwise from there.

        The chart's condition on `choose_start` (`A1_start_in_range`) is the one range check:
        a dice total or number out of range leaves the round waiting for a good one.
        """
        rnd = self.round
        assert rnd is not None
        if not self._model.trigger("choose_start", key, value):
            low, high = A1_RANGES[key]
            return [self._rejected(f"{key}: must be {low} to {high}, not {value}", "A1")]
        k = (value - 1) % 7  # 0 = the dealer, k = the k-th position counterclockwise from it
        if k == 0:
            start = DEALER
        elif self.options.ap_numbering == "from_dealer_left":
            start = str(7 - k)
        else:
            start = str(k)
        clockwise = ["1", "2", "3", "4", "5", "6", DEALER]
        if self.options.ap_numbering == "from_dealer_right":
            clockwise = ["6", "5", "4", "3", "2", "1", DEALER]
        first = clockwise.index(start)
        rotation = clockwise[first:] + clockwise[:first]
        rnd.order = rotation * 7  # 31.8(c): all seven positions, wagered or not
        rnd.expected = dict.fromkeys(rotation, 7)
        rnd.start_position = start
        position: int | str = int(start) if start.isdigit() else start
        # A1 (31.11(b), (c)): the start is a decision whatever chose it (dice, a number the
        # dealer entered, or the controller's draw), so the journal shows where each deal began.
        return [
            self._d(
                "starting_position",
                "A1",
                f"{source}: the deal starts at {'the dealer' if k == 0 else 'position ' + start}",
                position=position,
            )
        ]

    def _draw_number(self) -> int:
        assert self._random_source is not None  # checked when the engine was built
        return self._random_source(7) + 1

    class Deal(DealRules["AsiaPoker"]):
        """Asia Poker's deal: the starting position first (A1), seven hands of seven (S4)."""

        def bets_closed(self, rnd: Round) -> list[Decision]:
            if self.game.options.ap_start == "computer":
                number = self.game._draw_number()
                return self.game._set_start(
                    "number", number, f"number {number} drawn by the controller"
                )
            return []  # the deal waits for the dealer's starting_position (A1)

        def misdeal(self, target: str, count: int) -> list[Decision]:
            """S4 (31.8(d)2, 31.14): a position with more or less than seven voids all."""
            rnd = self.game.round
            assert rnd is not None
            if rnd.void_rule is not None:
                return []
            return self.game._void_round(
                "S4", f"{target} holds {count} cards, not seven", reshuffle=False
            )

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            # 31.8(d)2, whoever holds it
            return self.game._void_round("S4", counted, reshuffle=False)

    class Stub(StubRules["AsiaPoker"]):
        """Asia Poker's stub: four cards left of the 53 (S4), whoever holds a wrong count."""

        def expected(self, set_aside: int) -> int | None:
            # S4: 53 - 7 x 7 = 4, less any card set aside this round (a C1 discard).
            return self.game.composition.size - 49 - set_aside

        def misdeal_keeps_the_deck(self, misdealt: bool, adds_up: bool) -> bool:
            return misdealt  # S4 (31.8(d)2): a misdeal voids, no misdeal removes

    class Decks(DeckRules["AsiaPoker"]):
        """Asia Poker's decks: shuffled after every round unless configured otherwise."""

        def shuffles_every_round(self) -> bool:
            return self.game.interp.asia_poker_shuffles_every_round  # D3 (interpretation)
