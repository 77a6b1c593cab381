"""The device side of a byte link.

A simulated device is an ordinary object that receives the bytes the host
wrote and sends bytes back through a callback. Attachments (a pseudo-terminal,
a simulated pyusb backend, an in-process pipe) carry those bytes so that the
host's production transport and driver code run unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class DeviceSide(Protocol):
    """What an attachment needs from a simulated device."""

    def connect(self, send: Callable[[bytes], None]) -> None:
        """The link is up; ``send`` delivers bytes to the host."""

    def receive(self, data: bytes) -> None:
        """Bytes the host wrote."""

    def disconnect(self) -> None:
        """The link went down (host closed the port, or the attachment was torn down)."""
