"""5 Card Hi-Lo (N.J.A.C. 13:69F-40; 13:69E-1.13Z): five cards to each player and the
dealer, face down, from a manual shoe, the hand or an automated dealing shoe (stacks of
five), one or two alternating decks, a stub count every five rounds (S1).

Everything this game adds to the core engine is here, as hooks the core calls by name.
"""

from __future__ import annotations

from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import DealRules, StubRules
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.rules import METHODS, Citation, Rule
from tablectl.controller.engine.table import GameProfile

#: the rules of this game alone (docs/rules.md: M1-M3, 40.12(d))
RULES = (
    Rule("M1", "HILO: a player dealt the wrong number of cards", "13:69F-40.12(d)"),
    Rule("M2", "HILO: the dealer dealt four cards gets a fifth", "13:69F-40.12(d)"),
    Rule("M3", "HILO: any other misdeal to the dealer", "13:69F-40.12(d)"),
    Rule(
        "M7",
        "HILO: a misdeal check asked for, or a fifth dealer card ordered, and the round "
        "collected without it: all hands void, reshuffle",
        "13:69F-40.12(d), 40.7(f)2 (interpretation)",
    ),
)
#: this game's citations of the core's rules (subchapter 40; 13:69E-1.13Z the table)
CITATIONS: dict[str, Citation] = {
    "C1": "13:69F-40.12(a)",
    "C2": "13:69F-40.12(a)",
    "C3": "13:69F-40.12(c)",
    "C4": "13:69F-40.12(e)",
    "C5": "13:69F-40.12(f)",
    "C6": "13:69F-40.12(g)",
    "C7": "13:69F-40.9(f); 13:69E-1.18",
    "C9": {
        "manual_shoe": "13:69F-40.7(b)",
        "hand": "13:69F-40.8(b)3",
        "automated_shoe": "13:69F-40.9(b)2",
    },
    "C11": "13:69E-1.13Z(b)1",
    "S1": {
        "manual_shoe": "13:69F-40.7(f)",
        "hand": "13:69F-40.8(e)",
        "automated_shoe": "13:69F-40.9(e)",
    },
    "S2": "13:69F-40.9(f)",
    "S3": "13:69F-40.7(f)2",
    "D1": "13:69F-40.2(b)",
    "D2": "13:69F-40.2(b)5",
    "D3": "13:69F-40.4(a)",
    "D4": "13:69F-40.8(b)1",
    "R1": "13:69F-40.7(f) intent (interpretation)",
    "X1": "13:69F-40.12(f) by analogy (interpretation)",
    "X2": "13:69F-40.12(f) by analogy (interpretation)",
    "Q1": "13:69F-40.4(a); 13:69E-1.18 (interpretation)",
    "Q2": "13:69F-40.4(a); 13:69E-1.18 (interpretation)",
    "Q3": "13:69F-40.4(a); 13:69E-1.18 (interpretation)",
    "L1": "13:69F-40.6(b)",
    "L2": "13:69F-40.12(d)",
    "L3": "13:69F-40.4(a)",
}


class FiveCardHiLo(Engine):
    """5 Card Hi-Lo."""

    name = "five_card_hilo"
    profile = GameProfile("five_card_hilo", "5 Card Hi-Lo", 7, 5, 5, 0, METHODS, True)
    rules = RULES
    citations = CITATIONS
    counts_the_stub = True

    @classmethod
    def chart(cls) -> MachineDefinition:
        # M7: a round is not collected with its misdeal check unanswered (or M2's fifth
        # dealer card not dealt); the collection voids it first
        return chart(
            cls.name,
            cls.round_states,
            [("complete_deal", ("dealing",), "play", ())],
            collect_rules=("M7_misdeal_remedy_done",),
        )

    def M7_misdeal_remedy_done(self) -> bool:
        """M7 (40.12(d), 40.7(f)2): the check the dealer was asked for is answered and the
        dealer's ordered fifth card (M2) dealt before the round is collected (a void round
        needs neither)."""
        rnd = self.round
        if rnd is None or self.state == "void":
            return True
        # a fifth card dealt from the hand unread cannot be seen: only a read deal's counts
        return not (rnd.check_pending or (rnd.extra_dealer_cards and rnd.cards_tracked))

    class Deal(DealRules["FiveCardHiLo"]):
        """5 Card Hi-Lo's deal: five cards each and the dealer's; M1-M3, M7."""

        def unfinished_remedy(self) -> list[Decision]:
            rnd = self.game.round
            if self.game.M7_misdeal_remedy_done() or rnd is None:
                return []
            # M7: no one can say now whose hand was wrong (or the dealer's hand holds four):
            # 40.12(d)'s remedy that needs no answer, all hands void and the cards reshuffled
            what = (
                "the misdeal check was never answered"
                if rnd.check_pending
                else "the dealer's fifth card (M2) was never dealt"
            )
            return self.game._void_round("M7", f"round {rnd.number} was collected but {what}")

        def plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            rnd.order = [*players, DEALER] * 5  # 40.7(d), 40.8(c)
            rnd.stacks = [(p, 5) for p in players] + [(DEALER, 5)]  # 40.9(c)
            rnd.expected = dict.fromkeys(players, 5)
            rnd.expected[DEALER] = 5
            rnd.planned_cards = sum(rnd.expected.values())

        def misdeal(self, target: str, count: int) -> list[Decision]:
            """40.12(d): a player's wrong count voids that hand (M1); the dealer's four cards
            get a fifth (M2); any other misdeal to the dealer voids all and reshuffles (M3)."""
            rnd = self.game.round
            assert rnd is not None
            if target == DEALER:
                if count == 4:
                    # M2: the dealer's fifth card completes the hand; no void.
                    rnd.extra_dealer_cards = 1
                    return [
                        self.game._d("deal_dealer_card", "M2", "the dealer was dealt four cards")
                    ]
                # M3: any other misdeal to the dealer voids every hand.
                return self.game._void_round("M3", f"the dealer was dealt {count} cards, not five")
            # M1: only that player's hand is void.
            position = int(target)
            rnd.void_hands.add(position)
            return [
                self.game._d(
                    "void_hand",
                    "M1",
                    f"position {position} was dealt {count} cards, not five",
                    position=position,
                )
            ]

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            # M1/M2/M3 (40.12(d)) depend on whose hand is wrong, which a count cannot tell
            # (a skipped position and a short dealer give the same count): never an order on
            # a guess; the dealer checks the hands and misdeal_reported decides.
            rnd.order = []  # nor is a later card placed by what is left of the order
            rnd.check_pending = True  # M7: answered by misdeal_reported before the collection
            return [
                self.game._d(
                    "misdeal_check_required",
                    "M1",
                    f"{counted}: check the hands and report the misdealt one",
                )
            ]

    class Stub(StubRules["FiveCardHiLo"]):
        """5 Card Hi-Lo's stub count: the counting shuffler's exemption (S2)."""

        def count_exempts(self) -> bool:
            """S2 (40.9(f)): a counting shuffler exempts only when dealing from an ADS."""
            return (
                self.game.method == "automated_shoe"
                or not self.game.interp.hilo_counting_exemption_needs_ads
            )
