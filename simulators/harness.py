"""A game's simulated table, attached as a real one would be: ptys and a simulated USB bus.

The shuffler, the hole-card reader and the discard rack are each served on a pseudo-terminal
with a stable symlink under ``STATE_DIR/dev/`` (as udev names them under /dev/tablectl/); the
shoe sits on a SimulatedUsbBackend with the reference USB ids, so the host reaches it through
pyusb. `tablectl demo` builds the daemon's drivers over these; tests reuse it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.registry import replacing, simulator_class
from tablectl.simulators.table import SimulatedTable
from tablectl.simulators.usb_backend import SimulatedUsbBackend, SimulatedUsbDevice

#: demo device name -> the SimulatedTable's device key
TABLE_KEYS = {
    "shuffler": "shuffler",
    "shoe": "shoe",
    "reader": "hole_card_reader",
    "rack": "discard_rack",
}
USB_DEVICES = frozenset({"shoe"})


class UsbCable:
    """A device on the simulated bus: pulling it makes the host's handles fail (ENODEV)."""

    def __init__(self, backend: SimulatedUsbBackend, device: SimulatedUsbDevice) -> None:
        self.backend = backend
        self.device = device

    def unplug(self) -> None:
        self.backend.unplug(self.device)

    def replug(self) -> None:
        self.backend.plug(self.device)


class PtyCable:
    """A device on a pty: pulling it hangs the line up; the symlink follows the new pty."""

    def __init__(self, attachment: PtyAttachment) -> None:
        self.attachment = attachment

    def unplug(self) -> None:
        self.attachment.unplug()

    def replug(self) -> None:
        self.attachment.plug()


class SimulatedTableHarness:
    """The devices a game needs, their cables, and what a configuration must say of them."""

    def __init__(
        self,
        game: str,
        options: dict[str, Any],
        *,
        seed: int,
        state_dir: Path,
        shuffle_seconds: float = 0.3,
        drivers: Mapping[str, str] | None = None,
    ) -> None:
        """``drivers``: device name -> a vendor's driver whose simulator takes the reference
        one's place (on a pty, with the same cards), e.g. ``{"shoe": "acme-cs9"}``."""
        self.game = game
        self.state_dir = state_dir
        self.table = SimulatedTable(
            seed=seed,
            decks=int(options.get("decks", 6)) if game == "three_card_21" else 1,
            joker=game == "asia_poker",
            automated_shoe=options.get("dealing") == "automated_shoe",
            counting=options.get("shuffler", "counting") == "counting",
            shuffle_seconds=shuffle_seconds,
        )
        names = ["shuffler", "shoe", "rack"]
        if game == "three_card_21" and options.get("reader", "concealed") != "none":
            names.insert(2, "reader")
        self.devices: dict[str, SimulatedDevice] = {
            name: self.table.devices[TABLE_KEYS[name]] for name in names
        }
        self.drivers = {name: "reference" for name in names}
        for name, driver in (drivers or {}).items():
            if name not in self.devices:
                raise ValueError(
                    f"--driver {name}={driver}: this table has no device {name!r} "
                    f"(its devices: {', '.join(self.devices)})"
                )
            self.drivers[name] = driver
            if driver != "reference":
                device = replacing(
                    simulator_class(self.devices[name].kind, driver), self.devices[name]
                )
                setattr(self.table, name, device)  # SimulatedTable's attributes: the demo's names
                self.devices[name] = device
        self.cables: dict[str, PtyCable | UsbCable] = {}
        self.usb_backend: SimulatedUsbBackend | None = None

    def plug(self) -> None:
        """Attach every device (on the running loop): ptys under state_dir/dev, the USB bus."""
        loop = asyncio.get_running_loop()
        dev = self.state_dir / "dev"
        dev.mkdir(parents=True, exist_ok=True)
        self.usb_backend = SimulatedUsbBackend(loop)
        for name, device in self.devices.items():
            if name in USB_DEVICES and self.drivers[name] == "reference":
                usb = self.usb_backend.add_reference_device(
                    device.kind, device.identity.serial, device
                )
                self.cables[name] = UsbCable(self.usb_backend, usb)
            else:
                attachment = PtyAttachment(device, loop, link_path=dev / name)
                attachment.plug()
                self.cables[name] = PtyCable(attachment)

    def unplug(self) -> None:
        for cable in self.cables.values():
            cable.unplug()

    def identities(self) -> dict[str, tuple[str, str]]:
        """Device name -> (serial, firmware SHA-256), for the configuration's allow-lists."""
        return {
            name: (device.identity.serial, device.identity.firmware_sha256)
            for name, device in self.devices.items()
        }

    def usb_ids(self) -> dict[str, tuple[int, int]]:
        return {
            name: (REFERENCE_VENDOR_ID, REFERENCE_PRODUCT_IDS[self.devices[name].kind])
            for name in self.devices
            if name in USB_DEVICES and self.drivers[name] == "reference"
        }
