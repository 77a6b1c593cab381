"""`tablectl probe --list`: serial ports and USB devices matched to registered drivers, with
configuration lines that check-config accepts."""

from __future__ import annotations

import asyncio
import os
import tomllib

from serial.tools.list_ports_common import ListPortInfo

from tablectl.controller.commands import cli
from tablectl.controller.common.config import parse_config
from tablectl.drivers.discovery import listing, serial_ports, udev_names, usb_devices
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.usb_backend import SimulatedUsbBackend

HEAD = '[table]\nid = "t01"\ngame = "heads_up_holdem"\n'


def accepted(lines: str, serial: str) -> None:
    """The pasted lines, with the placeholders filled in, make a valid configuration."""
    text = lines.replace("SHA256 from `tablectl probe KIND --port PORT`", "ab" * 32)
    assert f'allowed_serials = ["{serial}"]' in text
    parse_config(tomllib.loads(HEAD + text), "pasted")


def test_a_usb_bridge_with_a_drivers_ids_is_matched_to_it():
    bridge = ListPortInfo("/dev/ttyUSB0", skip_link_detection=True)
    bridge.vid, bridge.pid, bridge.serial_number = 0x0403, 0x6001, "CS9-000123"
    bridge.description = "FT232R USB UART"
    other = ListPortInfo("/dev/ttyS0", skip_link_detection=True)
    found = serial_ports([bridge, other])
    assert found[0].matches == [("shoe", "acme-cs9")]
    assert "USB 0403:6001, serial CS9-000123" in found[0].description
    assert found[1].matches == []
    lines = found[0].config_lines()
    assert 'driver = "acme-cs9"' in lines and 'parity = "E"' in lines and "baudrate = 9600" in lines
    accepted(lines, "CS9-000123")


def test_udev_names_and_simulated_usb_devices_are_listed_with_lines(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        pty = PtyAttachment(ShoeSim(), loop, link_path=tmp_path / "target")
        pty.plug()
        udev = tmp_path / "tablectl"
        udev.mkdir()
        os.symlink(pty.slave_path, udev / "shuffler-ASD-0001")
        os.symlink(pty.slave_path, udev / "unrelated-name")
        backend = SimulatedUsbBackend(loop)
        backend.add_reference_device("shoe", "SIM-SHOE-0042", ShoeSim())
        try:
            names = udev_names(udev)
            usb, problem = await asyncio.to_thread(usb_devices, backend)
            text = await asyncio.to_thread(listing, [], backend, udev)
        finally:
            pty.unplug()
        return names, usb, problem, text

    names, usb, problem, text = asyncio.run(main())
    assert [(n.where.rsplit("/", 1)[1], n.serial) for n in names] == [
        ("shuffler-ASD-0001", "ASD-0001")
    ]
    assert names[0].matches == [("shuffler", "reference")]
    accepted(names[0].config_lines(), "ASD-0001")
    assert problem is None
    assert [(u.where, u.serial, u.matches) for u in usb] == [
        ("usb:1209:7a02", "SIM-SHOE-0042", [("shoe", "reference")])
    ]
    lines = usb[0].config_lines()
    assert "vendor_id = 0x1209" in lines and 'serial = "SIM-SHOE-0042"' in lines
    accepted(lines, "SIM-SHOE-0042")
    assert "# usb:1209:7a02" in text and "[devices.shoe.transport]" in text


def test_probe_list_runs_on_this_machine(capsys):
    assert cli.main(["probe", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# serial ports\n")
    assert "# USB devices matching a registered driver" in out


def test_probe_without_a_port_says_what_it_needs(capsys):
    assert cli.main(["probe", "shoe"]) == 2
    assert "give KIND and --port PORT, or --list" in capsys.readouterr().err
