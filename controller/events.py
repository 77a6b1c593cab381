"""EVENTS.md's event language: validation of one event, naming the bad field.

Fields beyond those listed are allowed (EVENTS.md: "add fields freely"); drivers add
``device``, the daemon adds ``time`` (an ISO-8601 local date-time).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from tablectl.controller.cards import CardError, parse_card


class EventError(ValueError):
    """An event that does not follow EVENTS.md; the message names the field."""


def _card(name: str, value: Any) -> str:
    try:
        return parse_card(value)
    except CardError as error:
        raise EventError(f"{name}: {error}") from None


def _kind_of(value: Any) -> str:
    """What a malformed value is, without its content (it may hold face-down cards, H7)."""
    if isinstance(value, list | tuple | str):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


def _cards(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        # the type, not the value: a stack sent as one string would name its cards (H7)
        raise EventError(f"{name}: must be a non-empty list of cards, got {_kind_of(value)}")
    return [_card(f"{name}[{i}]", v) for i, v in enumerate(value)]


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise EventError(f"{name}: must be true or false, got {value!r}")
    return value


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EventError(f"{name}: must be a whole number of 0 or more, got {value!r}")
    return value


def _deck(name: str, value: Any) -> str:
    if value not in ("A", "B"):
        raise EventError(f"{name}: must be 'A' or 'B', got {value!r}")
    return str(value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EventError(f"{name}: must be a non-empty string, got {value!r}")
    return value


def _positions(name: str, value: Any) -> list[int]:
    if not isinstance(value, list):
        raise EventError(f"{name}: must be a list of position numbers, got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise EventError(f"{name}: {item!r} is not a position number (1, 2, ...)")
    if len(set(value)) != len(value):
        raise EventError(f"{name}: a position is named twice in {value!r}")
    return sorted(value)


def _position(name: str, value: Any) -> int | str:
    if value == "dealer":
        return "dealer"
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EventError(f"{name}: must be a position number or 'dealer', got {value!r}")
    return value


def _hand_counts(name: str, value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise EventError(f"{name}: must be an object like {{'1': 5, 'dealer': 5}}, got {value!r}")
    out: dict[str, int] = {}
    for key, count in value.items():
        position = _position(f"{name}.{key}", key)
        out[str(position)] = _count(f"{name}.{key}", count)
    return out


Check = Callable[[str, Any], Any]

# type -> {field: (check, required)}
SCHEMA: dict[str, dict[str, tuple[Check, bool]]] = {
    "shuffle_started": {"deck": (_deck, False)},
    "shuffle_completed": {
        "deck": (_deck, False),
        "count": (_count, False),
        "method": (_text, False),
    },
    "shuffler_fault": {"fault": (_text, True)},
    "shoe_loaded": {"deck": (_deck, False)},
    "card_drawn": {"card": (_card, True), "face_up": (_bool, False), "deck": (_deck, False)},
    "stack_dispensed": {"cards": (_cards, True)},
    "cut_card_reached": {},
    "shoe_fault": {"fault": (_text, True)},
    "reader_inserted": {},
    "reader_result": {"blackjack": (_bool, True)},
    "reader_fault": {"fault": (_text, True)},
    "rack_level": {"cards": (_count, True)},
    "rack_cleared": {},
    "device_lost": {"device": (_text, True)},
    "device_connected": {"device": (_text, True)},
    "deck_received": {"deck": (_deck, False)},
    "reader_inspected": {"by": (_text, True)},
    "bets_closed": {"positions": (_positions, True)},
    "starting_position": {},  # dice or number: checked by the engine (exactly one of them)
    "deal_completed": {},
    "stub_counted": {"count": (_count, True), "hand_counts": (_hand_counts, False)},
    "dealer_changed": {},
    "bonus_settled": {},
    "insurance_closed": {},
    "dealer_turn": {},
    "dealer_card_exposed": {},
    "misdeal_reported": {"position": (_position, True), "cards": (_count, True)},
    "hands_collected": {},
    "reshuffle_requested": {},
    "device_removed": {"device": (_text, True)},
    "shuffler_empty_confirmed": {"by": (_text, True)},
    "supervisor_ack": {"by": (_text, True)},
    "controller_restarted": {},
}


def parse_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise EventError(f"time: must be an ISO-8601 local date-time string, got {value!r}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise EventError(f"time: {value!r} is not an ISO-8601 date-time") from None


def validate(event: Mapping[str, Any]) -> dict[str, Any]:
    """Return the event with its fields checked and cards canonical, or raise EventError."""
    if not isinstance(event, Mapping):
        raise EventError(f"an event must be an object, got {_kind_of(event)}")
    kind = event.get("type")
    schema = SCHEMA.get(kind) if isinstance(kind, str) else None
    if schema is None:
        if kind is None:
            raise EventError("type: missing")
        raise EventError(f"type: unknown event type {kind!r}")
    clean = dict(event)
    for name, (check, required) in schema.items():
        if name in event:
            clean[name] = check(name, event[name])
        elif required:
            raise EventError(f"{name}: missing (a {kind} event needs it)")
    if "time" in event:
        clean["time"] = parse_time(event["time"])
    if kind == "starting_position":
        has_dice, has_number = "dice" in event, "number" in event
        if has_dice == has_number:
            raise EventError("dice/number: a starting_position gives exactly one of them")
        # The range (dice 3-18, number 1-7) is A1's (31.11(b)), a rule-level refusal.
        name = "dice" if has_dice else "number"
        value = event[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise EventError(f"{name}: must be a whole number, got {value!r}")
    return clean
