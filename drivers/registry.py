"""Drivers by name, per device kind; vendors add theirs through entry points.

Modelled on python-can's interface registry: built-in drivers are listed here
as ``module:Class`` strings imported on first use, and any installed package
may add drivers to the ``tablectl.drivers`` entry-point group::

    [project.entry-points."tablectl.drivers"]
    acme-shuffler = "acme_tablectl.shuffler:AcmeShuffler"

The entry point's name is the driver's name; the class's ``kind`` (inherited
from tablectl.drivers.base.Shuffler, Shoe, HoleCardReader or DiscardRack) says which
kind it drives. The daemon builds a driver from configuration with
``create_driver(kind, driver, transport, name=..., allow_list=..., settings=...)``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from tablectl.drivers.base import KIND_CLASSES, DeviceDriver
from tablectl.drivers.transport.base import Transport

ENTRY_POINT_GROUP = "tablectl.drivers"

#: (kind, name) -> "module:Class"
BUILTIN_DRIVERS: dict[tuple[str, str], str] = {
    ("shuffler", "reference"): "tablectl.drivers.reference:ReferenceShuffler",
    ("shoe", "reference"): "tablectl.drivers.reference:ReferenceShoe",
    ("hole_card_reader", "reference"): "tablectl.drivers.reference:ReferenceHoleCardReader",
    ("discard_rack", "reference"): "tablectl.drivers.reference:ReferenceDiscardRack",
}


class DriverNotFound(LookupError):
    """No driver of that name for that kind; the message lists the ones there are."""


def _import_object(target: str, what: str = "driver") -> Any:
    """The object a ``module:attr`` string names; DriverNotFound when it cannot be imported."""
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise DriverNotFound(f"cannot import {what} {target!r}: {exc}") from None


def _import(target: str) -> type[DeviceDriver]:
    obj = _import_object(target)
    if not (isinstance(obj, type) and issubclass(obj, DeviceDriver)):
        raise DriverNotFound(f"{target!r} is not a tablectl DeviceDriver class")
    return obj


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_drivers(kind: str) -> list[str]:
    """Names of the drivers for ``kind``: built-in ones and entry points of that kind."""
    _check_kind(kind)
    names = {name for (k, name) in BUILTIN_DRIVERS if k == kind}
    for name, target in _plugins().items():
        try:
            if getattr(_import(target), "kind", None) == kind:
                names.add(name)
        except DriverNotFound:
            continue
    return sorted(names)


def _check_kind(kind: str) -> None:
    if kind not in KIND_CLASSES:
        allowed = ", ".join(KIND_CLASSES)
        raise DriverNotFound(f"unknown device kind {kind!r} (allowed: {allowed})")


def get_driver_class(kind: str, name: str) -> type[DeviceDriver]:
    """The driver class called ``name`` for ``kind``."""
    _check_kind(kind)
    target = BUILTIN_DRIVERS.get((kind, name)) or _plugins().get(name)
    if target is None:
        raise DriverNotFound(
            f"no {kind} driver named {name!r} (available: {', '.join(available_drivers(kind))})"
        )
    cls = _import(target)
    driven = getattr(cls, "kind", None)
    if driven != kind:
        raise DriverNotFound(f"driver {name!r} drives a {driven}, not a {kind}")
    return cls


def create_driver(kind: str, driver: str, transport: Transport, **kwargs: Any) -> DeviceDriver:
    """An instance of driver ``driver`` over ``transport`` (kwargs: name, allow_list, settings)."""
    return get_driver_class(kind, driver)(transport, **kwargs)
