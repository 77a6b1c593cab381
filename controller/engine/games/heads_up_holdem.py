"""Heads Up Hold'em (N.J.A.C. 13:69F-39; 13:69E-1.13Z): two cards to each player and the
dealer and a five-card board, face down, from a manual shoe, the hand or an automated
dealing shoe (the board's stack of five first), one or two alternating decks, a stub
count every five rounds (S1) whose sum counts the board (39.7(f)2).

Everything this game adds to the core engine is here, as hooks the core calls by name.
"""

from __future__ import annotations

from typing import Any

from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import DealRules, StubRules
from tablectl.controller.engine.ledger import COMMUNITY, DEALER
from tablectl.controller.engine.rules import METHODS, Citation, Rule
from tablectl.controller.engine.table import GameProfile

#: the rules of this game alone (docs/rules.md: M4, M5)
RULES = (
    Rule(
        "M4",
        "HUH: a hand or the community dealt the wrong number of cards",
        "13:69F-39.12(c), 39.7(f)2",
    ),
    Rule("M5", "HUH: a dealer card exposed before the reveal", "13:69F-39.12(d)"),
)
#: this game's citations of the core's rules (subchapter 39; 13:69E-1.13Z the table)
CITATIONS: dict[str, Citation] = {
    "C1": "13:69F-39.12(a)",
    "C2": "13:69F-39.12(a)",
    "C3": "13:69F-39.12(b)",
    "C4": "13:69F-39.12(e)",
    "C5": "13:69F-39.12(f)",
    "C6": "13:69F-39.12(g)",
    "C7": {
        "manual_shoe": "13:69F-39.7(g)",
        "hand": "13:69F-39.8(f)",
        "automated_shoe": "13:69F-39.9(f)",
    },
    "C9": {
        "manual_shoe": "13:69F-39.7(b)",
        "hand": "13:69F-39.8(b)3",
        "automated_shoe": "13:69F-39.9(b)2",
    },
    "C11": "13:69E-1.13Z(a) (Heads Up Hold'em)",
    "S1": {
        "manual_shoe": "13:69F-39.7(f)",
        "hand": "13:69F-39.8(e)",
        "automated_shoe": "13:69F-39.9(e)",
    },
    "S2": {
        "manual_shoe": "13:69F-39.7(g)",
        "hand": "13:69F-39.8(f)",
        "automated_shoe": "13:69F-39.9(f)",
    },
    "S3": "13:69F-39.7(f)2",
    "D1": "13:69F-39.2(b)",
    "D2": "13:69F-39.2(b)5",
    "D3": "13:69F-39.4(a)",
    "D4": "13:69F-39.8(b)1",
    "R1": "13:69F-39.7(f) intent (interpretation)",
    "X1": "13:69F-39.12(f) by analogy (interpretation)",
    "X2": "13:69F-39.12(f) by analogy (interpretation)",
    "Q1": "13:69F-39.4(a); 13:69E-1.18 (interpretation)",
    "Q2": "13:69F-39.4(a); 13:69E-1.18 (interpretation)",
    "Q3": "13:69F-39.4(a); 13:69E-1.18 (interpretation)",
    "L1": "13:69F-39.6(b)",
    "L2": "13:69F-39.12(c)",
    "L3": "13:69F-39.4(a)",
}


class HeadsUpHoldem(Engine):
    """Heads Up Hold'em."""

    name = "heads_up_holdem"
    profile = GameProfile("heads_up_holdem", "Heads Up Hold'em", 6, 2, 2, 5, METHODS, True)
    rules = RULES
    citations = CITATIONS
    counts_the_stub = True
    misdeal_rule = "M4"  # 39.12(c): any wrong count, a player's, the dealer's or the board's

    def _on_dealer_card_exposed(self, ev: dict[str, Any]) -> list[Decision]:
        if not self._in_round():
            return [self._rejected("dealer_card_exposed: no round is in play")]
        # M5: a dealer card exposed before the reveal voids every hand.
        return self._void_round("M5", "a dealer card was exposed before the reveal")

    class Deal(DealRules["HeadsUpHoldem"]):
        """Heads Up Hold'em's deal: two cards each and the dealer's, the board of five (M4)."""

        def plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            expected = dict.fromkeys(players, 2)
            expected[DEALER] = 2
            holes = [*players, DEALER] * 2
            if self.game.method == "hand":
                rnd.order = [*holes, *[COMMUNITY] * 5]  # 39.8(c), 39.10(c): board as play goes
            else:
                rnd.order = [*[COMMUNITY] * 5, *holes]  # 39.10(c), 39.7(d)
                expected[COMMUNITY] = 5
            rnd.stacks = [(COMMUNITY, 5)] + [(p, 2) for p in players] + [(DEALER, 2)]  # 39.9(c)
            rnd.expected = expected
            rnd.planned_cards = sum(expected.values()) + (0 if COMMUNITY in expected else 5)

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            return self.game._void_round("M4", counted)  # 39.12(c): whoever's hand it is, all void

    class Stub(StubRules["HeadsUpHoldem"]):
        """Heads Up Hold'em's stub count: exempt with a counting shuffler (S2)."""

        def count_exempts(self) -> bool:
            return True  # S2 (39.7(g), 39.8(f), 39.9(f)): with every dealing method
