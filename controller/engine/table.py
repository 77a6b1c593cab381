"""Game profiles and the table specification: which game, which options, validated.

A table the rules refuse (too many positions, a 9-deck shoe, hand dealing without a
shuffler ...) raises TableSpecError whose message names the option, the allowed values
and the rule that refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tablectl.controller.engine.cards import Composition
from tablectl.controller.engine.gaming_day import parse_start
from tablectl.controller.engine.interpretations import Interpretations
from tablectl.controller.engine.registry import (
    GameLoadError,
    GameNotFound,
    find_game,
    game_names,
    loaded_games,
)
from tablectl.controller.engine.rules import METHODS, citation

SHUFFLERS = ("none", "batch", "counting")


class TableSpecError(ValueError):
    """A table description the rules or docs/events.md refuse; the message says what and why."""


@dataclass(frozen=True)
class GameProfile:
    """What a game is: positions, cards per hand, dealing methods, deck composition."""

    name: str
    title: str
    max_positions: int
    cards_per_hand: int
    dealer_cards: int
    community_cards: int
    methods: tuple[str, ...]
    may_dual_deck: bool


@dataclass(frozen=True)
class GameOption:
    """One option of a game's own (e.g. a shoe's number of ``decks``), declared in the game's
    module: its name, its default and the values it takes. ``rule`` names the rule that
    refuses any other value (its citation is added to the message); ``note`` is the line
    `tablectl example-config` writes above it."""

    name: str
    default: bool | int | str
    choices: tuple[str, ...] = ()  # a word: one of these
    low: int | None = None  # a whole number: low to high
    high: int | None = None
    rule: str = ""
    note: str = ""

    def parse(self, value: Any, game: str, method: str) -> bool | int | str:
        """The option's value, checked; TableSpecError naming the option and what it takes."""
        if isinstance(self.default, bool):
            if not isinstance(value, bool):
                raise TableSpecError(f"option {self.name}: must be true or false, got {value!r}")
            return value
        if isinstance(self.default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TableSpecError(f"option {self.name}: must be a whole number, got {value!r}")
            low = value if self.low is None else self.low
            high = value if self.high is None else self.high
            if not low <= value <= high:
                raise TableSpecError(
                    f"option {self.name}: {value} is not allowed: {_span(low, high)}"
                    + (f" ({self.rule}, {citation(self.rule, game, method)})" if self.rule else "")
                )
            return value
        if value not in self.choices:
            raise TableSpecError(
                f"option {self.name}: {value!r} is not one of {', '.join(self.choices)}"
            )
        return str(value)


def _span(low: int, high: int) -> str:
    """6, 7 or 8; 1 to 20."""
    if high - low > 3:
        return f"{low} to {high}"
    values = [str(n) for n in range(low, high + 1)]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


# Each game's profile, options and deck live in its module (controller/engine/games/, or an
# installed game's package); a table finds its game by name in the registry.


def _game(name: str) -> Any:
    return find_game(name)


def _option_names(game: Any) -> tuple[str, ...]:
    return tuple(option.name for option in game.game_options)


def _games_with(option: str) -> tuple[str, ...]:
    """The loaded games whose own options include ``option`` (e.g. ``decks``)."""
    return tuple(g.name for g in loaded_games() if option in _option_names(g))


def _game_only_options() -> set[str]:
    return {option for g in loaded_games() for option in _option_names(g)}


@dataclass(frozen=True)
class TableOptions:
    """docs/events.md's options every game knows (and tablectl's documented additions) with
    their defaults; a game's own options (its module's ``game_options``) are in
    ``game_values`` and read as attributes too (``options.decks``)."""

    positions: int
    dealing: str = "manual_shoe"
    shuffler: str = "counting"
    dual_deck: bool = False
    rack_tolerance: int = 2
    gaming_day_start: str = "06:00"
    interpretations: Interpretations = field(default_factory=Interpretations)
    game_values: tuple[tuple[str, bool | int | str], ...] = ()

    def __getattr__(self, name: str) -> Any:
        # only called for a name that is no field: one of the game's own options
        if name.startswith("__") or name == "game_values":
            raise AttributeError(name)
        for option, value in self.game_values:
            if option == name:
                return value
        raise AttributeError(f"the table's game has no option {name!r}")


@dataclass(frozen=True)
class TableSpec:
    """A validated table: its game profile and options."""

    game: str
    options: TableOptions

    @property
    def profile(self) -> GameProfile:
        profile: GameProfile = _game(self.game).profile
        return profile

    def composition(self) -> Composition:
        """The cards of one deck (or shoe of decks) of this game with these options."""
        composition: Composition = _game(self.game).composition_for(self.options)
        return composition

    def deck_names(self) -> tuple[str, ...]:
        return ("A", "B") if self.options.dual_deck else ("A",)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSpec:
        """Validate a table line of a scenario or a configuration's game section."""
        if not isinstance(data, Mapping):
            raise TableSpecError(f"a table must be a JSON object, got {data!r}")
        game = data.get("game")
        if not isinstance(game, str):
            raise TableSpecError(f"game: {game!r} is not one of {', '.join(game_names())}")
        try:
            find_game(game)
        except GameLoadError as error:
            raise TableSpecError(f"game: {error}") from None
        except GameNotFound:
            raise TableSpecError(
                f"game: {game!r} is not one of {', '.join(game_names())}"
            ) from None
        raw = data.get("options", {})
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise TableSpecError(f"options: must be an object, got {raw!r}")
        return cls(game, _options(game, dict(raw)))


def _choice(opts: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = opts.pop(name, default)
    if value not in allowed:
        raise TableSpecError(f"option {name}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _flag(opts: dict[str, Any], name: str) -> bool:
    value = opts.pop(name, False)
    if not isinstance(value, bool):
        raise TableSpecError(f"option {name}: must be true or false, got {value!r}")
    return value


def _integer(opts: dict[str, Any], name: str, default: int) -> int:
    value = opts.pop(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TableSpecError(f"option {name}: must be a whole number, got {value!r}")
    return value


def _options(game: str, opts: dict[str, Any]) -> TableOptions:
    game_class = _game(game)
    profile: GameProfile = game_class.profile
    own = {option.name: option for option in game_class.game_options}
    if "decks" not in own and "decks" in opts:
        # docs/events.md lists `decks` among the options every game knows; a game dealt from
        # one deck takes `decks: 1` as stating it and refuses any other count.
        value = opts.pop("decks")
        if isinstance(value, bool) or value != 1:
            raise TableSpecError(
                f"option decks: {game} is dealt from one deck, not {value!r} "
                f"(6 to 8 decks apply only to {', '.join(_games_with('decks'))})"
            )
    defaults = {o.name: o.default for g in loaded_games() for o in g.game_options}
    for name in sorted(_game_only_options() - set(own)):
        if name in opts and opts[name] != defaults[name]:
            raise TableSpecError(
                f"option {name}: applies only to {', '.join(_games_with(name))}, not to {game}"
            )
        opts.pop(name, None)  # another game's option at its default: as if not given
    positions = _integer(opts, "positions", profile.max_positions)  # C11 (configuration)
    if not 1 <= positions <= profile.max_positions:
        raise TableSpecError(
            f"option positions: {positions} is not allowed for {game}: 1 to "
            f"{profile.max_positions} (C11, {citation('C11', game, 'manual_shoe')})"
        )
    dealing = _choice(opts, "dealing", METHODS, "manual_shoe")
    if dealing not in profile.methods:
        raise TableSpecError(
            f"option dealing: {dealing!r} is not allowed for {game}: {', '.join(profile.methods)}"
        )
    shuffler = _choice(opts, "shuffler", SHUFFLERS, "counting")
    if dealing == "hand" and shuffler == "none":  # D4 (configuration)
        raise TableSpecError(
            "option shuffler: dealing from the hand needs an automated shuffling device: "
            f"batch or counting, not 'none' (D4, {citation('D4', game, dealing)})"
        )
    dual_deck = _flag(opts, "dual_deck")
    if dual_deck and not profile.may_dual_deck:
        dual = [g.name for g in loaded_games() if g.profile.may_dual_deck]
        raise TableSpecError(f"option dual_deck: applies only to {', '.join(dual)}, not to {game}")
    if dual_deck and shuffler == "none":
        raise TableSpecError(
            "option dual_deck: two alternating decks need an automated shuffling device: "
            f"shuffler batch or counting (D1, {citation('D1', game, dealing)})"
        )
    game_values = tuple(
        (name, option.parse(opts.pop(name, option.default), game, dealing))
        for name, option in own.items()
    )
    tolerance = _integer(opts, "rack_tolerance", 2)
    if tolerance < 0:
        raise TableSpecError(f"option rack_tolerance: must be 0 or more, got {tolerance}")
    day_start = opts.pop("gaming_day_start", "06:00")
    try:
        parse_start(day_start if isinstance(day_start, str) else "")
    except ValueError:
        raise TableSpecError(f"option gaming_day_start: must be HH:MM, got {day_start!r}") from None
    changes = opts.pop("interpretations", {})
    if not isinstance(changes, Mapping):
        raise TableSpecError(f"option interpretations: must be an object, got {changes!r}")
    try:
        interpretations = Interpretations().overridden(dict(changes))
    except ValueError as error:
        raise TableSpecError(f"option interpretations: {error}") from None
    if opts:
        known = [n for n in TableOptions.__dataclass_fields__ if n != "game_values"] + [*own]
        raise TableSpecError(f"option {sorted(opts)[0]}: unknown; options are {', '.join(known)}")
    return TableOptions(
        positions=positions,
        dealing=dealing,
        shuffler=shuffler,
        dual_deck=dual_deck,
        rack_tolerance=tolerance,
        gaming_day_start=str(day_start),
        interpretations=interpretations,
        game_values=game_values,
    )
