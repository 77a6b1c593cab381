"""Transports, codecs and device drivers: device bytes in, docs/events.md events out.

This package's top level is the driver author's API (docs/drivers.md): what a vendor's driver
may import and subclass. Everything named in ``__all__`` is covered by ``DRIVER_API_VERSION``
(a driver says which it was written for with ``driver_api = "1.0"``; the registry refuses
another major or a later minor, naming both); the submodules behind it are internal and may
change in any release. ``examples/vendor-shoe`` imports nothing else of tablectl (its
simulator uses ``tablectl.simulators``' top level, the simulator author's API).
"""

from __future__ import annotations

from tablectl.drivers.base import (
    DRIVER_API_VERSION,
    CommandRefused,
    DeviceDriver,
    DeviceRefused,
    DeviceTimeout,
    DeviceUnavailable,
    DiscardRack,
    DriverError,
    DriverSettings,
    HoleCardReader,
    Shoe,
    Shuffler,
)
from tablectl.drivers.protocol.messages import Identity
from tablectl.drivers.transport.base import Transport, TransportError

__all__ = [
    "DRIVER_API_VERSION",
    "CommandRefused",
    "DeviceDriver",
    "DeviceRefused",
    "DeviceTimeout",
    "DeviceUnavailable",
    "DiscardRack",
    "DriverError",
    "DriverSettings",
    "HoleCardReader",
    "Identity",
    "Shoe",
    "Shuffler",
    "Transport",
    "TransportError",
]
