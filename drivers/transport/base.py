"""The contract every byte transport keeps.

A transport moves bytes between the daemon's asyncio loop and one device. It
knows nothing about frames or devices: the codec and the driver sit above it.
Received bytes are delivered on the loop thread, never from another thread.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable

DataCallback = Callable[[bytes], None]
LostCallback = Callable[[Exception | None], None]


class TransportError(Exception):
    """The transport could not be opened or failed; the message names the port."""


class Transport(abc.ABC):
    """Bytes in, bytes out, on one asyncio loop."""

    #: A short human name for logs and metrics labels, e.g. ``serial:/dev/ttyUSB0``.
    name: str

    @abc.abstractmethod
    async def open(
        self,
        loop: asyncio.AbstractEventLoop,
        on_data: DataCallback,
        on_lost: LostCallback,
    ) -> None:
        """Open the port; afterwards ``on_data`` receives bytes on ``loop``'s thread.

        ``on_lost`` is called once, on the loop thread, when the device goes away
        (unplugged, port closed by the other side); the transport is then closed.
        Raises TransportError when the port cannot be opened.
        """

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Queue bytes to the device without blocking the loop."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the port; idempotent. ``on_lost`` is not called for a requested close."""

    @property
    @abc.abstractmethod
    def is_open(self) -> bool:
        """True between a successful open and close/loss."""
