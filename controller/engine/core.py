"""The round engine: events in, decisions out; pure (no I/O, no clock, no randomness).

One :class:`Engine` per table: a composition of rule families (each its own class and
module: the decks, deck.py; the discard rack, rack.py; the hole-card reader, reader.py;
shuffle integrity, integrity.py), one ``transitions`` machine (controller/engine/machine.py)
and the round's life, which it routes events through. This module is the core and
names no game: each game's rules are a subclass in controller/engine/games/ overriding the hooks
below. Every rule is enforced in exactly one method, marked with its ID; the rules that
gate a step are conditions on the chart; every decision's citation comes from the rule
catalogue (controller/engine/rules.py, docs/rules.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import date, datetime
from typing import Any, ClassVar

from tablectl.controller.engine.cards import JOKER, Composition, standard_deck
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.events import UNDECODABLE_FRAME, EventError, validate
from tablectl.controller.engine.gaming_day import gaming_day_of, parse_start
from tablectl.controller.engine.integrity import ShuffleIntegrity
from tablectl.controller.engine.ledger import (
    BURNED,
    COMMUNITY,
    DEALER,
    DISCARD,
    SHOE,
    Ledger,
    LedgerError,
)
from tablectl.controller.engine.machine import (
    DEAL_CONDITIONS,
    MachineDefinition,
    RoundModel,
    build,
    chart,
)
from tablectl.controller.engine.rack import DiscardRack
from tablectl.controller.engine.reader import HoleCardReader
from tablectl.controller.engine.registry import find_game, register
from tablectl.controller.engine.rules import Citation, Rule, citation
from tablectl.controller.engine.shuffle_integrity import ShuffleWatch
from tablectl.controller.engine.table import GameOption, GameProfile, TableOptions, TableSpec

__all__ = ["SNAPSHOT_VERSION", "Decision", "Deck", "Engine", "SnapshotError"]

# Engine.snapshot()'s format. Adding a field with a default keeps the version (an older
# snapshot restores with the default); renaming or re-meaning one bumps it.
SNAPSHOT_VERSION = 1

UNASSIGNED = "unassigned"  # a card beyond the deal order of a face-down game
LAYOUT_TARGET_NAMES = {BURNED: "burn", DISCARD: "discard"}
DEVICE_KINDS = ("shuffler", "shoe", "hole_card_reader", "discard_rack")
# Device names of the example configurations and of docs/events.md, by kind; an event's own
# "kind" field (the daemon may add it) takes precedence over the name.
DEVICE_ALIASES = {
    "shuffler": "shuffler",
    "asd": "shuffler",
    "shoe": "shoe",
    "ads": "shoe",
    "automated_shoe": "shoe",
    "manual_shoe": "shoe",
    "hole_card_reader": "hole_card_reader",
    "reader": "hole_card_reader",
    "card_reader": "hole_card_reader",
    "discard_rack": "discard_rack",
    "rack": "discard_rack",
}


def device_kind(event: Mapping[str, Any]) -> str | None:
    """The kind of the device an event names: its ``kind`` field, else its name's alias."""
    kind = event.get("kind")
    if isinstance(kind, str) and kind in DEVICE_KINDS:
        return kind
    name = event.get("device")
    return DEVICE_ALIASES.get(name.lower()) if isinstance(name, str) else None


class SnapshotError(ValueError):
    """A snapshot Engine.restore cannot use; the message names the field and why."""


@dataclass
class Round:
    """What the engine knows of the round in play."""

    number: int
    deck: str
    positions: list[int]
    order: list[str] = field(default_factory=list)  # card-by-card targets still to fill
    stacks: list[tuple[str, int]] = field(default_factory=list)  # ADS stacks still to come
    expected: dict[str, int] = field(default_factory=dict)  # initial deal per target
    tally: dict[str, int] = field(default_factory=dict)
    started: bool = False  # the first card or stack of the round was allowed
    cards_tracked: int = 0
    face_up_found: int = 0  # C1, C2
    flagged: set[str] = field(default_factory=set)
    void_hands: set[int] = field(default_factory=set)
    void_rule: str | None = None
    extra_dealer_cards: int = 0  # M2
    up_card: str | None = None
    hole_card: str | None = None
    dealer_cards: list[str] = field(default_factory=list)
    reader_ignored: bool = False
    start_position: str | None = None  # A1
    planned_cards: int = 0  # the whole deal, community included (S3 for unread hands)
    blocked: bool = False  # a deal of this round was blocked: its later steps decide nothing
    check_pending: bool = False  # M7: the dealer was asked to check the hands, no answer yet
    reader_inserted: bool = False  # the hole card went into the reader this round
    # cards of this void round left on the layout when new cards of its deck were received
    # (the old deck's; they still go to the discard rack at the collection: D2, R1)
    layout_left: int = 0
    rack_reshuffled: bool = False  # G5: the rack's reshuffle mid-round completed


# The engine's own bookkeeping that a snapshot carries, beside the decks, the round, the
# machine's state and the reader's day (each encoded by hand in Engine.snapshot).
_SNAPSHOT_SCALARS = (
    "current",
    "explicit_deck",
    "last_round_deck",
    "round_number",
    "dealt",
    "burn_pending",
    "asd_removed",
    "ads_removed",
    "asd_faulted",
    "shuffler_emptied",
    "reader_disabled",
    "rack_level",
    "rack_baseline",
    "rack_direct",
    "rack_expected_min",
    "rack_deck",
    "rack_seen",
    "bart_carter_flagged",
    "pending_notifications",
    "suspended_from",
    "device_faults",
    "next_batch",
)
# Bookkeeping added after SNAPSHOT_VERSION 1 was written: a snapshot without it restores
# with the default (name -> default).
_OPTIONAL_SCALARS: dict[str, Any] = {"reader_fault_day": None, "blocked_without_round": 0}
_SETS = {"flagged", "void_hands"}


def _plain(value: Any) -> Any:
    """A field as JSON data: sets sorted, tuples as lists; a dict keeps its order (the
    engine iterates some, e.g. a round's expected counts, and decides in that order)."""
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _fields_of(cls: type, data: Any, where: str) -> dict[str, Any]:
    """The keyword arguments of dataclass ``cls`` from snapshot ``data``, checked by name."""
    if not isinstance(data, Mapping):
        raise SnapshotError(f"{where}: must be an object, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise SnapshotError(f"{where}.{unknown[0]}: not a field of this engine's snapshot")
    missing = [
        name
        for name, f in known.items()
        if name not in data and f.default is MISSING and f.default_factory is MISSING
    ]
    if missing:
        raise SnapshotError(f"{where}.{missing[0]}: missing")
    return dict(data)


def _day_text(day: date | str | None) -> str | None:
    """A gaming day as snapshot text: ISO date, "untimed" or None."""
    return day.isoformat() if isinstance(day, date) else day


def _day_of(text: Any, where: str) -> date | str | None:
    """A gaming day from snapshot text; SnapshotError naming ``where`` if it is none."""
    if not isinstance(text, str) or text == "untimed":
        return text  # type: ignore[no-any-return]
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise SnapshotError(f"{where}: {text!r} is not a date") from None


_HANDLER_NAMES: dict[type, tuple[str, ...]] = {}


def _handler_names(cls: type) -> tuple[str, ...]:
    """The ``_on_<event type>`` methods of an engine class (found once per class)."""
    names = _HANDLER_NAMES.get(cls)
    if names is None:
        names = _HANDLER_NAMES[cls] = tuple(n for n in dir(cls) if n.startswith("_on_"))
    return names


#: The game API this tablectl provides (``tablectl.games``, docs/games.md): MAJOR changes when
#: a game written for the last one could misbehave, MINOR when something is added a game may use.
GAME_API_VERSION = "1.0"


class _Kept:
    """An engine attribute kept by one of its rule families, under the name the snapshot and
    the games have always used for it (``rack_level`` is ``engine.rack.level``)."""

    __slots__ = ("family", "field")

    def __init__(self, family: str, field: str) -> None:
        self.family, self.field = family, field

    def __get__(self, engine: Any, owner: type | None = None) -> Any:
        return getattr(getattr(engine, self.family), self.field)

    def __set__(self, engine: Any, value: Any) -> None:
        setattr(getattr(engine, self.family), self.field, value)


class Engine:
    """The rules of one table. ``handle(event, at) -> decisions``.

    The core: ledger, decks, shuffles, devices, rack, decisions. It never names a game:
    each game is a subclass in controller/engine/games/ (one module per game, like python-chess's
    variants) that sets the class attributes below and overrides the hooks it needs;
    ``Engine(spec)`` builds the subclass the spec's game names (controller/engine/registry.py).
    """

    #: the game's name in a table spec; a subclass with a name registers itself
    name: ClassVar[str] = ""
    #: the game API the game was written for (an installed game of another major, or of a
    #: later minor, is refused by the registry)
    game_api: ClassVar[str] = GAME_API_VERSION
    profile: GameProfile
    #: options only this game knows, each with its default and values (table.py checks
    #: them and refuses them for other games)
    game_options: ClassVar[tuple[GameOption, ...]] = ()
    #: the game's own rules (docs/rules.md), found by ID in the catalogue (rules.py)
    rules: ClassVar[tuple[Rule, ...]] = ()
    #: the game's citation of a rule, or one per dealing method (rules.citation)
    citations: ClassVar[Mapping[str, Citation]] = {}
    #: the round's states between "no more bets" and the collection (the chart's middle)
    round_states: ClassVar[tuple[str, ...]] = ("dealing", "play")
    #: S1-S3: the dealer counts the stub (else stub_counted is refused)
    counts_the_stub: ClassVar[bool] = False
    #: D3: the deck is shuffled after every round
    shuffles_every_round: ClassVar[bool] = True
    #: the rule a house reshuffle (reshuffle_requested) is ordered under
    house_reshuffle_rule: ClassVar[str] = "D3"
    #: the deal goes to every position, wagered or not (a misdeal report may name any)
    deals_every_position: ClassVar[bool] = False
    #: a card-reading shoe's tally per hand counts as the dealer's report at the stub count
    tracked_counts_are_the_hands: ClassVar[bool] = False
    #: the rule (and whether it orders a reshuffle) for a hand dealt a wrong count
    misdeal_rule: ClassVar[str] = "M4"
    misdeal_reshuffles: ClassVar[bool] = True
    #: the rule of a stub count that does not add up
    stub_rule: ClassVar[str] = "S3"
    #: C6: the shuffler may be replaced only once a supervisor saw it empty
    replacing_the_shuffler_needs_empty_check: ClassVar[bool] = False

    # the discard rack's fields (controller/engine/rack.py), by their snapshot names
    rack_level = _Kept("rack", "level")
    rack_baseline = _Kept("rack", "baseline")
    rack_direct = _Kept("rack", "direct")
    rack_expected_min = _Kept("rack", "expected_min")
    rack_deck = _Kept("rack", "deck")
    rack_seen = _Kept("rack", "seen")
    # shuffle integrity's watch (controller/engine/integrity.py)
    shuffle_watch = _Kept("integrity", "watch")
    # the hole-card reader's (controller/engine/reader.py)
    reader_inspected_day = _Kept("reader", "inspected_day")
    reader_disabled = _Kept("reader", "disabled")
    reader_fault_day = _Kept("reader", "fault_day")

    @classmethod
    def composition_for(cls, options: TableOptions) -> Composition:
        """The cards of one deck (or shoe) of this game: 52 unless the game says otherwise."""
        return standard_deck()

    @classmethod
    def chart(cls) -> MachineDefinition:
        """The game's round chart: the common frame around a deal and its play."""
        return chart(cls.name, cls.round_states, [("complete_deal", ("dealing",), "play", ())])

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
            if self.interp.shuffle_integrity and self._shoe_shuffled_whole()
            else None,
        )
        self._at = 0
        self._time: datetime | None = None  # the event in hand's time, if it has one
        # C10: cards drawn (blocked) with every deck removed and no round opened since
        self.blocked_without_round = 0
        # each event type's handler, found by name (``_on_<type>``, the game's if it has one)
        self._handlers: dict[str, Callable[[dict[str, Any]], list[Decision]]] = {
            name[4:]: getattr(self, name) for name in _handler_names(type(self))
        }

    # ------------------------------------------------------------------ public API

    @property
    def state(self) -> str:
        """The state machine's current state."""
        return self._model.state

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
            "reader": self._reader_state(),
            "device_faults": dict(self.device_faults),
        }

    def snapshot(self) -> dict[str, Any]:
        """The engine's whole state as JSON data (versioned, key order fixed), for the journal.

        ``Engine.restore(spec, snapshot)`` continues exactly where this engine is: the same
        decisions and status for every later event. It holds face-down cards (the ledger,
        the dealer's hole card, this round's dealt cards): journal only, never a log (H7).
        """
        rnd = self.round
        day = self.reader_inspected_day
        return {
            "version": SNAPSHOT_VERSION,
            "game": self.game,
            "state": self.state,
            "decks": {
                name: {
                    **{
                        f.name: _plain(getattr(deck, f.name))
                        for f in fields(Deck)
                        if f.name not in ("name", "ledger")
                    },
                    "ledger": deck.ledger.as_dict(),
                }
                for name, deck in sorted(self.decks.items())
            },
            "round": None
            if rnd is None
            else {f.name: _plain(getattr(rnd, f.name)) for f in fields(Round)},
            "reader_inspected_day": _day_text(day),
            **{name: _plain(getattr(self, name)) for name in _SNAPSHOT_SCALARS},
            **(
                {"reader_fault_day": _day_text(self.reader_fault_day)}
                if self.reader_fault_day is not None
                else {}
            ),
            **(
                {"blocked_without_round": self.blocked_without_round}
                if self.blocked_without_round
                else {}
            ),
            **(
                {"shuffle_watch": self.shuffle_watch.snapshot()}
                if self.shuffle_watch is not None
                else {}
            ),
        }

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

    def _load(self, snap: Mapping[str, Any]) -> None:
        if not isinstance(snap, Mapping):
            raise SnapshotError(f"snapshot: must be an object, got {type(snap).__name__}")
        version = snap.get("version")
        if version != SNAPSHOT_VERSION:
            raise SnapshotError(f"version: {version!r}; this engine reads {SNAPSHOT_VERSION}")
        if snap.get("game") != self.game:
            raise SnapshotError(f"game: {snap.get('game')!r}, but the table is {self.game}")
        expected = {"version", "game", "state", "decks", "round", "reader_inspected_day"}
        expected.update(_SNAPSHOT_SCALARS)
        # optional: a snapshot from before the shuffle watch restores with an empty one
        unknown = sorted(set(snap) - expected - {"shuffle_watch"} - set(_OPTIONAL_SCALARS))
        missing = sorted(expected - set(snap))
        if unknown or missing:
            what = f"{unknown[0]}: unknown" if unknown else f"{missing[0]}: missing"
            raise SnapshotError(what)
        state = snap["state"]
        if state not in self._definition.states:
            raise SnapshotError(f"state: {state!r} is not a state of {self.game}")
        decks = snap["decks"]
        if not isinstance(decks, Mapping) or sorted(decks) != sorted(self.decks):
            raise SnapshotError(f"decks: must name the decks {', '.join(sorted(self.decks))}")
        for name, data in decks.items():
            where = f"decks.{name}"
            if not isinstance(data, Mapping):
                raise SnapshotError(f"{where}: must be an object")
            args = _fields_of(Deck, {"name": name, **data}, where)
            try:
                args["ledger"] = Ledger.from_dict(self.composition, args["ledger"])
            except (LedgerError, AttributeError, TypeError) as error:
                raise SnapshotError(f"{where}.ledger: {error}") from None
            self.decks[name] = Deck(**args)
        rnd = snap["round"]
        if rnd is None:
            self.round = None
        else:
            args = _fields_of(Round, rnd, "round")
            for name in _SETS & set(args):
                args[name] = set(args[name])
            if "stacks" in args:
                args["stacks"] = [(str(t), int(n)) for t, n in args["stacks"]]
            self.round = Round(**args)
        self.reader_inspected_day = _day_of(snap["reader_inspected_day"], "reader_inspected_day")
        self.reader_fault_day = _day_of(snap.get("reader_fault_day"), "reader_fault_day")
        blocked = snap.get("blocked_without_round", 0)
        if not isinstance(blocked, int) or blocked < 0:
            raise SnapshotError(f"blocked_without_round: {blocked!r} is not a count")
        self.blocked_without_round = blocked
        for name in _SNAPSHOT_SCALARS:
            setattr(self, name, snap[name])
        watch = snap.get("shuffle_watch")
        if self.shuffle_watch is not None and isinstance(watch, Mapping):
            try:
                self.shuffle_watch.restore(watch)
            except (KeyError, TypeError, ValueError) as error:
                raise SnapshotError(f"shuffle_watch: {error}") from None
        self._machine.set_state(state, model=self._model)

    def dealt_cards(self) -> list[dict[str, Any]]:
        """This round's cards in the order dealt, face-down ones included (journal only)."""
        return [dict(entry) for entry in self.dealt]

    def ledger(self, deck: str = "A") -> Ledger:
        return self.decks[deck].ledger

    # ------------------------------------------------------------------ helpers

    def _d(self, decision: str, rule_id: str, reason: str, **extras: Any) -> Decision:
        return Decision(
            decision, citation(rule_id, self.game, self.method), rule_id, self._at, reason, **extras
        )

    def _rejected(self, error: str, rule_id: str = "E0") -> Decision:
        # E0's citation is the catalogue's "docs/events.md", like any other rule's
        return self._d("rejected", rule_id, f"event refused: {error}", error=error)

    def _notify(self, rule_id: str, reason: str) -> Decision:
        self.pending_notifications.append(rule_id)
        return self._d("notify_supervisor", rule_id, reason)

    def _fire(self, trigger: str, *args: Any) -> None:
        self._model.trigger(trigger, *args)

    def _in_round(self) -> bool:
        return self.round is not None and self.state in self._definition.round_states

    def _deck(self) -> Deck:
        return self.decks[self.current]

    def _deck_state(self, deck: Deck) -> str:
        return deck.state(deck.name == self.current and self._in_round())

    def _gaming_day(self, when: datetime | None) -> date | str:
        """The gaming day of ``when``; events without a time share one day ("untimed")."""
        if when is None:
            return "untimed"
        return gaming_day_of(when, parse_start(self.options.gaming_day_start))

    def _record(self, card: str, target: str, face_up: bool) -> None:
        to: int | str = int(target) if target.isdigit() else LAYOUT_TARGET_NAMES.get(target, target)
        self.dealt.append({"card": card, "to": to, "face_up": face_up})

    def _collect_layout(self, deck: Deck) -> int:
        """Move the layout's cards to the discard rack; returns how many moved."""
        return deck.collect_layout()

    def _end_round(self) -> list[Decision]:
        """The round's cards are collected (hands_collected, or implied by a new round)."""
        decisions: list[Decision] = []
        rnd = self.round
        # the round's own deck: with two decks the other may be in the shoe already (a void
        # round's cards wait for the collection while the next deck is loaded)
        deck = self.decks[rnd.deck] if rnd is not None else self._deck()
        if rnd is not None and not deck.removed:
            # D2, R1: a void round's cards of a deck replaced since (deck_received) are the
            # old deck's; they reach the rack all the same
            moved = self._collect_layout(deck) + rnd.layout_left
            decisions += self.rack.collected(deck.name, moved)
            if self._counts_in_alternation(rnd):
                self.last_round_deck = deck.name
        if rnd is not None:
            decisions += self._shuffle_findings(deck.name, rnd.number)
        self.round = None
        self.dealt = []
        self.explicit_deck = False
        if self.state == "deck_removed":
            return decisions
        if self.state == "suspended":
            self.suspended_from = None
        self._fire("collect")
        return decisions

    # ------------------------------------------------------------------ deal checks

    # The rules that gate the deal (machine.DEAL_CONDITIONS, on the chart's start_deal):
    # each is defined here once and named after its rule.

    def C10_deck_not_removed(self) -> bool:
        """C10: a removed deck is not dealt until new cards are received and shuffled."""
        return not self._deck().removed

    def C6_no_other_method_at_the_table(self) -> bool:
        """C6: not shuffled by another method while the shuffler was still at the table."""
        return not self._deck().manual_shuffle_refused

    def D4_hand_deal_has_a_working_shuffler(self) -> bool:
        """D4: dealing from the hand needs a working automated shuffling device."""
        return not (self.method == "hand" and (self.asd_removed or self.asd_faulted))

    def C4_shuffle_completed(self) -> bool:
        """C4: a batch whose shuffle did not complete is not dealt."""
        return not self._deck().faulted

    def C10_new_cards_shuffled(self) -> bool:
        """C10: new cards are shuffled before their first deal."""
        return not self._deck().fresh

    def reshuffle_done(self) -> bool:
        """The reshuffle a rule ordered (C2, C5, G3, G4, M3, M4, M5 ...) came first."""
        return self._deck().reshuffle_rule is None

    def D1_D3_shuffled_since_the_last_round(self) -> bool:
        """D3: shuffled after every round; D1: with two decks, the other deck, shuffled."""
        if not self._shuffles_every_round():
            return True
        deck = self._deck()
        if self.options.dual_deck:
            return deck.name != self.last_round_deck and deck.shuffled
        return deck.shuffled

    def S1_stub_counted_in_time(self) -> bool:
        """S1: no sixth round of a deck without a verified stub count."""
        if not self.counts_the_stub:
            return True
        return self._counter(self._deck()).rounds_since_count < self.interp.stub_count_interval

    def C10_the_rounds_deck_in_place(self, positions: list[int] | None = None) -> bool:
        """C10: "no more bets" once the cards are in the shoe (40.7(a)-(b), 40.9(b),
        39.7(a)-(b), 31.8(a)): not while the deck the round would be dealt from is removed."""
        return self.state != "deck_removed" and not self.decks[self._due_deck()].removed

    def C11_positions_within_the_table(self, positions: list[int] | None = None) -> bool:
        """C11: never more positions than the game and the table have."""
        if positions is None:
            return True
        allowed = self.options.positions
        return len(positions) <= self.profile.max_positions and all(p <= allowed for p in positions)

    # The conservation law's gates (docs/rules.md, L): a round ends only with an outcome
    # the journal records, completed (collected once its deal is complete) or void.

    def _round_open(self) -> bool:
        """A round is in play: bets closed, not yet collected nor void (suspended counts)."""
        return self.round is not None and (
            self.state in self._definition.round_states or self.state == "suspended"
        )

    def C10_another_deck_in_place(self) -> bool:
        """C10 per deck: removing one of two decks leaves the other to deal (39.2(b))."""
        return any(not d.removed for d in self.decks.values())

    def L1_no_round_in_play(self, positions: list[int] | None = None) -> bool:
        """L1: "no more bets" once a round; the round in play ends (collected or void)
        before another opens, so a second call can neither replace it nor drop its cards."""
        return not self._round_open()

    def L2_deal_complete(self) -> bool:
        """L2: a round in play is collected only once its deal is complete (or it is void):
        a collection mid-deal would end it with its hands neither completed nor void."""
        state = self.suspended_from if self.state == "suspended" else self.state
        return state not in self._definition.deal_states

    def L3_the_rounds_cards_stay_out_of_the_shuffle(self, deck: str | None = None) -> bool:
        """L3: the deck of a round in play is shuffled only once the round ends; a game may
        shuffle mid-round where its own rule says so (``_rack_reshuffled_mid_round``)."""
        rnd = self.round
        if rnd is None or not rnd.started or (deck is not None and deck != rnd.deck):
            return True
        return self._in_round() and self._rack_reshuffled_mid_round()

    def _deal_block(self) -> str | None:
        """The rule that forbids dealing from the deck in play, if any (the first that fails)."""
        for name in DEAL_CONDITIONS:
            if not getattr(self, name)():
                if name == "reshuffle_done":
                    return self._deck().reshuffle_rule
                if name == "D1_D3_shuffled_since_the_last_round":
                    return "D1" if self.options.dual_deck else "D3"
                return name.split("_", 1)[0]
        return None

    def _counts_in_alternation(self, rnd: Round) -> bool:
        """D1 (interpretation I3): a void round is its deck's turn unless configured not to."""
        void = self.state == "void" or rnd.void_rule is not None
        return not void or self.interp.void_round_counts_in_alternation

    def _due_deck(self) -> str:
        """The deck the next round is dealt from: the one loaded by name, else with two decks
        the other of the last round's (39.2(b), 40.2(b)); a void round ending now counts."""
        rnd = self.round
        ending = rnd if rnd is not None and self.state == "void" else None
        last = self.last_round_deck
        if ending is not None and self._counts_in_alternation(ending):
            last = ending.deck
        explicit = self.explicit_deck and ending is None
        if self.options.dual_deck and not explicit and last:
            return "B" if last == "A" else "A"
        return self.current

    def _counter(self, deck: Deck) -> Deck:
        """S1: whose rounds are counted: the deck's own, or the table's (interpretation)."""
        return deck if self.interp.stub_count_per_deck else self.decks["A"]

    def _shuffles_every_round(self) -> bool:
        """D3: whether this table shuffles after every round (a game may make it optional)."""
        return self.shuffles_every_round

    def _block_reason(self, rule_id: str) -> str:
        reasons = {
            "C10": "the deck was removed or is new and unshuffled: no deal until new cards "
            "are received and shuffled",
            "C6": "the cards were shuffled or dealt by another method while the device "
            "was still at the table",
            "D4": "dealing from the hand needs a working automated shuffling device",
            "C4": "the shuffler did not complete its shuffle of these cards",
            "D1": "with two decks, each round must use the other deck, shuffled",
            "D3": "the deck was not shuffled since its last round",
            "S1": "the stub has not been counted for five rounds of this deck",
            "G3": "the cut card came out: the cards must be reshuffled first",
            "G8": "the house ordered a reshuffle: the cards must be reshuffled first",
            "G4": "the discard rack holds about a deck: Bart Carter reshuffle first",
        }
        return reasons.get(rule_id, "the cards must be reshuffled before the next deal")

    def _start_deal(self) -> list[Decision]:
        """The first card or stack of a round: check the deck may be dealt (S1 cadence)."""
        rnd = self.round
        assert rnd is not None
        deck = self._deck()
        # the chart's start_deal carries the rules that may refuse it (DEAL_CONDITIONS)
        allowed = self._model.trigger("start_deal") if self.state == "dealing" else None
        rule_id = None if allowed else self._deal_block()
        if rule_id is not None:
            rnd.blocked = True
            return [self._d("deal_blocked", rule_id, self._block_reason(rule_id))]
        rnd.started = True
        if self._shuffles_every_round():
            deck.shuffled = False
        decisions: list[Decision] = []
        if self.counts_the_stub:
            # S1: per deck, the fifth round since the last verified count needs a count.
            counter = self._counter(deck)
            if counter.round_dealt() == self.interp.stub_count_interval:
                extra = {"deck": deck.name} if self.options.dual_deck else {}
                decisions.append(
                    self._d(
                        "stub_count_required",
                        "S1",
                        f"deck {deck.name}: fifth round since its last verified count",
                        **extra,
                    )
                )
        return decisions

    def _foreign_card(
        self, card: str, deck_field: str | None, copies: int = 1
    ) -> list[Decision] | None:
        """C8: a card not in the composition, of the other deck, or one copy too many."""
        # C8: the ledger knows every card left in the shoe; a draw it cannot make is foreign.
        deck = self._deck()
        if card == JOKER and not self.composition.holds(JOKER):
            why = "a joker in a 52-card game"
        elif deck_field is not None and deck_field != deck.name:
            why = f"a card of deck {deck_field} while deck {deck.name} is in play"
        elif deck.ledger.holds(SHOE, card) < copies:
            # H7: the card may be face down; the reason does not name it.
            why = "a card seen more often than the composition holds since the last shuffle"
        else:
            return None
        return self._void_and_remove("C8", why, notify=True)

    def _void_and_remove(self, rule_id: str, why: str, notify: bool = False) -> list[Decision]:
        deck = self._deck()
        decisions: list[Decision] = []
        rnd = self.round
        if rnd is not None and rnd.void_rule is None and self._round_open():
            # L: the round cannot go on without its deck; dealt or not, it ends void
            decisions.append(self._d("void_round", rule_id, f"all hands void: {why}"))
        decisions.append(self._remove(deck, rule_id, why))
        if notify:
            decisions.append(self._notify(rule_id, f"deck {deck.name} removed: {why}"))
        return decisions

    def _remove(self, deck: Deck, rule_id: str, why: str) -> Decision:
        deck.remove()
        in_play = deck.name == self.current
        if in_play and self.state != "deck_removed":
            rnd = self.round
            if rnd is not None and rnd.deck == deck.name:
                self.last_round_deck = deck.name  # D1: its round (void now) was its turn
            self.round = None
            self.explicit_deck = False
            # C10 per deck: the chart's remove_deck leaves the table dealing while another
            # deck is in place (C10_another_deck_in_place), else it waits for new cards
            self._fire("remove_deck")
        extra = {"deck": deck.name} if self.options.dual_deck or rule_id == "C7" else {}
        return self._d("remove_deck", rule_id, f"deck {deck.name} removed: {why}", **extra)

    def _void_round(self, rule_id: str, why: str, reshuffle: bool = True) -> list[Decision]:
        decisions = [self._d("void_round", rule_id, f"all hands void: {why}")]
        if self.round is not None:
            self.round.void_rule = rule_id
        if reshuffle:
            self._deck().reshuffle_rule = rule_id
            decisions.append(self._d("reshuffle", rule_id, "the cards must be reshuffled"))
        if self.state != "void":
            if self.state == "suspended":
                self._model.state = self.suspended_from or "dealing"
            self._fire("void")
        return decisions

    def _discard_unusable(self, card: str) -> None:
        deck = self._deck()
        if not deck.removed and deck.ledger.holds(SHOE, card) > 0:
            deck.ledger.move(card, SHOE, DISCARD)
            self._record(card, DISCARD, False)

    # ------------------------------------------------------------------ cards

    def _on_card_drawn(self, ev: dict[str, Any]) -> list[Decision]:
        card: str = ev["card"]
        face_up: bool = ev.get("face_up", False)
        state = self.state
        if state == "deck_removed" or self._deck().removed or self._due_deck_removed():
            return self._blocked_c10()
        if state == "void":
            self._discard_unusable(card)
            rule_id = (self.round.void_rule if self.round else None) or "C2"
            return [self._d("deal_blocked", rule_id, "the round is void: no more cards")]
        if state == "suspended":
            return [self._rejected("card_drawn: the shoe is suspended until it reconnects")]
        if self._another_method(stack=False):
            self._discard_unusable(card)
            return [self._d("deal_blocked", "C6", self._block_reason("C6"))]
        if self.round is None or state not in self._definition.round_states:
            foreign = self._foreign_card(card, ev.get("deck"))
            return foreign if foreign is not None else self._card_outside_round(card, face_up)
        if state == "starting_position":
            # A1: the deal starts only once the starting position is known.
            self._discard_unusable(card)
            return [
                self._d("procedure_violation", "A1", "a card dealt before the starting position"),
                self._notify("A1", "a card was dealt before the starting position was chosen"),
            ]
        decisions: list[Decision] = []
        if not self.round.started:
            decisions = self._start_deal()
            if not self.round.started:
                self._discard_unusable(card)
                return decisions
        blocked = self._mid_round_block()
        if blocked is not None:
            # a game's rule that stops the round's later cards too (C4 after a mid-round
            # reshuffle that jammed): the card is not dealt, nor taken for the burn card
            self._discard_unusable(card)
            return [*decisions, self._d("deal_blocked", blocked, self._block_reason(blocked))]
        foreign = self._foreign_card(card, ev.get("deck"))
        if foreign is not None:
            return decisions + foreign
        if face_up:
            return decisions + self._face_up_card(card)
        if self.burn_pending is not None:
            return decisions + self._burn(card)
        return decisions + self._deal_one(card)

    def _due_deck_removed(self) -> bool:
        """C10 per deck: no round open and the deck due next (two decks) is removed."""
        return self.round is None and self.decks[self._due_deck()].removed

    def _blocked_c10(self) -> list[Decision]:
        """C10: a deal from a removed deck; with no round open, counted (hands_collected)."""
        if self.round is None:
            self.blocked_without_round += 1
        return [self._d("deal_blocked", "C10", self._block_reason("C10"))]

    def _card_outside_round(self, card: str, face_up: bool) -> list[Decision]:
        if self.burn_pending is not None and not face_up:
            rule_id = self._deal_block()
            if rule_id is not None:
                # the burn card is drawn from the shoe like any other: same blocks
                self._discard_unusable(card)
                return [self._d("deal_blocked", rule_id, self._block_reason(rule_id))]
            return self._burn(card)
        if face_up:
            return self._face_up_card(card)
        if not self._early_card_is_violation():
            self._discard_unusable(card)
            return []
        self._discard_unusable(card)
        return self._before_bets("a card was drawn")

    def _before_bets(self, what: str) -> list[Decision]:
        """C9: a card drawn or a stack dispensed before "no more bets"."""
        # C9: the one place; an expected burn card (G2) never reaches here.
        return [
            self._d("procedure_violation", "C9", f"{what} before 'no more bets'"),
            self._notify("C9", f"{what} before 'no more bets'"),
        ]

    def _face_up_card(self, card: str) -> list[Decision]:
        """C1 and C2: cards found face up in the shoe while dealing."""
        self._discard_unusable(card)
        rnd = self.round
        found = 1
        if rnd is not None:
            rnd.face_up_found += 1
            found = rnd.face_up_found
        if found == 1:
            # C1: the first face-up card is not used; the next card takes its place.
            return [
                self._d("discard_card", "C1", "a card was found face up in the shoe", card=card)
            ]
        # C2: a second face-up card in the same round voids it.
        return self._void_round("C2", "a second card was found face up in the shoe")

    def _burn(self, card: str) -> list[Decision]:
        """G2 (new shoe or new dealer) and G5 (shoe reshuffled mid-round): burn one card."""
        rule_id = self.burn_pending or "G2"
        self.burn_pending = None
        # 2C.6(c): the burn card goes face down to the discard rack at once (so a rack
        # reading after it already holds it: R1 must not count it again).
        self._deck().ledger.move(card, SHOE, DISCARD)
        self.rack.direct += 1
        self._record(card, BURNED, False)
        why = {
            "G2": "the first card after the shoe is loaded or a new dealer comes is burned",
            "G5": "the first card after the mid-round reshuffle is burned",
        }[rule_id]
        return [self._d("burn_card", rule_id, why)]

    def _next_target(self, rnd: Round) -> str:
        # C3: a card drawn in error without its face exposed is simply the next card of
        # the deal order; nothing here (or anywhere) takes it for a misdeal.
        if rnd.extra_dealer_cards:
            rnd.extra_dealer_cards -= 1  # M2
            return DEALER
        if rnd.order:
            return rnd.order.pop(0)
        return UNASSIGNED

    def _deal_one(self, card: str) -> list[Decision]:
        rnd = self.round
        assert rnd is not None
        deck = self._deck()
        decisions: list[Decision] = []
        target = self._next_target(rnd)
        burned = self._burned_instead(target, card)
        if burned is not None:
            return burned
        deck.ledger.move(card, SHOE, target)
        rnd.cards_tracked += 1
        rnd.tally[target] = rnd.tally.get(target, 0) + 1
        self._record(card, target, self._dealt_face_up(target, rnd))
        decisions += self._card_dealt(target, card)
        return decisions

    def _on_stack_dispensed(self, ev: dict[str, Any]) -> list[Decision]:
        cards: list[str] = ev["cards"]
        if self.method != "automated_shoe":
            return [
                self._rejected(f"cards: a stack needs dealing automated_shoe, not {self.method}")
            ]
        state = self.state
        if state == "deck_removed" or self._deck().removed or self._due_deck_removed():
            return self._blocked_c10()
        if self._another_method(stack=True):
            return [self._d("deal_blocked", "C6", "the automated dealing shoe was removed")]
        if state == "void":
            for card in cards:
                self._discard_unusable(card)
            rule_id = (self.round.void_rule if self.round else None) or "C5"
            return [self._d("deal_blocked", rule_id, "the round is void: no more cards")]
        if state == "suspended":
            return [self._rejected("cards: the shoe is suspended until it reconnects")]
        stack = Counter(cards)
        if self.round is None or state not in self._definition.round_states:
            for card, copies in stack.items():
                foreign = self._foreign_card(card, None, copies)
                if foreign is not None:
                    return foreign
            for card in cards:
                self._discard_unusable(card)
            return self._before_bets("a stack was dispensed")
        rnd = self.round
        decisions: list[Decision] = []
        if not rnd.started:
            decisions = self._start_deal()
            if not rnd.started:
                for card in cards:
                    self._discard_unusable(card)
                return decisions
        for card, copies in stack.items():
            foreign = self._foreign_card(card, None, copies)
            if foreign is not None:
                return decisions + foreign
        if rnd.extra_dealer_cards:
            target, size = DEALER, rnd.extra_dealer_cards
            rnd.extra_dealer_cards = 0
        elif rnd.stacks:
            target, size = rnd.stacks.pop(0)
        else:
            target, size = UNASSIGNED, 0
        deck = self._deck()
        for card in cards:
            deck.ledger.move(card, SHOE, target)
            self._record(card, target, False)
        rnd.cards_tracked += len(cards)
        rnd.tally[target] = rnd.tally.get(target, 0) + len(cards)
        if len(cards) != size and target != UNASSIGNED:
            rnd.flagged.add(target)
            decisions += self._misdeal(target, len(cards))
        return decisions

    # ------------------------------------------------------------------ misdeals

    def _misdeal(self, target: str, count: int) -> list[Decision]:
        """One hand (or the community) holds ``count`` cards, not what the deal expects.

        By default any wrong count voids every hand under the game's ``misdeal_rule``;
        a game whose rule looks at whose hand it is overrides this.
        """
        rnd = self.round
        assert rnd is not None
        if rnd.void_rule is not None:
            return []
        what = "the community" if target == COMMUNITY else f"hand {target}"
        return self._void_round(
            self.misdeal_rule, f"{what} was dealt {count} cards", reshuffle=self.misdeal_reshuffles
        )

    def _on_misdeal_reported(self, ev: dict[str, Any]) -> list[Decision]:
        rnd = self.round
        if rnd is None or not self._in_round():
            return [self._rejected("misdeal_reported: no round is in play")]
        target = str(ev["position"])
        if target != DEALER and int(target) not in rnd.positions and not self.deals_every_position:
            return [self._rejected(f"position: {target} has no wager this round")]
        count: int = ev["cards"]
        if count == rnd.expected.get(target, -1):
            return [self._rejected(f"cards: {count} is the right number for {target}")]
        rnd.flagged.add(target)
        rnd.check_pending = False  # M7: the dealer answered the check
        return self._misdeal(target, count)

    def _on_deal_completed(self, ev: dict[str, Any]) -> list[Decision]:
        if self.state != "dealing" or self.round is None:
            return [self._rejected(f"deal_completed: no deal in progress (state {self.state})")]
        return self._complete_deal()

    def _deal_count_check(self, rnd: Round) -> list[Decision]:
        """At the end of the deal: the cards each target got against the deal's plan.

        A stack's size is certain (the ADS says which stack went where). A card-by-card
        count is not: a skipped position and a short last hand give the same tally, so
        where the decision depends on whose hand is wrong the dealer is asked to check.
        """
        wrong = [
            (target, rnd.tally.get(target, 0))
            for target, n in rnd.expected.items()
            if rnd.tally.get(target, 0) != n and target not in rnd.flagged
        ]
        over = rnd.tally.get(UNASSIGNED, 0)
        if not wrong and not over:
            return []
        if self.method != "automated_shoe":
            dealt = rnd.cards_tracked
            planned = sum(rnd.expected.values())
            uncertain = self._uncertain_count(rnd, f"the shoe read {dealt} cards for {planned}")
            if uncertain is not None:
                return uncertain
        decisions: list[Decision] = []
        for target, got in wrong:
            rnd.flagged.add(target)
            decisions += self._misdeal(target, got)
            if self.state != "dealing":
                break
        return decisions

    def _complete_deal(self) -> list[Decision]:
        """Compare what each hand received with the deal (M1-M4, M6, S4), then play on."""
        rnd = self.round
        assert rnd is not None
        decisions: list[Decision] = []
        if not rnd.started:
            if rnd.blocked:
                return []  # the cards were blocked already; this is not a deal (F5)
            if self.method != "hand":
                # L2: a shoe that reads every card read none: nothing was dealt, so the
                # round would be "played" with empty hands; it is dealt, or collected (void)
                return [
                    self._rejected(
                        f"deal_completed: the shoe read no card of round {rnd.number}; "
                        "nothing was dealt",
                        "L2",
                    )
                ]
            # dealt from the hand with no card reader: the deal itself is this event.
            decisions = self._start_deal()
            if not rnd.started:
                return decisions
        if rnd.cards_tracked:
            decisions += self._deal_count_check(rnd)
        if self.state == "dealing":
            self._fire("complete_deal")
        return decisions

    # ------------------------------------------------------------------ betting, starting

    def _on_bets_closed(self, ev: dict[str, Any]) -> list[Decision]:
        positions: list[int] = ev["positions"]
        allowed = self.options.positions
        if not self.C11_positions_within_the_table(positions):
            # C11 (the chart's condition on close_bets), checked before the last round ends
            return [
                self._rejected(
                    f"positions: {positions} names more than the {allowed} positions of this "
                    f"{self.profile.title} table (the game allows {self.profile.max_positions})",
                    "C11",
                )
            ]
        if not self.L1_no_round_in_play(positions):
            # L1 (the chart's condition on close_bets): the round in play is not replaced
            rnd = self.round
            assert rnd is not None
            return [
                self._rejected(
                    f"bets_closed: round {rnd.number} is in play ({self.state}); it ends "
                    "with hands_collected once played out, or void, before another opens",
                    "L1",
                )
            ]
        if not self.C10_the_rounds_deck_in_place(positions):
            # C10 (the chart's condition on close_bets): nothing to deal, so no round opens
            return [
                self._rejected(
                    f"bets_closed: deck {self._due_deck()} was removed; no round opens until "
                    "new cards are received and shuffled",
                    "C10",
                )
            ]
        self.blocked_without_round = 0
        decisions: list[Decision] = []
        if self.round is not None or self.state == "void":
            decisions += self._end_round()  # the void round's cards were collected
        if self.state == "shuffling":
            self._deck_for_shuffle(None).shuffling = False
        if self.options.dual_deck and not self.explicit_deck and self.last_round_deck:
            self.current = "B" if self.last_round_deck == "A" else "A"
        self.round_number += 1
        rnd = Round(self.round_number, self.current, positions)
        self.round = rnd
        self.rack.round_opened()
        self._fire("close_bets", positions)
        return decisions + self._bets_closed(rnd)

    def _plan(self, rnd: Round) -> None:
        """The deal order of the game's "order of play": by default one card at a time to
        each wagered position and then the dealer, round after round (a game overrides)."""
        players = [str(p) for p in rnd.positions]
        rnd.order = [*players, DEALER] * self.profile.cards_per_hand
        rnd.expected = dict.fromkeys(players, self.profile.cards_per_hand)
        rnd.expected[DEALER] = self.profile.dealer_cards
        rnd.planned_cards = sum(rnd.expected.values()) + self.profile.community_cards

    # ------------------------------------------------------------------ stub counts

    def _on_stub_counted(self, ev: dict[str, Any]) -> list[Decision]:
        deck = self._deck()
        if deck.removed:
            return [self._rejected("stub_counted: the deck was removed", "C10")]
        count: int = ev["count"]
        hand_counts: dict[str, int] = ev.get("hand_counts", {})
        rnd = self.round
        size = self.composition.size
        set_aside = deck.ledger.count(DISCARD) + deck.ledger.count(BURNED) if rnd else 0
        stub = self._stub_expected(set_aside) if rnd is not None else None
        if stub is not None:
            expected = stub
        elif rnd is not None and rnd.cards_tracked == 0 and rnd.started:
            # hand dealing without a card reader: the cards out are the deal's.
            expected = size - rnd.planned_cards
        else:
            expected = deck.ledger.count(SHOE)
        misdealt: dict[str, int] = {}
        # The cards out of the stub: each hand as the dealer reports it (else as the deal
        # tracked it, else as planned), the board, and the cards set aside. The board is
        # part of the 52 (39.7(e): the stub is counted after the community cards are dealt).
        out = set_aside
        over_dealt = 0
        if rnd is not None:
            for target, n in rnd.expected.items():
                if target == COMMUNITY:
                    continue
                held = hand_counts.get(target)
                if held is None and rnd.cards_tracked and self.tracked_counts_are_the_hands:
                    held = rnd.tally.get(target, 0)
                if held is not None and held != n and target not in rnd.flagged:
                    misdealt[target] = held
                if held is None:
                    held = rnd.tally.get(target, 0) if rnd.cards_tracked else n
                out += held
            if self.profile.community_cards:
                # the board is in the deck's count (39.7(e): counted after the board is dealt)
                out += (
                    rnd.tally.get(COMMUNITY, 0)
                    if rnd.cards_tracked
                    else self.profile.community_cards
                )
            if not hand_counts:
                # a card drawn beyond the deal order lies on some hand: that hand holds
                # more than its count (31.8(d)2, 40.7(f)2, 39.7(f)2), though none says which.
                over_dealt = rnd.tally.get(UNASSIGNED, 0)
                out += over_dealt
        if count == expected:
            self._counter(deck).count_verified()  # S1: a verified count
            # the deck is whole; a hand the dealer found misdealt is the game's misdeal
            # rule (40.12(d), 39.12(c), 2C.14(g)), not the stub count's (40.7(f)1).
            decisions: list[Decision] = []
            for target, held in misdealt.items():
                if self.state == "void":
                    break
                assert rnd is not None
                rnd.flagged.add(target)
                rnd.check_pending = False  # M7: the hand counts answer the check
                decisions += self._misdeal(target, held)
            return decisions
        rule_id = self.stub_rule
        whole = self._stub_misdeal_keeps_the_deck(
            bool(misdealt) or over_dealt > 0, count + out == size
        )
        if whole:
            if rnd is not None and rnd.void_rule is None and self.state != "void":
                return self._void_round(rule_id, "the cards were misdealt", reshuffle=False)
            return []
        return self._void_and_remove(
            rule_id, f"the stub count {count} does not add up to the {size}-card deck"
        )

    # ------------------------------------------------------------------ shuffles and decks

    def _deck_for_shuffle(self, named: str | None) -> Deck:
        if named is not None:
            return self.decks[named] if named in self.decks else self.decks["A"]
        if self.options.dual_deck:
            shuffling = [d for d in self.decks.values() if d.shuffling]
            if shuffling:
                return shuffling[0]
            other = "B" if self.current == "A" else "A"
            return self.decks[other if self._in_round() else self.current]
        return self.decks["A"]

    def _on_shuffle_started(self, ev: dict[str, Any]) -> list[Decision]:
        if ev.get("deck") is not None and ev["deck"] not in self.decks:
            return [self._rejected(f"deck: {ev['deck']!r}: this table has one deck, A")]
        if self._shuffler_holds_next_batch():
            self.next_batch = "shuffling"
            return []
        deck = self._deck_for_shuffle(ev.get("deck"))
        if self._round_open() and not self._model.trigger("shuffle_mid_round", deck.name):
            return [self._shuffle_refused(deck)]
        ended = self._void_round_to_shuffler(deck)
        deck.shuffling = True
        deck.shuffled = False
        self.rack.shuffled(deck.name)
        if self.state == "idle" and not self.options.dual_deck:
            self._fire("start_shuffle")
        return ended

    def _shuffle_findings(self, deck: str, round_number: int) -> list[Decision]:
        """Q1, Q2: the ended round's cards, in the order they left the shoe, to the watch.

        Only an ended round's cards go in (never the round in play: H7), and a finding names
        rounds and a statistic, never a card. It blocks nothing: surveillance is told.
        """
        if self.integrity.watch is None:
            return []
        cards = [entry["card"] for entry in self.dealt]
        return self.integrity.round_ended(deck, round_number, cards)

    def _shuffle_refused(self, deck: Deck) -> Decision:
        """L3: a shuffle of the deck whose round is in play is not taken."""
        assert self.round is not None
        return self._rejected(
            f"deck {deck.name}: its cards are in round {self.round.number}'s hands "
            "until the round is collected or void; they are not shuffled now",
            "L3",
        )

    def _void_round_to_shuffler(self, deck: Deck) -> list[Decision]:
        """A void round whose deck goes back to the shuffler is over; nothing reached the rack.

        C5 (40.12(f), 39.12(f)): "the cards in the device are reshuffled with the cards
        already dealt", so D2 (cards of one deck in the rack) and R1 never see them.
        """
        rnd = self.round
        if rnd is None or self.state != "void" or rnd.deck != deck.name:
            return []
        if self._counts_in_alternation(rnd):
            self.last_round_deck = deck.name
        ended = self._shuffle_findings(deck.name, rnd.number)  # over: tested like any round
        deck.layout_to_shuffler()  # its cards go into the shuffler with the deck
        self.round = None
        self.dealt = []
        self.explicit_deck = False
        self.rack.expected_min = None
        self._fire("collect")
        return ended

    def _on_shuffle_completed(self, ev: dict[str, Any]) -> list[Decision]:
        if ev.get("deck") is not None and ev["deck"] not in self.decks:
            return [self._rejected(f"deck: {ev['deck']!r}: this table has one deck, A")]
        if self._shuffler_holds_next_batch():
            return self._next_batch_completed(ev.get("count"))
        deck = self._deck_for_shuffle(ev.get("deck"))
        if deck.removed:
            return [
                self._rejected(
                    f"shuffle_completed: deck {deck.name} was removed; deck_received first", "C10"
                )
            ]
        count: int | None = ev.get("count")
        size = self.composition.size
        miscounted = (
            count is not None
            and count != size
            and (self.counts_the_stub or self.interp.count_mismatch_removes_deck_everywhere)
        )
        if (
            not miscounted
            and self._round_open()
            and not self._model.trigger("shuffle_mid_round", deck.name)
        ):
            return [self._shuffle_refused(deck)]  # L3 (a wrong count is C7's, below)
        deck.shuffling = False
        ended: list[Decision] = []
        if not miscounted:
            ended = self._void_round_to_shuffler(deck)  # its cards are in this shuffle (C5)
        if self.state == "shuffling":
            self._fire("finish_shuffle")
        self.rack.shuffled(deck.name)
        if miscounted:
            # C7: the counting shuffler found other than the full deck.
            return self._void_and_remove_if_current(
                deck, "C7", f"the shuffler counted {count} cards, not {size}"
            )
        manual = ev.get("method") == "manual" or self.asd_removed
        if manual and self.options.shuffler != "none" and not self._asd_may_be_replaced():
            # C6: another shuffling method while the ASD is still at the table.
            deck.manual_shuffle_refused = True
            return ended
        if self._rack_reshuffled_mid_round():
            # G5: the discard rack, reshuffled mid-round, goes back in the shoe.
            deck.ledger.move_all(DISCARD, SHOE)
            if self.round is not None:
                self.round.rack_reshuffled = True
            self._new_shoe_order(deck.name, whole=False)
        else:
            deck.ledger.gather(SHOE)
            self._new_shoe_order(deck.name, whole=True)
        deck.shuffle_done()
        self.bart_carter_flagged = False
        if not manual:
            self.asd_faulted = False
        if count == size and self._counting_exemption():
            self._counter(deck).count_verified()  # S2: a full count is a verified count
        return ended

    def _shoe_shuffled_whole(self) -> bool:
        """Q1, Q2 compare a whole shuffle with the deal before it: a game whose shoe is never
        shuffled whole (a partial reshuffle into the shoe) says no, and is not watched."""
        return True

    def _new_shoe_order(self, deck: str, whole: bool) -> None:
        """Q1, Q2: a shuffled deck goes into play. Only a whole deck's shuffle is compared with
        the deal before it (G5's reshuffled rack is a part: its pairs tell nothing)."""
        self.integrity.new_order(deck, whole)

    def _another_method(self, stack: bool) -> bool:
        """C6: a deal by another method than the table's ADS while the ADS is still there
        (a card by hand or manual shoe), or by the ADS after it was removed."""
        # C6: dealing; shuffles by another method are judged by _asd_may_be_replaced.
        if stack:
            return self.ads_removed
        extra_dealer_card = self.round is not None and self.round.extra_dealer_cards > 0  # M2
        return self.method == "automated_shoe" and not self.ads_removed and not extra_dealer_card

    def _asd_may_be_replaced(self) -> bool:
        """C6: removed (and, where the game asks it, seen empty by a supervisor)."""
        if self.replacing_the_shuffler_needs_empty_check:
            return self.asd_removed and self.shuffler_emptied
        return self.asd_removed

    def _counting_exemption(self) -> bool:
        """S2: a counting shuffler in place exempts from the stub count where the game
        allows it (``_count_exempts``)."""
        if self.options.shuffler != "counting" or self.asd_removed:
            return False
        return self._count_exempts()

    def _void_and_remove_if_current(self, deck: Deck, rule_id: str, why: str) -> list[Decision]:
        if deck.name == self.current:
            return self._void_and_remove(rule_id, why)
        return [self._remove(deck, rule_id, why)]

    def _on_shuffler_fault(self, ev: dict[str, Any]) -> list[Decision]:
        return self._shuffler_failed(f"the shuffler reported {ev['fault']}")

    def _shuffler_failed(self, why: str) -> list[Decision]:
        """C4: a jam, a stop or an incomplete cycle: reshuffle; the batch may not be dealt."""
        if self._shuffler_holds_next_batch():
            # C4 for the next batch in the shuffler: the shoe in play shuffled fine and deals on.
            self.next_batch = "faulted"
            self.device_faults["shuffler"] = why
            return [self._d("reshuffle", "C4", f"{why}: the batch in the shuffler is reshuffled")]
        deck = self._deck_for_shuffle(None)
        deck.shuffling = False
        deck.faulted = True
        deck.shuffled = False
        self.asd_faulted = True
        self.device_faults["shuffler"] = why
        if self.state == "shuffling":
            self._fire("fault_shuffle")
        return [self._d("reshuffle", "C4", f"{why}: the cards must be reshuffled")]

    def _on_shoe_loaded(self, ev: dict[str, Any]) -> list[Decision]:
        named = ev.get("deck")
        if named is not None:
            if named not in self.decks:
                return [self._rejected(f"deck: {named!r}: this table has one deck, A")]
            rnd = self.round
            if rnd is not None and named != rnd.deck:
                # L: the round's cards (a void one's too, until collected) are of its deck
                if rnd.started or not self._in_round():
                    return [self._rejected("shoe_loaded: another deck mid-round")]
                rnd.deck = named  # no card dealt yet: the round is dealt from it
            self.current = named
            self.explicit_deck = True
        if not self._round_open():
            # between rounds only: a round in play (suspended too) deals on from the shoe it
            # has; the shuffler's next batch is loaded after it (2C.4(i)2)
            self._load_next_batch()
        if self.asd_removed and self.options.shuffler != "none":
            # C6: cards loaded after the ASD left were shuffled by another method.
            self._deck().manual_shuffle_refused = not self._asd_may_be_replaced()
        self._new_shoe_or_dealer()
        return []

    def _on_dealer_changed(self, ev: dict[str, Any]) -> list[Decision]:
        self._new_shoe_or_dealer()
        return []

    def _on_deck_received(self, ev: dict[str, Any]) -> list[Decision]:
        named = ev.get("deck") or ("A" if not self.options.dual_deck else None)
        if named is None:
            removed = [d.name for d in self.decks.values() if d.removed]
            named = removed[0] if removed else self.current
        if named not in self.decks:
            return [self._rejected(f"deck: {named!r}: this table has one deck, A")]
        if self._shuffler_holds_next_batch():
            self.next_batch = "fresh"  # new cards for the shuffler's next batch
            return []
        if self._in_round() and named == self.current:
            return [self._rejected("deck_received: a round is in play with that deck")]
        rnd = self.round
        if rnd is not None and self.state == "suspended" and rnd.deck == named:
            # a suspended round resumes with its cards (a device back): its deck stays in play
            return [
                self._rejected(
                    f"deck_received: round {rnd.number} is suspended with deck {named}'s "
                    "cards out; it resumes or is voided first"
                )
            ]
        if rnd is not None and self.state == "void" and rnd.deck == named:
            if self.interp.deck_receipt_waits_for_void_collection:
                # I2 (configured): the void round's cards are collected before new cards
                return [
                    self._rejected(
                        f"deck_received: void round {rnd.number}'s cards of deck {named} "
                        "are still on the layout; hands_collected first"
                    )
                ]
            # I2: the void round's cards stay the old deck's, on the layout until collected;
            # they still go to the discard rack (D2, R1 count them then)
            rnd.layout_left += self.decks[named].layout_count()
        # C10: new cards, inspected at receipt (a verified count), to be shuffled first.
        self.decks[named] = Deck.received(named, self.composition)
        self.blocked_without_round = 0
        if self.state == "deck_removed" and self.C10_another_deck_in_place():
            self._fire("receive_deck")  # C10 per deck: a deck is in place again
        return []

    def _on_reshuffle_requested(self, ev: dict[str, Any]) -> list[Decision]:
        rule_id = self.house_reshuffle_rule
        deck = self._deck()
        if not deck.removed:
            deck.reshuffle_rule = rule_id
        return [self._d("reshuffle", rule_id, "the house reshuffles at its discretion")]

    def _on_shoe_fault(self, ev: dict[str, Any]) -> list[Decision]:
        fault: str = ev["fault"]
        self.device_faults["shoe"] = fault
        if fault == "empty" and self._in_round():
            ran_out = self._shoe_ran_out()
            if ran_out is not None:
                return ran_out
        if self.method != "automated_shoe":
            if fault == UNDECODABLE_FRAME:
                return self._card_unread()
            return self._manual_shoe_fault(fault) if fault != "empty" else []
        return self._ads_failed(f"the automated dealing shoe reported {fault}")

    def _card_unread(self) -> list[Decision]:
        """X2: the card-reading shoe sent a frame that cannot be decoded.

        A card may have left the shoe unread, so the ledger no longer vouches for the hands
        or the shoe: as for an ADS that failed (C5), the round in play is void and the cards
        are reshuffled; between rounds, the reshuffle alone.
        """
        why = "the shoe sent a frame it could not decode: a card may have left it unread"
        if self.state == "void":
            return []  # the round is void already; its reshuffle is due
        if self._in_round() or self.state == "suspended":
            return self._void_round("X2", why)
        deck = self._deck()
        if deck.removed:
            return []  # C10: no deal from it until new cards come
        deck.reshuffle_rule = "X2"
        return [self._d("reshuffle", "X2", f"{why}: the cards must be reshuffled")]

    def _ads_failed(self, why: str) -> list[Decision]:
        """C5: the ADS jammed, stopped or did not deal all cards."""
        if self._in_round() or self.state == "suspended":
            return self._void_round("C5", why)
        if self.state == "void":
            return []
        self._deck().reshuffle_rule = "C5"
        return [self._d("reshuffle", "C5", f"{why}: the cards in it must be reshuffled")]

    def _on_device_removed(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        if kind == "shuffler":
            self.asd_removed = True
        elif kind == "shoe":
            self.ads_removed = True
        else:
            return [self._rejected(f"device: {ev['device']!r} is not a shuffler or a shoe")]
        return []

    def _on_shuffler_empty_confirmed(self, ev: dict[str, Any]) -> list[Decision]:
        self.shuffler_emptied = True
        return []

    def _on_device_lost(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        self.device_faults[ev["device"]] = "lost"
        if kind == "hole_card_reader":
            return self._reader_down("the hole-card reader stopped answering")
        if kind == "shuffler" and any(d.shuffling for d in self.decks.values()):
            return self._shuffler_failed("the shuffler stopped answering mid-shuffle")
        if kind == "shoe" and self._in_round():
            if self.method == "automated_shoe":
                return self._ads_failed("the automated dealing shoe stopped answering")
            self.suspended_from = self.state
            self._fire("suspend")
        return []

    def _on_device_connected(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        self.device_faults.pop(ev["device"], None)
        if kind == "shoe" and self.state == "suspended" and self.suspended_from:
            self._machine.set_state(self.suspended_from, model=self._model)
            self.suspended_from = None
        if kind == "shuffler":
            self.asd_removed = False
        return []

    # ------------------------------------------------------------------ hooks
    # What a game changes overrides one of these (controller/engine/games/); the defaults are
    # those of a face-down game dealt one card at a time and shuffled after every round.

    def _blocked_round(self) -> bool:
        """A round whose deal was blocked and never started: its steps decide nothing."""
        rnd = self.round
        return rnd is not None and rnd.blocked and not rnd.started

    def _reader_state(self) -> str:
        """The hole-card reader's state for status (none: the game has no reader)."""
        return "none"

    def _bets_closed(self, rnd: Round) -> list[Decision]:
        """After "no more bets": plan the deal (a game may first choose a start, A1)."""
        self._plan(rnd)
        return []

    def _early_card_is_violation(self) -> bool:
        """C9: a card drawn before "no more bets" (not an expected burn) is a violation."""
        return True

    def _burned_instead(self, target: str, card: str) -> list[Decision] | None:
        """A card the rules burn instead of dealing it to ``target`` (e.g. G6), or None."""
        return None

    def _card_dealt(self, target: str, card: str) -> list[Decision]:
        """After a card reached ``target``: what the game's rules make of it."""
        return []

    def _dealt_face_up(self, target: str, rnd: Round) -> bool:
        """Whether a card dealt to ``target`` lies face up (H7: face-down cards stay hidden)."""
        return False

    def _uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
        """A card-by-card deal whose count is wrong, no device saying whose hand: the
        decision where it does not depend on whose hand (or asks the dealer), else None
        (each wrong hand is then judged by ``_misdeal`` from the deal order)."""
        return None

    def _stub_expected(self, set_aside: int) -> int | None:
        """The stub the game's own rule expects in a round (S4), or None (the ledger's)."""
        return None

    def _stub_misdeal_keeps_the_deck(self, misdealt: bool, adds_up: bool) -> bool:
        """S3 (40.7(f)2, 39.7(f)2): a wrong stub count voids the hands and keeps the deck
        only when the cards were misdealt "but 52 cards remain" (count + hands + board +
        set aside make the deck); otherwise the deck is removed."""
        return misdealt and adds_up

    def _count_exempts(self) -> bool:
        """S2: whether a counting shuffler exempts this game (and method) from S1."""
        return False

    def _rack_reshuffled_mid_round(self) -> bool:
        """G5: a shuffle completed mid-round puts the discard rack back in the shoe."""
        return False

    def _shuffler_holds_next_batch(self) -> bool:
        """Whether a shuffle now is of the shuffler's next batch, not of the cards dealt."""
        return False

    def _next_batch_completed(self, count: int | None) -> list[Decision]:
        return []

    def _load_next_batch(self) -> None:
        """The shuffler's next batch goes into the shoe (games that deal from a shoe)."""

    def _new_shoe_or_dealer(self) -> None:
        """A new shoe or a new dealer (G2 burns a card where the game asks it)."""

    def _shoe_ran_out(self) -> list[Decision] | None:
        """The shoe reported empty mid-round: the game's rule (G5), or None."""
        return None

    def _reader_down(self, why: str, rule_id: str = "H5") -> list[Decision]:
        """H5: a malfunctioning reader (a game without a reader ignores it)."""
        return []

    def _rack_rules(self, level: int) -> list[Decision]:
        """The game's own rules on the discard rack's level (G4, G7)."""
        return []

    def _resumes_after_restart(self) -> bool:
        """X1: whether a round in play resumes after a restart (cards dealt face up)."""
        return False

    def _unfinished_remedy(self) -> list[Decision]:
        """At the collection of a round played out: a remedy the rules asked for and never
        got (a game's own rule), as decisions that end the round void; none by default."""
        return []

    def _mid_round_block(self) -> str | None:
        """A game's rule that blocks a later card of a round already dealing (C4 after a
        mid-round reshuffle of its own jammed), or None."""
        return None

    def _manual_shoe_fault(self, fault: str) -> list[Decision]:
        """A manual (card-reading) shoe reports a fault other than empty or an undecodable
        frame: nothing by default (the cards dealt stand); a game may decide (I6)."""
        return []

    # Events of another game's steps: refused, naming the step this game does not have.

    def _on_bonus_settled(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"bonus_settled: {self.game} has no bonus step")]

    def _on_insurance_closed(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"insurance_closed: {self.game} has no insurance")]

    def _on_dealer_turn(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"dealer_turn: {self.game} has no dealer's turn")]

    def _on_cut_card_reached(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"cut_card_reached: {self.game} has no cut card in the shoe")]

    def _on_starting_position(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"starting_position: {self.game} has no starting position")]

    def _on_dealer_card_exposed(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected(f"dealer_card_exposed: {self.game} has no such irregularity")]

    def _on_reader_inserted(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_inserted: this table has no hole-card reader")]

    def _on_reader_result(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_result: this table has no hole-card reader")]

    def _on_reader_fault(self, ev: dict[str, Any]) -> list[Decision]:
        return [self._rejected("reader_fault: this table has no hole-card reader")]

    # ------------------------------------------------------------------ hole-card reader

    def _on_reader_inspected(self, ev: dict[str, Any]) -> list[Decision]:
        if self.reader.inspected(self._gaming_day(ev.get("time"))):
            self.device_faults.pop("hole_card_reader", None)
        return []

    # ------------------------------------------------------------------ the discard rack

    def _on_rack_level(self, ev: dict[str, Any]) -> list[Decision]:
        return self.rack.reading(ev["cards"])

    def _on_rack_cleared(self, ev: dict[str, Any]) -> list[Decision]:
        return self.rack.reading(0)

    def _on_rack_fault(self, ev: dict[str, Any]) -> list[Decision]:
        """The sensor failed: its last count stands unconfirmed and the fault shows in the
        status (degraded) until it reports a level or an empty rack again; nothing the rules
        gate on a rack count is decided from a sensor that says it cannot count."""
        self.device_faults["discard_rack"] = str(ev["fault"])
        return []

    # ------------------------------------------------------------------ collection, misc

    def _on_hands_collected(self, ev: dict[str, Any]) -> list[Decision]:
        if self.round is None and self.blocked_without_round:
            # C10: the dealer dealt (every card blocked) after bets_closed was refused: say so
            return [
                self._rejected(
                    "hands_collected: no round is in play: the deck was removed, no round "
                    "opened and every card drawn since was blocked",
                    "C10",
                )
            ]
        if self.round is None and self.state not in ("void", "suspended"):
            return []
        decisions: list[Decision] = []
        if self.state == "dealing" and self.deal_fulfilled():
            # every card the deal planned was read: the collection ends the deal first, and
            # each hand is checked against it as deal_completed would
            decisions = self._complete_deal()
        if not self.L2_deal_complete():
            # L2 (the chart's condition on collect): a round collected mid-deal (or before
            # its deal began, say blocked) holds hands of the wrong count: it ends void
            rnd = self.round
            assert rnd is not None
            how = " (its deal was blocked)" if rnd.blocked and not rnd.started else ""
            decisions += self._void_round(
                "L2",
                f"round {rnd.number} was collected before its deal was complete{how}",
                reshuffle=False,
            )
        elif self.state != "void":
            # a remedy asked for and not carried out (the chart's game rules on collect)
            decisions += self._unfinished_remedy()
        return decisions + self._end_round()

    def deal_fulfilled(self) -> bool:
        """Every card or stack the deal of the round in play planned has been read."""
        rnd = self.round
        if rnd is None or not rnd.started or rnd.extra_dealer_cards:
            return False
        return not (rnd.stacks if self.method == "automated_shoe" else rnd.order)

    def _on_supervisor_ack(self, ev: dict[str, Any]) -> list[Decision]:
        self.pending_notifications.clear()
        return []

    def _on_controller_restarted(self, ev: dict[str, Any]) -> list[Decision]:
        """X1: a round in progress resumes where its cards allow it, else it is void."""
        # X1: a game dealt face up may resume (_resumes_after_restart); face down, void.
        rnd = self.round
        if rnd is None or not (self._in_round() or self.state == "suspended"):
            return []
        if not rnd.started or self._resumes_after_restart():
            return [self._d("continue_play", "X1", "the controller restarted; the round resumes")]
        return self._void_round("X1", "the controller restarted with face-down cards out")
