"""Heads Up Hold'em (N.J.A.C. 13:69F-39; 13:69E-1.13Z): two cards to each player and the
dealer and a five-card board, face down, from a manual shoe, the hand or an automated
dealing shoe (the board's stack of five first), one or two alternating decks, a stub
count every five rounds (S1) whose sum counts the board (39.7(f)2).

Everything this game adds to the core engine is here, as hooks the core calls by name.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tablectl.controller.decisions import Decision
from tablectl.controller.engine import Engine, Round
from tablectl.controller.ledger import COMMUNITY, DEALER
from tablectl.controller.rules import METHODS
from tablectl.controller.table import GameProfile


class HeadsUpHoldem(Engine):
    """Heads Up Hold'em."""

    name = "heads_up_holdem"
    profile = GameProfile("heads_up_holdem", "Heads Up Hold'em", 6, 2, 2, 5, METHODS, True)
    game_options: ClassVar[tuple[str, ...]] = ("dual_deck",)
    counts_the_stub = True
    misdeal_rule = "M4"  # 39.12(c): any wrong count, a player's, the dealer's or the board's

    def _plan(self, rnd: Round) -> None:
        players = [str(p) for p in rnd.positions]
        expected = dict.fromkeys(players, 2)
        expected[DEALER] = 2
        holes = [*players, DEALER] * 2
        if self.method == "hand":
            rnd.order = [*holes, *[COMMUNITY] * 5]  # 39.8(c), 39.10(c): board as play goes
        else:
            rnd.order = [*[COMMUNITY] * 5, *holes]  # 39.10(c), 39.7(d)
            expected[COMMUNITY] = 5
        rnd.stacks = [(COMMUNITY, 5)] + [(p, 2) for p in players] + [(DEALER, 2)]  # 39.9(c)
        rnd.expected = expected
        rnd.planned_cards = sum(expected.values()) + (0 if COMMUNITY in expected else 5)

    def _uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
        return self._void_round("M4", counted)  # 39.12(c): whoever's hand it is, all void

    def _count_exempts(self) -> bool:
        return True  # S2 (39.7(g), 39.8(f), 39.9(f)): with every dealing method

    def _on_dealer_card_exposed(self, ev: dict[str, Any]) -> list[Decision]:
        if not self._in_round():
            return [self._rejected("dealer_card_exposed: no round is in play")]
        # M5: a dealer card exposed before the reveal voids every hand.
        return self._void_round("M5", "a dealer card was exposed before the reveal")
