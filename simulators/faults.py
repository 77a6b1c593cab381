"""Wire-level fault injection: a DeviceSide that wraps a simulated device.

It sits between any attachment (pty, pyusb backend, in-process) and the
device, so faults reach the production driver exactly as a bad cable or a
misbehaving firmware would: garbage bytes, corrupted CRCs, slow answers, a
device that goes silent and comes back. Nothing in the driver knows it exists.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tablectl.simulators.link import DeviceSide


class FaultyWire:
    """A DeviceSide passing bytes to and from ``inner``, with faults on demand."""

    def __init__(self, inner: DeviceSide) -> None:
        self.inner = inner
        self._host_send: Callable[[bytes], None] | None = None
        self._corrupt = 0
        self._delay = 0.0
        self._last_due = 0.0
        self.silent = False
        self.injected: dict[str, int] = {}

    # -- DeviceSide --------------------------------------------------------------

    def connect(self, send: Callable[[bytes], None]) -> None:
        self._host_send = send
        if not self.silent:
            self.inner.connect(self._to_host)

    def receive(self, data: bytes) -> None:
        if not self.silent:
            self.inner.receive(data)

    def disconnect(self) -> None:
        self._host_send = None
        if not self.silent:
            self.inner.disconnect()

    # -- the path to the host ------------------------------------------------------

    def _to_host(self, data: bytes) -> None:
        if self.silent or self._host_send is None:
            return
        if self._corrupt and data:
            self._corrupt -= 1
            flipped = bytearray(data)
            flipped[-1] ^= 0x01  # the last byte of a frame is its CRC
            data = bytes(flipped)
        if self._delay > 0:
            loop = asyncio.get_running_loop()
            due = max(loop.time() + self._delay, self._last_due)  # keep the order
            self._last_due = due
            loop.call_at(due, self._deliver, data)
        else:
            self._host_send(data)

    def _deliver(self, data: bytes) -> None:
        if self._host_send is not None and not self.silent:
            self._host_send(data)

    def _count(self, fault: str) -> None:
        self.injected[fault] = self.injected.get(fault, 0) + 1

    # -- faults ----------------------------------------------------------------------

    def garbage(self, data: bytes) -> None:
        """Bytes that are no frame, straight onto the wire."""
        self._count("garbage")
        if self._host_send is not None and not self.silent:
            self._host_send(data)

    def bad_crc(self, count: int = 1) -> None:
        """The next ``count`` writes to the host arrive with a corrupted CRC."""
        self._count("bad_crc")
        self._corrupt += count

    def slow(self, seconds: float) -> None:
        """Everything the device sends arrives ``seconds`` late (0 ends the fault)."""
        self._count("slow")
        self._delay = seconds

    def go_silent(self) -> None:
        """The device vanishes from the link: no bytes either way, its session is gone."""
        self._count("disconnect")
        if not self.silent:
            self.silent = True
            self.inner.disconnect()

    def come_back(self) -> None:
        """The device answers again, as after a power cycle (a new handshake is needed)."""
        if self.silent:
            self.silent = False
            if self._host_send is not None:
                self.inner.connect(self._to_host)
