"""`tablectl probe --list`: the serial ports and USB devices here that a driver could drive.

Serial ports come from pyserial's ``list_ports`` (with the USB vendor id, product id and
serial number of a USB-serial adapter where the kernel knows them) and from the udev names
under ``/dev/tablectl/`` (``KIND-SERIAL``, systemd/70-tablectl.rules); USB devices from
pyusb. Each is matched to the registered drivers by its USB ids (a driver's ``usb_ids``;
the reference devices' ids are drivers.usb_ids) or by its udev name, and comes with the
``[devices.NAME]`` lines to paste into the table's configuration.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from tablectl.drivers.base import DeviceDriver
from tablectl.drivers.registry import BUILTIN_DRIVERS, ENTRY_POINT_GROUP, DriverNotFound, _import
from tablectl.drivers.usb_ids import DEVICE_KINDS, REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID

UDEV_DIR = Path("/dev/tablectl")


@dataclass
class Found:
    """One port or device, and the drivers that could drive it."""

    where: str  # a serial port path, or usb:VVVV:PPPP
    transport: dict[str, Any]
    description: str
    matches: list[tuple[str, str]] = field(default_factory=list)  # (kind, driver)
    serial: str | None = None

    def config_lines(self) -> str:
        """The configuration to paste, one [devices.NAME] per matching driver."""
        blocks = []
        for kind, driver in self.matches or [("KIND", "DRIVER")]:
            name = {"hole_card_reader": "reader", "discard_rack": "rack"}.get(kind, kind)
            lines = [
                f"[devices.{name.lower()}]",
                f'kind = "{kind}"',
                f'driver = "{driver}"',
                f'allowed_serials = ["{self.serial or "SERIAL"}"]',
                'allowed_firmware_sha256 = ["SHA256 from `tablectl probe KIND --port PORT`"]',
                f"[devices.{name.lower()}.transport]",
            ]
            lines += [f"{key} = {_toml(value, key)}" for key, value in self.transport.items()]
            if kind != "KIND" and self.transport.get("type") == "serial":
                cls = _driver_class(kind, driver)
                for key, value in (cls.serial_defaults if cls else {}).items():
                    if key not in self.transport:
                        lines.append(f"{key} = {_toml(value)}")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)


def _toml(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key in ("vendor_id", "product_id"):
        return f"0x{value:04x}"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _driver_class(kind: str, driver: str) -> type[DeviceDriver] | None:
    target = BUILTIN_DRIVERS.get((kind, driver))
    if target is None:
        target = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}.get(driver)
    try:
        return _import(target) if target else None
    except DriverNotFound:
        return None


def registered_drivers() -> list[tuple[str, str, type[DeviceDriver]]]:
    """(kind, name, class) of every driver importable here."""
    found = []
    for (kind, name), target in BUILTIN_DRIVERS.items():
        found.append((kind, name, _import(target)))
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = _import(ep.value)
        except DriverNotFound:
            continue
        found.append((cls.kind, ep.name, cls))
    return found


def usb_matches(vendor: int | None, product: int | None) -> list[tuple[str, str]]:
    """Drivers whose devices carry these USB ids (the reference ids included)."""
    if vendor is None or product is None:
        return []
    matches = [
        (kind, "reference")
        for kind, pid in REFERENCE_PRODUCT_IDS.items()
        if (vendor, product) == (REFERENCE_VENDOR_ID, pid)
    ]
    for kind, name, cls in registered_drivers():
        if (vendor, product) in cls.usb_ids and (kind, name) not in matches:
            matches.append((kind, name))
    return matches


def serial_ports(ports: Iterable[Any] | None = None) -> list[Found]:
    """pyserial's ports (``ports``: its ListPortInfo entries; default: this machine's)."""
    if ports is None:
        from serial.tools import list_ports

        ports = list_ports.comports()
    found = []
    for port in ports:
        usb = (
            f" (USB {port.vid:04x}:{port.pid:04x}"
            + (f", serial {port.serial_number}" if port.serial_number else "")
            + ")"
            if port.vid is not None and port.pid is not None
            else ""
        )
        found.append(
            Found(
                port.device,
                {"type": "serial", "port": port.device},
                f"{port.description or 'serial port'}{usb}",
                usb_matches(port.vid, port.pid),
                port.serial_number,
            )
        )
    return found


def udev_names(directory: Path = UDEV_DIR) -> list[Found]:
    """The /dev/tablectl/KIND-SERIAL links the udev rules made: kind and serial by name."""
    if not directory.is_dir():
        return []
    found = []
    for link in sorted(directory.iterdir()):
        kind, sep, serial = link.name.partition("-")
        if not sep or kind not in DEVICE_KINDS:
            continue
        target = os.path.realpath(link)
        found.append(
            Found(
                str(link),
                {"type": "serial", "port": str(link)},
                f"udev name for {target}",
                [(kind, name) for k, name, _ in registered_drivers() if k == kind],
                serial,
            )
        )
    return found


def usb_devices(backend: Any = None) -> tuple[list[Found], str | None]:
    """USB devices a driver matches (pyusb), and why none could be listed, if so."""
    import usb.core

    try:
        devices = list(usb.core.find(find_all=True, backend=backend))
    except usb.core.NoBackendError:
        return [], "pyusb found no USB backend (is libusb installed?)"
    except usb.core.USBError as error:
        return [], f"USB enumeration failed: {error}"
    found = []
    for device in devices:
        matches = usb_matches(device.idVendor, device.idProduct)
        if not matches:
            continue
        try:
            serial = device.serial_number
        except (usb.core.USBError, ValueError):
            serial = None
        transport: dict[str, Any] = {
            "type": "usb",
            "vendor_id": device.idVendor,
            "product_id": device.idProduct,
        }
        if serial:
            transport["serial"] = serial
        found.append(
            Found(
                f"usb:{device.idVendor:04x}:{device.idProduct:04x}",
                transport,
                f"USB device {device.idVendor:04x}:{device.idProduct:04x}"
                + (f", serial {serial}" if serial else ""),
                matches,
                serial,
            )
        )
    return found, None


def listing(
    ports: Iterable[Any] | None = None, backend: Any = None, udev_dir: Path = UDEV_DIR
) -> str:
    """The text `tablectl probe --list` prints."""
    serial = udev_names(udev_dir) + serial_ports(ports)
    usb, usb_problem = usb_devices(backend)
    out = ["# serial ports"]
    if not serial:
        out.append("#   none")
    for item in serial:
        names = ", ".join(f"{k}/{d}" for k, d in item.matches) or "no registered driver"
        out.append(f"#   {item.where}: {item.description}: {names}")
    out.append("# USB devices matching a registered driver")
    if usb_problem:
        out.append(f"#   {usb_problem}")
    elif not usb:
        out.append("#   none")
    for item in usb:
        names = ", ".join(f"{k}/{d}" for k, d in item.matches)
        out.append(f"#   {item.where}: {item.description}: {names}")
    for item in [*serial, *usb]:
        if item.matches:
            out += ["", f"# {item.where}", item.config_lines()]
    return "\n".join(out) + "\n"
