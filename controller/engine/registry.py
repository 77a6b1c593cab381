"""The games a table can play, found by name; packages add theirs through entry points.

Modelled on the driver registry (tablectl.drivers.registry, itself python-can's): the
bundled games are the package controller/engine/games/ (one module per game), and any installed
package may add a game to the ``tablectl.games`` entry-point group::

    [project.entry-points."tablectl.games"]
    high_card = "high_card:HighCard"

The entry point's name is the game's name (the ``[table] game`` of a configuration); its
object is the game's class, a subclass of the core engine whose ``name`` is that name.
A subclass defined in a running program (a test's toy game) registers itself by its
``name`` when it is defined, as every game class does. The core looks a game up here by
the name in the table spec and never names one (docs/games.md).
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import EntryPoint, entry_points
from typing import Any

ENTRY_POINT_GROUP = "tablectl.games"

_GAMES: dict[str, Any] = {}
_BUILTIN = "tablectl.controller.engine.games"
_builtin_loaded = False
_ENGINE = "tablectl.controller.engine.core"
#: the game API major before this one, still served (deprecated) for one release
DEPRECATED_GAME_API_MAJOR = 1


class GameNotFound(LookupError):
    """No game of that name; the message names it and lists the games there are."""


class GameLoadError(GameNotFound):
    """A game's module is installed but cannot be loaded; the message names the game, its
    entry point and why, so that the table refuses to start rather than play another game."""


def register(game: Any) -> None:
    """Make ``game`` (an Engine subclass with a ``name``) known to tables and the CLI."""
    _GAMES[game.name] = game


def _bundled() -> list[str]:
    """The bundled games' names, in the package's order (the order of the regulations)."""
    return [game.name for game in importlib.import_module(_BUILTIN).BUNDLED]


def _load_builtin() -> None:
    # The bundled games register on import; importing them here lets the core modules
    # that look games up stay free of any import of a game. They are listed first, in
    # the package's order, whatever imported a game module before. Once: the lookups of
    # every decision's citation come here.
    global _builtin_loaded
    if _builtin_loaded:
        return
    bundled = _bundled()
    for name in [*bundled, *(n for n in list(_GAMES) if n not in bundled)]:
        _GAMES[name] = _GAMES.pop(name)
    _builtin_loaded = True


def _plugins() -> dict[str, EntryPoint]:
    """The installed ``tablectl.games`` entry points by name (not imported)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f" of the package {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ENTRY_POINT_GROUP}:{ep.name} = {ep.value!r}{where}"


def _load_plugin(ep: EntryPoint) -> Any:
    """The game class an entry point names, checked; GameLoadError saying why not."""
    try:
        game = ep.load()
    except Exception as error:  # any failure of a game's module refuses that game, by name
        raise GameLoadError(
            f"game {ep.name!r} cannot be loaded ({_origin(ep)}): {type(error).__name__}: {error}"
        ) from error
    try:
        _check_plugin(ep, game)
    except GameLoadError:
        # a game class registers itself when its module defines it: a refused one must not
        # stay findable under its name
        for name in [n for n, registered in _GAMES.items() if registered is game]:
            del _GAMES[name]
        raise
    register(game)
    return game


def _check_plugin(ep: EntryPoint, game: Any) -> None:
    engine = importlib.import_module(_ENGINE).Engine
    if not (isinstance(game, type) and issubclass(game, engine)):
        raise GameLoadError(
            f"game {ep.name!r} ({_origin(ep)}) is not a game: {game!r} is not a subclass of "
            "tablectl.controller.engine.core.Engine"
        )
    named = getattr(game, "name", "")
    if named != ep.name:
        raise GameLoadError(
            f"game {ep.name!r} ({_origin(ep)}): the class is named {named!r}; "
            "the entry point's name must be the game's name"
        )
    check_game_api(game, f"{ep.name!r} ({_origin(ep)})")
    # the catalogue checks the game's rules and citations (rule IDs, clashes)
    importlib.import_module("tablectl.controller.engine.rules").check_game(game)


def _api(text: object) -> tuple[int, int] | None:
    major, _, minor = str(text).partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        return None
    return int(major), int(minor or 0)


def check_game_api(game: Any, where: str) -> None:
    """Refuse an installed game written for another major game API or a later minor one,
    naming both versions (as the driver registry does for drivers)."""
    ours_text = importlib.import_module(_ENGINE).GAME_API_VERSION
    ours = _api(ours_text)
    declared = getattr(game, "game_api", ours_text)
    theirs = _api(declared)
    if theirs is None:
        raise GameLoadError(f"game {where}: game_api {declared!r} is not MAJOR.MINOR: refused")
    assert ours is not None
    if theirs[0] == ours[0] - 1 == DEPRECATED_GAME_API_MAJOR:
        # game API 1 (hooks as methods of the one class) is served for one more release
        warnings.warn(
            f"game {where} is written for game API {declared}, served until tablectl 0.3 "
            f"(hooks.py adapts its hooks); this tablectl provides {ours_text} (tablectl.games, "
            "docs/games.md: a game's rules of each family)",
            DeprecationWarning,
            stacklevel=2,
        )
        return
    if theirs[0] != ours[0] or theirs[1] > ours[1]:
        raise GameLoadError(
            f"game {where} is written for game API {declared}; this tablectl provides "
            f"{ours_text} (tablectl.games): install the game's release for API {ours_text}"
        )


def find_game(name: str) -> Any:
    """The game class called ``name``: bundled, defined in this program, or installed.

    GameNotFound names the game and the games there are; GameLoadError (a GameNotFound)
    names a game whose module is installed but fails to load, and why.
    """
    if name not in _GAMES:
        _load_builtin()
    if name in _GAMES:
        return _GAMES[name]
    plugin = _plugins().get(name)
    if plugin is None:
        raise GameNotFound(f"no game named {name!r} (available: {', '.join(game_names())})")
    return _load_plugin(plugin)


def game_names() -> tuple[str, ...]:
    """Every game's name: the bundled ones first, then any defined here, then the installed
    ones (named by their entry points, not imported: a broken one is refused when used)."""
    _load_builtin()
    return tuple(dict.fromkeys([*_GAMES, *sorted(_plugins())]))


def bundled_game_names() -> tuple[str, ...]:
    """The games shipped with tablectl (controller/engine/games/), in the regulations' order."""
    return tuple(_bundled())


def loaded_games() -> tuple[Any, ...]:
    """The game classes loaded so far (the bundled ones always): those whose rules and
    options the core may have to know without a table of that game."""
    _load_builtin()
    return tuple(_GAMES.values())
