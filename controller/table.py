"""Game profiles and the table specification: which game, which options, validated.

A table the rules refuse (too many positions, a 9-deck shoe, hand dealing without a
shuffler ...) raises TableSpecError whose message names the option, the allowed values
and the rule that refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tablectl.controller.cards import Composition
from tablectl.controller.gaming_day import parse_start
from tablectl.controller.interpretations import Interpretations
from tablectl.controller.registry import find_game, game_names
from tablectl.controller.rules import METHODS, citation

SHUFFLERS = ("none", "batch", "counting")
READERS = ("none", "concealed", "revealing")
AP_STARTS = ("operator", "computer")
AP_NUMBERINGS = ("from_dealer_left", "from_dealer_right")


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


# Each game's profile, options and deck live in its module (controller/games/); a table
# finds its game by name in the registry.


def _game(name: str) -> Any:
    return find_game(name)


def _games_with(option: str) -> tuple[str, ...]:
    """The games whose own options include ``option`` (e.g. ``decks``)."""
    return tuple(n for n in game_names() if option in _game(n).game_options)


def _game_only_options() -> set[str]:
    return {option for n in game_names() for option in _game(n).game_options}


@dataclass(frozen=True)
class TableOptions:
    """docs/events.md's options (and tablectl's documented additions) with their defaults."""

    positions: int
    dealing: str = "manual_shoe"
    shuffler: str = "counting"
    dual_deck: bool = False
    decks: int = 6
    bart_carter: bool = False
    dealer_hits_soft_17: bool = False
    reader: str = "concealed"
    rack_tolerance: int = 2
    gaming_day_start: str = "06:00"
    ap_start: str = "operator"
    ap_numbering: str = "from_dealer_left"
    interpretations: Interpretations = field(default_factory=Interpretations)


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
        names = game_names()
        if not isinstance(game, str) or game not in names:
            raise TableSpecError(f"game: {game!r} is not one of {', '.join(names)}")
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
    defaults = TableOptions(positions=profile.max_positions)
    if "decks" not in game_class.game_options and "decks" in opts:
        # docs/events.md lists `decks` among the options every game knows; a game dealt from
        # one deck takes `decks: 1` as stating it and refuses any other count.
        value = opts.pop("decks")
        if isinstance(value, bool) or value != 1:
            raise TableSpecError(
                f"option decks: {game} is dealt from one deck, not {value!r} "
                f"(6 to 8 decks apply only to {', '.join(_games_with('decks'))})"
            )
    only = _game_only_options()
    for name in [n for n in TableOptions.__dataclass_fields__ if n in only]:
        if (
            name in opts
            and name not in game_class.game_options
            and opts[name] != getattr(defaults, name)
        ):
            raise TableSpecError(
                f"option {name}: applies only to {', '.join(_games_with(name))}, not to {game}"
            )
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
    if dual_deck and shuffler == "none":
        raise TableSpecError(
            "option dual_deck: two alternating decks need an automated shuffling device: "
            f"shuffler batch or counting (D1, {citation('D1', game, dealing)})"
        )
    decks = _integer(opts, "decks", 6)  # G1: 6 to 8 decks (2C.2(a))
    if not 6 <= decks <= 8:
        raise TableSpecError(
            f"option decks: {decks} is not allowed: 6, 7 or 8 (G1, 13:69F-2C.2(a))"
        )
    bart_carter = _flag(opts, "bart_carter")
    hits_soft_17 = _flag(opts, "dealer_hits_soft_17")
    reader = _choice(opts, "reader", READERS, "concealed")
    tolerance = _integer(opts, "rack_tolerance", 2)
    if tolerance < 0:
        raise TableSpecError(f"option rack_tolerance: must be 0 or more, got {tolerance}")
    day_start = opts.pop("gaming_day_start", "06:00")
    try:
        parse_start(day_start if isinstance(day_start, str) else "")
    except ValueError:
        raise TableSpecError(f"option gaming_day_start: must be HH:MM, got {day_start!r}") from None
    ap_start = _choice(opts, "ap_start", AP_STARTS, "operator")
    ap_numbering = _choice(opts, "ap_numbering", AP_NUMBERINGS, "from_dealer_left")
    changes = opts.pop("interpretations", {})
    if not isinstance(changes, Mapping):
        raise TableSpecError(f"option interpretations: must be an object, got {changes!r}")
    try:
        interpretations = Interpretations().overridden(dict(changes))
    except ValueError as error:
        raise TableSpecError(f"option interpretations: {error}") from None
    if opts:
        known = [*TableOptions.__dataclass_fields__]
        raise TableSpecError(f"option {sorted(opts)[0]}: unknown; options are {', '.join(known)}")
    return TableOptions(
        positions=positions,
        dealing=dealing,
        shuffler=shuffler,
        dual_deck=dual_deck,
        decks=decks,
        bart_carter=bart_carter,
        dealer_hits_soft_17=hits_soft_17,
        reader=reader,
        rack_tolerance=tolerance,
        gaming_day_start=str(day_start),
        ap_start=ap_start,
        ap_numbering=ap_numbering,
        interpretations=interpretations,
    )
