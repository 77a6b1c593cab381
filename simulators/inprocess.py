"""An in-process Transport <-> DeviceSide pairing for fast soak runs and unit tests.

Bytes go through the event loop (``call_soon``) in both directions, so a
driver sees the same asynchrony as with a real port, without a file
descriptor. ``unplug()``/``replug()`` simulate a cable pulled and put back.
Integration tests also run the drivers over a real pty and the pyusb backend.
"""

from __future__ import annotations

import asyncio

from tablectl.drivers.transport.base import DataCallback, LostCallback, Transport, TransportError
from tablectl.simulators.link import DeviceSide


class InProcessTransport(Transport):
    """A Transport whose other end is a DeviceSide in the same process."""

    def __init__(self, device: DeviceSide, name: str = "inprocess") -> None:
        self.device = device
        self.name = name
        self.plugged = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_data: DataCallback | None = None
        self._on_lost: LostCallback | None = None
        self._open = False
        self.bytes_to_device = 0
        self.bytes_to_host = 0

    async def open(
        self, loop: asyncio.AbstractEventLoop, on_data: DataCallback, on_lost: LostCallback
    ) -> None:
        if not self.plugged:
            raise TransportError(f"{self.name}: no device attached (unplugged)")
        if self._open:
            raise TransportError(f"{self.name}: already open")
        self._loop, self._on_data, self._on_lost = loop, on_data, on_lost
        self._open = True
        self.device.connect(self._from_device)

    def _from_device(self, data: bytes) -> None:
        if self._open and self._loop is not None:
            self.bytes_to_host += len(data)
            self._loop.call_soon(self._deliver, data)

    def _deliver(self, data: bytes) -> None:
        if self._open and self._on_data is not None:
            self._on_data(data)

    def write(self, data: bytes) -> None:
        if not self._open or self._loop is None:
            raise TransportError(f"{self.name}: write on a closed transport")
        self.bytes_to_device += len(data)
        self._loop.call_soon(self._to_device, data)

    def _to_device(self, data: bytes) -> None:
        if self._open:
            self.device.receive(data)

    async def close(self) -> None:
        if self._open:
            self._open = False
            self.device.disconnect()

    @property
    def is_open(self) -> bool:
        return self._open

    # -- the cable ---------------------------------------------------------------------

    def unplug(self) -> None:
        """The device is pulled out: the driver sees the transport lost."""
        self.plugged = False
        if self._open:
            self._open = False
            self.device.disconnect()
            if self._on_lost is not None and self._loop is not None:
                self._loop.call_soon(self._on_lost, ConnectionError(f"{self.name}: unplugged"))

    def replug(self) -> None:
        """The device is plugged back in; the next open() succeeds."""
        self.plugged = True
