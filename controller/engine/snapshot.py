"""The engine's state as JSON data, versioned, for the journal; and back.

``Engine.snapshot()`` writes it, ``Engine.restore(spec, snapshot)`` continues from it
exactly (the same decisions and status for every later event); a snapshot of another
version or game, or one that breaks conservation, is refused naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from datetime import date
from typing import Any

from tablectl.controller.engine.deck import Deck
from tablectl.controller.engine.ledger import (
    Ledger,
    LedgerError,
)
from tablectl.controller.engine.table_state import Round, TableState

# Engine.snapshot()'s format. Adding a field with a default keeps the version (an older
# snapshot restores with the default); renaming or re-meaning one bumps it.
SNAPSHOT_VERSION = 1


class SnapshotError(ValueError):
    """A snapshot Engine.restore cannot use; the message names the field and why."""


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


class Snapshots:
    """The engine's whole state to JSON data and back (``Engine.restore`` builds one)."""

    __slots__ = ("table",)

    def __init__(self, table: TableState) -> None:
        self.table = table

    def snapshot(self) -> dict[str, Any]:
        """The engine's whole state as JSON data (versioned, key order fixed), for the journal.

        ``Engine.restore(spec, snapshot)`` continues exactly where this engine is: the same
        decisions and status for every later event. It holds face-down cards (the ledger,
        the dealer's hole card, this round's dealt cards): journal only, never a log (H7).
        """
        rnd = self.table.round
        day = self.table.reader_inspected_day
        return {
            "version": SNAPSHOT_VERSION,
            "game": self.table.game,
            "state": self.table.state,
            "decks": {
                name: {
                    **{
                        f.name: _plain(getattr(deck, f.name))
                        for f in fields(Deck)
                        if f.name not in ("name", "ledger")
                    },
                    "ledger": deck.ledger.as_dict(),
                }
                for name, deck in sorted(self.table.decks.items())
            },
            "round": None
            if rnd is None
            else {f.name: _plain(getattr(rnd, f.name)) for f in fields(Round)},
            "reader_inspected_day": _day_text(day),
            **{name: _plain(getattr(self.table, name)) for name in _SNAPSHOT_SCALARS},
            **(
                {"reader_fault_day": _day_text(self.table.reader_fault_day)}
                if self.table.reader_fault_day is not None
                else {}
            ),
            **(
                {"blocked_without_round": self.table.blocked_without_round}
                if self.table.blocked_without_round
                else {}
            ),
            **(
                {"shuffle_watch": self.table.shuffle_watch.snapshot()}
                if self.table.shuffle_watch is not None
                else {}
            ),
        }

    def _load(self, snap: Mapping[str, Any]) -> None:
        if not isinstance(snap, Mapping):
            raise SnapshotError(f"snapshot: must be an object, got {type(snap).__name__}")
        version = snap.get("version")
        if version != SNAPSHOT_VERSION:
            raise SnapshotError(f"version: {version!r}; this engine reads {SNAPSHOT_VERSION}")
        if snap.get("game") != self.table.game:
            raise SnapshotError(f"game: {snap.get('game')!r}, but the table is {self.table.game}")
        expected = {"version", "game", "state", "decks", "round", "reader_inspected_day"}
        expected.update(_SNAPSHOT_SCALARS)
        # optional: a snapshot from before the shuffle watch restores with an empty one
        unknown = sorted(set(snap) - expected - {"shuffle_watch"} - set(_OPTIONAL_SCALARS))
        missing = sorted(expected - set(snap))
        if unknown or missing:
            what = f"{unknown[0]}: unknown" if unknown else f"{missing[0]}: missing"
            raise SnapshotError(what)
        state = snap["state"]
        if state not in self.table._definition.states:
            raise SnapshotError(f"state: {state!r} is not a state of {self.table.game}")
        decks = snap["decks"]
        if not isinstance(decks, Mapping) or sorted(decks) != sorted(self.table.decks):
            raise SnapshotError(f"decks: must name the decks {', '.join(sorted(self.table.decks))}")
        for name, data in decks.items():
            where = f"decks.{name}"
            if not isinstance(data, Mapping):
                raise SnapshotError(f"{where}: must be an object")
            args = _fields_of(Deck, {"name": name, **data}, where)
            try:
                args["ledger"] = Ledger.from_dict(self.table.composition, args["ledger"])
            except (LedgerError, AttributeError, TypeError) as error:
                raise SnapshotError(f"{where}.ledger: {error}") from None
            self.table.decks[name] = Deck(**args)
        rnd = snap["round"]
        if rnd is None:
            self.table.round = None
        else:
            args = _fields_of(Round, rnd, "round")
            for name in _SETS & set(args):
                args[name] = set(args[name])
            if "stacks" in args:
                args["stacks"] = [(str(t), int(n)) for t, n in args["stacks"]]
            self.table.round = Round(**args)
        self.table.reader_inspected_day = _day_of(
            snap["reader_inspected_day"], "reader_inspected_day"
        )
        self.table.reader_fault_day = _day_of(snap.get("reader_fault_day"), "reader_fault_day")
        blocked = snap.get("blocked_without_round", 0)
        if not isinstance(blocked, int) or blocked < 0:
            raise SnapshotError(f"blocked_without_round: {blocked!r} is not a count")
        self.table.blocked_without_round = blocked
        for name in _SNAPSHOT_SCALARS:
            setattr(self.table, name, snap[name])
        watch = snap.get("shuffle_watch")
        if self.table.shuffle_watch is not None and isinstance(watch, Mapping):
            try:
                self.table.shuffle_watch.restore(watch)
            except (KeyError, TypeError, ValueError) as error:
                raise SnapshotError(f"shuffle_watch: {error}") from None
        self.table._machine.set_state(state, model=self.table._model)
