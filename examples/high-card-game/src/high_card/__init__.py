"""High Card: an example game for tablectl, installed as a package of its own.

One card, face down, to each wagered position and (unless the table says otherwise) one to
the dealer, from a card-reading manual shoe; the dealer turns them over and the highest card
wins. It is not a game of the New Jersey regulations: its "house rules" stand in for the
texts a real game's module would cite, and show where each piece of a game lives.

It imports tablectl's game API (``tablectl.games``) and nothing else of tablectl.
Everything the game adds to tablectl is in this module (docs/games.md, "The contract"):

- the class, a subclass of the core engine, whose ``name`` is the entry point's name
  (pyproject.toml: ``[project.entry-points."tablectl.games"] high_card = "high_card:HighCard"``);
- ``profile``: positions, cards per hand, dealing methods;
- ``game_options``: its own options, checked with the table's configuration;
- ``rules``: its own rules (K1), found by ID in tablectl's catalogue;
- ``citations``: its own citations of the core's rules (C1, C2, C11 ...);
- ``chart()``, and its rules of the deal where they differ from the default: ``Deal``, a
  subclass of ``DealRules`` (``plan``, ``uncertain_count``) that reaches the table as
  ``self.game``.

The core (faces found up, decks, shuffles, devices, the journal, the daemon) is tablectl's.
"""

from __future__ import annotations

from typing import ClassVar

from tablectl.games import (
    DEALER,
    Citation,
    DealRules,
    Decision,
    Engine,
    GameOption,
    GameProfile,
    MachineDefinition,
    Round,
    Rule,
    chart,
)

__all__ = ["CITATIONS", "RULES", "HighCard"]

HOUSE_RULES = "High Card house rules (example game)"

#: the rules of this game alone; an ID of its own, never one of the catalogue's
RULES = (
    Rule(
        "K1",
        "High Card: a hand dealt other than one card voids the round; reshuffle",
        f"{HOUSE_RULES} 4(b)",
    ),
)
#: the game's citations of the core's rules (the others cite the rule's own text)
CITATIONS: dict[str, Citation] = {
    "C1": f"{HOUSE_RULES} 4(a)",
    "C2": f"{HOUSE_RULES} 4(a)",
    "C11": f"{HOUSE_RULES} 2",
    "D3": f"{HOUSE_RULES} 3",
}


class HighCard(Engine):
    """High Card: one card each, highest wins."""

    name = "high_card"
    #: the game API this module is written for (tablectl.games.GAME_API_VERSION)
    game_api = "2.0"
    profile = GameProfile(
        "high_card", "High Card (example game)", 5, 1, 1, 0, ("manual_shoe",), False
    )
    game_options: ClassVar[tuple[GameOption, ...]] = (
        GameOption(
            "dealer_card",
            True,
            note="The dealer takes a card too (false: the players play against each other).",
        ),
    )
    rules = RULES
    citations = CITATIONS
    round_states = ("dealing", "showdown")
    misdeal_rule = "K1"

    @classmethod
    def chart(cls) -> MachineDefinition:
        return chart(cls.name, cls.round_states, [("complete_deal", ("dealing",), "showdown", ())])

    class Deal(DealRules["HighCard"]):
        """High Card's deal: one card each (and the dealer's); any wrong count is K1."""

        def plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            dealer = [DEALER] if self.game.options.dealer_card else []
            rnd.order = [*players, *dealer]
            rnd.expected = dict.fromkeys([*players, *dealer], 1)
            rnd.planned_cards = len(rnd.order)

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            # K1: whoever's hand it is, a wrong count voids every hand
            return self.game._void_round("K1", counted)
