"""The Acme CS-9 wire protocol, without I/O: framing, LRC, cards, messages.

Line: 9600 baud, 8 data bits, even parity, 1 stop bit (8E1), no flow control.

Frame: ``STX text ETX LRC``. ``text`` is printable ASCII, fields separated by commas;
``LRC`` is one byte, the XOR of every byte after STX up to and including ETX (ISO 1155
style, as many payment and gaming peripherals use). The receiver answers a frame whose LRC
checks with ACK (0x06) and one whose LRC does not with NAK (0x15); the device sends a
frame again on NAK or when no ACK comes within ``ACK_TIMEOUT`` (at most ``MAX_TRIES`` in
all). The host's commands are answered by a reply frame instead of an ACK.

Host to device:     ``V`` identify; ``L,1`` / ``L,0`` lock / unlock dispensing; ``S`` status.
Device to host:     ``I,model,serial,firmware,sha256`` identity; ``A,L,1|0`` command done;
                    ``E,L,code,text`` command refused; ``T,locked,fault`` status;
                    ``C,card,F|B`` card drawn (face up / back up); ``K,n,card...`` stack;
                    ``X`` cut card; ``N,deck`` deck loaded (``-``: unnamed);
                    ``F,code,text`` fault (``JM`` jam, ``SP`` stopped, ``IC`` incomplete,
                    ``SN`` sensor, ``HW`` hardware, ``EM`` empty); ``D,1|0`` lock state.

Cards: suit letter ``S H D C`` then rank ``01``..``13`` (ace 01, king 13); joker ``J00``.
"""

from __future__ import annotations

STX, ETX, ACK, NAK = 0x02, 0x03, 0x06, 0x15
BAUDRATE = 9600
SERIAL_LINE = {"baudrate": BAUDRATE, "bytesize": 8, "parity": "E", "stopbits": 1}
ACK_TIMEOUT = 0.3
MAX_TRIES = 3
#: longest frame text the device sends (a stack of 52 is well under it)
MAX_TEXT = 512

#: fault codes -> the EVENTS.md ``fault`` word
FAULTS = {
    "JM": "jam",
    "SP": "stopped",
    "IC": "incomplete",
    "SN": "sensor",
    "HW": "hardware",
    "EM": "empty",
}
FAULT_CODES = {word: code for code, word in FAULTS.items()}

_RANKS = "A23456789TJQK"
_SUITS = {"S": "s", "H": "h", "D": "d", "C": "c"}


class ProtocolError(ValueError):
    """A frame or field this protocol does not allow; the message names it (never a card)."""


def lrc(data: bytes) -> int:
    value = 0
    for byte in data:
        value ^= byte
    return value


def frame(text: str) -> bytes:
    body = text.encode("ascii") + bytes((ETX,))
    return bytes((STX,)) + body + bytes((lrc(body),))


def card_to_wire(card: str) -> str:
    """``As`` -> ``S01``; ``JK`` -> ``J00``."""
    if card == "JK":
        return "J00"
    suit = {v: k for k, v in _SUITS.items()}[card[1]]
    return f"{suit}{_RANKS.index(card[0]) + 1:02d}"


def card_from_wire(text: str) -> str:
    """``S01`` -> ``As``; ProtocolError (naming the field's length only) if malformed."""
    if text == "J00":
        return "JK"
    if len(text) == 3 and text[0] in _SUITS and text[1:].isdigit() and 1 <= int(text[1:]) <= 13:
        return _RANKS[int(text[1:]) - 1] + _SUITS[text[0]]
    raise ProtocolError(f"malformed card field ({len(text)} characters)")


#: what ``Deframer.feed`` yields: ("frame", text), ("ack", ""), ("nak", ""), ("bad", "")
Item = tuple[str, str]


class Deframer:
    """Bytes in, frames and control bytes out; counts what it threw away. Used on both sides."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.garbage = 0  # bytes outside any frame, or of a frame cut short
        self.bad_lrc = 0

    def feed(self, data: bytes) -> list[Item]:
        out: list[Item] = []
        self._buf += data
        while self._buf:
            if self._buf[0] != STX:
                byte = self._buf.pop(0)
                if byte == ACK:
                    out.append(("ack", ""))
                elif byte == NAK:
                    out.append(("nak", ""))
                else:
                    self.garbage += 1
                continue
            end = self._buf.find(ETX, 1)
            restart = self._buf.find(STX, 1, end if end > 0 else len(self._buf))
            if restart > 0:
                # a new frame began before this one ended: the first was cut short
                self.garbage += restart
                del self._buf[:restart]
                continue
            if end < 0:
                if len(self._buf) > MAX_TEXT + 1:
                    self.garbage += len(self._buf)
                    self._buf.clear()
                break  # wait for the rest
            if end + 1 >= len(self._buf):
                break  # the LRC byte is still to come
            body = bytes(self._buf[1 : end + 1])
            check = self._buf[end + 1]
            del self._buf[: end + 2]
            text = body[:-1]
            if lrc(body) != check or not all(0x20 <= b < 0x7F for b in text):
                self.bad_lrc += 1
                out.append(("bad", ""))
                continue
            out.append(("frame", text.decode("ascii")))
        return out
