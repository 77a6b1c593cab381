"""70-tablectl.rules under the real `udevadm test`, on devices umockdev provides.

Each case runs in a private mount namespace (`unshare -m`), so nothing touches
the machine's /dev, /run/udev, /etc/udev or account files:
- /etc/udev/rules.d is a scratch directory holding the rules under test (the
  distribution's rules in /usr/lib/udev/rules.d run too, as on a table PC);
- /etc/passwd and /etc/group come from `systemd-sysusers --root` applied to
  systemd/tablectl.sysusers, so the group "tablectl" is the one the package makes;
- /dev is an empty tmpfs where the test makes the real device nodes (0600 root)
  and /run/udev a tmpfs for udev's database.
umockdev-run supplies the devices' sysfs (tests/ops/umockdev/*.umockdev); udevadm
then sets group and mode on the real nodes and creates the symlinks, which the
test reads back with stat/readlink.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from opstools import SYSTEMD_DIR, missing, require_tool

from tablectl.drivers.usb_ids import DEVICE_KINDS, REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID

HERE = Path(__file__).resolve().parent
DEVICES = HERE / "umockdev"
RULES = SYSTEMD_DIR / "70-tablectl.rules"
LOCAL_EXAMPLE = SYSTEMD_DIR / "69-tablectl-local.rules.example"
USB = "/devices/pci0000:00/0000:00:14.0/usb1"


@dataclass(frozen=True)
class Node:
    path: str
    major: int
    minor: int


@dataclass
class Outcome:
    links: dict[str, str]  # name under /dev/tablectl -> target, relative to /dev
    modes: dict[str, tuple[int, int]]  # node path -> (permission bits, gid)
    gids: dict[str, int]  # group name -> gid in the scratch account files
    log: str


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    found = {name: require_tool(name) for name in ("udevadm", "umockdev-run", "systemd-sysusers")}
    found["unshare"] = require_tool("unshare")
    if os.geteuid() != 0:
        missing("udev rule tests need root for a private mount namespace")
    probe = subprocess.run(
        [found["unshare"], "-m", "--propagation", "private", "true"], capture_output=True
    )
    if probe.returncode != 0:
        missing(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    if not Path("/etc/udev/rules.d").is_dir():
        missing("/etc/udev/rules.d does not exist (udev is not installed)")
    return found


@pytest.fixture(scope="module")
def accounts(tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    (root / "etc").mkdir()
    for name in ("passwd", "group", "shadow", "gshadow"):
        if Path("/etc", name).exists():
            shutil.copy(Path("/etc", name), root / "etc" / name)
    made = subprocess.run(
        [tools["systemd-sysusers"], f"--root={root}", str(SYSTEMD_DIR / "tablectl.sysusers")],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return root


def udev_test(
    tools: dict[str, str],
    accounts: Path,
    work: Path,
    description: str,
    devpath: str,
    nodes: list[Node],
    local_rules: str | None = None,
) -> Outcome:
    rules = work / "rules.d"
    rules.mkdir()
    shutil.copy(RULES, rules / RULES.name)
    if local_rules is not None:
        (rules / "69-tablectl-local.rules").write_text(local_rules)
    log = work / "udevadm.log"
    q = shlex.quote
    script = [
        "set -eu",
        f"mount --bind {q(str(rules))} /etc/udev/rules.d",
        f"mount --bind {q(str(accounts / 'etc/group'))} /etc/group",
        f"mount --bind {q(str(accounts / 'etc/passwd'))} /etc/passwd",
        "mkdir -p /run/udev && mount -t tmpfs tmpfs /run/udev",
        "mount -t tmpfs -o mode=0755 tmpfs /dev",
        "mknod -m 0666 /dev/null c 1 3",
    ]
    for node in nodes:
        script += [
            f"mkdir -p {q(os.path.dirname(node.path))}",
            f"mknod -m 0600 {q(node.path)} c {node.major} {node.minor}",
        ]
    script += [
        f"{q(tools['umockdev-run'])} --device {q(str(DEVICES / description))} -- "
        f"{q(tools['udevadm'])} test --action=add {q(devpath)} > {q(str(log))} 2>&1",
    ]
    for node in nodes:
        script.append(f"echo node {q(node.path)} $(stat -c '%a %g' {q(node.path)})")
    script.append(
        "[ -d /dev/tablectl ] && find /dev/tablectl -mindepth 1 -printf 'link %P %l\\n' || true"
    )
    result = subprocess.run(
        [tools["unshare"], "-m", "--propagation", "private", "sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = log.read_text() if log.exists() else ""
    assert result.returncode == 0, f"{result.stderr}\n{text}"
    links: dict[str, str] = {}
    modes: dict[str, tuple[int, int]] = {}
    for line in result.stdout.splitlines():
        kind, *fields = line.split()
        if kind == "link":
            links[fields[0]] = os.path.normpath(os.path.join("tablectl", fields[1]))
        elif kind == "node":
            modes[fields[0]] = (int(fields[1], 8), int(fields[2]))
    gids = {}
    for entry in (accounts / "etc/group").read_text().splitlines():
        name, _password, gid, *_ = entry.split(":")
        gids[name] = int(gid)
    return Outcome(links, modes, gids, text)


def test_reference_usb_device_gets_a_name_and_the_group(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    node = Node("/dev/bus/usb/001/002", 189, 1)
    outcome = udev_test(tools, accounts, tmp_path, "shuffler-usb.umockdev", f"{USB}/1-1", [node])
    assert outcome.links == {"shuffler-SHF-0001": "bus/usb/001/002"}, outcome.log
    assert outcome.modes[node.path] == (0o660, outcome.gids["tablectl"]), outcome.log


def test_reference_cdc_acm_port_gets_a_name_and_the_group(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    node = Node("/dev/ttyACM0", 166, 0)
    devpath = f"{USB}/1-2/1-2:1.0/tty/ttyACM0"
    outcome = udev_test(tools, accounts, tmp_path, "shoe-acm.umockdev", devpath, [node])
    assert outcome.links == {"shoe-SHOE-42": "ttyACM0"}, outcome.log
    assert outcome.modes[node.path] == (0o660, outcome.gids["tablectl"]), outcome.log


def test_usb_serial_adapter_named_by_the_local_rule(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    """The shipped example, as a site would install it, names an FTDI adapter's device."""
    node = Node("/dev/ttyUSB0", 188, 0)
    devpath = f"{USB}/1-3/1-3:1.0/ttyUSB0/tty/ttyUSB0"
    outcome = udev_test(
        tools,
        accounts,
        tmp_path,
        "ftdi-adapter.umockdev",
        devpath,
        [node],
        local_rules=LOCAL_EXAMPLE.read_text(),
    )
    assert outcome.links == {"discard_rack-FT5XK2QA": "ttyUSB0"}, outcome.log
    assert outcome.modes[node.path] == (0o660, outcome.gids["tablectl"]), outcome.log


def test_usb_serial_adapter_without_a_local_rule_is_left_alone(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    node = Node("/dev/ttyUSB0", 188, 0)
    devpath = f"{USB}/1-3/1-3:1.0/ttyUSB0/tty/ttyUSB0"
    outcome = udev_test(tools, accounts, tmp_path, "ftdi-adapter.umockdev", devpath, [node])
    assert f"Setting permissions {node.path}" in outcome.log, "udev did not process the node"
    assert outcome.links == {}, outcome.log
    assert outcome.modes[node.path][1] != outcome.gids["tablectl"], outcome.log


def test_other_devices_get_nothing(tools: dict[str, str], accounts: Path, tmp_path: Path) -> None:
    node = Node("/dev/bus/usb/001/005", 189, 4)
    outcome = udev_test(tools, accounts, tmp_path, "keyboard.umockdev", f"{USB}/1-4", [node])
    assert f"Setting permissions {node.path}" in outcome.log, "udev did not process the node"
    assert outcome.links == {}, outcome.log
    assert outcome.modes[node.path][1] != outcome.gids["tablectl"], outcome.log


def test_device_without_serial_gets_no_name_and_no_access(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    node = Node("/dev/bus/usb/001/006", 189, 5)
    outcome = udev_test(
        tools, accounts, tmp_path, "reader-no-serial.umockdev", f"{USB}/1-5", [node]
    )
    assert f"Setting permissions {node.path}" in outcome.log, "udev did not process the node"
    assert outcome.links == {}, outcome.log
    assert outcome.modes[node.path][1] != outcome.gids["tablectl"], outcome.log


def test_hostile_serial_stays_inside_dev_tablectl(
    tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    node = Node("/dev/bus/usb/001/007", 189, 6)
    outcome = udev_test(
        tools, accounts, tmp_path, "rack-hostile-serial.umockdev", f"{USB}/1-6", [node]
    )
    assert len(outcome.links) == 1, outcome.log
    (name,) = outcome.links
    assert "/" not in name and " " not in name and name.startswith("discard_rack-"), name
    assert outcome.links[name] == "bus/usb/001/007"
    assert outcome.modes[node.path] == (0o660, outcome.gids["tablectl"]), outcome.log


def reference_device(kind: str, product_id: int, serial: str) -> str:
    """A umockdev description of a bulk-only reference device of this kind on bus 1, port 7."""
    return "\n".join(
        [
            f"P: {USB}/1-7",
            "E: DEVNAME=/dev/bus/usb/001/008",
            "E: DEVTYPE=usb_device",
            "E: DRIVER=usb",
            "E: SUBSYSTEM=usb",
            "E: BUSNUM=001",
            "E: DEVNUM=008",
            "E: MAJOR=189",
            "E: MINOR=7",
            f"E: PRODUCT={REFERENCE_VENDOR_ID:x}/{product_id:x}/100",
            f"A: idVendor={REFERENCE_VENDOR_ID:04x}",
            f"A: idProduct={product_id:04x}",
            "A: busnum=1",
            "A: devnum=8",
            "A: dev=189:7",
            "A: manufacturer=tablectl reference",
            f"A: product=Reference {kind}",
            f"A: serial={serial}",
            "",
            (DEVICES / "keyboard.umockdev").read_text().split("\n\n", 1)[1],
        ]
    )


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_every_reference_kind_by_the_shared_ids(
    kind: str, tools: dict[str, str], accounts: Path, tmp_path: Path
) -> None:
    """The rules follow drivers/usb_ids.py: each kind's product id gives that kind's name."""
    description = tmp_path / f"{kind}.umockdev"
    description.write_text(reference_device(kind, REFERENCE_PRODUCT_IDS[kind], "REF-123"))
    node = Node("/dev/bus/usb/001/008", 189, 7)
    work = tmp_path / "work"
    work.mkdir()
    outcome = udev_test(tools, accounts, work, str(description), f"{USB}/1-7", [node])
    assert outcome.links == {f"{kind}-REF-123": "bus/usb/001/008"}, outcome.log
    assert outcome.modes[node.path] == (0o660, outcome.gids["tablectl"]), outcome.log
