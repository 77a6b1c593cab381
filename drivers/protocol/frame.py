"""Framing of the reference protocol: pure bytes <-> frames, no I/O.

Wire layout (docs/protocol.md, "Framing")::

    A5 5A | ver | seq | type | len_hi len_lo | hcheck | payload (len) | crc32 (4, big-endian)

``hcheck`` is the low byte of CRC-16/XMODEM over ``ver..len`` so a corrupted
length is caught before the decoder waits for bytes that will never come; the
CRC-32 covers ``ver..payload``. A decoder that finds anything wrong drops one
byte and hunts for the next magic: that is the resynchronisation.
"""

from __future__ import annotations

import binascii
import enum
import struct
import zlib
from dataclasses import dataclass
from typing import Final

MAGIC: Final = b"\xa5\x5a"
FRAMING_VERSION: Final = 1
MAX_PAYLOAD: Final = 1024
HEADER_SIZE: Final = 8  # magic(2) ver seq type len(2) hcheck
TRAILER_SIZE: Final = 4
OVERHEAD: Final = HEADER_SIZE + TRAILER_SIZE

_HEAD = struct.Struct(">BBBH")


class DecodeError(enum.Enum):
    """Why bytes were dropped; used as the ``error`` label of the driver's metrics."""

    GARBAGE = "garbage"  # bytes before a magic
    HEADER = "header"  # the header check failed
    VERSION = "version"  # a framing version this decoder does not know
    LENGTH = "length"  # the length exceeds MAX_PAYLOAD
    CRC = "crc"  # the frame's CRC-32 does not match


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: a message type, a sequence number and an opaque payload."""

    type: int
    seq: int
    payload: bytes = b""

    def __post_init__(self) -> None:
        if not 0 <= self.type <= 0xFF:
            raise ValueError(f"frame type {self.type} is not a byte")
        if not 0 <= self.seq <= 0xFF:
            raise ValueError(f"frame seq {self.seq} is not a byte")
        if len(self.payload) > MAX_PAYLOAD:
            raise ValueError(f"payload of {len(self.payload)} bytes exceeds {MAX_PAYLOAD}")


@dataclass(frozen=True, slots=True)
class DecodeResult:
    """``consumed`` bytes may be dropped from the buffer; ``frame`` or ``error`` says why."""

    consumed: int
    frame: Frame | None = None
    error: DecodeError | None = None


def _header_check(head: bytes) -> int:
    return binascii.crc_hqx(head, 0) & 0xFF


def encode(frame: Frame) -> bytes:
    """The bytes of ``frame`` on the wire."""
    head = _HEAD.pack(FRAMING_VERSION, frame.seq, frame.type, len(frame.payload))
    body = head + frame.payload
    return b"".join(
        (MAGIC, head, bytes((_header_check(head),)), frame.payload, zlib.crc32(body).to_bytes(4))
    )


def decode_verbose(buffer: bytes | bytearray | memoryview) -> DecodeResult:
    """Decode at most one frame from the start of ``buffer``.

    ``consumed == 0`` with no frame means: wait for more bytes. Otherwise drop
    ``consumed`` bytes and call again. Never raises on any input.
    """
    data = bytes(buffer[: HEADER_SIZE + MAX_PAYLOAD + TRAILER_SIZE])
    size = len(data)
    start = data.find(MAGIC)
    if start < 0:
        # keep a trailing first magic byte: its partner may still arrive
        keep = 1 if size and data[-1] == MAGIC[0] else 0
        if size - keep:
            return DecodeResult(size - keep, error=DecodeError.GARBAGE)
        return DecodeResult(0)
    if start > 0:
        return DecodeResult(start, error=DecodeError.GARBAGE)
    if size < HEADER_SIZE:
        return DecodeResult(0)
    head = data[2:7]
    version, seq, msg_type, length = _HEAD.unpack(head)
    if data[7] != _header_check(head):
        return DecodeResult(1, error=DecodeError.HEADER)
    if version != FRAMING_VERSION:
        return DecodeResult(1, error=DecodeError.VERSION)
    if length > MAX_PAYLOAD:
        return DecodeResult(1, error=DecodeError.LENGTH)
    total = HEADER_SIZE + length + TRAILER_SIZE
    if size < total:
        return DecodeResult(0)
    payload = data[HEADER_SIZE : HEADER_SIZE + length]
    crc = int.from_bytes(data[HEADER_SIZE + length : total])
    if zlib.crc32(head + payload) != crc:
        return DecodeResult(1, error=DecodeError.CRC)
    return DecodeResult(total, Frame(msg_type, seq, payload))


def decode(buffer: bytes | bytearray | memoryview) -> tuple[int, Frame | None]:
    """``(consumed, frame | None)``: the codec's contract (see decode_verbose)."""
    result = decode_verbose(buffer)
    return result.consumed, result.frame


def wire_time(frame_size: int, baud: int = 115200, bits_per_byte: int = 10) -> float:
    """Seconds a frame of ``frame_size`` bytes takes on a serial line (8N1 = 10 bits)."""
    return frame_size * bits_per_byte / baud
