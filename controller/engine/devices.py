"""The table's devices: a shoe or shuffler fault (C4, C5, X2), a device removed, lost or
back, and the events of the families' devices (the hole-card reader, reader.py; the
discard rack, rack.py), routed to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.events import UNDECODABLE_FRAME
from tablectl.controller.engine.gates import DealGates
from tablectl.controller.engine.round_life import RoundLife
from tablectl.controller.engine.shuffles import Shuffles

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


class Devices:
    """The devices' events: faults, removal, loss and return, the reader's inspection and
    the rack's readings (routed to their families), the supervisor's acknowledgement."""

    __slots__ = ("round_life", "shuffles", "table")

    def __init__(self, table: DealGates, round_life: RoundLife, shuffles: Shuffles) -> None:
        self.table = table
        self.round_life = round_life
        self.shuffles = shuffles

    def _on_shoe_fault(self, ev: dict[str, Any]) -> list[Decision]:
        fault: str = ev["fault"]
        self.table.device_faults["shoe"] = fault
        if fault == "empty" and self.table._in_round():
            ran_out = self.table.deck_rules.ran_out()
            if ran_out is not None:
                return ran_out
        if self.table.method != "automated_shoe":
            if fault == UNDECODABLE_FRAME:
                return self._card_unread()
            return self.table.deck_rules.manual_shoe_fault(fault) if fault != "empty" else []
        return self._ads_failed(f"the automated dealing shoe reported {fault}")

    def _card_unread(self) -> list[Decision]:
        """X2: the card-reading shoe sent a frame that cannot be decoded.

        A card may have left the shoe unread, so the ledger no longer vouches for the hands
        or the shoe: as for an ADS that failed (C5), the round in play is void and the cards
        are reshuffled; between rounds, the reshuffle alone.
        """
        why = "the shoe sent a frame it could not decode: a card may have left it unread"
        if self.table.state == "void":
            return []  # the round is void already; its reshuffle is due
        if self.table._in_round() or self.table.state == "suspended":
            return self.round_life._void_round("X2", why)
        deck = self.table._deck()
        if deck.removed:
            return []  # C10: no deal from it until new cards come
        deck.reshuffle_rule = "X2"
        return [self.table._d("reshuffle", "X2", f"{why}: the cards must be reshuffled")]

    def _ads_failed(self, why: str) -> list[Decision]:
        """C5: the ADS jammed, stopped or did not deal all cards."""
        if self.table._in_round() or self.table.state == "suspended":
            return self.round_life._void_round("C5", why)
        if self.table.state == "void":
            return []
        self.table._deck().reshuffle_rule = "C5"
        return [self.table._d("reshuffle", "C5", f"{why}: the cards in it must be reshuffled")]

    def _on_device_removed(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        if kind == "shuffler":
            self.table.asd_removed = True
        elif kind == "shoe":
            self.table.ads_removed = True
        else:
            return [self.table._rejected(f"device: {ev['device']!r} is not a shuffler or a shoe")]
        return []

    def _on_shuffler_empty_confirmed(self, ev: dict[str, Any]) -> list[Decision]:
        self.table.shuffler_emptied = True
        return []

    def _on_device_lost(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        self.table.device_faults[ev["device"]] = "lost"
        if kind == "hole_card_reader":
            return self.table.reader_rules.down("the hole-card reader stopped answering")
        if kind == "shuffler" and any(d.shuffling for d in self.table.decks.values()):
            return self.shuffles._shuffler_failed("the shuffler stopped answering mid-shuffle")
        if kind == "shoe" and self.table._in_round():
            if self.table.method == "automated_shoe":
                return self._ads_failed("the automated dealing shoe stopped answering")
            self.table.suspended_from = self.table.state
            self.table._fire("suspend")
        return []

    def _on_device_connected(self, ev: dict[str, Any]) -> list[Decision]:
        kind = device_kind(ev)
        self.table.device_faults.pop(ev["device"], None)
        if kind == "shoe" and self.table.state == "suspended" and self.table.suspended_from:
            self.table._machine.set_state(self.table.suspended_from, model=self.table._model)
            self.table.suspended_from = None
        if kind == "shuffler":
            self.table.asd_removed = False
        return []

    # ------------------------------------------------------------------ hole-card reader

    def _on_reader_inspected(self, ev: dict[str, Any]) -> list[Decision]:
        if self.table.reader.inspected(self.table._gaming_day(ev.get("time"))):
            self.table.device_faults.pop("hole_card_reader", None)
        return []

    # ------------------------------------------------------------------ the discard rack

    def _on_rack_level(self, ev: dict[str, Any]) -> list[Decision]:
        return self.table.rack.reading(ev["cards"])

    def _on_rack_cleared(self, ev: dict[str, Any]) -> list[Decision]:
        return self.table.rack.reading(0)

    def _on_rack_fault(self, ev: dict[str, Any]) -> list[Decision]:
        """The sensor failed: its last count stands unconfirmed and the fault shows in the
        status (degraded) until it reports a level or an empty rack again; nothing the rules
        gate on a rack count is decided from a sensor that says it cannot count."""
        self.table.device_faults["discard_rack"] = str(ev["fault"])
        return []

    # ------------------------------------------------------------------ the supervisor

    def _on_supervisor_ack(self, ev: dict[str, Any]) -> list[Decision]:
        self.table.pending_notifications.clear()
        return []
