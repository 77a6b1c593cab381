"""The driver registry: built-ins by name, vendor drivers from the entry-point group."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from tablectl.drivers import registry
from tablectl.drivers.base import Shoe
from tablectl.drivers.reference import ReferenceShoe, ReferenceShuffler
from tablectl.simulators.inprocess import InProcessTransport
from tablectl.simulators.shoe import ShoeSim


class VendorShoe(ReferenceShoe):
    """A vendor's shoe driver, as an installed package would provide it."""


@pytest.fixture
def vendor_plugin(monkeypatch):
    eps = [
        EntryPoint("acme-shoe", f"{__name__}:VendorShoe", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module:Nothing", registry.ENTRY_POINT_GROUP),
    ]

    def fake_entry_points(group: str):
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)


def test_builtin_reference_drivers():
    assert registry.get_driver_class("shuffler", "reference") is ReferenceShuffler
    for kind in ("shuffler", "shoe", "hole_card_reader", "discard_rack"):
        assert "reference" in registry.available_drivers(kind)


def test_vendor_driver_from_entry_point(vendor_plugin):
    assert registry.available_drivers("shoe") == ["acme-shoe", "reference"]
    assert registry.available_drivers("shuffler") == ["reference"]
    driver = registry.create_driver(
        "shoe", "acme-shoe", InProcessTransport(ShoeSim()), name="shoe-1"
    )
    assert isinstance(driver, VendorShoe) and isinstance(driver, Shoe)
    assert driver.name == "shoe-1"


def test_unknown_names_and_kinds_are_clear(vendor_plugin):
    with pytest.raises(registry.DriverNotFound, match=r"no shoe driver named 'nope'.*acme-shoe"):
        registry.get_driver_class("shoe", "nope")
    with pytest.raises(registry.DriverNotFound, match="unknown device kind 'toaster'"):
        registry.get_driver_class("toaster", "reference")
    with pytest.raises(registry.DriverNotFound, match="drives a shoe, not a shuffler"):
        registry.get_driver_class("shuffler", "acme-shoe")
    with pytest.raises(registry.DriverNotFound, match="cannot import driver"):
        registry.get_driver_class("shoe", "broken")
