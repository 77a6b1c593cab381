"""What the engine knows of its table, and the services each of its parts uses.

The state (decks, the round in play, devices, the rule families' objects) and the few
helpers every part calls: a decision with the catalogue's citation for the game in play,
a notification to the supervisor, a trigger of the chart, the deck in play. The bottom of
the engine's parts (controller/engine/core.py composes them); it names no game.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol

from tablectl.controller.engine.cards import Composition
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.gaming_day import gaming_day_of, parse_start
from tablectl.controller.engine.integrity import ShuffleIntegrity
from tablectl.controller.engine.interpretations import Interpretations
from tablectl.controller.engine.ledger import (
    BURNED,
    DISCARD,
    Ledger,
)
from tablectl.controller.engine.machine import (
    MachineDefinition,
    RoundModel,
)
from tablectl.controller.engine.rack import DiscardRack
from tablectl.controller.engine.reader import HoleCardReader
from tablectl.controller.engine.rules import citation
from tablectl.controller.engine.table import TableOptions, TableSpec

UNASSIGNED = "unassigned"  # a card beyond the deal order of a face-down game
LAYOUT_TARGET_NAMES = {BURNED: "burn", DISCARD: "discard"}


#: The game API this tablectl provides (``tablectl.games``, docs/games.md): MAJOR changes when
#: a game written for the last one could misbehave, MINOR when something is added a game may use.
GAME_API_VERSION = "2.0"


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


class RoundServices(Protocol):
    """What the hooks of a game ask of the round's life (round_life.py's ``RoundLife``, which
    the core composes); named here so that the table's state imports none of its parts."""

    def _void_round(self, rule_id: str, why: str, reshuffle: bool = True) -> list[Decision]: ...

    def _complete_deal(self) -> list[Decision]: ...

    def deal_fulfilled(self) -> bool: ...


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


class TableState:
    """What the engine knows of its table, and the services every part of it uses: a
    decision with the catalogue's citation, the supervisor's notifications, the chart's
    trigger, the deck in play. Its fields are set by ``Engine.__init__`` (core.py)."""

    spec: TableSpec
    game: str
    options: TableOptions
    interp: Interpretations
    method: str
    composition: Composition
    _random_source: Callable[[int], int] | None
    _definition: MachineDefinition
    _model: RoundModel
    _machine: Any
    decks: dict[str, Deck]
    current: str
    explicit_deck: bool
    last_round_deck: str | None
    round: Round | None
    round_number: int
    dealt: list[dict[str, Any]]
    burn_pending: str | None
    asd_removed: bool
    ads_removed: bool
    asd_faulted: bool
    shuffler_emptied: bool
    reader: HoleCardReader
    rack: DiscardRack
    bart_carter_flagged: bool
    pending_notifications: list[str]
    suspended_from: str | None
    device_faults: dict[str, str]
    next_batch: str | None
    integrity: ShuffleIntegrity
    round_life: RoundServices
    _at: int
    _time: datetime | None
    blocked_without_round: int

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

    @property
    def state(self) -> str:
        """The state machine's current state."""
        return self._model.state

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

    def _round_open(self) -> bool:
        """A round is in play: bets closed, not yet collected nor void (suspended counts)."""
        return self.round is not None and (
            self.state in self._definition.round_states or self.state == "suspended"
        )

    def _deck(self) -> Deck:
        return self.decks[self.current]

    def _deck_state(self, deck: Deck) -> str:
        return deck.state(deck.name == self.current and self._in_round())

    def _deck_for_shuffle(self, named: str | None) -> Deck:
        """The deck a shuffle is of: the one named, else the one shuffling, else with two
        decks the one not in play (the other's round is dealt meanwhile)."""
        if named is not None:
            return self.decks[named] if named in self.decks else self.decks["A"]
        if self.options.dual_deck:
            shuffling = [d for d in self.decks.values() if d.shuffling]
            if shuffling:
                return shuffling[0]
            other = "B" if self.current == "A" else "A"
            return self.decks[other if self._in_round() else self.current]
        return self.decks["A"]

    def _gaming_day(self, when: datetime | None) -> date | str:
        """The gaming day of ``when``; events without a time share one day ("untimed")."""
        if when is None:
            return "untimed"
        return gaming_day_of(when, parse_start(self.options.gaming_day_start))

    def _record(self, card: str, target: str, face_up: bool) -> None:
        to: int | str = int(target) if target.isdigit() else LAYOUT_TARGET_NAMES.get(target, target)
        self.dealt.append({"card": card, "to": to, "face_up": face_up})
