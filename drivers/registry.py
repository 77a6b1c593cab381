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

from tablectl.drivers.base import DRIVER_API_VERSION, KIND_CLASSES, DeviceDriver
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
    check_driver_api(obj, target)
    return obj


class DriverApiMismatch(DriverNotFound):
    """A driver written for a driver API this tablectl does not provide."""


def _api(text: object) -> tuple[int, int] | None:
    major, _, minor = str(text).partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        return None
    return int(major), int(minor or 0)


def check_driver_api(cls: type[DeviceDriver], target: str) -> None:
    """Refuse a driver written for another major driver API, or a later minor one, naming
    both versions; a driver that declares none is refused too (it cannot be told apart)."""
    ours = _api(DRIVER_API_VERSION)
    assert ours is not None
    declared = getattr(cls, "driver_api", None)
    theirs = _api(declared) if declared is not None else None
    where = f"{target} ({cls.__module__}.{cls.__qualname__})"
    if theirs is None:
        raise DriverApiMismatch(
            f"driver {where} declares no driver API version (driver_api = "
            f'"{DRIVER_API_VERSION}" for this tablectl, docs/drivers.md): refused'
            if declared is None
            else f"driver {where}: driver_api {declared!r} is not MAJOR.MINOR: refused"
        )
    if theirs[0] != ours[0] or theirs[1] > ours[1]:
        raise DriverApiMismatch(
            f"driver {where} is written for the driver API {declared}, and this tablectl "
            f"provides {DRIVER_API_VERSION}: install the driver's release for API "
            f"{ours[0]}.x (or a tablectl that provides {declared}); refused"
        )


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
