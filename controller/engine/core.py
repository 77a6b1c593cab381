"""The round engine: events in, decisions out; pure (no I/O, no clock, no randomness).

One :class:`Engine` per table: a composition of parts, each an object of a class of its own
module that the Engine holds and routes events to: the rule families that keep their own state
(the decks, deck.py; the discard rack, rack.py; the hole-card reader, reader.py; shuffle
integrity, integrity.py) and the round's life over them (``round_life``, round_life.py: open,
deal, play, collect, void; ``dealing``, dealing.py: the cards; ``stub_count``, stub_count.py;
``shuffles``, shuffles.py: the shuffles and decks; ``devices``, devices.py; ``snapshots``,
snapshot.py), on one ``transitions`` machine (machine.py) whose rule conditions are gates.py's.
The Engine itself is the table's state (table_state.py), what a game sets and overrides
(hooks.py) and the chart's conditions (gates.py); its parts reach them through it. This module
names no game: each game's rules are a subclass in controller/engine/games/ setting the
attributes of hooks.py and supplying its rules of each family there (``Deal``, ``Stub``,
``Decks``, ``Rack``, ``Reader``). Every rule is enforced in exactly one method,
marked with its ID; the rules that gate a step are conditions on the chart; every decision's
citation comes from the rule catalogue (controller/engine/rules.py, docs/rules.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from tablectl.controller.engine.dealing import Dealing
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.devices import DEVICE_ALIASES, DEVICE_KINDS, Devices, device_kind
from tablectl.controller.engine.events import EventError, validate
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.integrity import ShuffleIntegrity
from tablectl.controller.engine.ledger import SHOE, Ledger
from tablectl.controller.engine.machine import RoundModel, build
from tablectl.controller.engine.rack import DiscardRack
from tablectl.controller.engine.reader import HoleCardReader
from tablectl.controller.engine.registry import find_game, register
from tablectl.controller.engine.round_life import RoundLife
from tablectl.controller.engine.shuffle_integrity import ShuffleWatch
from tablectl.controller.engine.shuffles import Shuffles
from tablectl.controller.engine.snapshot import SNAPSHOT_VERSION, SnapshotError, Snapshots
from tablectl.controller.engine.stub_count import StubCount
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.engine.table_state import (
    GAME_API_VERSION,
    LAYOUT_TARGET_NAMES,
    UNASSIGNED,
    Round,
)

# What this module was before its parts had modules of their own: the names a game or a
# test imports from here keep working (the game API is tablectl.games, docs/games.md).
__all__ = [
    "DEVICE_ALIASES",
    "DEVICE_KINDS",
    "GAME_API_VERSION",
    "LAYOUT_TARGET_NAMES",
    "SNAPSHOT_VERSION",
    "UNASSIGNED",
    "Decision",
    "Deck",
    "Engine",
    "Round",
    "SnapshotError",
    "device_kind",
]


_HANDLER_NAMES: dict[type, tuple[str, ...]] = {}


def _handler_names(cls: type) -> tuple[str, ...]:
    """The ``_on_<event type>`` methods of a class (found once per class)."""
    names = _HANDLER_NAMES.get(cls)
    if names is None:
        names = _HANDLER_NAMES[cls] = tuple(n for n in dir(cls) if n.startswith("_on_"))
    return names


#: the methods of the parts the Engine composes (none of them a game's hook)
_PART_METHODS = frozenset(
    name
    for part in (RoundLife, Dealing, StubCount, Shuffles, Devices, Snapshots)
    for name in vars(part)
    if callable(vars(part)[name]) and not name.startswith("__")
) - {"snapshot", "_load", "deal_fulfilled"}


class Engine(DealGates):
    """The rules of one table. ``handle(event, at) -> decisions``.

    The core: it builds the table's state, its families and its parts, and routes each event
    to the part whose rules it concerns (``_on_<type>``; a game's own handler first). It
    never names a game: each game is a subclass in controller/engine/games/ (one module per
    game, like python-chess's variants) that sets the class attributes of hooks.py and
    supplies its rules of each family where they differ;
    ``Engine(spec)`` builds the subclass the spec's game names (controller/engine/registry.py).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a method of one of the parts is no hook: a game's method of that name would never
        # be called (the part's own is), so it is refused here rather than ignored
        shadowed = sorted(
            name for name in vars(cls) if name in _PART_METHODS and not name.startswith("_on_")
        )
        if shadowed:
            raise TypeError(
                f"{cls.__qualname__}.{shadowed[0]}: not a hook a game overrides (a method of "
                "the engine's parts); docs/games.md lists the hooks"
            )
        if cls.name:
            register(cls)

    def __new__(cls, spec: TableSpec, random_source: Callable[[int], int] | None = None) -> Engine:
        # Engine(spec) is the spec's game: the subclass registered under its name.
        game: type[Engine] = find_game(spec.game) if cls is Engine else cls
        return object.__new__(game)

    def __init__(
        self,
        spec: TableSpec,
        random_source: Callable[[int], int] | None = None,
    ) -> None:
        self.spec = spec
        self.game = spec.game
        self.options = spec.options
        self.interp = spec.options.interpretations
        self.method = spec.options.dealing
        self.composition = spec.composition()
        self._random_source = random_source
        self._build_rules()  # the game's rules of each family (hooks.py)
        self._definition = self.chart()
        self._model = RoundModel()
        self._machine = build(self._definition, self._model, self)
        preshuffled = self.interp.opening_decks_preshuffled
        self.decks: dict[str, Deck] = {
            name: Deck(name, Ledger(self.composition), shuffled=preshuffled, fresh=not preshuffled)
            for name in spec.deck_names()
        }
        self.current = "A"
        self.explicit_deck = False
        self.last_round_deck: str | None = None
        self.round: Round | None = None
        self.round_number = 0
        self.dealt: list[dict[str, Any]] = []
        self.burn_pending: str | None = None  # G2 or G5
        self.asd_removed = False
        self.ads_removed = False
        self.asd_faulted = False
        self.shuffler_emptied = False
        self.reader = HoleCardReader(self.interp)  # H1, H5 (controller/engine/reader.py)
        self.rack = DiscardRack(self)  # D2, R1 (controller/engine/rack.py)
        self.bart_carter_flagged = False
        self.pending_notifications: list[str] = []
        self.suspended_from: str | None = None
        self.device_faults: dict[str, str] = {}
        # A shoe game's next batch in the shuffler while the shoe deals: None, "fresh"
        # (received), "shuffling", "ready", "faulted" (C4) or "removed" (C7); it becomes
        # the shoe's at the next shoe_loaded.
        self.next_batch: str | None = None
        # Q1, Q2: the dealt order tested for a replayed or inadequate shuffle, round by round
        # once each round is over (controller/engine/shuffle_integrity.py); a Bart Carter shoe is
        # never shuffled whole, which both statistics assume.
        self.integrity = ShuffleIntegrity(
            self,
            ShuffleWatch(self.composition.copies)
            if self.interp.shuffle_integrity and self.deck_rules.shuffled_whole()
            else None,
        )
        self._at = 0
        self._time: datetime | None = None  # the event in hand's time, if it has one
        # C10: cards drawn (blocked) with every deck removed and no round opened since
        self.blocked_without_round = 0
        # the parts the events are routed to, each a class of its own module
        self.round_life: RoundLife = RoundLife(self)  # open, deal, play, collect, void
        self.dealing = Dealing(self, self.round_life)  # each card and stack
        self.stub_count = StubCount(self, self.round_life)  # S1-S4
        self.shuffles = Shuffles(self, self.round_life)  # shuffles, decks loaded/received
        self.devices = Devices(self, self.round_life, self.shuffles)  # faults, removal, loss
        self.snapshots = Snapshots(self)  # the state as JSON data and back
        # each event type's handler, found by name (``_on_<type>``): the game's if it has
        # one (its class, or the refusals of hooks.py), else the part's whose rules it concerns
        handlers: dict[str, Callable[[dict[str, Any]], list[Decision]]] = {}
        for part in (self.devices, self.shuffles, self.stub_count, self.dealing, self.round_life):
            for name in _handler_names(type(part)):
                handlers[name[4:]] = getattr(part, name)
        for name in _handler_names(type(self)):
            handlers[name[4:]] = getattr(self, name)
        self._handlers = handlers

    # ------------------------------------------------------------------ public API

    def handle(self, event: Mapping[str, Any], at: int) -> list[Decision]:
        """Apply one docs/events.md event; return the decisions the rules demand, in order."""
        self._at = at
        try:
            clean = validate(event)
        except EventError as error:
            return [self._rejected(str(error))]
        self._time = clean.get("time")
        return self._handlers[clean["type"]](clean)

    def status(self) -> dict[str, Any]:
        """The public view for `tablectl status`. Never a card value (H7)."""
        # H7: counts and states only; no card identity leaves the engine except through
        # dealt_cards() (the access-controlled journal) and decisions on exposed cards.
        return {
            "game": self.game,
            "state": self.state,
            "round": self.round_number,
            "deck_in_play": self.current,
            "decks": {
                name: {
                    "state": self._deck_state(deck),
                    "rounds_since_stub_count": self._counter(deck).rounds_since_count,
                    "stub_count_every": self.interp.stub_count_interval,  # S1, as configured
                    "cards_in_shoe": deck.ledger.count(SHOE),
                }
                for name, deck in self.decks.items()
            },
            "pending_supervisor_notifications": list(self.pending_notifications),
            "reader": self.reader_rules.state(),
            "device_faults": dict(self.device_faults),
        }

    def snapshot(self) -> dict[str, Any]:
        """The engine's whole state as JSON data (versioned, key order fixed), for the journal
        (snapshot.py: face-down cards included, journal only, never a log: H7)."""
        return self.snapshots.snapshot()

    def _load(self, snapshot: Mapping[str, Any]) -> None:
        self.snapshots._load(snapshot)

    @classmethod
    def restore(
        cls,
        spec: TableSpec,
        snapshot: Mapping[str, Any],
        random_source: Callable[[int], int] | None = None,
    ) -> Engine:
        """An engine of table ``spec`` in the state ``snapshot`` recorded.

        ``random_source`` is injected as for a new engine (the drawn numbers stay the
        caller's: the journal replays them). A snapshot of another version, another game,
        or whose ledgers break conservation is refused with SnapshotError naming the field.
        """
        engine = cls(spec, random_source=random_source)
        engine._load(snapshot)
        return engine
