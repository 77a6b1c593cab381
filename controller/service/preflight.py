"""One preflight, shared by `tablectl check-config` and `tablectl run`.

Everything `run` would refuse once it started is looked for here first, before the journal is
opened, a port touched or a socket bound, and every problem is reported at once with the same
message by both commands (each naming the configuration file and key, like the configuration's
own checks). A problem is an error (run refuses to start: exit 2) or a warning (run starts and
logs it: a serial port absent now may be plugged later).

Nothing here changes anything: directories are checked for the right to create them, the
metrics address is tried with a socket closed at once, the lock is only tried by `run`.
"""

from __future__ import annotations

import contextlib
import datetime
import grp
import importlib
import logging
import os
import pwd
import shutil
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.common.config import SerialTransportConfig, TableConfig, UsbTransportConfig
from tablectl.controller.record.journal import private_file_problem
from tablectl.controller.service.operator import socket_in_use
from tablectl.drivers.base import DeviceDriver
from tablectl.drivers.registry import DriverNotFound, get_driver_class

ERROR = "error"
WARNING = "warning"

MIB = 1024 * 1024
#: Below this much free space under the journal, `run` refuses to start: the journal's
#: preallocated -wal (about 4.6 MiB) and a gaming day of rounds must fit with room to spare.
MIN_FREE_BYTES = 64 * MIB
#: Below this, `run` starts but warns (and check-config says so). The journal grows by about
#: 8 KiB (Three Card 21) to 13 KiB (HILO, an ADS) per round, measured with `tablectl demo`:
#: a week at 60 rounds an hour around the clock is 55-130 MiB; this is several weeks.
WARN_FREE_BYTES = 512 * MIB


@dataclass(frozen=True)
class Problem:
    """One thing run would refuse (error) or would start despite (warning)."""

    severity: str
    key: str
    message: str

    def text(self, source: str) -> str:
        prefix = "" if self.severity == ERROR else "warning: "
        return f"{prefix}{source}: {self.key}: {self.message}"


def preflight(config: TableConfig, *, running: bool = False) -> list[Problem]:
    """Every problem a start of this table would meet, errors and warnings, all at once.

    `running`: the table's daemon runs now (check-config beside it), so the metrics address
    and the operator socket in use are its own, not problems.
    """
    problems: list[Problem] = []
    problems += check_group(config.operator_group, "operator.group")
    problems += check_group(config.supervisor_group, "operator.supervisor_group")
    if not running:
        problems += check_metrics_address(config.metrics_host, config.metrics_port)
    problems += check_directory("journal.path", config.journal_path)
    problems += check_journal_file(config.journal_path)
    problems += check_free_space("journal.path", config.journal_path)
    problems += check_directory("operator.socket", config.operator_socket)
    if not running:
        problems += check_socket_path(config.operator_socket)
    problems += check_devices(config)
    problems += check_sealing_key(config)
    problems += check_archive_dir(config)
    problems += check_witness_keys(config)
    problems += check_identity_key(config)
    problems += check_system_libraries(config)
    problems += check_timezone(config)
    return problems


def machine_keeps_utc(year: int | None = None) -> bool:
    """This machine's zone is UTC all year (no offset in January nor in July): an imaged PC
    left in UTC, whose local time is not the casino's."""
    year = year or datetime.date.today().year
    return all(
        datetime.datetime(year, month, 1, 12).astimezone().utcoffset() == datetime.timedelta(0)
        for month in (1, 7)
    )


def check_timezone(config: TableConfig) -> list[Problem]:
    """A table without `[table] timezone` counts its gaming day in this PC's zone: on a PC
    kept in UTC that day starts hours off the casino's (06:00 UTC is 01:00 in New Jersey)."""
    if config.timezone is not None or not machine_keeps_utc():
        return []
    start = config.gaming_day_start.strftime("%H:%M")
    return [
        Problem(
            WARNING,
            "table.timezone",
            f"not set, and this PC's zone is UTC: the gaming day is taken to start at {start} "
            f"UTC and events are stamped in UTC; set the casino's zone, e.g. "
            f'timezone = "America/New_York" in [table]',
        )
    ]


def check_identity_key(config: TableConfig) -> list[Problem]:
    """A table with witnesses has its identity key: it signs the checkpoints they cosign."""
    if config.witness is None:
        return []
    from tablectl.controller.record.checkpoints import identity_key_path

    problems: list[Problem] = []
    identity = identity_key_path(config.sealing_key_path)
    if not identity.is_file():
        problems.append(
            Problem(
                ERROR,
                "witness",
                f"no identity key at {identity}: the table signs no checkpoint for its "
                f"witnesses without it; create it with `tablectl journal setup-keys --config "
                f"{config.source}`",
            )
        )
    return problems


def check_witness_keys(config: TableConfig) -> list[Problem]:
    """Each [witness] key is a witness's public key (a C2SP cosignature/v1 vkey whose key ID
    matches it), as `tablectl witness setup-key` printed it: a mistyped key would make every
    cosignature look forged."""
    if config.witness is None:
        return []
    from tablectl.controller.record.note import ALG_COSIGNATURE_V1, NoteError, Verifier

    problems: list[Problem] = []
    for index, endpoint in enumerate(config.witness.witnesses):
        key = f"witness.witnesses[{index}].key"
        try:
            verifier = Verifier.parse(endpoint.key)
        except NoteError as error:
            problems.append(Problem(ERROR, key, str(error)))
            continue
        if verifier.alg != ALG_COSIGNATURE_V1:
            problems.append(
                Problem(
                    ERROR,
                    key,
                    f"{verifier.name}: a table's signing key (type 0x01), not a witness's "
                    "cosignature key (type 0x04, from `tablectl witness setup-key`)",
                )
            )
    return problems


def check_archive_dir(config: TableConfig) -> list[Problem]:
    """The archive retention copies segments to is not the journal's directory, inside or
    above it, nor on its filesystem unless said in words (journal_upkeep.archive_problem):
    retention removes a segment once the archive holds it, so the archive must be another
    place, or the segment's only copy goes."""
    if config.archive_dir is None:
        return []
    from tablectl.controller.record.journal_upkeep import archive_problem

    problem = archive_problem(
        config.journal_path.parent,
        config.archive_dir,
        same_filesystem_accepted=config.archive_same_filesystem,
    )
    return [] if problem is None else [Problem(ERROR, "journal.archive_dir", problem)]


def check_sealing_key(config: TableConfig) -> list[Problem]:
    """A sealed table (the default) has its sealing key: a table is never unsealed by omission.

    Without it the journal would hold only its hash chain, which whoever can write the file
    can recompute; `sealing = "off"` under `[journal]` says in words that it is meant.
    """
    if not config.sealing:
        return []
    path = config.sealing_key_path
    if path.is_file():
        return []
    where = "journal.sealing_key" if config.sealing_key is not None else "journal.sealing"
    return [
        Problem(
            ERROR,
            where,
            f"no sealing key at {path}: create it with `tablectl journal setup-keys --config "
            f"{config.source}` and keep the verification key it prints off this PC "
            '(docs/journal.md); or write sealing = "off" under [journal] to run unsealed',
        )
    ]


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == ERROR]


def check_group(group: str, key: str) -> list[Problem]:
    """The group `[operator]` names at `key` exists (the operator socket needs its id)."""
    try:
        grp.getgrnam(group)
    except KeyError:
        return [
            Problem(
                ERROR,
                key,
                f"group {group!r} does not exist (create it, e.g. with the sysusers entry "
                "systemd/tablectl.sysusers, or name another group)",
            )
        ]
    return []


def check_metrics_address(host: str, port: int) -> list[Problem]:
    """The address can be bound now (as the metrics server binds it: SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        return [Problem(ERROR, "metrics.listen", f"cannot resolve {host!r}: {error.strerror}")]
    family, kind, proto, _name, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        return [
            Problem(
                ERROR,
                "metrics.listen",
                f"cannot bind {host}:{port}: {error.strerror} (another process listens there? "
                "`ss -ltnp` names it; or choose another port)",
            )
        ]
    return []


def _existing_ancestor(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_directory(key: str, file_path: Path) -> list[Problem]:
    """The file's directory exists and is writable, or can be created by this user."""
    directory = file_path.parent
    if directory.is_dir():
        if not os.access(directory, os.W_OK | os.X_OK):
            return [Problem(ERROR, key, f"directory {directory} is not writable by this user")]
        return []
    ancestor = _existing_ancestor(directory)
    if not ancestor.is_dir():
        return [Problem(ERROR, key, f"{ancestor} is not a directory; cannot create {directory}")]
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return [
            Problem(
                ERROR,
                key,
                f"directory {directory} does not exist and {ancestor} is not writable by this "
                "user to create it (the tmpfiles entry creates it for the service user)",
            )
        ]
    return []


def check_journal_file(path: Path) -> list[Problem]:
    if path.exists() and not path.is_file():
        return [Problem(ERROR, "journal.path", f"{path} exists and is not a file")]
    problem = private_file_problem(path) if path.is_file() else None
    if problem is not None:
        return [Problem(ERROR, "journal.path", problem)]
    return []


def free_bytes(path: Path) -> int | None:
    """Free bytes for this user on the filesystem that holds `path` (or its nearest ancestor)."""
    try:
        return shutil.disk_usage(_existing_ancestor(path)).free
    except OSError:
        return None


def check_free_space(
    key: str, path: Path, minimum: int = MIN_FREE_BYTES, warning: int = WARN_FREE_BYTES
) -> list[Problem]:
    free = free_bytes(path.parent)
    if free is None:
        return []
    where = _existing_ancestor(path.parent)
    if free < minimum:
        return [
            Problem(
                ERROR,
                key,
                f"only {free / MIB:.1f} MiB free under {where}; the journal needs at least "
                f"{minimum // MIB} MiB to start (free space, or archive old journals)",
            )
        ]
    if free < warning:
        return [
            Problem(
                WARNING,
                key,
                f"only {free / MIB:.1f} MiB free under {where} (less than about a week of "
                f"play; warning below {warning // MIB} MiB)",
            )
        ]
    return []


def check_socket_path(path: Path) -> list[Problem]:
    if not (path.exists() or path.is_symlink()):
        return []
    if not stat.S_ISSOCK(path.lstat().st_mode):
        return [Problem(ERROR, "operator.socket", f"{path} exists and is not a socket")]
    if socket_in_use(path):
        return [
            Problem(
                ERROR,
                "operator.socket",
                f"{path}: another process accepts connections on it (another daemon for this "
                "table, or a copied configuration); it is never replaced while in use",
            )
        ]
    return []


def check_serial_line(
    key: str, driver: str, transport: SerialTransportConfig, driver_class: type[DeviceDriver]
) -> list[Problem]:
    """The configured serial line against the line the driver declares for its device
    (`serial_defaults`, from the device's manual): a setting left out is 8N1 at the
    configuration's default speed, which a 9600 8E1 device never answers."""
    problems: list[Problem] = []
    for setting, declared in driver_class.serial_defaults.items():
        configured = getattr(transport, setting, None)
        if configured is None or configured == declared:
            continue
        said = f"{configured!r}" if setting in transport.given else f"{configured!r} (the default)"
        problems.append(
            Problem(
                ERROR,
                f"{key}.transport.{setting}",
                f"{said}, but the {driver} driver declares {declared!r} for its device's serial "
                f"line: set {setting} = {_toml(declared)} (or leave the device on its manual's "
                "line)",
            )
        )
    return problems


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def check_devices(config: TableConfig) -> list[Problem]:
    problems: list[Problem] = []
    for device in config.devices:
        key = f"devices.{device.name}"
        try:
            driver_class = get_driver_class(device.kind, device.driver)
        except DriverNotFound as error:
            problems.append(Problem(ERROR, f"{key}.driver", str(error)))
        else:
            # [devices.NAME.settings], by the driver's own schema (docs/drivers.md)
            for setting, message in driver_class.settings_problems(device.settings):
                where = f"{key}.settings" + (f".{setting}" if setting else "")
                problems.append(Problem(ERROR, where, message))
            if isinstance(device.transport, SerialTransportConfig):
                problems += check_serial_line(key, device.driver, device.transport, driver_class)
        transport = device.transport
        if isinstance(transport, SerialTransportConfig) and "://" not in transport.port:
            if not os.path.exists(transport.port):
                problems.append(
                    Problem(
                        WARNING,
                        f"{key}.transport.port",
                        f"{transport.port} is absent (not plugged yet?): the daemon starts and "
                        "connects when it appears",
                    )
                )
            else:
                problems += check_port_access(f"{key}.transport.port", transport.port, config)
                problems += check_device_policy(f"{key}.transport.port", transport.port)
        elif isinstance(transport, UsbTransportConfig) and not (
            transport.vendor_id and transport.product_id
        ):
            problems.append(
                Problem(
                    ERROR,
                    f"{key}.transport",
                    "vendor_id and product_id must both be non-zero USB ids",
                )
            )
    return problems


#: The user tablectl@.service runs as (User=, systemd/tablectl@.service): when root runs
#: check-config, a device is checked for this user, not for root (who may open anything).
SERVICE_USER = "tablectl"


def check_port_access(key: str, port: str, config: TableConfig) -> list[Problem]:
    """A present serial port the daemon's user may not open is refused now, not at the handshake.

    Run by the service (or any non-root user), the kernel answers for that user (`os.access`,
    ACLs included). Run by root, as an administrator runs check-config, the port's owner,
    group and mode are compared with the service user's groups (its own, its supplementary
    groups, and the unit's SupplementaryGroups=, the operator group).
    """
    if os.geteuid() != 0:
        if os.access(port, os.R_OK | os.W_OK):
            return []
        who = _user_name(os.geteuid())
    else:
        try:
            account = pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return []  # no service user on this machine (a check-config run elsewhere)
        groups = {account.pw_gid} | {g.gr_gid for g in grp.getgrall() if SERVICE_USER in g.gr_mem}
        with contextlib.suppress(KeyError):
            groups.add(grp.getgrnam(config.operator_group).gr_gid)
        if _mode_allows(os.stat(port), account.pw_uid, groups):
            return []
        who = SERVICE_USER
    info = os.stat(port)
    owner, group = _user_name(info.st_uid), _group_name(info.st_gid)
    return [
        Problem(
            ERROR,
            key,
            f"{port} (owner {owner}, group {group}, mode {stat.S_IMODE(info.st_mode):04o}) "
            f"cannot be opened for reading and writing by user {who}: the udev rules "
            "(70-tablectl.rules) give /dev/tablectl/* group tablectl; for another port add a "
            f"local rule, or the user to group {group} (usermod -aG {group} {who})",
        )
    ]


#: The device classes tablectl@.service's DevicePolicy=closed lets the daemon open (its
#: DeviceAllow= lines, char-NAME: every character device whose major /proc/devices names NAME);
#: tests/ops/test_systemd.py holds the unit to this list.
UNIT_DEVICE_CLASSES = ("ttyS", "ttyUSB", "ttyACM", "usb_device")


def character_drivers(major: int, devices: Path = Path("/proc/devices")) -> list[str]:
    """The names /proc/devices gives a character device major (one major may carry several)."""
    names: list[str] = []
    try:
        text = devices.read_text()
    except OSError:
        return names
    section = ""
    for line in text.splitlines():
        if line.endswith(":"):
            section = line
            continue
        number, _, name = line.strip().partition(" ")
        if section.startswith("Character") and number.isdigit() and int(number) == major:
            names.append(name)
    return names


def check_device_policy(key: str, port: str) -> list[Problem]:
    """A port the unit's device policy would refuse: run under tablectl@.service, the daemon
    gets EPERM opening it, whatever its owner and mode (check-config runs outside the unit)."""
    try:
        info = os.stat(port)
    except OSError:
        return []
    if not stat.S_ISCHR(info.st_mode):
        return []
    major = os.major(info.st_rdev)
    names = character_drivers(major)
    if not names or set(names) & set(UNIT_DEVICE_CLASSES):
        return []
    allowed = ", ".join(f"char-{name}" for name in UNIT_DEVICE_CLASSES)
    return [
        Problem(
            WARNING,
            key,
            f"{port} is a {'/'.join(names)} device (character major {major}), which "
            f"tablectl@.service does not let the daemon open (DevicePolicy=closed, DeviceAllow= "
            f"{allowed}): under the unit it fails with 'Operation not permitted'; allow it "
            f"with a drop-in, systemctl edit tablectl@TABLE: [Service] "
            f"DeviceAllow=char-{names[-1]} rw",
        )
    ]


def _mode_allows(info: os.stat_result, uid: int, groups: set[int]) -> bool:
    """Read and write by the classic mode bits, as the kernel decides for a non-root user."""
    if info.st_uid == uid:
        need = stat.S_IRUSR | stat.S_IWUSR
    elif info.st_gid in groups:
        need = stat.S_IRGRP | stat.S_IWGRP
    else:
        need = stat.S_IROTH | stat.S_IWOTH
    return info.st_mode & need == need


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


#: The Debian package that provides what pyusb loads (libusb-1.0.so.0).
LIBUSB_PACKAGE = "libusb-1.0-0"


def check_system_libraries(config: TableConfig) -> list[Problem]:
    """The system libraries this table needs at run time can be loaded, or the start is refused.

    A USB device needs a pyusb backend (libusb-1.0 from the system): without one the device
    could never connect, and nothing but its DOWN status would say why. The journal needs
    Python's sqlite3 (libsqlite3), the floor store psycopg (its bundled libpq, or the system's).
    Each problem names the Debian package to install.
    """
    problems: list[Problem] = []
    usb_devices = [d.name for d in config.devices if isinstance(d.transport, UsbTransportConfig)]
    if usb_devices and not usb_backend_available():
        problems += [
            Problem(
                ERROR,
                f"devices.{name}.transport",
                "pyusb finds no USB backend: libusb-1.0 is not installed or cannot be loaded, "
                f"so this device could never connect (Debian: apt install {LIBUSB_PACKAGE})",
            )
            for name in usb_devices
        ]
    problem = _import_problem("sqlite3", "libsqlite3-0")
    if problem:
        problems.append(Problem(ERROR, "journal.path", problem))
    if config.floor is not None:
        problem = _import_problem("psycopg", "libpq5")
        if problem:
            problems.append(Problem(ERROR, "floor.dsn", problem))
    return problems


def usb_backend_available() -> bool:
    """Whether pyusb finds a backend, trying them as `usb.core.find` does (libusb 1.0 first).

    Each backend loads its C library with ctypes: this is the daemon's own loading, not a
    guess from file names. pyusb logs a failed load with a traceback; that is kept quiet here,
    since the problem returned says it.
    """
    import usb.backend.libusb0
    import usb.backend.libusb1
    import usb.backend.openusb

    with _quiet("usb.libloader", *(f"usb.backend.{name}" for name in PYUSB_BACKENDS)):
        for module in (usb.backend.libusb1, usb.backend.openusb, usb.backend.libusb0):
            with contextlib.suppress(Exception):
                if module.get_backend() is not None:
                    return True
    return False


def _import_problem(module: str, package: str) -> str | None:
    try:
        importlib.import_module(module)
    except ImportError as error:
        return f"Python cannot load {module} ({error}); Debian: apt install {package}"
    return None


PYUSB_BACKENDS = ("libusb1", "openusb", "libusb0")


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """These loggers silenced for the block (a record goes to the handlers up the tree whatever
    its parents' state, so each logger that logs is named)."""
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, before, strict=True):
            logger.disabled = was
