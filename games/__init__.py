"""The game author's API: what a game module may import from tablectl and override.

A game is a subclass of :class:`Engine` with its profile, options, rules, citations, round
chart, and its rules for each of the engine's rule families where they differ from the
defaults (:class:`DealRules`, :class:`StubRules`, :class:`DeckRules`, :class:`RackRules`,
:class:`ReaderRules`: subclasses named ``Deal``, ``Stub``, ``Decks``, ``Rack``, ``Reader`` on
the game's class, each reaching the table as ``self.game``), installed as a package that
names its class in the ``tablectl.games`` entry-point group (docs/games.md;
``examples/high-card-game`` is a worked example that imports nothing else of tablectl).
Everything here is covered by ``GAME_API_VERSION``; every other module of tablectl is internal
and may change in any release.

The version works as the driver API's (``tablectl.drivers.DRIVER_API_VERSION``): MAJOR changes
when a game written for the last one could misbehave (a hook renamed, a contract changed), MINOR
when something is added a game may use. A game says which it was written for
(``game_api = "2.0"`` on its class); the registry refuses a game of another major or of a later
minor, naming both versions. Game API 1 (one class overriding ``_plan``, ``_misdeal``, …) is
still served in this release, with a DeprecationWarning, and goes in tablectl 0.3.

The families' hooks (``Deal.plan``, ``Deal.uncertain_count``, …), ``chart`` and the class
attributes a game sets are listed in docs/games.md, "The contract".
"""

from __future__ import annotations

from tablectl.controller.engine.core import GAME_API_VERSION, Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import (
    DealRules,
    DeckRules,
    RackRules,
    ReaderRules,
    Rules,
    StubRules,
)
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.rules import Citation, Rule
from tablectl.controller.engine.table import GameOption, GameProfile

__all__ = [
    "DEALER",
    "GAME_API_VERSION",
    "Citation",
    "DealRules",
    "Decision",
    "DeckRules",
    "Engine",
    "GameOption",
    "GameProfile",
    "MachineDefinition",
    "RackRules",
    "ReaderRules",
    "Round",
    "Rule",
    "Rules",
    "StubRules",
    "chart",
]
