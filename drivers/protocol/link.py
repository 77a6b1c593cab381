"""The sans-I/O link layer: sequence numbers, ACK/NAK, bounded retransmission.

Stop-and-wait in each direction: one data frame in flight, the rest queued.
The owner feeds received bytes to ``receive(data, now)``, writes out whatever
``take_output()`` returns, and calls ``poll(now)`` at ``next_deadline()``.
Time is passed in; this module never reads a clock, sleeps or does I/O, so the
same code runs in the drivers, in the simulators, and in tests with a fake clock.
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from dataclasses import dataclass

from tablectl.drivers.protocol.frame import MAX_PAYLOAD, DecodeError, Frame, decode_verbose, encode
from tablectl.drivers.protocol.messages import Msg

#: NAK reasons (payload byte)
NAK_BAD_FRAME = 1


class LinkFailure(Exception):
    """A frame went unacknowledged after every retransmission: the peer is gone."""


@dataclass(frozen=True, slots=True)
class LinkSettings:
    ack_timeout: float = 0.25  # seconds to wait for an ACK before retransmitting
    max_retransmissions: int = 3  # after the first transmission


class Link:
    """One end of a reference-protocol link."""

    def __init__(self, settings: LinkSettings | None = None) -> None:
        self.settings = settings or LinkSettings()
        self._rx = bytearray()
        self._out = bytearray()
        self.errors: Counter[str] = Counter()  # DecodeError values and "nak_received"
        self.frames_sent = 0
        self.frames_received = 0
        self.retransmissions = 0
        self.reset()

    def reset(self) -> None:
        """Forget sequence state, queued and in-flight frames (a new session starts)."""
        self._rx.clear()
        self._out.clear()
        self._queue: deque[Frame] = deque()
        self._inflight: bytes | None = None
        self._inflight_seq = 0
        self._deadline: float | None = None
        self._attempts = 0
        self._next_seq = 0
        self._last_rx_seq: int | None = None
        self.failed = False

    def reset_sending(self) -> None:
        """Drop queued and in-flight frames and restart numbering at 0 (the device on HELLO)."""
        self._queue.clear()
        self._inflight = None
        self._deadline = None
        self._attempts = 0
        self._next_seq = 0
        self.failed = False

    # -- sending -----------------------------------------------------------

    def send(self, msg_type: int, payload: bytes, now: float) -> int:
        """Queue a data frame for reliable delivery; returns its sequence number."""
        if len(payload) > MAX_PAYLOAD:
            raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
        seq = self._next_seq
        self._next_seq = (seq + 1) & 0xFF
        self._queue.append(Frame(msg_type, seq, payload))
        self._pump(now)
        return seq

    def _pump(self, now: float) -> None:
        if self._inflight is None and self._queue and not self.failed:
            frame = self._queue.popleft()
            self._inflight = encode(frame)
            self._inflight_seq = frame.seq
            self._attempts = 0
            self._transmit(now)

    def _transmit(self, now: float) -> None:
        assert self._inflight is not None
        self._out += self._inflight
        self.frames_sent += 1
        self._deadline = now + self.settings.ack_timeout

    def _retransmit(self, now: float) -> None:
        if self._attempts >= self.settings.max_retransmissions:
            self.failed = True
            self._deadline = None
            raise LinkFailure(
                f"frame seq {self._inflight_seq} unacknowledged after "
                f"{self._attempts + 1} transmissions"
            )
        self._attempts += 1
        self.retransmissions += 1
        self._transmit(now)

    def _control(self, msg_type: Msg, seq: int, payload: bytes = b"") -> None:
        self._out += encode(Frame(msg_type, seq, payload))
        self.frames_sent += 1

    def poll(self, now: float) -> None:
        """Retransmit a frame whose ACK is overdue; LinkFailure when retries are exhausted."""
        if self.failed:
            raise LinkFailure(f"frame seq {self._inflight_seq} unacknowledged (peer sent NAKs)")
        if self._inflight is not None and self._deadline is not None and now >= self._deadline:
            self._retransmit(now)

    def next_deadline(self) -> float | None:
        return self._deadline if self._inflight is not None else None

    @property
    def idle(self) -> bool:
        """Nothing in flight and nothing queued."""
        return self._inflight is None and not self._queue

    def take_output(self) -> bytes:
        """Bytes to write to the peer now."""
        out = bytes(self._out)
        self._out.clear()
        return out

    # -- receiving ---------------------------------------------------------

    def receive(self, data: bytes, now: float) -> list[Frame]:
        """Feed received bytes; returns new data frames in order (duplicates dropped)."""
        self._rx += data
        delivered: list[Frame] = []
        while self._rx:
            result = decode_verbose(self._rx)
            if result.consumed == 0:
                break
            del self._rx[: result.consumed]
            if result.error is not None:
                self.errors[result.error.value] += 1
                if result.error is DecodeError.CRC:
                    self._control(Msg.NAK, 0, bytes((NAK_BAD_FRAME,)))
                continue
            assert result.frame is not None
            self.frames_received += 1
            frame = result.frame
            if frame.type == Msg.ACK:
                if self._inflight is not None and frame.seq == self._inflight_seq:
                    self._inflight = None
                    self._deadline = None
                    self._pump(now)
                continue
            if frame.type == Msg.NAK:
                self.errors["nak_received"] += 1
                if self._inflight is not None and not self.failed:
                    # exhaustion is reported by the next poll() through self.failed
                    with contextlib.suppress(LinkFailure):
                        self._retransmit(now)
                continue
            self._control(Msg.ACK, frame.seq)
            if frame.type == Msg.HELLO:
                self._last_rx_seq = None  # a HELLO opens a new session, whatever came before
            if frame.seq == self._last_rx_seq:
                self.errors["duplicate"] += 1
                continue
            self._last_rx_seq = frame.seq
            delivered.append(frame)
        return delivered
