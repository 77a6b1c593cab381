"""The vendor kit's simulator seam: the example CS-9 simulator is built on the public
`VendorSimulator` alone (no private method of tablectl's overridden, none of tablectl's own
protocol decoded), and its reports arrive in docs/events.md's words. Its conformance run is
in test_conformance.py (`conformance("shoe", "acme-cs9")`)."""

from __future__ import annotations

import ast
import asyncio
import inspect

from acme_shoe import protocol as p
from acme_shoe import simulator

from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.vendor import Report, VendorSimulator


def test_the_example_overrides_only_public_methods_and_decodes_no_tablectl_protocol() -> None:
    source = inspect.getsource(simulator)
    tree = ast.parse(source)
    assert "tablectl.drivers.protocol" not in source  # it gets Reports, not tablectl frames
    (sim,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AcmeShoeSim"]
    defined = {n.name for n in sim.body if isinstance(n, ast.FunctionDef)}
    inherited_private = {
        name
        for base in (VendorSimulator, ShoeSim)
        for klass in base.__mro__
        for name in vars(klass)
        if name.startswith("_") and not name.startswith("__")
    }
    assert not defined & inherited_private, defined & inherited_private
    overridden = defined & {n for klass in VendorSimulator.__mro__ for n in vars(klass)}
    assert overridden <= {"__init__", "on_connect", "on_disconnect", "on_bytes", "on_report"}
    assert issubclass(simulator.AcmeShoeSim, VendorSimulator)


def test_reports_arrive_in_the_words_of_docs_events_md() -> None:
    reports: list[Report] = []

    class Recorder(VendorSimulator, ShoeSim):
        def on_bytes(self, data: bytes) -> None:
            self.identified()

        def on_report(self, report: Report) -> None:
            reports.append(report)

    async def main() -> None:
        device = Recorder(seed=3)
        sent: list[bytes] = []
        device.connect(sent.append)
        device.receive(b"hello")  # the vendor's handshake, whatever it is
        device.load()
        assert device.draw() is not None
        device.jam()
        assert device.draw() is None  # jammed
        done, _ = device.do("lock_dispensing")
        assert done and device.locked
        assert device.do("self_test") == (False, "no command 'self_test' on a shoe")

    asyncio.run(main())
    kinds = [r.type for r in reports]
    assert "card_drawn" in kinds and "shoe_fault" in kinds and "dispensing_locked" in kinds
    drawn = next(r for r in reports if r.type == "card_drawn")
    assert set(drawn.fields) == {"card", "face_up"} and len(drawn.fields["card"]) in (2, 3)
    fault = next(r for r in reports if r.type == "shoe_fault")
    assert fault.fields["fault"] == "jam"
    assert p.card_to_wire(drawn.fields["card"])  # the vendor's wire takes it as is


def test_a_simulator_without_the_wire_methods_cannot_be_made() -> None:
    """on_bytes and on_report are abstract: a vendor class that forgot one fails when it is
    made, naming the method, not later when the host first speaks."""
    import pytest

    class Forgetful(VendorSimulator, ShoeSim):
        def on_bytes(self, data: bytes) -> None:
            self.identified()

    with pytest.raises(TypeError, match="on_report"):
        Forgetful(seed=1)
