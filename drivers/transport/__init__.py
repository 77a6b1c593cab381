"""Byte transports: serial (pyserial) and USB bulk endpoints (pyusb). Nothing about devices."""

from __future__ import annotations

import inspect
from typing import Any

from tablectl.drivers.transport.base import Transport, TransportError

__all__ = [
    "TRANSPORT_KINDS",
    "Transport",
    "TransportConfigError",
    "TransportError",
    "make_transport",
]

#: transport kind -> (module, class) implementing it; imported lazily.
TRANSPORT_KINDS: dict[str, tuple[str, str]] = {
    "serial": ("tablectl.drivers.transport.serial", "SerialTransport"),
    "usb": ("tablectl.drivers.transport.usb", "UsbTransport"),
}


class TransportConfigError(ValueError):
    """A transport was configured wrongly; the message names the kind and the option."""


def make_transport(kind: str, **options: Any) -> Transport:
    """Build a transport from configuration, e.g. ``make_transport("serial", port="/dev/pts/5")``.

    Raises TransportConfigError naming the bad kind, the unknown or missing option,
    or the option whose value is not allowed.
    """
    if kind not in TRANSPORT_KINDS:
        raise TransportConfigError(
            f"unknown transport kind {kind!r}; expected one of: {', '.join(TRANSPORT_KINDS)}"
        )
    module_name, class_name = TRANSPORT_KINDS[kind]
    module = __import__(module_name, fromlist=[class_name])
    cls = getattr(module, class_name)
    parameters = inspect.signature(cls).parameters
    allowed = list(parameters)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TransportConfigError(
            f"{kind} transport: unknown option(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(allowed)}"
        )
    missing = [
        name
        for name, parameter in parameters.items()
        if parameter.default is inspect.Parameter.empty and name not in options
    ]
    if missing:
        raise TransportConfigError(
            f"{kind} transport: missing required option(s) {', '.join(missing)}"
        )
    try:
        transport: Transport = cls(**options)
    except ValueError as exc:
        raise TransportConfigError(str(exc)) from exc
    return transport
