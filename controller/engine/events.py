"""The event language (docs/events.md): one strict schema for every event, wherever it enters.

Scenario files (`tablectl replay`), the operator socket, `tablectl op` and the round engine all
check events here, so a field the language does not define is an error naming it (a `faceup`
for `face_up` would otherwise deal a face-up card as face-down), a wrong type names the field
and the type expected, and an unknown event suggests the nearest name. Every field has a length
and a character limit: input that would grow the journal or a reply without bound is refused.

docs/events.md's tables are generated from `EVENT_TYPES`
(`python -m tablectl.controller.engine.events`) and a test keeps them equal, so the document
cannot drift from what is enforced.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tablectl.controller.engine.cards import CardError, mask_card_words, parse_card

#: The longest JSON line a scenario file or the operator socket may carry (bytes).
MAX_LINE = 64 * 1024
#: The deepest nesting of objects and lists an event may have (the event is depth 1).
MAX_DEPTH = 4
#: Bounds of numbers and lists (far above any table's; below what grows a record unbounded).
MAX_COUNT = 100_000
MAX_POSITION = 99
MAX_CARDS = 255  # a stack as the device protocol carries it (docs/protocol.md)
MAX_TEXT = 255  # a device's own words (fault, detail, model ...): the wire's string limit
MAX_NAME = 64  # a person, a client id
#: The `fault` of a device's fault event for a frame that arrived intact but cannot be decoded
#: (docs/protocol.md): the drivers emit it, the engine decides on it for the shoe (X2).
UNDECODABLE_FRAME = "undecodable_frame"
MAX_NUMBER = 1_000  # dice and number: A1 (31.11(b)) refuses what is out of its range

Source = Literal["device", "operator", "controller"]
Role = Literal["dealer", "supervisor"]


class EventError(ValueError):
    """An event that does not follow the event language; the message starts with the field."""


def _show(value: Any) -> str:
    """A value for an error message: short (it may be 60 KB) and never a list's content."""
    if isinstance(value, list | tuple | dict):
        return f"{type(value).__name__} of length {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind_of(value: Any) -> str:
    """What a malformed value is, without its content (it may hold face-down cards, H7)."""
    if isinstance(value, list | tuple | str):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


# -- field types -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldType:
    """How a field is checked, what a person is told it must be, and how `op` reads it."""

    expected: str  # "a whole number 0-100000": docs/events.md and every type error say it
    check: Callable[[str, Any], Any]  # (field name, value) -> the canonical value
    from_text: Callable[[str], Any] = str  # `tablectl op --field TEXT` -> a JSON value


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _int_from_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def _bool_from_text(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    return text


def _list_from_text(item: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if text.startswith("["):
            return _json_or_text(text)
        return [item(part.strip()) for part in text.split(",") if part.strip()]

    return parse


def _whole(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EventError(f"{name}: must be a whole number {low}-{high}, got {_show(value)}")
    return value


def _count(name: str, value: Any) -> int:
    return _whole(name, value, 0, MAX_COUNT)


def _number(name: str, value: Any) -> int:
    return _whole(name, value, -MAX_NUMBER, MAX_NUMBER)


def _card(name: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > 3:
        raise EventError(f"{name}: must be a card like 'As', 'Td' or 'JK', got {_kind_of(value)}")
    try:
        return parse_card(value)
    except CardError as error:
        raise EventError(f"{name}: {error}") from None


def _cards(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_CARDS:
        # the type, not the value: a stack sent as one string would name its cards (H7)
        raise EventError(
            f"{name}: must be a non-empty list of cards (at most {MAX_CARDS}), "
            f"got {_kind_of(value)}"
        )
    return [_card(f"{name}[{i}]", v) for i, v in enumerate(value)]


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise EventError(f"{name}: must be true or false, got {_show(value)}")
    return value


def _deck(name: str, value: Any) -> str:
    if value not in ("A", "B"):
        raise EventError(f"{name}: must be 'A' or 'B', got {_show(value)}")
    return str(value)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _device_text(name: str, value: Any) -> str:
    """A device's own words: any text the wire carries (<= 255), never cut or refused for a
    character, so that a fault is never lost over its wording; lone surrogates excepted."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_TEXT:
        # the type and length, never the text: a device's words may name a card (H7)
        raise EventError(f"{name}: must be text of 1-{MAX_TEXT} characters, got {_kind_of(value)}")
    if _has_surrogate(value):
        raise EventError(f"{name}: contains a lone UTF-16 surrogate (not text)")
    return value


def _device_said(name: str, value: Any) -> str:
    """A device's own words about a fault, with card-shaped words masked (H7): the engine puts
    them in decisions' reasons and `status`; the journal keeps them as the device sent them."""
    return mask_card_words(_device_text(name, value))


def _device_words(name: str, value: Any) -> str:
    """What a device says of itself (model, serial, firmware): as the wire carries it, maybe
    empty; a device is never refused here for its wording (the allow-list judges it)."""
    if value == "":
        return ""
    return _device_text(name, value)


def _pattern(pattern: str, expected: str) -> Callable[[str, Any], str]:
    compiled = re.compile(pattern)

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or not compiled.fullmatch(value):
            raise EventError(f"{name}: must be {expected}, got {_show(value)}")
        return value

    return check


def _choice(*allowed: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if value not in allowed:
            raise EventError(f"{name}: must be one of {', '.join(allowed)}; got {_show(value)}")
        return str(value)

    return check


def _position(name: str, value: Any) -> int | str:
    if value == "dealer":
        return "dealer"
    if isinstance(value, str) and value.isdigit() and len(value) <= 2:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_POSITION:
        raise EventError(
            f"{name}: must be a position 1-{MAX_POSITION} or 'dealer', got {_show(value)}"
        )
    return value


def _positions(name: str, value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) > MAX_POSITION:
        raise EventError(
            f"{name}: must be a list of at most {MAX_POSITION} position numbers, got {_show(value)}"
        )
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_POSITION:
            raise EventError(f"{name}: {_show(item)} is not a position number 1-{MAX_POSITION}")
    if len(set(value)) != len(value):
        raise EventError(f"{name}: a position is named twice in {value!r}")
    return sorted(value)


def _hand_counts(name: str, value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping) or len(value) > MAX_POSITION + 1:
        raise EventError(
            f'{name}: must be an object like {{"1": 5, "dealer": 5}}, got {_show(value)}'
        )
    out: dict[str, int] = {}
    for key, count in value.items():
        position = _position(f"{name}.{_show(key)}", key)
        out[str(position)] = _count(f"{name}.{position}", count)
    return out


def _time(name: str, value: Any) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise EventError(f"{name}: must be an ISO-8601 local date-time string, got {_show(value)}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise EventError(f"{name}: {_show(value)} is not an ISO-8601 date-time") from None


ROLES: tuple[Role, ...] = ("dealer", "supervisor")
GRANTS = ("group", "root", "service user")
_CALLER_KEYS = ("uid", "user", "role", "granted_by")


def _caller(name: str, value: Any) -> dict[str, Any]:
    """The authenticated caller the daemon stamps into an operator event (never a client)."""
    if not isinstance(value, Mapping) or set(value) != set(_CALLER_KEYS):
        raise EventError(f"{name}: must be an object with {', '.join(_CALLER_KEYS)}")
    return {
        "uid": _whole(f"{name}.uid", value["uid"], 0, 2**32 - 1),
        "user": PERSON.check(f"{name}.user", value["user"]),
        "role": _choice(*ROLES)(f"{name}.role", value["role"]),
        "granted_by": _pattern(r"(group [a-z_][a-z0-9_-]{0,31}|root|service user)", "a grant")(
            f"{name}.granted_by", value["granted_by"]
        ),
    }


COUNT = FieldType(f"a whole number 0-{MAX_COUNT}", _count, _int_from_text)
NUMBER = FieldType(f"a whole number (-{MAX_NUMBER} to {MAX_NUMBER})", _number, _int_from_text)
CARD = FieldType("a card: rank A 2-9 T J Q K (or 10) and suit c d h s, or JK", _card)
CARDS = FieldType(f"a list of 1-{MAX_CARDS} cards", _cards, _list_from_text(str))
BOOL = FieldType("true or false", _bool, _bool_from_text)
DECK = FieldType("`A` or `B`", _deck)
DEVICE_TEXT = FieldType(f"text of 1-{MAX_TEXT} characters", _device_said)
DEVICE_WORDS = FieldType(f"text of 0-{MAX_TEXT} characters", _device_words)
DEVICE_NAME = FieldType(
    "a device name: 1-32 of `A-Z a-z 0-9 _ -`, starting with a letter",
    _pattern(r"[A-Za-z][A-Za-z0-9_-]{0,31}", "a device name (1-32 of A-Za-z0-9_-)"),
)
DEVICE_KIND = FieldType(
    "`shuffler`, `shoe`, `hole_card_reader` or `discard_rack`",
    _choice("shuffler", "shoe", "hole_card_reader", "discard_rack"),
)
SHA256 = FieldType("64 lowercase hex digits", _pattern(r"[0-9a-f]{64}", "64 lowercase hex digits"))
PERSON = FieldType(
    f"a person's user name or id: 1-{MAX_NAME} of letters, digits and `._@-`",
    _pattern(
        rf"[^\W][\w.@-]{{0,{MAX_NAME - 1}}}", f"a user name (1-{MAX_NAME} of letters, digits, ._@-)"
    ),
)
CLIENT_ID = FieldType(
    f"1-{MAX_NAME} of `A-Z a-z 0-9 . _ : -`",
    _pattern(rf"[A-Za-z0-9._:-]{{1,{MAX_NAME}}}", f"1-{MAX_NAME} of A-Za-z0-9._:-"),
)
METHOD = FieldType("`manual` (a shuffle by hand)", _choice("manual"))
POSITION = FieldType(
    f"a position 1-{MAX_POSITION} or `dealer`", _position, lambda t: _int_from_text(t)
)
POSITIONS = FieldType(
    f"a list of distinct positions 1-{MAX_POSITION} (`1,2,4`)",
    _positions,
    _list_from_text(_int_from_text),
)
HAND_COUNTS = FieldType(
    'an object, position -> cards (`{"1": 5, "dealer": 5}`)', _hand_counts, _json_or_text
)
UNSIGNED = FieldType(
    "a whole number 0-4294967295", lambda n, v: _whole(n, v, 0, 2**32 - 1), _int_from_text
)
TIME = FieldType("an ISO-8601 local date-time (`2026-11-21T10:05:00`)", _time)
CALLER = FieldType("an object: `uid`, `user`, `role`, `granted_by`", _caller)


@dataclass(frozen=True)
class Field:
    """One field of an event."""

    name: str
    type: FieldType
    doc: str
    required: bool = False
    stamped: bool = False  # the daemon sets it; refused from an operator client
    from_caller: bool = False  # the daemon fills it with the caller's user name


@dataclass(frozen=True)
class EventType:
    """One event of the language: where it comes from, its fields, who may send it."""

    name: str
    source: Source
    doc: str
    fields: tuple[Field, ...] = ()
    role: Role | None = None  # operator events: the role the caller needs
    role_basis: str = ""  # the text that says who does this

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


# Envelope fields: added by the drivers and the daemon, allowed in scenario files.
TIME_FIELD = Field(
    "time", TIME, "when the daemon received it (stamped; scenario files may give it)", stamped=True
)
DEVICE_FIELDS = (
    Field("device", DEVICE_NAME, "the configured name of the device that sent it (drivers add it)"),
    Field("kind", DEVICE_KIND, "that device's kind (drivers add it)"),
)
OPERATOR_FIELDS = (
    Field(
        "id",
        CLIENT_ID,
        "the client's id for this event: a retry with the same id is answered, not applied twice",
    ),
    Field(
        "caller",
        CALLER,
        "who sent it, as the operator socket's kernel credentials say (stamped by the daemon)",
        stamped=True,
    ),
)
FAULT_FIELDS = (
    Field(
        "fault",
        DEVICE_TEXT,
        "`jam`, `stopped`, `incomplete`, `sensor`, `hardware`, or the device's own word",
        required=True,
    ),
    Field("detail", DEVICE_TEXT, "the device's own words about it"),
)
BY = Field(
    "by",
    PERSON,
    "who did it: the authenticated user (the operator socket fills it in and refuses another)",
    required=True,
    from_caller=True,
)
TEXT_13_69E_1_10D_F = "13:69E-1.10D(f): the floor-person assigned to the table inspects the reader"


def _device(name: str, doc: str, *fields: Field) -> EventType:
    return EventType(name, "device", doc, (*fields, *DEVICE_FIELDS, TIME_FIELD))


def _operator(name: str, doc: str, role: Role, basis: str, *fields: Field) -> EventType:
    return EventType(name, "operator", doc, (*fields, *OPERATOR_FIELDS, TIME_FIELD), role, basis)


DEALER_DEALS = "the dealer deals and runs the round (40.7, 39.7, 2C.6, 31.8)"
ENVELOPE = (TIME_FIELD, *DEVICE_FIELDS, *OPERATOR_FIELDS)
EVENT_TYPES: dict[str, EventType] = {
    e.name: e
    for e in (
        _device("shuffle_started", "the ASD began a shuffle", Field("deck", DECK, "the deck")),
        _device(
            "shuffle_completed",
            "the ASD finished; `count` when it counts the cards",
            Field("deck", DECK, "the deck"),
            Field("count", COUNT, "the cards it counted (a counting shuffler)"),
            Field("method", METHOD, "`manual`: the cards were shuffled by hand (C6)"),
        ),
        _device("shuffler_fault", "the ASD failed", *FAULT_FIELDS),
        _device(
            "shoe_loaded",
            "a full set of cards was placed in the shoe; with two decks alternating it names "
            "the deck going into play, whatever the dealing method",
            Field("deck", DECK, "the deck"),
        ),
        _device(
            "card_drawn",
            "a card-reading manual shoe saw a card leave it",
            Field("card", CARD, "the card", required=True),
            Field("face_up", BOOL, "it left face up (default false)"),
            Field("deck", DECK, "its back colour, when the reader reports it (C8)"),
        ),
        _device(
            "stack_dispensed",
            "an ADS dispensed a stack",
            Field("cards", CARDS, "the stack's cards", required=True),
        ),
        _device("cut_card_reached", "the cutting card came out"),
        _device(
            "shoe_fault",
            "the ADS or shoe failed (`empty`: the 3C21 shoe ran out mid-round, G5; "
            "`undecodable_frame`: a card may have left a card-reading shoe unread, X2)",
            *FAULT_FIELDS,
        ),
        _device("reader_inserted", "the dealer inserted the hole card into the hole-card reader"),
        _device(
            "reader_result",
            "the reader's answer",
            Field("blackjack", BOOL, "the dealer has a blackjack", required=True),
        ),
        _device("reader_fault", "the reader failed", *FAULT_FIELDS),
        _device(
            "rack_level",
            "the discard-rack sensor's estimate of the cards in the rack",
            Field("cards", COUNT, "the estimate", required=True),
            Field("height_um", UNSIGNED, "the stack's height in micrometres"),
            Field("um_per_card", UNSIGNED, "the sensor's calibration"),
        ),
        _device("rack_cleared", "the discard-rack sensor reports an empty rack (D2, R1)"),
        _device(
            "rack_fault",
            "the discard-rack sensor failed: its counts are not trusted until it reports a level "
            "or an empty rack again",
            *FAULT_FIELDS,
        ),
        EventType(
            "device_lost",
            "device",
            "a device stopped answering",
            (
                Field("device", DEVICE_NAME, "its configured name", required=True),
                DEVICE_FIELDS[1],
                TIME_FIELD,
            ),
        ),
        EventType(
            "device_connected",
            "device",
            "a device handshook and was accepted",
            (
                Field("device", DEVICE_NAME, "its configured name", required=True),
                DEVICE_FIELDS[1],
                Field("model", DEVICE_WORDS, "its model, as it says"),
                Field("serial", DEVICE_WORDS, "its serial number"),
                Field("firmware", DEVICE_WORDS, "its firmware version"),
                Field("firmware_sha256", SHA256, "its firmware image's hash"),
                TIME_FIELD,
            ),
        ),
        _operator(
            "deck_received",
            "new cards at the table after inspection",
            "supervisor",
            "40.3(b), 39.3(b): the dealer's inspection is verified by the floorperson "
            "assigned to the table (13:69E-1.18 receipt of decks)",
            Field("deck", DECK, "the deck"),
        ),
        _operator(
            "reader_inspected",
            "the floorperson's daily inspection of the hole-card reader",
            "supervisor",
            TEXT_13_69E_1_10D_F,
            BY,
        ),
        _operator(
            "bets_closed",
            '"no more bets"',
            "dealer",
            '39.7(b), 40.7(b): the dealer announces "No more bets"',
            Field(
                "positions",
                POSITIONS,
                "the wagered positions, 1-based from the dealer's left",
                required=True,
            ),
        ),
        _operator(
            "starting_position",
            "AP: the dice total or the random number that selects where the deal starts; "
            "exactly one of `dice` and `number`",
            "dealer",
            "31.11(b): the dealer shakes the dice or enters the number",
            Field("dice", NUMBER, "the dice total (3-18, A1)"),
            Field("number", NUMBER, "the random number (1-7, A1)"),
        ),
        _operator("deal_completed", "the dealer finished the initial deal", "dealer", DEALER_DEALS),
        _operator(
            "stub_counted",
            "the dealer counted the stub",
            "dealer",
            "40.7(f), 39.7(f), 31.8(d): the dealer counts the stub",
            Field("count", COUNT, "the cards in the stub", required=True),
            Field("hand_counts", HAND_COUNTS, "the cards each hand holds, when they were counted"),
        ),
        _operator(
            "dealer_changed",
            "a new dealer took the table",
            "dealer",
            "2C.6(c): each new dealer comes to the table and burns a card before dealing",
        ),
        _operator("bonus_settled", "3C21: the bonus wagers were resolved", "dealer", DEALER_DEALS),
        _operator(
            "insurance_closed", "3C21: insurance is no longer offered", "dealer", DEALER_DEALS
        ),
        _operator(
            "dealer_turn",
            "3C21: players are done; cards drawn now go to the dealer",
            "dealer",
            DEALER_DEALS,
        ),
        _operator(
            "dealer_card_exposed",
            "HUH: a dealer card was exposed before the reveal",
            "dealer",
            DEALER_DEALS,
        ),
        _operator(
            "misdeal_reported",
            "the dealer found a hand with the wrong number of cards",
            "dealer",
            "40.7(f)2, 39.7(f)2, 31.8(d)2: the dealer determines whether the cards were misdealt",
            Field("position", POSITION, "the hand", required=True),
            Field("cards", COUNT, "the cards it holds", required=True),
        ),
        _operator(
            "hands_collected",
            "the round is over and its cards are in the discard rack",
            "dealer",
            DEALER_DEALS,
        ),
        _operator(
            "reshuffle_requested",
            "the house reshuffles at its discretion",
            "dealer",
            "a reshuffle removes nothing from play; the dealer carries out the house's call "
            "(tablectl's interpretation: no text assigns it)",
        ),
        _operator(
            "device_removed",
            "an ASD or ADS was taken off the table",
            "supervisor",
            "2C.14(j): a supervisor inspects an ASD before its removal; 40.12(g), 39.12(g): "
            "removing a device changes the table's approved method (tablectl's interpretation "
            "for the games whose text names no one)",
            Field("device", DEVICE_NAME, "the shuffler or shoe", required=True),
        ),
        _operator(
            "shuffler_empty_confirmed",
            "a supervisor confirmed no cards remain in the ASD",
            "supervisor",
            "2C.14(j): prior to removal a supervisor inspects the ASD for cards remaining",
            BY,
        ),
        _operator(
            "supervisor_ack",
            "a supervisor acknowledged the pending notification",
            "supervisor",
            "2C.14(k) and every notify_supervisor decision: the notice is for a casino supervisor",
            BY,
        ),
        _operator(
            "clock_step_acknowledged",
            "a supervisor accepts the table's clock after a clock_step alarm (docs/journal.md): "
            "seals, retention and the journal's roll-over resume; handled by the daemon, never "
            "by the round engine",
            "supervisor",
            "2C.6(m), 40.10(g): the record must keep its time; a person who can answer for the "
            "clock accepts it (tablectl's interpretation)",
            BY,
        ),
        _operator(
            "floor_divergence_acknowledged",
            "a supervisor lets the table deal on after a floor_diverged alarm (docs/floor.md): "
            "the journal no longer matches the floor's copy; handled by the daemon, never by "
            "the round engine",
            "supervisor",
            "2C.6(m): the record kept off the table is the one that cannot be changed; a person "
            "who answers for the table decides whether it deals without it (tablectl's "
            "interpretation)",
            BY,
        ),
        EventType(
            "controller_restarted",
            "controller",
            "the daemon rebuilt the table from its journal (X1); sent by the daemon only",
            (TIME_FIELD,),
        ),
    )
}

OPERATOR_EVENTS = frozenset(n for n, e in EVENT_TYPES.items() if e.source == "operator")
DEVICE_EVENTS = frozenset(n for n, e in EVENT_TYPES.items() if e.source == "device")
# Built once, not per event validated (validate runs for every event the engine sees).
_ALL_NAMES = sorted(EVENT_TYPES)
_OPERATOR_NAMES = sorted(OPERATOR_EVENTS)
_FIELDS = {name: {f.name: f for f in spec.fields} for name, spec in EVENT_TYPES.items()}
# Each event type's fields as `validate` walks them, once per event: (name, check, required,
# from_caller), in the schema's order (the clean event keeps it).
_CHECKS = {
    name: tuple((f.name, f.type.check, f.required, f.from_caller) for f in spec.fields)
    for name, spec in EVENT_TYPES.items()
}


def _nearest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def event_type(kind: Any, *, client: bool = False) -> EventType:
    """The EventType of a `type` value, or EventError suggesting the nearest name."""
    if kind is None:
        raise EventError("type: missing")
    if not isinstance(kind, str):
        raise EventError(f"type: must be an event name, got {_show(kind)}")
    spec = EVENT_TYPES.get(kind)
    names = _OPERATOR_NAMES if client else _ALL_NAMES  # sorted once: for the messages only
    if spec is None:
        raise EventError(f"type: unknown event type {_show(kind)}{_nearest(kind, names)}")
    if client and spec.source != "operator":
        raise EventError(
            f"type: {kind!r} is a {spec.source} event; a terminal sends operator events only "
            f"({', '.join(names)})"
        )
    return spec


def validate(event: Mapping[str, Any], *, client: bool = False) -> dict[str, Any]:
    """Return the event with its fields checked and cards canonical, or raise EventError.

    `client`: the event comes from an operator's terminal (socket or `op`): only operator
    events, no stamped field (`time`, `caller`), and `by` may be left to the daemon.
    """
    if not isinstance(event, Mapping):
        raise EventError(f"an event must be an object, got {_kind_of(event)}")
    spec = event_type(event.get("type"), client=client)
    known = _FIELDS[spec.name]
    for name in event:
        if name == "type":
            continue
        field = known.get(name)
        if field is None:
            plain = isinstance(name, str) and len(name) <= 40 and name.isprintable()
            label = name if plain else _show(name)
            hint = _nearest(name, list(known)) if plain else ""
            listed = ", ".join(n for n, f in known.items() if not (client and f.stamped))
            raise EventError(f"{label}: unknown field of {spec.name}{hint} (its fields: {listed})")
        if client and field.stamped:
            raise EventError(f"{name}: set by the table, not by a terminal")
    clean: dict[str, Any] = {"type": spec.name}
    for name, check, required, from_caller in _CHECKS[spec.name]:
        if name in event:
            clean[name] = check(name, event[name])
        elif required and not (client and from_caller):
            raise EventError(f"{name}: missing (a {spec.name} event needs it)")
    if spec.name == "starting_position" and ("dice" in event) == ("number" in event):
        raise EventError("dice/number: a starting_position gives exactly one of them")
    return clean


# -- JSON lines ------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise EventError(f"{name} is not a number JSON allows")


def _check_tree(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise EventError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if _has_surrogate(value):
            raise EventError("a string holds a lone UTF-16 surrogate (not text)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise EventError("a number is not finite")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_tree(key, depth)
            _check_tree(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_tree(item, depth + 1)


def parse_json_object(line: str | bytes) -> dict[str, Any]:
    """One JSON object from a line, refusing what JSON or the language does not allow.

    NaN and Infinity, nesting past MAX_DEPTH, lone surrogates and lines past MAX_LINE are
    EventError with a message, never an exception from deep inside (RecursionError ...).
    """
    if len(line) > MAX_LINE:
        raise EventError(f"line longer than {MAX_LINE} bytes")
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
    except UnicodeDecodeError as error:
        raise EventError(f"not UTF-8 at byte {error.start}") from None
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise EventError(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise EventError(f"not valid JSON: {error.msg} (column {error.colno})") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise EventError(f"not valid JSON: {str(error)[:80]}") from None
    if not isinstance(obj, dict):
        raise EventError(f"an event must be a JSON object, got {_kind_of(obj)}")
    _check_tree(obj, 1)
    return obj


def parse_time(value: Any) -> datetime:
    """An event's `time` (ISO-8601 local date-time) as a datetime; EventError names it."""
    return _time("time", value)


# -- docs/events.md --------------------------------------------------------------------------


def _own_fields(event: EventType) -> list[Field]:
    """An event's own fields, without the envelope every event of its source carries."""
    return [f for f in event.fields if not any(f is e for e in ENVELOPE)]


def _field_cell(event: EventType) -> str:
    cells = []
    for field in _own_fields(event):
        mark = "" if field.required else "?"
        cells.append(f"`{field.name}`{mark}")
    return ", ".join(cells)


def markdown_tables() -> str:
    """The generated part of docs/events.md: every event, its fields, types and limits."""
    lines: list[str] = []
    for source, title in (
        ("device", "Device events (from drivers; in a scenario, as if a driver had sent them)"),
        ("operator", "Operator events (from the dealer's or supervisor's terminal)"),
        ("controller", "Controller events (from the daemon itself)"),
    ):
        lines += [f"### {title}", ""]
        role_column = source == "operator"
        header = "| event | fields | " + ("role | " if role_column else "") + "meaning |"
        lines += [header, "| --- | --- | " + ("--- | " if role_column else "") + "--- |"]
        for event in EVENT_TYPES.values():
            if event.source != source:
                continue
            role = f"{event.role} | " if role_column else ""
            lines.append(f"| `{event.name}` | {_field_cell(event)} | {role}{event.doc} |")
        lines.append("")
    lines += ["### Fields", "", "| event | field | type and limits | required | meaning |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for event in EVENT_TYPES.values():
        for field in _own_fields(event):
            required = "yes" if field.required else "no"
            if field.from_caller:
                required = "yes (filled in from the socket)"
            lines.append(
                f"| `{event.name}` | `{field.name}` | {field.type.expected} | {required} | "
                f"{field.doc} |"
            )
    lines += ["", "### Fields every event of a source may carry", ""]
    lines += ["| source | field | type and limits | meaning |", "| --- | --- | --- | --- |"]
    for source, fields in (
        ("all", (TIME_FIELD,)),
        ("device", DEVICE_FIELDS),
        ("operator", OPERATOR_FIELDS),
    ):
        for field in fields:
            lines.append(f"| {source} | `{field.name}` | {field.type.expected} | {field.doc} |")
    return "\n".join(lines) + "\n"


def role_table() -> str:
    """The generated table of docs/operations.md: who may send each operator event, and why."""
    lines = ["| event | role | the text that says who |", "| --- | --- | --- |"]
    for event in EVENT_TYPES.values():
        if event.source == "operator":
            lines.append(f"| `{event.name}` | {event.role} | {event.role_basis} |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- BEGIN GENERATED: python -m tablectl.controller.engine.events {what} -->"
END = "<!-- END GENERATED -->"


def replace_generated(document: str, what: str, body: str) -> str:
    """`document` with the block between its BEGIN/END markers for `what` replaced by `body`."""
    begin = BEGIN.format(what=what)
    start = document.index(begin) + len(begin)
    stop = document.index(END, start)
    return document[:start] + "\n" + body + document[stop:]


def main(argv: list[str] | None = None) -> int:
    """Print a generated block: `events` (docs/events.md) or `roles` (docs/operations.md)."""
    args = sys.argv[1:] if argv is None else argv
    what = args[0] if args else "events"
    print(markdown_tables() if what == "events" else role_table(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
