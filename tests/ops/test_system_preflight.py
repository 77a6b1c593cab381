"""The preflight knows the system: a USB table on a machine where libusb cannot be loaded, and a
serial port the daemon's user may not open, are refused by `check-config` and `run`, naming
what to install or change (issue 26).

The library is made genuinely unloadable, not mocked: in a private mount namespace
(`unshare -m`) an empty file is bound over libusb-1.0.so.0, so the dynamic loader itself
fails on it and pyusb's real backend search finds nothing, exactly as on a machine without
the package. The bare-root test (tests/ops/test_debian_package.py) shows the same on a
Debian root where the package is really absent.
"""

from __future__ import annotations

import ctypes.util
import grp
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from opstools import REPO, missing

TABLECTL = str(Path(sys.executable).parent / "tablectl")
SYSTEM_PYTHON = "/usr/bin/python3.11"
NOBODY = 65534

USB_TABLE = """
[table]
id = "usb01"
game = "five_card_hilo"
[table.options]
dealing = "automated_shoe"
shuffler = "counting"
[devices.shoe]
kind = "shoe"
driver = "reference"
allowed_serials = ["ADS-1"]
allowed_firmware_sha256 = ["{sha}"]
[devices.shoe.transport]
type = "usb"
vendor_id = 0x1209
product_id = 0x7a02
serial = "ADS-1"
[journal]
path = "{state}/journal.sqlite"
sealing = "off"
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{state}/operator.sock"
group = "{group}"
supervisor_group = "{group}"
"""

SERIAL_TABLE = """
[table]
id = "ser01"
game = "three_card_21"
[devices.rack]
kind = "discard_rack"
driver = "reference"
allowed_serials = ["RACK-1"]
allowed_firmware_sha256 = ["{sha}"]
[devices.rack.transport]
type = "serial"
port = "{port}"
[journal]
path = "{state}/journal.sqlite"
sealing = "off"
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{state}/operator.sock"
group = "{group}"
supervisor_group = "{group}"
"""

SHA = "9b2e4d6f8a0c1e3f5a7b9c0d2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f"


def libusb_file() -> Path:
    """The file the dynamic loader opens for libusb-1.0 on this machine."""
    name = ctypes.util.find_library("usb-1.0")
    if name is None:
        missing("libusb-1.0 is not installed here (Debian libusb-1.0-0)")
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"):
        path = Path(directory) / str(name)
        if path.exists():
            return path.resolve()
    pytest.fail(f"find_library says {name} but no such file in the usual directories")


def without_libusb(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`args` in a private mount namespace where libusb's file is empty (unloadable)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        missing("a private mount namespace needs root and unshare (util-linux)")
    script = 'mount --bind /dev/null "$0" && exec "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
         str(libusb_file()), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def plain(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def usb_table(tmp_path: Path) -> Path:
    group = "root" if os.geteuid() == 0 else os.getgroups()[0]
    path = tmp_path / "usb01.toml"
    path.write_text(USB_TABLE.format(sha=SHA, state=tmp_path / "state", group=group))
    return path


def test_check_config_refuses_a_usb_table_where_libusb_cannot_be_loaded(usb_table: Path) -> None:
    refused = without_libusb([TABLECTL, "check-config", str(usb_table)])
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        f"{usb_table}: devices.shoe.transport: pyusb finds no USB backend: libusb-1.0 is not "
        "installed or cannot be loaded, so this device could never connect "
        "(Debian: apt install libusb-1.0-0)"
    ) in refused.stderr
    assert "Traceback" not in refused.stderr  # pyusb's own logged traceback is kept quiet
    # the same file, the library in place: the machine is fine
    accepted = plain([TABLECTL, "check-config", str(usb_table)])
    assert accepted.returncode == 0, accepted.stderr
    assert "OK: table usb01" in accepted.stdout


def test_run_refuses_to_start_a_usb_table_where_libusb_cannot_be_loaded(usb_table: Path) -> None:
    refused = without_libusb([TABLECTL, "run", "--config", str(usb_table)])
    assert refused.returncode == 2, refused.stderr
    assert "apt install libusb-1.0-0" in refused.stderr
    assert "not started" in refused.stderr
    assert not (usb_table.parent / "state" / "journal.sqlite").exists()


def test_a_table_without_usb_devices_does_not_need_libusb(tmp_path: Path) -> None:
    port = tmp_path / "absent-port"
    table = tmp_path / "ser01.toml"
    group = "root" if os.geteuid() == 0 else os.getgroups()[0]
    table.write_text(SERIAL_TABLE.format(sha=SHA, port=port, state=tmp_path / "s", group=group))
    result = without_libusb([TABLECTL, "check-config", str(table)])
    assert result.returncode == 0, result.stderr
    assert "libusb" not in result.stderr
    assert f"warning: {table}: devices.rack.transport.port: {port} is absent" in result.stderr


# -- a serial port the daemon's user may not open ----------------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory user nobody can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tablectl-port-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def as_nobody(args: list[str]) -> subprocess.CompletedProcess[str]:
    """tablectl as uid nobody, on the system Python 3.11 with this checkout and the test
    environment's packages (the venv's interpreter lives under root's home)."""
    if os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON):
        missing(f"running tablectl as another user needs root and {SYSTEM_PYTHON}")
    site = next((REPO / ".venv" / "lib").glob("python3.11/site-packages"))
    return subprocess.run(
        [SYSTEM_PYTHON, "-m", "tablectl.controller", *args],
        user=NOBODY, group=NOBODY, extra_groups=[],
        env={"PYTHONPATH": f"{REPO / '.src'}:{site}", "PATH": "/usr/bin:/bin"},
        cwd="/", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_serial_port_the_user_may_not_open_is_refused_naming_owner_group_and_mode(
    shared_dir: Path,
) -> None:
    # a real serial line (a pty), owned as a serial port is before the udev rules apply:
    # root, group dialout, 0660; nobody is not in dialout
    dialout = grp.getgrnam("dialout")
    assert "nobody" not in dialout.gr_mem
    master, slave = os.openpty()
    try:
        port = os.ttyname(slave)
        os.chown(port, 0, dialout.gr_gid)
        os.chmod(port, 0o660)
        state = shared_dir / "state"
        state.mkdir()
        os.chown(state, NOBODY, NOBODY)
        table = shared_dir / "ser01.toml"
        table.write_text(SERIAL_TABLE.format(sha=SHA, port=port, state=state, group="nogroup"))
        refused = as_nobody(["check-config", str(table)])
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert (
            f"{table}: devices.rack.transport.port: {port} (owner root, group dialout, mode "
            "0660) cannot be opened for reading and writing by user nobody"
        ) in refused.stderr
        assert "usermod -aG dialout nobody" in refused.stderr
        # what 70-tablectl.rules does for the service user: the port's group is the user's
        os.chown(port, 0, NOBODY)
        accepted = as_nobody(["check-config", str(table)])
        assert accepted.returncode == 0, accepted.stderr
        assert "OK: table ser01" in accepted.stdout
    finally:
        os.close(slave)
        os.close(master)


# -- a serial port the unit's device policy would refuse ----------------------------------------


def test_check_config_says_when_the_units_device_policy_would_refuse_a_port(
    tmp_path: Path,
) -> None:
    """tablectl@.service opens only char-ttyS/ttyUSB/ttyACM/usb_device (DevicePolicy=closed):
    a port of another class (here a pty, major `pts`) passes its owner and mode checks yet
    gets EPERM under the unit, so check-config says so; the PC's own serial port (a real
    ttyS node: major 4, minor 73 = ttyS9, made with mknod) is allowed, and not warned about."""
    if os.geteuid() != 0:
        missing("mknod of a ttyS node needs root")
    group = "root"
    ttys = tmp_path / "ttyS9"
    os.mknod(ttys, 0o660 | 0o020000, os.makedev(4, 73))  # S_IFCHR, as the 8250 driver's
    master, slave = os.openpty()
    try:
        pty = os.ttyname(slave)
        for name, port in (("ttys", ttys), ("pty", pty)):
            table = tmp_path / f"{name}.toml"
            table.write_text(
                SERIAL_TABLE.format(sha=SHA, port=port, state=tmp_path / name, group=group)
            )
        allowed = plain([TABLECTL, "check-config", str(tmp_path / "ttys.toml")])
        assert allowed.returncode == 0, allowed.stderr
        assert "DevicePolicy" not in allowed.stderr
        refused = plain([TABLECTL, "check-config", str(tmp_path / "pty.toml")])
        assert refused.returncode == 0, refused.stderr  # a warning: run may be outside the unit
        major = os.major(os.stat(pty).st_rdev)
        assert (
            f"warning: {tmp_path / 'pty.toml'}: devices.rack.transport.port: {pty} is a pts "
            f"device (character major {major}), which tablectl@.service does not let the daemon "
            "open (DevicePolicy=closed, DeviceAllow= char-ttyS, char-ttyUSB, char-ttyACM, "
            "char-usb_device): under the unit it fails with 'Operation not permitted'"
        ) in refused.stderr
        assert "DeviceAllow=char-pts rw" in refused.stderr
    finally:
        os.close(slave)
        os.close(master)
