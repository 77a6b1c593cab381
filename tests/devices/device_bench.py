"""A bench that puts a reference driver in front of its simulator.

``bench`` takes an attachment name: the in-process pairing, a real pty opened
with pyserial (SerialTransport), or the simulated pyusb backend opened with
UsbTransport, so every driver test runs the production transport code too.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from tablectl.drivers.base import AllowList, DeviceDriver, DriverSettings
from tablectl.drivers.protocol.link import LinkSettings
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.drivers.transport.usb import UsbTransport
from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.inprocess import InProcessTransport
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.usb_backend import SimulatedUsbBackend

FAST = DriverSettings(
    handshake_timeout=0.5,
    command_timeout=0.5,
    heartbeat_interval=0.1,
    backoff_initial=0.02,
    backoff_max=0.1,
    link=LinkSettings(ack_timeout=0.05, max_retransmissions=3),
)


class Bench:
    """A running driver, its simulator, the fault wire between them, and the events seen."""

    def __init__(self, sim: SimulatedDevice, driver: DeviceDriver, wire: FaultyWire, cable: Any):
        self.sim = sim
        self.driver = driver
        self.wire = wire
        self.cable = cable
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._changed.set()

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == event_type]

    async def wait_for(self, event_type: str, count: int = 1, timeout: float = 2.0) -> dict:
        """The ``count``-th event of ``event_type``; fails the test after ``timeout``."""
        async with asyncio.timeout(timeout):
            while len(self.of_type(event_type)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.of_type(event_type)[count - 1]

    async def settle(self, seconds: float = 0.05) -> None:
        await asyncio.sleep(seconds)


Attach = Callable[[FaultyWire, SimulatedDevice], tuple[Any, Any]]  # -> (transport, cable)


def attach_inprocess(wire: FaultyWire, sim: SimulatedDevice) -> tuple[Any, Any]:
    transport = InProcessTransport(wire)
    return transport, transport


class PtyCable:
    """A pty attachment served by the simulator; the host opens a stable symlink with pyserial."""

    def __init__(self, wire: FaultyWire) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="tablectl-pty-")
        self.attachment = PtyAttachment(
            wire, asyncio.get_running_loop(), link_path=Path(self.tmp.name) / "device"
        )
        self.path = self.attachment.plug()

    def unplug(self) -> None:
        self.attachment.unplug()

    def replug(self) -> None:
        self.attachment.replug()

    async def aclose(self) -> None:
        self.attachment.close()
        self.tmp.cleanup()


def attach_pty(wire: FaultyWire, sim: SimulatedDevice) -> tuple[Any, Any]:
    cable = PtyCable(wire)
    return SerialTransport(cable.path), cable


class UsbCable:
    """A device on the simulated pyusb bus; the host's UsbTransport runs unchanged."""

    def __init__(self, wire: FaultyWire, sim: SimulatedDevice) -> None:
        self.backend = SimulatedUsbBackend(asyncio.get_running_loop())
        self.device = self.backend.add_reference_device(sim.kind, sim.identity.serial, wire)

    def unplug(self) -> None:
        self.backend.unplug(self.device)

    def replug(self) -> None:
        self.backend.plug(self.device)


def attach_usb(wire: FaultyWire, sim: SimulatedDevice) -> tuple[Any, Any]:
    cable = UsbCable(wire, sim)
    transport = UsbTransport(
        REFERENCE_VENDOR_ID,
        REFERENCE_PRODUCT_IDS[sim.kind],
        sim.identity.serial,
        backend=cable.backend,
    )
    return transport, cable


ATTACHMENTS: dict[str, Attach] = {
    "inprocess": attach_inprocess,
    "pty": attach_pty,
    "usb": attach_usb,
}


@contextlib.asynccontextmanager
async def bench(
    sim: SimulatedDevice,
    driver_cls: type[DeviceDriver],
    attachment: str = "inprocess",
    *,
    allow_list: AllowList | None = None,
    settings: DriverSettings = FAST,
    expect_up: bool = True,
) -> AsyncIterator[Bench]:
    wire = FaultyWire(sim)
    transport, cable = ATTACHMENTS[attachment](wire, sim)
    driver = driver_cls(transport, allow_list=allow_list, settings=settings)
    b = Bench(sim, driver, wire, cable)
    await driver.start(asyncio.get_running_loop(), b.on_event)
    try:
        if expect_up:
            assert await driver.wait_connected(2.0), "driver did not connect"
        yield b
    finally:
        await driver.stop()
        closer = getattr(cable, "aclose", None)
        if closer is not None:
            await closer()
