"""The games a table can play, found by name.

Each game is a subclass of the engine (controller/games/, one module per game) that
registers itself here by its ``name`` when its module is imported; the core looks a game
up by the name in the table spec and never names one. A game outside the package (a
house variant, a test's toy game) registers the same way: define the subclass.
"""

from __future__ import annotations

import importlib
from typing import Any

_GAMES: dict[str, Any] = {}
_BUILTIN = "tablectl.controller.games"


def register(game: Any) -> None:
    """Make ``game`` (an Engine subclass with a ``name``) known to tables and the CLI."""
    _GAMES[game.name] = game


def _load_builtin() -> None:
    # The bundled games register on import; importing them here lets the core modules
    # that look games up stay free of any import of a game. They are listed first, in
    # the package's order, whatever imported a game module before.
    bundled = [game.name for game in importlib.import_module(_BUILTIN).BUNDLED]
    for name in [*bundled, *(n for n in list(_GAMES) if n not in bundled)]:
        _GAMES[name] = _GAMES.pop(name)


def find_game(name: str) -> Any:
    """The game class registered as ``name``; KeyError when there is none."""
    if name not in _GAMES:
        _load_builtin()
    return _GAMES[name]


def game_names() -> tuple[str, ...]:
    """Every registered game's name: the bundled four first, then any added."""
    _load_builtin()
    return tuple(_GAMES)
