"""Simulators by driver name: the reference ones built in, a vendor's through entry points.

A vendor's package registers its simulator under its driver's name::

    [project.entry-points."tablectl.simulators"]
    acme-cs9 = "acme_shoe.simulator:AcmeShoeSim"

so that `tablectl conformance`, `tablectl sim --driver` and `tablectl demo --driver` can put
the vendor's device on a pty. A simulator is a DeviceSide (simulators.link) and takes the
keywords of the reference simulator of its kind (``KIND_KEYWORDS``), so the demo's simulated
table can swap it in for the reference one and deal from it.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from tablectl.drivers.registry import BUILTIN_DRIVERS, _import_object
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.scenario import SIMULATORS

ENTRY_POINT_GROUP = "tablectl.simulators"

#: the attributes of a reference simulator that a replacement is built with, per kind
KIND_KEYWORDS: dict[str, tuple[str, ...]] = {
    "shuffler": ("seed", "decks", "joker", "counting", "shuffle_seconds"),
    "shoe": ("seed", "automated", "decks", "joker", "stack_size"),
    "hole_card_reader": ("seed", "read_seconds", "self_test_seconds"),
    "discard_rack": ("seed", "um_per_card", "noise_um"),
}


class SimulatorNotFound(LookupError):
    """No simulator for that driver; the message says how a package registers one."""


def simulator_class(kind: str, driver: str) -> type[SimulatedDevice]:
    """The simulator of ``driver`` for ``kind``: reference built in, others by entry point."""
    if (kind, driver) in BUILTIN_DRIVERS:
        return SIMULATORS[kind]
    targets = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if driver not in targets:
        raise SimulatorNotFound(
            f"no simulator registered for driver {driver!r} (a package adds one to the "
            f"{ENTRY_POINT_GROUP!r} entry points under the driver's name)"
        )
    cls = _import_object(targets[driver], "simulator")
    if not (isinstance(cls, type) and issubclass(cls, SimulatedDevice)):
        raise SimulatorNotFound(f"{targets[driver]!r} is not a tablectl SimulatedDevice class")
    if getattr(cls, "kind", None) != kind:
        raise SimulatorNotFound(f"simulator {targets[driver]!r} is a {cls.kind}, not a {kind}")
    return cls


def replacing(cls: type[SimulatedDevice], reference: SimulatedDevice) -> SimulatedDevice:
    """A ``cls`` device built like ``reference`` (same seed, decks, ...), to take its place."""
    keywords: dict[str, Any] = {
        key: getattr(reference, key) for key in KIND_KEYWORDS[reference.kind]
    }
    return cls(**keywords)
