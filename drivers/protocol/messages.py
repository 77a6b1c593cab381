"""Message types and payload layouts of the reference protocol (docs/protocol.md).

Pure functions only. Payloads are small fixed binary layouts; strings are
UTF-8 with a one-byte length prefix. A payload that does not parse raises
PayloadError naming the message and what was wrong.
"""

from __future__ import annotations

import enum
import hashlib
import re
import struct
from dataclasses import dataclass
from typing import Final

#: Message-set versions this code speaks; negotiated in the handshake.
PROTOCOL_VERSIONS: Final = (1, 1)


class PayloadError(ValueError):
    """A payload does not match its message's layout."""


class Msg(enum.IntEnum):
    """Every message type on the wire, by its type byte."""

    # link and control (both directions)
    ACK = 0x01
    NAK = 0x02
    RESULT = 0x03  # device -> host: the outcome of a command
    PING = 0x04  # host -> device: liveness; the link ACK is the answer
    # handshake
    HELLO = 0x10  # host -> device: versions the host speaks
    IDENTITY = 0x11  # device -> host: version chosen and identity
    # shuffler events
    SHUFFLE_STARTED = 0x20
    SHUFFLE_PROGRESS = 0x21
    SHUFFLE_COMPLETED = 0x22
    SHUFFLER_FAULT = 0x23
    SHUFFLER_STATUS = 0x24
    DECK_LOCKED = 0x25
    DECK_RELEASED = 0x26
    # shoe events
    CARD_DRAWN = 0x28
    STACK_DISPENSED = 0x29
    CUT_CARD_REACHED = 0x2A
    SHOE_LOADED = 0x2B
    SHOE_FAULT = 0x2C
    DISPENSING_LOCKED = 0x2D
    # hole-card reader events
    READER_INSERTED = 0x30
    READER_RESULT = 0x31
    READER_FAULT = 0x32
    SELF_TEST_RESULT = 0x33
    # discard rack events
    RACK_LEVEL = 0x38
    RACK_CLEARED = 0x39
    RACK_FAULT = 0x3A
    # commands (host -> device)
    START_SHUFFLE = 0x40
    LOCK_DECK = 0x41
    RELEASE_DECK = 0x42
    LOCK_DISPENSING = 0x44
    UNLOCK_DISPENSING = 0x45
    SELF_TEST = 0x48
    READ_LEVEL = 0x4C


class Kind(enum.IntEnum):
    """Device kind codes in IDENTITY; names are drivers.usb_ids.DEVICE_KINDS."""

    SHUFFLER = 1
    SHOE = 2
    HOLE_CARD_READER = 3
    DISCARD_RACK = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Kind:
        try:
            return cls[label.upper()]
        except KeyError:
            allowed = ", ".join(k.label for k in cls)
            raise ValueError(f"unknown device kind {label!r} (allowed: {allowed})") from None


class ResultCode(enum.IntEnum):
    """RESULT codes and what the driver does with each (docs/protocol.md, "Errors")."""

    OK = 0
    UNKNOWN_MESSAGE = 1  # driver: command fails (CommandRefused), counted as a protocol error
    BAD_PAYLOAD = 2  # driver: command fails, counted as a protocol error
    WRONG_STATE = 3  # driver: command fails (busy, jammed, locked); device stays up
    VERSION_UNSUPPORTED = 4  # driver: handshake fails, device refused with an alarm
    NOT_READY = 5  # driver: the device lost the session; reconnect and handshake again
    HARDWARE_FAULT = 6  # driver: command fails; the fault itself arrives as a fault event


class Fault(enum.IntEnum):
    """Fault codes of SHUFFLER_FAULT, SHOE_FAULT, READER_FAULT and RACK_FAULT (docs/events.md
    ``fault``)."""

    JAM = 1
    STOPPED = 2
    INCOMPLETE = 3
    SENSOR = 4
    HARDWARE = 5
    OTHER = 0xFF


RANKS: Final = "A23456789TJQK"
SUITS: Final = "cdhs"
_CARD = re.compile(r"^(?:[A2-9TJQK][cdhs]|JK)$")


def check_card(card: str) -> str:
    """The card if spelled as docs/events.md says, else PayloadError (never echoing it: H7)."""
    if not _CARD.match(card):
        raise PayloadError(
            "bad card (not shown: it may be face down): expected the docs/events.md spelling, "
            "rank A23456789TJQK then suit cdhs, or JK"
        )
    return card


def _card_bytes(card: str) -> bytes:
    return check_card(card).encode("ascii")


def _card_from(raw: bytes, what: str) -> str:
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise PayloadError(f"{what}: card bytes are not ASCII (not shown)") from None
    try:
        return check_card(text)
    except PayloadError as exc:
        raise PayloadError(f"{what}: {exc}") from None


def _pack_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 255:
        raise PayloadError(f"string of {len(raw)} bytes exceeds 255")
    return bytes((len(raw),)) + raw


class _Reader:
    """Reads a payload field by field; every shortfall names the message."""

    def __init__(self, payload: bytes, what: str) -> None:
        self.data = payload
        self.pos = 0
        self.what = what

    def take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise PayloadError(
                f"{self.what}: payload of {len(self.data)} bytes too short for {field}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u16(self, field: str) -> int:
        return int.from_bytes(self.take(2, field))

    def u32(self, field: str) -> int:
        return int.from_bytes(self.take(4, field))

    def string(self, field: str) -> str:
        raw = self.take(self.u8(field + " length"), field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PayloadError(f"{self.what}: {field} is not UTF-8") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise PayloadError(
                f"{self.what}: {len(self.data) - self.pos} unexpected trailing bytes"
            )


# --- handshake -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a device says it is at the handshake."""

    kind: str
    model: str
    serial: str
    firmware: str
    firmware_sha256: str  # 64 lowercase hex digits

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "model": self.model,
            "serial": self.serial,
            "firmware": self.firmware,
            "firmware_sha256": self.firmware_sha256,
        }


def firmware_hash(image: bytes) -> str:
    return hashlib.sha256(image).hexdigest()


def pack_hello(min_version: int, max_version: int) -> bytes:
    return bytes((min_version, max_version))


def unpack_hello(payload: bytes) -> tuple[int, int]:
    r = _Reader(payload, "HELLO")
    low, high = r.u8("min_version"), r.u8("max_version")
    r.end()
    if low > high:
        raise PayloadError(f"HELLO: min_version {low} > max_version {high}")
    return low, high


def pack_identity(version: int, identity: Identity) -> bytes:
    digest = bytes.fromhex(identity.firmware_sha256)
    if len(digest) != 32:
        raise PayloadError("IDENTITY: firmware_sha256 must be 32 bytes")
    return b"".join(
        (
            bytes((version, Kind.from_label(identity.kind))),
            _pack_str(identity.model),
            _pack_str(identity.serial),
            _pack_str(identity.firmware),
            digest,
        )
    )


def unpack_identity(payload: bytes) -> tuple[int, Identity]:
    r = _Reader(payload, "IDENTITY")
    version = r.u8("version")
    code = r.u8("kind")
    try:
        kind = Kind(code).label
    except ValueError:
        raise PayloadError(f"IDENTITY: unknown kind code {code}") from None
    model, serial, firmware = r.string("model"), r.string("serial"), r.string("firmware")
    digest = r.take(32, "firmware_sha256").hex()
    r.end()
    return version, Identity(kind, model, serial, firmware, digest)


# --- results and faults ----------------------------------------------------


def pack_result(ref_seq: int, code: ResultCode, text: str = "") -> bytes:
    return bytes((ref_seq, code)) + _pack_str(text)


def unpack_result(payload: bytes) -> tuple[int, int, str]:
    r = _Reader(payload, "RESULT")
    ref_seq, code, text = r.u8("ref_seq"), r.u8("code"), r.string("text")
    r.end()
    return ref_seq, code, text


def fault_name(code: int, text: str) -> str:
    """The docs/events.md ``fault`` word: jam/stopped/incomplete/..., or the device's own word."""
    try:
        fault = Fault(code)
    except ValueError:
        fault = Fault.OTHER
    if fault is Fault.OTHER:
        return text or "other"
    return fault.name.lower()


def pack_fault(fault: Fault, text: str = "") -> bytes:
    return bytes((fault,)) + _pack_str(text)


def unpack_fault(payload: bytes, what: str) -> tuple[int, str]:
    r = _Reader(payload, what)
    code, text = r.u8("fault"), r.string("text")
    r.end()
    return code, text


# --- shuffler --------------------------------------------------------------

NO_DECK: Final = 0
NOT_COUNTED: Final = 0xFFFF


def pack_deck(deck: str | None) -> bytes:
    if deck is None:
        return bytes((NO_DECK,))
    if deck not in ("A", "B"):
        raise PayloadError(f"deck {deck!r} is not A or B")
    return deck.encode("ascii")


def _deck_from(code: int, what: str) -> str | None:
    if code == NO_DECK:
        return None
    if code in (0x41, 0x42):
        return chr(code)
    raise PayloadError(f"{what}: deck byte {code:#04x} is not 0, 'A' or 'B'")


def unpack_deck(payload: bytes, what: str) -> str | None:
    r = _Reader(payload, what)
    deck = _deck_from(r.u8("deck"), what)
    r.end()
    return deck


def pack_shuffle_completed(deck: str | None, count: int | None) -> bytes:
    return pack_deck(deck) + struct.pack(">H", NOT_COUNTED if count is None else count)


def unpack_shuffle_completed(payload: bytes) -> tuple[str | None, int | None]:
    r = _Reader(payload, "SHUFFLE_COMPLETED")
    deck = _deck_from(r.u8("deck"), "SHUFFLE_COMPLETED")
    count = r.u16("count")
    r.end()
    return deck, None if count == NOT_COUNTED else count


def pack_progress(percent: int) -> bytes:
    return bytes((percent,))


def unpack_progress(payload: bytes) -> int:
    r = _Reader(payload, "SHUFFLE_PROGRESS")
    percent = r.u8("percent")
    r.end()
    if percent > 100:
        raise PayloadError(f"SHUFFLE_PROGRESS: percent {percent} > 100")
    return percent


def pack_shuffler_status(door_open: bool, empty: bool) -> bytes:
    return bytes((int(door_open) | int(empty) << 1,))


def unpack_shuffler_status(payload: bytes) -> tuple[bool, bool]:
    r = _Reader(payload, "SHUFFLER_STATUS")
    flags = r.u8("flags")
    r.end()
    return bool(flags & 1), bool(flags & 2)


# --- shoe ------------------------------------------------------------------


def pack_card_drawn(card: str, face_up: bool) -> bytes:
    return _card_bytes(card) + bytes((int(face_up),))


def unpack_card_drawn(payload: bytes) -> tuple[str, bool]:
    r = _Reader(payload, "CARD_DRAWN")
    card = _card_from(r.take(2, "card"), "CARD_DRAWN")
    flags = r.u8("flags")
    r.end()
    return card, bool(flags & 1)


def pack_stack(cards: list[str]) -> bytes:
    if len(cards) > 255:
        raise PayloadError(f"STACK_DISPENSED: {len(cards)} cards exceed 255")
    return bytes((len(cards),)) + b"".join(_card_bytes(c) for c in cards)


def unpack_stack(payload: bytes) -> list[str]:
    r = _Reader(payload, "STACK_DISPENSED")
    n = r.u8("count")
    cards = [_card_from(r.take(2, f"card {i + 1}"), "STACK_DISPENSED") for i in range(n)]
    r.end()
    return cards


# --- hole-card reader ------------------------------------------------------


def pack_bool(value: bool) -> bytes:
    return bytes((int(value),))


def unpack_bool(payload: bytes, what: str) -> bool:
    r = _Reader(payload, what)
    value = r.u8("flag")
    r.end()
    if value > 1:
        raise PayloadError(f"{what}: flag {value} is not 0 or 1")
    return bool(value)


def pack_self_test(ok: bool, code: int = 0) -> bytes:
    return bytes((int(ok), code))


def unpack_self_test(payload: bytes) -> tuple[bool, int]:
    r = _Reader(payload, "SELF_TEST_RESULT")
    ok, code = r.u8("ok"), r.u8("code")
    r.end()
    return bool(ok), code


# --- discard rack ----------------------------------------------------------


def pack_rack_level(cards: int, height_um: int, um_per_card: int) -> bytes:
    return struct.pack(">HIH", cards, height_um, um_per_card)


def unpack_rack_level(payload: bytes) -> tuple[int, int, int]:
    r = _Reader(payload, "RACK_LEVEL")
    cards, height, per_card = r.u16("cards"), r.u32("height_um"), r.u16("um_per_card")
    r.end()
    if per_card == 0:
        raise PayloadError("RACK_LEVEL: um_per_card calibration is 0")
    return cards, height, per_card


def require_empty(payload: bytes, what: str) -> None:
    _Reader(payload, what).end()
