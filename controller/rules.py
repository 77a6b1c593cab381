"""The rule catalogue: the one place that maps a rule ID (docs/rules.md) to its citation.

Every decision the engine emits takes its ``rule`` text from :func:`citation`, so a
regulator's lab can trace any decision back to the regulation (docs/rules.md).
Citations depend on the game and, for some rules, on the dealing method, because the
regulations repeat a rule in each dealing procedure (e.g. 40.7(f), 40.8(e), 40.9(e)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
METHODS = ("manual_shoe", "hand", "automated_shoe")


@dataclass(frozen=True)
class Rule:
    """One rule of docs/rules.md: its ID, a one-line summary and its citations."""

    rule_id: str
    summary: str
    default: str
    by_game: dict[str, str] = field(default_factory=dict)
    by_game_method: dict[tuple[str, str], str] = field(default_factory=dict)

    def citation(self, game: str, method: str) -> str:
        return self.by_game_method.get((game, method), self.by_game.get(game, self.default))


def _per_method(game: str, manual: str, hand: str, ads: str) -> dict[tuple[str, str], str]:
    return {(game, "manual_shoe"): manual, (game, "hand"): hand, (game, "automated_shoe"): ads}


_T, _H, _U, _A = GAMES
# regs/README.md: Asia Poker's irregularities are 13:69F-31.14, cited but not in regs/.
AP_IRREGULARITIES = "13:69F-31.14 (interpretation; text not in regs/)"

CATALOGUE: dict[str, Rule] = {
    r.rule_id: r
    for r in [
        Rule(
            "C1",
            "the first card found face up while dealing is discarded; the next takes its place",
            "13:69F-2C.14(a), 40.12(a), 39.12(a)",
            {
                _T: "13:69F-2C.14(a)",
                _H: "13:69F-40.12(a)",
                _U: "13:69F-39.12(a)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C2",
            "a second card found face up in the same round voids the round; reshuffle",
            "13:69F-2C.14(a), 40.12(a), 39.12(a)",
            {
                _T: "13:69F-2C.14(a)",
                _H: "13:69F-40.12(a)",
                _U: "13:69F-39.12(a)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C3",
            "a card drawn in error without its face exposed is used as the next card",
            "13:69F-2C.14(b), 40.12(c), 39.12(b)",
            {
                _T: "13:69F-2C.14(b)",
                _H: "13:69F-40.12(c)",
                _U: "13:69F-39.12(b)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C4",
            "the shuffler jammed, stopped or did not complete its cycle: reshuffle",
            "13:69F-2C.14(i), 40.12(e), 39.12(e)",
            {
                _T: "13:69F-2C.14(i)",
                _H: "13:69F-40.12(e)",
                _U: "13:69F-39.12(e)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C5",
            "the automated dealing shoe failed during a round: void the round, reshuffle",
            "13:69F-40.12(f), 39.12(f)",
            {
                _H: "13:69F-40.12(f)",
                _U: "13:69F-39.12(f)",
                _T: "13:69F-2C.14(h) by analogy (interpretation)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C6",
            "another shuffling or dealing method only after the device is removed",
            "13:69F-2C.14(j), 40.12(g), 39.12(g)",
            {
                _T: "13:69F-2C.14(j)",
                _H: "13:69F-40.12(g)",
                _U: "13:69F-39.12(g)",
                _A: AP_IRREGULARITIES,
            },
        ),
        Rule(
            "C7",
            "a counting shuffler reported a count other than the deck size: remove the deck",
            "13:69E-1.18 (interpretation of 40.9(f), 39.7(g))",
            {
                _H: "13:69F-40.9(f); 13:69E-1.18",
                _T: "13:69E-1.18 (interpretation)",
                _A: "13:69E-1.18 (interpretation)",
            },
            {
                **_per_method(_U, "13:69F-39.7(g)", "13:69F-39.8(f)", "13:69F-39.9(f)"),
            },
        ),
        Rule(
            "C8",
            "a card not in the composition, or one more often than it holds: void, remove",
            "13:69E-1.17, 1.18 (interpretation)",
        ),
        Rule(
            "C9",
            "a card drawn or stack dispensed before 'no more bets'",
            "13:69F-40.7(b), 39.7(b), 31.8(a)",
            {_A: "13:69F-31.8(a)", _T: "13:69F-2C.6(d) (interpretation)"},
            {
                **_per_method(_H, "13:69F-40.7(b)", "13:69F-40.8(b)3", "13:69F-40.9(b)2"),
                **_per_method(_U, "13:69F-39.7(b)", "13:69F-39.8(b)3", "13:69F-39.9(b)2"),
            },
        ),
        Rule(
            "C10",
            "after a deck is removed no deal until new cards are received and shuffled",
            "13:69E-1.18 (interpretation)",
        ),
        Rule(
            "C11",
            "no more positions than the game allows",
            "13:69E-1.10D(a), 1.13Z, 13:69F-31.8(c)",
            {
                _T: "13:69E-1.10D(a)",
                _H: "13:69E-1.13Z(b)1",
                _U: "13:69E-1.13Z(a) (Heads Up Hold'em)",
                _A: "13:69F-31.8(c)",
            },
        ),
        Rule(
            "S1",
            "the stub is counted at least once every five rounds (per deck)",
            "13:69F-40.7(f), 39.7(f)",
            {},
            {
                **_per_method(_H, "13:69F-40.7(f)", "13:69F-40.8(e)", "13:69F-40.9(e)"),
                **_per_method(_U, "13:69F-39.7(f)", "13:69F-39.8(e)", "13:69F-39.9(e)"),
            },
        ),
        Rule(
            "S2",
            "a counting shuffler's full count replaces the stub count (HILO: only with an ADS)",
            "13:69F-40.9(f), 39.7(g)",
            {_H: "13:69F-40.9(f)"},
            _per_method(_U, "13:69F-39.7(g)", "13:69F-39.8(f)", "13:69F-39.9(f)"),
        ),
        Rule(
            "S3",
            "a stub count that does not add up: misdeal voids; missing cards remove the deck",
            "13:69F-40.7(f)2, 39.7(f)2",
            {_H: "13:69F-40.7(f)2", _U: "13:69F-39.7(f)2"},
        ),
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
        Rule("M1", "HILO: a player dealt the wrong number of cards", "13:69F-40.12(d)"),
        Rule("M2", "HILO: the dealer dealt four cards gets a fifth", "13:69F-40.12(d)"),
        Rule("M3", "HILO: any other misdeal to the dealer", "13:69F-40.12(d)"),
        Rule(
            "M4",
            "HUH: a hand or the community dealt the wrong number of cards",
            "13:69F-39.12(c), 39.7(f)2",
        ),
        Rule("M5", "HUH: a dealer card exposed before the reveal", "13:69F-39.12(d)"),
        Rule("M6", "3C21: a player given no initial cards", "13:69F-2C.14(e), (g)"),
        Rule("H1", "the hole-card reader used before its daily inspection", "13:69E-1.10D(f)"),
        Rule(
            "H2", "hole card inserted with an up card other than A, K, Q, J, 10", "13:69F-2C.14(k)"
        ),
        Rule("H3", "hole card inserted before insurance closed (ace up)", "13:69F-2C.7(a)2"),
        Rule("H4", "the reader used before the bonus wagers are settled", "13:69F-2C.6(e)"),
        Rule("H5", "the reader malfunctioned: play continues without it", "13:69F-2C.14(l)"),
        Rule(
            "H6",
            "the reader contradicted the hole card read by the shoe: a malfunction",
            "13:69F-2C.14(l) (interpretation)",
        ),
        Rule(
            "H7", "no face-down card in any output before it is revealed", "13:69F-2C.14(k); GLI-29"
        ),
        Rule("G1", "a Three Card 21 shoe holds 6 to 8 decks", "13:69F-2C.2(a)"),
        Rule(
            "G2",
            "the first card after loading the shoe or a new dealer is burned",
            "13:69F-2C.6(c)",
        ),
        Rule("G3", "the cut card: complete the round, then reshuffle", "13:69F-2C.4(h)"),
        Rule("G4", "Bart Carter: reshuffle once the rack holds about a deck", "13:69F-2C.4(h)2"),
        Rule(
            "G8",
            "the house reshuffles at its discretion, after the round in play",
            "13:69F-2C.4(h)1",
        ),
        Rule(
            "G5",
            "the shoe ran out mid-round: reshuffle the rack, burn, complete",
            "13:69F-2C.14(f)",
        ),
        Rule(
            "G6",
            "a card the dealer draws on a standing total is burned",
            "13:69F-2C.11(b), 2C.14(d)",
        ),
        Rule("G7", "the discard rack holds more than the shoe's cards", "13:69E-1.10D(e)"),
        Rule(
            "D1",
            "two decks alternate every round; the next deck must have been shuffled",
            "13:69F-40.2(b), 39.2(b)",
            {_H: "13:69F-40.2(b)", _U: "13:69F-39.2(b)"},
        ),
        Rule(
            "D2",
            "cards of only one deck in the discard rack at a time",
            "13:69F-40.2(b)5, 39.2(b)5",
            {_H: "13:69F-40.2(b)5", _U: "13:69F-39.2(b)5"},
        ),
        Rule(
            "D3",
            "the deck is shuffled after every round",
            "13:69F-40.4(a), 39.4(a)",
            {_H: "13:69F-40.4(a)", _U: "13:69F-39.4(a)", _A: "13:69F-31.8(a) (interpretation)"},
        ),
        Rule(
            "D4",
            "dealing from the hand needs an automated shuffling device",
            "13:69F-40.8(b)1, 39.8(b)1",
            {_H: "13:69F-40.8(b)1", _U: "13:69F-39.8(b)1"},
        ),
        Rule(
            "R1",
            "the discard rack did not rise by the cards that left the shoe",
            "13:69E-1.10D(e); 40.7(f) intent (interpretation)",
            {
                _T: "13:69E-1.10D(e) (interpretation)",
                _H: "13:69F-40.7(f) intent (interpretation)",
                _U: "13:69F-39.7(f) intent (interpretation)",
                _A: "13:69F-31.8(d) intent (interpretation)",
            },
        ),
        Rule(
            "X1",
            "tablectl restarted mid-round: resume where the cards allow it, else void",
            "13:69F-40.12(f), 39.12(f), 2C.14(h) by analogy (interpretation)",
            {
                _T: "13:69F-2C.14(h) by analogy (interpretation)",
                _H: "13:69F-40.12(f) by analogy (interpretation)",
                _U: "13:69F-39.12(f) by analogy (interpretation)",
                _A: "13:69F-31.8(d)2 by analogy (interpretation)",
            },
        ),
        Rule(
            "X2",
            "the card-reading shoe sent a frame it could not decode: void the round, reshuffle",
            "13:69F-40.12(f), 39.12(f), 2C.14(h) by analogy (interpretation)",
            {
                _T: "13:69F-2C.14(h) by analogy (interpretation)",
                _H: "13:69F-40.12(f) by analogy (interpretation)",
                _U: "13:69F-39.12(f) by analogy (interpretation)",
                _A: "13:69F-31.8(d)2 by analogy (interpretation)",
            },
        ),
        Rule(
            "L1",
            "'no more bets' once a round: the round in play ends before another opens",
            "13:69F-2C.5(f), 40.6(b), 39.6(b), 31.8(a)",
            {
                _T: "13:69F-2C.5(f)",
                _H: "13:69F-40.6(b)",
                _U: "13:69F-39.6(b)",
                _A: "13:69F-31.8(a) (interpretation)",
            },
        ),
        Rule(
            "L2",
            "a round collected before its deal is complete: its hands are void",
            "13:69F-2C.14(g), 40.12(d), 39.12(c), 31.8(d)2",
            {
                _T: "13:69F-2C.14(g) (interpretation)",
                _H: "13:69F-40.12(d)",
                _U: "13:69F-39.12(c)",
                _A: "13:69F-31.8(d)2",
            },
        ),
        Rule(
            "L3",
            "the cards of a round in play are not shuffled until the round ends",
            "13:69F-40.4(a), 39.4(a)",
            {
                _T: "13:69F-2C.4(a), (h)",
                _H: "13:69F-40.4(a)",
                _U: "13:69F-39.4(a)",
                _A: "13:69F-31.8(a) (interpretation)",
            },
        ),
        Rule("E0", "the event does not follow docs/events.md", "docs/events.md"),
    ]
}


def citation(rule_id: str, game: str, method: str) -> str:
    """The regulation text the decision rests on, for this game and dealing method."""
    return CATALOGUE[rule_id].citation(game, method)
