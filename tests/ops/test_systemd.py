"""tablectl@.service, sysusers and tmpfiles under the real systemd tools."""

from __future__ import annotations

import re
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from opstools import SYSTEMD_DIR, missing, run

UNIT = SYSTEMD_DIR / "tablectl@.service"
SYSUSERS = SYSTEMD_DIR / "tablectl.sysusers"
TMPFILES = SYSTEMD_DIR / "tablectl.tmpfiles"
EXPOSURE_LIMIT = 2.0


def settings(text: str) -> dict[str, list[str]]:
    """'Section.Key' -> every value assigned to it, in order (repeats are meaningful)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return found


def exposure(analyze: str, unit: Path) -> float:
    """The overall exposure level; also checks that --threshold (in tenths) agrees."""
    threshold = f"--threshold={round(EXPOSURE_LIMIT * 10)}"
    result = run([analyze, "security", "--offline=true", "--no-pager", threshold, str(unit)])
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, f"no exposure level in:\n{result.stdout}\n{result.stderr}"
    level = float(match.group(1))
    assert (result.returncode == 0) == (level <= EXPOSURE_LIMIT), result.stderr
    return level


def instance_copy(tmp_path: Path, name: str, text: str) -> Path:
    """The unit as an instance (tablectl@NAME.service) in a scratch directory.

    `systemd-analyze verify` checks that ExecStart's binary exists and is
    executable. The packaged unit names /usr/bin/tablectl, which is where pip puts
    the console script on a table PC; here the same console script lives in the
    test environment's bin directory, so the copy points at that real file and
    nothing else changes.
    """
    unit = tmp_path / f"tablectl@{name}.service"
    unit.write_text(text)
    return unit


def console_script() -> str:
    script = shutil.which("tablectl", path=str(Path(sys.executable).parent))
    assert script, "the tablectl console script is not installed next to the test interpreter"
    return script


def test_unit_has_the_required_settings() -> None:
    unit = settings(UNIT.read_text())
    assert unit["Service.Type"] == ["notify"]
    assert unit["Service.NotifyAccess"] == ["main"]
    assert unit["Service.ExecStart"] == ["/usr/bin/tablectl run --config /etc/tablectl/%i.toml"]
    assert unit["Service.Restart"] == ["on-failure"]
    assert unit["Service.User"] == ["tablectl"]
    assert unit["Service.Group"] == ["tablectl"]
    assert unit["Service.SupplementaryGroups"] == ["tablectl-op"]
    assert unit["Service.StateDirectory"] == ["tablectl/%i"]
    assert unit["Service.StateDirectoryMode"] == ["0700"]
    assert unit["Service.RuntimeDirectory"] == ["tablectl/%i"]
    assert unit["Service.ConfigurationDirectory"] == ["tablectl"]
    assert unit["Service.DevicePolicy"] == ["closed"]
    assert unit["Service.IPAddressDeny"] == ["any"]
    assert unit["Service.IPAddressAllow"] == ["localhost"]
    watchdog = unit["Service.WatchdogSec"][0]
    assert re.fullmatch(r"\d+s", watchdog) and int(watchdog[:-1]) >= 2
    families = unit["Service.RestrictAddressFamilies"][0].split()
    assert set(families) == {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}
    # the serial ports and raw USB devices a table uses, the PC's own ttyS among them, and
    # the list check-config warns by (a port of another class is refused under the unit)
    from tablectl.controller.service.preflight import UNIT_DEVICE_CLASSES

    allowed = {value.split()[0] for value in unit["Service.DeviceAllow"]}
    assert allowed == {f"char-{name}" for name in UNIT_DEVICE_CLASSES}
    assert "char-ttyS" in allowed
    assert all(value.split()[1] == "rw" for value in unit["Service.DeviceAllow"])
    # the daemon hands its operator socket to the operator group: chown(2) allowed back
    # after @privileged is denied (the filter lines apply in order)
    assert unit["Service.SystemCallFilter"] == [
        "@system-service",
        "~@privileged @resources",
        "@chown",
    ]
    assert unit["Install.WantedBy"] == ["multi-user.target"]
    assert unit["Service.LimitNOFILE"] == ["1024"]


def test_the_operator_socket_fits_in_the_units_descriptors() -> None:
    """LimitNOFILE covers every connection the operator socket may hold, one accept burst
    and room for the rest of the daemon (the abuse tests run the daemon with this limit)."""
    from tablectl.controller.common.config import OperatorLimits
    from tablectl.controller.service.operator import LISTEN_BACKLOG

    nofile = int(settings(UNIT.read_text())["Service.LimitNOFILE"][0])
    limits = OperatorLimits()
    held = limits.max_connections + limits.privileged_connections + 2 * LISTEN_BACKLOG
    assert held + 256 <= nofile


def test_exposure_is_at_most_two(require_tool: Callable[[str], str]) -> None:
    level = exposure(require_tool("systemd-analyze"), UNIT)
    assert level <= EXPOSURE_LIMIT, f"exposure {level} > {EXPOSURE_LIMIT}"


def test_exposure_check_sees_an_unhardened_unit(
    require_tool: Callable[[str], str], tmp_path: Path
) -> None:
    """The exposure check can fail: the same unit without its hardening scores high."""
    keep = ("Type=", "ExecStart=", "User=", "Group=", "[", "Description=", "WantedBy=")
    bare = "\n".join(line for line in UNIT.read_text().splitlines() if line.startswith(keep))
    unit = instance_copy(tmp_path, "bare", bare + "\n")
    assert exposure(require_tool("systemd-analyze"), unit) > 5.0


def test_verify_is_clean(require_tool: Callable[[str], str], tmp_path: Path) -> None:
    text = UNIT.read_text().replace(
        "ExecStart=/usr/bin/tablectl ", f"ExecStart={console_script()} "
    )
    unit = instance_copy(tmp_path, "t1", text)
    result = run([require_tool("systemd-analyze"), "verify", str(unit)])
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == "", "verify printed warnings"


def test_verify_catches_a_typo(require_tool: Callable[[str], str], tmp_path: Path) -> None:
    """The verify check can fail: a misspelt key is reported (verify still exits 0)."""
    text = UNIT.read_text().replace(
        "ExecStart=/usr/bin/tablectl ", f"ExecStart={console_script()} "
    )
    unit = instance_copy(tmp_path, "t2", text.replace("WatchdogSec=", "WatchdogSecs="))
    result = run([require_tool("systemd-analyze"), "verify", str(unit)])
    assert "Unknown key 'WatchdogSecs'" in result.stderr


def make_root(tmp_path: Path) -> Path:
    """A scratch root with a copy of this machine's account files."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for name in ("passwd", "group", "shadow", "gshadow"):
        source = Path("/etc") / name
        if source.exists():
            shutil.copy(source, root / "etc" / name)
    return root


def account(file: Path, name: str) -> list[str] | None:
    for line in file.read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return fields
    return None


def test_sysusers_creates_the_user_and_groups(
    require_tool: Callable[[str], str], tmp_path: Path
) -> None:
    root = make_root(tmp_path)
    result = run([require_tool("systemd-sysusers"), f"--root={root}", str(SYSUSERS)])
    assert result.returncode == 0, result.stderr
    user = account(root / "etc/passwd", "tablectl")
    group = account(root / "etc/group", "tablectl")
    operators = account(root / "etc/group", "tablectl-op")
    supervisors = account(root / "etc/group", "tablectl-sup")
    assert user and group and operators and supervisors
    assert user[3] == group[2], "the user's primary group is tablectl"
    assert int(user[2]) < 1000, "a system user"
    assert user[6] in {"/usr/sbin/nologin", "/sbin/nologin"}
    assert "tablectl" in operators[3].split(",")


def test_tmpfiles_creates_the_parent_directories(
    require_tool: Callable[[str], str], tmp_path: Path
) -> None:
    root = make_root(tmp_path)
    users = run([require_tool("systemd-sysusers"), f"--root={root}", str(SYSUSERS)])
    assert users.returncode == 0, users.stderr
    result = run([require_tool("systemd-tmpfiles"), f"--root={root}", "--create", str(TMPFILES)])
    assert result.returncode == 0, result.stderr
    tablectl = account(root / "etc/passwd", "tablectl")
    assert tablectl
    state = (root / "var/lib/tablectl").stat()
    assert stat.S_IMODE(state.st_mode) == 0o750
    assert state.st_uid == int(tablectl[2])
    for path in ("etc/tablectl", "run/tablectl"):
        info = (root / path).stat()
        assert stat.S_IMODE(info.st_mode) == 0o755 and info.st_uid == 0


@pytest.mark.parametrize("tool", ["systemd-sysusers", "systemd-tmpfiles"])
def test_systemd_package_tools_present(tool: str) -> None:
    if shutil.which(tool) is None:
        missing(f"{tool} is not installed")


def test_a_refused_start_is_not_restarted() -> None:
    """Exit 2 (a refused start) cannot be mended by restarting: the unit names it in
    RestartPreventExitStatus, and it is the code run uses for a refusal."""
    from tablectl.controller.commands.run import EXIT_REFUSED

    unit = settings(UNIT.read_text())
    assert unit["Service.RestartPreventExitStatus"] == [str(EXIT_REFUSED)]
    assert unit["Service.Restart"] == ["on-failure"]  # exit 1 and 3 still restart and replay
