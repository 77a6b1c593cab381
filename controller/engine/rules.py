"""The rule catalogue: the one place that maps a rule ID (docs/rules.md) to its citation.

Every decision the engine emits takes its ``rule`` text from :func:`citation`, so a
regulator's lab can trace any decision back to the regulation (docs/rules.md).

This module holds the rules the core enforces for every game (``CORE_RULES``), each with
the citation a game gets when it names none of its own. A game's own rules and its own
citations of the core's rules live in the game's module (docs/games.md): its ``rules``
(a tuple of :class:`Rule`) and its ``citations`` (rule ID -> the citation, or dealing
method -> citation where the regulations repeat a rule in each dealing procedure, e.g.
40.7(f), 40.8(e), 40.9(e)). :data:`CATALOGUE` looks any rule up by its ID, the core's and
every loaded game's alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tablectl.controller.engine.registry import GameLoadError, find_game, loaded_games

METHODS = ("manual_shoe", "hand", "automated_shoe")
#: a game's citation of a rule: one text, or one per dealing method (METHODS)
Citation = str | Mapping[str, str]
RULE_ID_PATTERN = r"^[A-Z][0-9]{1,2}$"  # metrics label rule IDs of this shape only


@dataclass(frozen=True)
class Rule:
    """One rule of docs/rules.md: its ID, a one-line summary and its citation.

    ``default`` is the citation of a game that gives none of its own for this rule.
    """

    rule_id: str
    summary: str
    default: str


# Q: the texts require the cards "randomly intermixed" (2C.4(a), 40.4(a), 39.4(a)); each
# game cites its own paragraph (controller/engine/games/GAME.py).
_SHUFFLED = "13:69F-2C.4(a), 40.4(a), 39.4(a); 13:69E-1.18 (interpretation)"

CORE_RULES: dict[str, Rule] = {
    r.rule_id: r
    for r in [
        Rule(
            "C1",
            "the first card found face up while dealing is discarded; the next takes its place",
            "13:69F-2C.14(a), 40.12(a), 39.12(a)",
        ),
        Rule(
            "C2",
            "a second card found face up in the same round voids the round; reshuffle",
            "13:69F-2C.14(a), 40.12(a), 39.12(a)",
        ),
        Rule(
            "C3",
            "a card drawn in error without its face exposed is used as the next card",
            "13:69F-2C.14(b), 40.12(c), 39.12(b)",
        ),
        Rule(
            "C4",
            "the shuffler jammed, stopped or did not complete its cycle: reshuffle",
            "13:69F-2C.14(i), 40.12(e), 39.12(e)",
        ),
        Rule(
            "C5",
            "the automated dealing shoe failed during a round: void the round, reshuffle",
            "13:69F-40.12(f), 39.12(f)",
        ),
        Rule(
            "C6",
            "another shuffling or dealing method only after the device is removed",
            "13:69F-2C.14(j), 40.12(g), 39.12(g)",
        ),
        Rule(
            "C7",
            "a counting shuffler reported a count other than the deck size: remove the deck",
            "13:69E-1.18 (interpretation of 40.9(f), 39.7(g))",
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
        ),
        Rule(
            "S1",
            "the stub is counted at least once every five rounds (per deck)",
            "13:69F-40.7(f), 39.7(f)",
        ),
        Rule(
            "S2",
            "a counting shuffler's full count replaces the stub count (in some games: with an ADS)",
            "13:69F-40.9(f), 39.7(g)",
        ),
        Rule(
            "S3",
            "a stub count that does not add up: misdeal voids; missing cards remove the deck",
            "13:69F-40.7(f)2, 39.7(f)2",
        ),
        Rule(
            "H7", "no face-down card in any output before it is revealed", "13:69F-2C.14(k); GLI-29"
        ),
        Rule(
            "D1",
            "two decks alternate every round; the next deck must have been shuffled",
            "13:69F-40.2(b), 39.2(b)",
        ),
        Rule(
            "D2",
            "cards of only one deck in the discard rack at a time",
            "13:69F-40.2(b)5, 39.2(b)5",
        ),
        Rule(
            "D3",
            "the deck is shuffled after every round",
            "13:69F-40.4(a), 39.4(a)",
        ),
        Rule(
            "D4",
            "dealing from the hand needs an automated shuffling device",
            "13:69F-40.8(b)1, 39.8(b)1",
        ),
        Rule(
            "R1",
            "the discard rack did not rise by the cards that left the shoe",
            "13:69E-1.10D(e); 40.7(f) intent (interpretation)",
        ),
        Rule(
            "X1",
            "tablectl restarted mid-round: resume where the cards allow it, else void",
            "13:69F-40.12(f), 39.12(f), 2C.14(h) by analogy (interpretation)",
        ),
        Rule(
            "X2",
            "the card-reading shoe sent a frame it could not decode: void the round, reshuffle",
            "13:69F-40.12(f), 39.12(f), 2C.14(h) by analogy (interpretation)",
        ),
        # Q: shuffle integrity (controller/engine/shuffle_integrity.py, docs/shuffle-integrity.md).
        # The texts require the cards "randomly intermixed" (2C.4(a), 40.4(a), 39.4(a)) and
        # the deck's integrity kept (13:69E-1.18); how to tell from the dealt order is ours.
        Rule(
            "Q1",
            "a run of cards came out in the same order as after an earlier shuffle: "
            "surveillance told (interpretation)",
            _SHUFFLED,
        ),
        Rule(
            "Q2",
            "the deal kept far more adjacent pairs of the previous deal than a shuffle "
            "leaves: surveillance told (interpretation)",
            _SHUFFLED,
        ),
        Rule(
            "Q3",
            "over a gaming day, ranks landed on a position unlike the deck's composition "
            "(chi-square): `tablectl journal seat-bias` (interpretation)",
            _SHUFFLED,
        ),
        # L: a round ends only with an outcome (docs/rules.md, "Every card accounted for");
        # each game cites its own paragraph (controller/engine/games/GAME.py)
        Rule(
            "L1",
            "'no more bets' once a round: the round in play ends before another opens",
            "13:69F-2C.5(f), 40.6(b), 39.6(b), 31.8(a)",
        ),
        Rule(
            "L2",
            "a round collected before its deal is complete: its hands are void",
            "13:69F-2C.14(g), 40.12(d), 39.12(c), 31.8(d)2",
        ),
        Rule(
            "L3",
            "the cards of a round in play are not shuffled until the round ends",
            "13:69F-40.4(a), 39.4(a)",
        ),
        Rule("E0", "the event does not follow docs/events.md", "docs/events.md"),
    ]
}


class _Catalogue(Mapping[str, Rule]):
    """Every rule by its ID: the core's, then each loaded game's own (docs/games.md)."""

    def __getitem__(self, rule_id: str) -> Rule:
        return _merged(loaded_games())[rule_id]

    def __iter__(self) -> Iterator[str]:
        return iter(_merged(loaded_games()))

    def __len__(self) -> int:
        return len(_merged(loaded_games()))


@lru_cache(maxsize=8)
def _merged(games: tuple[Any, ...]) -> dict[str, Rule]:
    merged = dict(CORE_RULES)
    for game in games:
        for rule in game.rules:
            merged.setdefault(rule.rule_id, rule)
    return merged


#: every rule, the core's and the loaded games' own, by rule ID
CATALOGUE: Mapping[str, Rule] = _Catalogue()


def check_game(game: Any) -> None:
    """Refuse a game whose rules or citations the catalogue could not trace: GameLoadError
    naming the game and the rule. Run when an installed game is loaded (the registry)."""
    name = game.name
    known = dict(CATALOGUE)
    own: dict[str, Rule] = {}
    for rule in game.rules:
        if not isinstance(rule, Rule) or not re.match(RULE_ID_PATTERN, rule.rule_id):
            raise GameLoadError(
                f"game {name!r}: rule {rule!r} is not a Rule with an ID like 'K1' "
                "(a capital letter and one or two digits)"
            )
        other = known.get(rule.rule_id)
        if other is not None and other != rule:
            raise GameLoadError(
                f"game {name!r}: rule {rule.rule_id} is already the catalogue's "
                f"({other.summary!r}): give the game's rule an ID of its own"
            )
        own[rule.rule_id] = rule
    for rule_id, cited in game.citations.items():
        if rule_id not in known and rule_id not in own:
            raise GameLoadError(f"game {name!r}: cites rule {rule_id!r}, which no catalogue has")
        texts = [cited] if isinstance(cited, str) else list(cited.values())
        methods = [] if isinstance(cited, str) else [m for m in cited if m not in METHODS]
        if methods or not all(isinstance(text, str) and text for text in texts):
            raise GameLoadError(
                f"game {name!r}: the citation of {rule_id} must be a text or one per "
                f"dealing method ({', '.join(METHODS)}), got {cited!r}"
            )


def citation(rule_id: str, game: str, method: str) -> str:
    """The regulation text the decision rests on, for this game and dealing method: the
    game's own citation of the rule (its module's ``citations``), else the rule's."""
    cited = find_game(game).citations.get(rule_id)
    if isinstance(cited, str):
        return cited
    if cited is not None and method in cited:
        text: str = cited[method]
        return text
    return CATALOGUE[rule_id].default
