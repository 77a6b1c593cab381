"""The game author's API: what a game module may import from tablectl and override.

A game is a subclass of :class:`Engine` with its profile, options, rules, citations, round
chart and the hooks it overrides, installed as a package that names its class in the
``tablectl.games`` entry-point group (docs/games.md; ``examples/high-card-game`` is a worked
example that imports nothing else of tablectl). Everything here is covered by
``GAME_API_VERSION``; every other module of tablectl is internal and may change in any release.

The version works as the driver API's (``tablectl.drivers.DRIVER_API_VERSION``): MAJOR changes
when a game written for the last one could misbehave (a hook renamed, a contract changed), MINOR
when something is added a game may use. A game says which it was written for
(``game_api = "1.0"`` on its class); the registry refuses a game of another major or of a later
minor, naming both versions.

The hooks a game overrides (``chart``, ``_plan``, ``_uncertain_count``, …) and the class
attributes it sets are listed in docs/games.md, "The contract".
"""

from __future__ import annotations

from tablectl.controller.engine.core import GAME_API_VERSION, Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.rules import Citation, Rule
from tablectl.controller.engine.table import GameOption, GameProfile

__all__ = [
    "DEALER",
    "GAME_API_VERSION",
    "Citation",
    "Decision",
    "Engine",
    "GameOption",
    "GameProfile",
    "MachineDefinition",
    "Round",
    "Rule",
    "chart",
]
