"""Byte transports: serial (pyserial) and USB bulk endpoints (pyusb). Nothing about devices."""

from drivers.transport.base import Transport, TransportError

__all__ = ["Transport", "TransportError"]
