"""A table's configuration: one TOML file per table, validated before anything starts.

Every problem found is reported at once, each naming the file, the key and what is allowed,
so that a technician fixes a garbled file in one pass (`tablectl check-config FILE`).
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import tomllib
import urllib.parse
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablectl.controller.engine.gaming_day import DEFAULT_START, parse_start
from tablectl.controller.engine.registry import ENTRY_POINT_GROUP as GAMES_ENTRY_POINT_GROUP
from tablectl.controller.engine.registry import GameLoadError, GameNotFound, find_game, game_names
from tablectl.controller.engine.table import TableSpec, TableSpecError

DEVICE_KINDS = ("shuffler", "shoe", "hole_card_reader", "discard_rack")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
TRANSPORTS = ("serial", "usb")

# Names shared with the systemd unit, tmpfiles and sysusers entries (ops).
SERVICE_USER = "tablectl"
SERVICE_GROUP = "tablectl"
OPERATOR_GROUP = "tablectl-op"
SUPERVISOR_GROUP = "tablectl-sup"
CONFIG_PATH_TEMPLATE = "/etc/tablectl/{table}.toml"
JOURNAL_PATH_TEMPLATE = "/var/lib/tablectl/{table}/journal.sqlite"
OPERATOR_SOCKET_TEMPLATE = "/run/tablectl/{table}/operator.sock"
# Fixed default metrics port: outside the 9100-9999 range allocated to exporters, below the
# ephemeral range (32768+), so it never collides with an outgoing connection's port.
DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 8337
DEFAULT_GAMING_DAY_START = DEFAULT_START
DEFAULT_LOG_LEVEL = "info"
DEFAULT_CHECKPOINT_ROUNDS = 25
SEALING_KEY_NAME = "sealing-key"
JOURNAL_KEYS = (
    "path",
    "sealing",
    "sealing_key",
    "checkpoint_rounds",
    "retain_days",
    "archive_dir",
    "archive_same_filesystem",
    "clock_step_hours",
)
#: `[journal] archive_same_filesystem`: an archive on the journal's own filesystem is refused
#: (one disk failure loses both copies) unless the configuration says this, in these words.
ARCHIVE_SAME_FILESYSTEM_WORDS = "one disk holds both copies"
#: A start whose clock is more than this many hours past the journal's last row is a clock
#: step (docs/journal.md, "Clock steps"): longer than a table is normally closed.
DEFAULT_CLOCK_STEP_HOURS = 168
#: `[journal] sealing`: a table is sealed unless its configuration says otherwise in words.
SEALING_CHOICES = ("on", "off")
DEFAULT_BAUDRATE = 115200
BAUDRATES = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)

TABLE_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
DEVICE_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
DRIVER_NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")
GROUP_NAME_PATTERN = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
HHMM_PATTERN = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")

TOP_LEVEL_KEYS = ("table", "journal", "metrics", "operator", "devices", "floor", "witness")
FLOOR_KEYS = ("dsn", "passfile", "batch_rows", "on_divergence")
#: `[floor] on_divergence`: what the table does when its journal no longer matches the floor's
#: copy (a rollback, a rewrite, a clone shipping as it): an operator's decision, in words; the
#: first, the default, holds dealing until a supervisor sends floor_divergence_acknowledged
DIVERGENCE_STOP = "stop dealing until a supervisor acknowledges"
DIVERGENCE_KEEP = "keep dealing"
DIVERGENCE_CHOICES = (DIVERGENCE_STOP, DIVERGENCE_KEEP)
DEFAULT_FLOOR_BATCH_ROWS = 2000
MAX_FLOOR_BATCH_ROWS = 10_000
# A password written into the DSN (key=value or URI form): refused, it belongs in a passfile.
_DSN_PASSWORD = re.compile(r"(?:^|\s)password\s*=|^[a-z]+://[^/@\s]*:[^/@\s]*@", re.IGNORECASE)
# A DSN naming several servers (a replicated floor: `host=a,b,c`, or a URI's `h1:p,h2:p`) and
# how it chooses among them: only the primary takes rows.
_DSN_HOSTS = re.compile(r"(?:^|\s)(?:host|hostaddr)\s*=\s*'?([^\s']*)", re.IGNORECASE)
_URI_HOSTS = re.compile(r"^[a-z]+://(?:[^@/]*@)?([^/?]*)", re.IGNORECASE)
_DSN_TARGET = re.compile(r"target_session_attrs\s*=\s*'?([a-z-]+)", re.IGNORECASE)
#: the choices that land on the server taking writes (libpq's target_session_attrs)
WRITABLE_TARGETS = ("read-write", "primary")
TABLE_KEYS = ("id", "game", "options", "gaming_day_start", "timezone", "log_level")
DEVICE_KEYS = (
    "kind",
    "driver",
    "transport",
    "allowed_serials",
    "allowed_firmware_sha256",
    "settings",
)
#: how long the driver waits for the device (seconds), in either transport's table
TIMEOUT_KEYS = ("handshake_timeout", "command_timeout")
SERIAL_LINE_KEYS = ("bytesize", "parity", "stopbits", "xonxoff", "rtscts", "dsrdtr", "exclusive")
SERIAL_KEYS = ("type", "port", "baudrate", *SERIAL_LINE_KEYS, *TIMEOUT_KEYS)
USB_KEYS = ("type", "vendor_id", "product_id", "serial", *TIMEOUT_KEYS)
BYTESIZES = (5, 6, 7, 8)
PARITIES = ("N", "E", "O", "M", "S")
STOPBITS = (1, 1.5, 2)
#: the bounds of a configured timeout, seconds
TIMEOUT_RANGE = (0.05, 60.0)


class ConfigError(ValueError):
    """The configuration file is unusable; `problems` lists each one (file: key: what's allowed)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class DriverTimeouts:
    """`handshake_timeout` and `command_timeout` of a transport table; None: the driver's own."""

    handshake_timeout: float | None = None
    command_timeout: float | None = None


@dataclass(frozen=True)
class SerialTransportConfig:
    """The serial line as the device's manual gives it (8N1 unless said otherwise)."""

    port: str
    baudrate: int = DEFAULT_BAUDRATE
    type: str = "serial"
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    xonxoff: bool = False
    rtscts: bool = False
    dsrdtr: bool = False
    exclusive: bool = True
    timeouts: DriverTimeouts = field(default_factory=DriverTimeouts)
    #: the keys the file gave (the others are defaults): check-config says which it was
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def transport_options(self) -> dict[str, Any]:
        """Keyword arguments for `drivers.transport.make_transport("serial", ...)`."""
        return {
            "port": self.port,
            "baudrate": self.baudrate,
            "bytesize": self.bytesize,
            "parity": self.parity,
            "stopbits": self.stopbits,
            "xonxoff": self.xonxoff,
            "rtscts": self.rtscts,
            "dsrdtr": self.dsrdtr,
            "exclusive": self.exclusive,
        }


@dataclass(frozen=True)
class UsbTransportConfig:
    vendor_id: int
    product_id: int
    serial: str | None = None
    type: str = "usb"
    timeouts: DriverTimeouts = field(default_factory=DriverTimeouts)

    def transport_options(self) -> dict[str, Any]:
        """Keyword arguments for `drivers.transport.make_transport("usb", ...)`."""
        return {
            "vendor_id": self.vendor_id,
            "product_id": self.product_id,
            "serial_number": self.serial,
        }


TransportConfig = SerialTransportConfig | UsbTransportConfig


@dataclass(frozen=True)
class DeviceConfig:
    """One device of the table; the allow-lists are checked against the handshake identity."""

    name: str
    kind: str
    driver: str
    transport: TransportConfig
    allowed_serials: tuple[str, ...]
    allowed_firmware_sha256: tuple[str, ...]
    #: `[devices.NAME.settings]`: the driver's own options, checked by its schema
    #: (`check_driver_settings`), handed to the driver as they are
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FloorConfig:
    """Where the daemon ships its journal rows (docs/floor.md); credentials never in here.

    `dsn`: a libpq connection string without a password (e.g. "service=tablectl-floor" or
    "host=floor.casino dbname=floor user=tablectl_table_t01"); `passfile`: the libpq password
    file (mode 0600, readable by the service user only); `batch_rows`: rows per COPY batch.
    """

    dsn: str
    passfile: Path | None = None
    batch_rows: int = DEFAULT_FLOOR_BATCH_ROWS
    #: on_divergence = DIVERGENCE_STOP (True, the default) or DIVERGENCE_KEEP (False)
    stop_on_divergence: bool = True


@dataclass(frozen=True)
class OperatorLimits:
    """What the operator socket gives one caller and all of them (docs/operations.md).

    The defaults keep every connection the daemon may hold, plus one accept burst, far inside
    the unit's LimitNOFILE=1024, so no caller can make root's `status` fail for want of a file
    descriptor.
    """

    idle_timeout: float = 30.0  # seconds a connection may take to send a whole request line
    max_connections: int = 128  # open connections of all callers but root and the service user
    max_connections_per_caller: int = 8  # open connections of one uid
    privileged_connections: int = 16  # root's and the service user's own, outside the total
    events_per_second: float = 2.0  # operator events one uid may send, sustained ...
    event_burst: int = 5  # ... and at once (each is made durable before its answer)
    requests_per_second: float = 20.0  # every other line (status, subscribe, errors), sustained
    request_burst: int = 100  # ... and at once


@dataclass(frozen=True)
class TableConfig:
    source: str
    table_id: str
    game: str
    options: dict[str, Any]
    devices: tuple[DeviceConfig, ...]
    journal_path: Path
    metrics_host: str
    metrics_port: int
    operator_socket: Path
    operator_group: str
    gaming_day_start: datetime.time
    log_level: str
    #: `[table] timezone` (an IANA name): the zone of the gaming day and the events' local
    #: times; None: this machine's zone (check-config warns on a PC kept in UTC)
    timezone: str | None = None
    floor: FloorConfig | None = None
    witness: WitnessConfig | None = None
    supervisor_group: str = SUPERVISOR_GROUP
    operator_limits: OperatorLimits = OperatorLimits()
    # [journal] beyond its path (docs/journal.md): sealing key, checkpoints, retention
    sealing: bool = True  # `sealing = "off"` turns it off: `run` refuses a sealed table's
    # start without its key (preflight)
    sealing_key: Path | None = None
    checkpoint_rounds: int = DEFAULT_CHECKPOINT_ROUNDS
    retain_days: int = 0
    archive_dir: Path | None = None
    #: `archive_same_filesystem = "one disk holds both copies"`: the archive may share the
    #: journal's filesystem (retention and the preflight refuse it otherwise)
    archive_same_filesystem: bool = False
    #: options the configuration did not state but a table gets (the shuffle watch): a
    #: journal begun by a version without them goes on as written (service.py)
    implied_options: tuple[str, ...] = ()
    clock_step_hours: int = DEFAULT_CLOCK_STEP_HOURS

    @property
    def zone(self) -> datetime.tzinfo | None:
        """The table's zone (`timezone`), or None for this machine's."""
        return zoneinfo.ZoneInfo(self.timezone) if self.timezone else None

    @property
    def sealing_key_path(self) -> Path:
        """Where `journal setup-keys` writes the sealing key and the daemon reads it."""
        if self.sealing_key is not None:
            return self.sealing_key
        return self.journal_path.parent / SEALING_KEY_NAME

    def table_dict(self) -> dict[str, Any]:
        """The scenario/journal header line describing this table (docs/events.md)."""
        return {"type": "table", "game": self.game, "options": dict(self.options)}

    def table_dict_as_stated(self) -> dict[str, Any]:
        """The header line without the implied options: what an earlier version wrote."""
        options = dict(self.options)
        chosen = dict(options.get("interpretations", {}))
        for name in self.implied_options:
            chosen.pop(name, None)
        if chosen:
            options["interpretations"] = chosen
        else:
            options.pop("interpretations", None)
        return {"type": "table", "game": self.game, "options": options}


def _timezone(problems: _Problems, table: Mapping[str, Any]) -> str | None:
    """`[table] timezone`: an IANA name this machine's zone database knows (None: absent)."""
    if "timezone" not in table:
        return None
    name = table["timezone"]
    if not isinstance(name, str) or not name:
        problems.add("table.timezone", f"must be an IANA time zone name, got {name!r}")
        return None
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        problems.add(
            "table.timezone",
            f"unknown time zone {name!r}: an IANA name such as 'America/New_York' "
            "(the names are in /usr/share/zoneinfo; Debian's package tzdata)",
        )
        return None
    return name


class _Problems:
    """Collects problems, each prefixed with the file, so all are reported together."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, key: str, message: str) -> None:
        self.items.append(f"{self.source}: {key}: {message}")


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def _check_unknown(
    problems: _Problems, table: Mapping[str, Any], prefix: str, known: tuple[str, ...]
) -> None:
    for key in table:
        if key not in known:
            name = f"{prefix}.{key}" if prefix else key
            problems.add(name, f"unknown key; allowed keys here: {_allowed(known)}")


def _table(problems: _Problems, data: Mapping[str, Any], key: str, name: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        problems.add(name, f"must be a table ([{name}]), got {type(value).__name__}")
        return {}
    return value


def _string(
    problems: _Problems,
    data: Mapping[str, Any],
    key: str,
    name: str,
    *,
    default: str | None = None,
    pattern: re.Pattern[str] | None = None,
    allowed: tuple[str, ...] | None = None,
    what: str = "",
) -> str | None:
    if key not in data:
        if default is None:
            problems.add(name, f"is required ({what or 'a string'})")
        return default
    value = data[key]
    if not isinstance(value, str):
        problems.add(name, f"must be a string ({what or 'text'}), got {value!r}")
        return None
    if allowed is not None and value not in allowed:
        problems.add(name, f"{value!r} is not allowed; allowed: {_allowed(allowed)}")
        return None
    if pattern is not None and not pattern.match(value):
        problems.add(name, f"{value!r} is not allowed; expected {what}")
        return None
    return value


def _game(problems: _Problems, table: Mapping[str, Any]) -> str | None:
    """`[table] game`: a game the registry finds, bundled or installed (docs/games.md)."""
    game = _string(problems, table, "game", "table.game", what="a game")
    if game is None:
        return None
    try:
        find_game(game)
    except GameLoadError as error:
        problems.add("table.game", str(error))
        return None
    except GameNotFound:
        problems.add(
            "table.game",
            f"{game!r} is not allowed; allowed: {_allowed(game_names())} (the bundled games "
            f"and those installed through the {GAMES_ENTRY_POINT_GROUP} entry points)",
        )
        return None
    return game


def parse_listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) -> (host, port); ValueError says what is wrong."""
    match = re.match(r"^\[([0-9A-Fa-f:.]+)\]:(\d{1,5})$", text) or re.match(
        r"^([^:\[\]]+):(\d{1,5})$", text
    )
    if not match:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8337 or [::1]:8337)")
    host, port_text = match.group(1), match.group(2)
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"host {host!r} is not an IP address or 'localhost'") from None
    return host, port


def _usb_id(problems: _Problems, data: Mapping[str, Any], key: str, name: str) -> int | None:
    if key not in data:
        problems.add(name, "is required (an integer 0x0000-0xffff, e.g. 0x1209)")
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        problems.add(name, f"{value!r} is not allowed; expected an integer 0x0000-0xffff")
        return None
    return value


def _string_list(
    problems: _Problems, data: Mapping[str, Any], key: str, name: str, pattern: re.Pattern[str]
) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        problems.add(name, "is required: the list of values allowed at the handshake")
        return ()
    if not isinstance(value, list) or not value:
        problems.add(name, f"must be a non-empty list of strings, got {value!r}")
        return ()
    good: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not pattern.match(item):
            problems.add(f"{name}[{index}]", f"{item!r} is not allowed; expected {pattern.pattern}")
        else:
            good.append(item)
    return tuple(good)


SERIAL_NUMBER_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def _transport(problems: _Problems, device: Mapping[str, Any], name: str) -> TransportConfig | None:
    tname = f"{name}.transport"
    if "transport" not in device:
        problems.add(tname, f"is required: a table with type = {_allowed(TRANSPORTS)}")
        return None
    data = _table(problems, device, "transport", tname)
    if not data:
        return None
    kind = _string(problems, data, "type", f"{tname}.type", allowed=TRANSPORTS, what="transport")
    if kind == "serial":
        _check_unknown(problems, data, tname, SERIAL_KEYS)
        port = _string(problems, data, "port", f"{tname}.port", what="a device path or URL")
        baudrate = data.get("baudrate", DEFAULT_BAUDRATE)
        if baudrate not in BAUDRATES or isinstance(baudrate, bool):
            problems.add(
                f"{tname}.baudrate", f"{baudrate!r} is not allowed; allowed: {list(BAUDRATES)}"
            )
            return None
        line = _serial_line(problems, data, tname)
        timeouts = _timeouts(problems, data, tname)
        if line is None or timeouts is None or not port:
            return None
        return SerialTransportConfig(
            port=port, baudrate=baudrate, timeouts=timeouts, given=frozenset(data), **line
        )
    if kind == "usb":
        _check_unknown(problems, data, tname, USB_KEYS)
        usb_timeouts = _timeouts(problems, data, tname)
        vendor_id = _usb_id(problems, data, "vendor_id", f"{tname}.vendor_id")
        product_id = _usb_id(problems, data, "product_id", f"{tname}.product_id")
        serial = data.get("serial")
        if serial is not None and (
            not isinstance(serial, str) or not SERIAL_NUMBER_PATTERN.match(serial)
        ):
            problems.add(
                f"{tname}.serial", f"{serial!r} is not allowed; expected 1-64 of [A-Za-z0-9_.:-]"
            )
            return None
        if vendor_id is None or product_id is None or usb_timeouts is None:
            return None
        return UsbTransportConfig(
            vendor_id=vendor_id, product_id=product_id, serial=serial, timeouts=usb_timeouts
        )
    return None


def _serial_line(problems: _Problems, data: Mapping[str, Any], tname: str) -> dict[str, Any] | None:
    """bytesize, parity, stopbits and the flags of `[devices.NAME.transport]`; None if bad."""
    line: dict[str, Any] = {}
    good = True
    choices: tuple[tuple[str, tuple[Any, ...]], ...] = (
        ("bytesize", BYTESIZES),
        ("parity", PARITIES),
        ("stopbits", STOPBITS),
    )
    for key, allowed in choices:
        if key not in data:
            continue
        value = data[key]
        if isinstance(value, bool) or value not in allowed:
            problems.add(
                f"{tname}.{key}",
                f"{value!r} is not allowed; allowed: {', '.join(map(str, allowed))}",
            )
            good = False
        else:
            line[key] = value
    for key in ("xonxoff", "rtscts", "dsrdtr", "exclusive"):
        if key not in data:
            continue
        if not isinstance(data[key], bool):
            problems.add(f"{tname}.{key}", f"{data[key]!r} is not allowed; expected true or false")
            good = False
        else:
            line[key] = data[key]
    return line if good else None


def _timeouts(problems: _Problems, data: Mapping[str, Any], tname: str) -> DriverTimeouts | None:
    low, high = TIMEOUT_RANGE
    values: dict[str, float] = {}
    for key in TIMEOUT_KEYS:
        if key not in data:
            continue
        value = data[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            problems.add(
                f"{tname}.{key}", f"{value!r} is not allowed; expected seconds, {low} to {high}"
            )
            return None
        values[key] = float(value)
    return DriverTimeouts(**values)


def _devices(problems: _Problems, data: Mapping[str, Any]) -> tuple[DeviceConfig, ...]:
    devices = _table(problems, data, "devices", "devices")
    result: list[DeviceConfig] = []
    for dev_name, dev in devices.items():
        name = f"devices.{dev_name}"
        if not DEVICE_NAME_PATTERN.match(dev_name):
            problems.add(name, "device names are 1-32 of [a-z0-9_], starting with a letter")
        if not isinstance(dev, dict):
            problems.add(name, f"must be a table ([{name}]), got {type(dev).__name__}")
            continue
        _check_unknown(problems, dev, name, DEVICE_KEYS)
        kind = _string(problems, dev, "kind", f"{name}.kind", allowed=DEVICE_KINDS, what="kind")
        driver = _string(
            problems,
            dev,
            "driver",
            f"{name}.driver",
            pattern=DRIVER_NAME_PATTERN,
            what="a driver name registered for the kind (e.g. 'reference')",
        )
        transport = _transport(problems, dev, name)
        serials = _string_list(
            problems, dev, "allowed_serials", f"{name}.allowed_serials", SERIAL_NUMBER_PATTERN
        )
        hashes = _string_list(
            problems,
            dev,
            "allowed_firmware_sha256",
            f"{name}.allowed_firmware_sha256",
            SHA256_PATTERN,
        )
        settings = _table(problems, dev, "settings", f"{name}.settings")
        if kind and driver and transport:
            result.append(
                DeviceConfig(dev_name, kind, driver, transport, serials, hashes, dict(settings))
            )
    return tuple(result)


def _multi_host_problem(dsn: str) -> str | None:
    """A DSN over several servers must ask for the one that takes writes: libpq tries the
    hosts in order and, without target_session_attrs, keeps the first that answers, which
    after a failover is a standby that refuses every row (docs/floor.md, a replicated floor)."""
    hosts = [m.group(1) for m in _DSN_HOSTS.finditer(dsn)]
    uri = _URI_HOSTS.match(dsn)
    if uri:
        hosts.append(uri.group(1))
    if not any("," in h for h in hosts):
        return None
    target = _DSN_TARGET.search(dsn)
    if target and target.group(1).lower() in WRITABLE_TARGETS:
        return None
    said = f"target_session_attrs={target.group(1)}" if target else "no target_session_attrs"
    return (
        f"names several servers but {said}: add target_session_attrs=read-write so that "
        "the table ships to the primary, whichever server it is after a failover"
    )


def _floor(problems: _Problems, data: Mapping[str, Any]) -> FloorConfig | None:
    """The optional [floor] section: without it the table ships nothing."""
    if "floor" not in data:
        return None
    floor = _table(problems, data, "floor", "floor")
    _check_unknown(problems, floor, "floor", FLOOR_KEYS)
    dsn = _string(
        problems,
        floor,
        "dsn",
        "floor.dsn",
        what="a PostgreSQL connection string without a password, e.g. 'service=tablectl-floor'",
    )
    if dsn is not None and _DSN_PASSWORD.search(dsn):
        problems.add(
            "floor.dsn",
            "holds a password in clear: keep it in a libpq passfile (floor.passfile) or a "
            "service file instead (docs/floor.md)",
        )
        dsn = None
    if dsn is not None and (problem := _multi_host_problem(dsn)):
        problems.add("floor.dsn", problem)
        dsn = None
    passfile_text = floor.get("passfile")
    passfile: Path | None = None
    if passfile_text is not None:
        if not isinstance(passfile_text, str) or not passfile_text:
            problems.add("floor.passfile", f"must be a file path, got {passfile_text!r}")
        else:
            passfile = Path(passfile_text)
    batch_rows = floor.get("batch_rows", DEFAULT_FLOOR_BATCH_ROWS)
    if (
        isinstance(batch_rows, bool)
        or not isinstance(batch_rows, int)
        or not 1 <= batch_rows <= MAX_FLOOR_BATCH_ROWS
    ):
        problems.add(
            "floor.batch_rows",
            f"{batch_rows!r} is not allowed; expected a whole number 1-{MAX_FLOOR_BATCH_ROWS}",
        )
        return None
    words = floor.get("on_divergence", DIVERGENCE_STOP)
    if words not in DIVERGENCE_CHOICES:
        problems.add(
            "floor.on_divergence",
            f'{words!r} is not allowed; expected "{DIVERGENCE_STOP}" (the default) or '
            f'"{DIVERGENCE_KEEP}", in words',
        )
        return None
    return (
        FloorConfig(
            dsn=dsn,
            passfile=passfile,
            batch_rows=batch_rows,
            stop_on_divergence=words == DIVERGENCE_STOP,
        )
        if dsn
        else None
    )


WITNESS_KEYS = ("quorum", "timeout", "witnesses")
WITNESS_ENTRY_KEYS = ("url", "key")
DEFAULT_WITNESS_TIMEOUT = 5.0
# A verifier key's shape (C2SP signed-note): NAME+HASH+BASE64; note.py checks the rest.
_VKEY_SHAPE = re.compile(r"^[^+\s]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]+={0,2}$")


@dataclass(frozen=True)
class WitnessEndpoint:
    """One witness the table sends its checkpoints to: its URL (the tlog-witness submission
    prefix) and its public key (a C2SP vkey; its name is the cosignature's key name)."""

    url: str
    key: str

    @property
    def name(self) -> str:
        return self.key.split("+", 1)[0]


@dataclass(frozen=True)
class WitnessConfig:
    """[witness] (docs/journal.md): where the table's signed checkpoints go, and how many
    witnesses must cosign one for it to count (`quorum`)."""

    witnesses: tuple[WitnessEndpoint, ...]
    quorum: int
    timeout: float = DEFAULT_WITNESS_TIMEOUT


def _witness(problems: _Problems, data: Mapping[str, Any]) -> WitnessConfig | None:
    """The optional [witness] section: without it the table's checkpoints go nowhere."""
    if "witness" not in data:
        return None
    section = _table(problems, data, "witness", "witness")
    _check_unknown(problems, section, "witness", WITNESS_KEYS)
    entries = section.get("witnesses")
    if not isinstance(entries, list) or not entries:
        problems.add(
            "witness.witnesses",
            'is required: a list of { url = "http://HOST:PORT", key = "NAME+HASH+KEY" } '
            "(the key `tablectl witness setup-key` printed on the witness's machine)",
        )
        return None
    endpoints: list[WitnessEndpoint] = []
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"witness.witnesses[{index}]"
        if not isinstance(entry, dict):
            problems.add(where, f"must be a table {{ url = ..., key = ... }}, got {entry!r}")
            continue
        _check_unknown(problems, entry, where, WITNESS_ENTRY_KEYS)
        url = _string(problems, entry, "url", f"{where}.url", what='"http://HOST:PORT[/PREFIX]"')
        key = _string(problems, entry, "key", f"{where}.key", what="the witness's public key")
        if url is not None:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                problems.add(f"{where}.url", f"{url!r} is not an http:// or https:// URL")
                url = None
            elif parts.query or parts.fragment:
                problems.add(f"{where}.url", f"{url!r}: a URL prefix takes no ?query or #fragment")
                url = None
        if key is not None and not _VKEY_SHAPE.match(key):
            problems.add(
                f"{where}.key",
                f"{key!r} is not a witness public key (NAME+HASH+KEY, as `tablectl witness "
                "setup-key` prints it)",
            )
            key = None
        if key is not None:
            name = key.split("+", 1)[0]
            if name in names:
                problems.add(f"{where}.key", f"a second witness named {name!r}: names must differ")
            names.add(name)
        if url is not None and key is not None:
            endpoints.append(WitnessEndpoint(url.rstrip("/"), key))
    quorum = section.get("quorum", len(entries))
    if isinstance(quorum, bool) or not isinstance(quorum, int) or not 1 <= quorum <= len(entries):
        problems.add(
            "witness.quorum",
            f"{quorum!r} is not allowed; expected a whole number 1-{len(entries)} (how many of "
            "the witnesses listed must cosign a checkpoint)",
        )
        return None
    timeout = section.get("timeout", DEFAULT_WITNESS_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0.1 <= timeout <= 60
    ):
        problems.add("witness.timeout", f"{timeout!r} is not allowed; expected seconds 0.1-60")
        return None
    if len(endpoints) != len(entries):
        return None
    return WitnessConfig(tuple(endpoints), quorum, float(timeout))


# [operator] key -> (OperatorLimits field, lowest, highest): each a number in its range.
OPERATOR_LIMIT_KEYS: dict[str, tuple[float, float]] = {
    "idle_timeout": (1, 3600),
    "max_connections": (1, 512),
    "max_connections_per_caller": (1, 64),
    "events_per_second": (0.1, 100),
    "event_burst": (1, 1000),
    "requests_per_second": (1, 1000),
    "request_burst": (1, 10000),
}
OPERATOR_KEYS = ("socket", "group", "supervisor_group", *OPERATOR_LIMIT_KEYS)


def _operator_limits(problems: _Problems, operator: Mapping[str, Any]) -> OperatorLimits:
    values: dict[str, Any] = {}
    defaults = OperatorLimits()
    for key, (low, high) in OPERATOR_LIMIT_KEYS.items():
        if key not in operator:
            continue
        value = operator[key]
        whole = isinstance(getattr(defaults, key), int)
        kinds = (int,) if whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
            what = "a whole number" if whole else "a number"
            problems.add(
                f"operator.{key}", f"{value!r} is not allowed; expected {what} {low:g}-{high:g}"
            )
            continue
        values[key] = value
    return OperatorLimits(**values)


def parse_config(data: Mapping[str, Any], source: str) -> TableConfig:
    """Validate a parsed TOML document; `source` names the file in every error."""
    problems = _Problems(source)
    _check_unknown(problems, data, "", TOP_LEVEL_KEYS)
    table = _table(problems, data, "table", "table")
    if "table" not in data:
        problems.add("table", "is required: a [table] with id and game")
    _check_unknown(problems, table, "table", TABLE_KEYS)
    table_id = _string(
        problems,
        table,
        "id",
        "table.id",
        pattern=TABLE_ID_PATTERN,
        what="1-32 of [a-z0-9_-], starting with a letter or digit (e.g. 't01')",
    )
    game = _game(problems, table)
    options = _table(problems, table, "options", "table.options")
    for key, value in options.items():
        if not isinstance(value, str | int | bool | float | list | dict):
            problems.add(f"table.options.{key}", f"must be a value, got {type(value).__name__}")
    start_text = _string(
        problems,
        table,
        "gaming_day_start",
        "table.gaming_day_start",
        default=DEFAULT_GAMING_DAY_START.strftime("%H:%M"),
        pattern=HHMM_PATTERN,
        what="local time HH:MM, 00:00-23:59 (e.g. '06:00')",
    )
    gaming_day_start = parse_start(start_text) if start_text else DEFAULT_GAMING_DAY_START
    timezone = _timezone(problems, table)
    log_level = _string(
        problems,
        table,
        "log_level",
        "table.log_level",
        default=DEFAULT_LOG_LEVEL,
        allowed=LOG_LEVELS,
        what="a log level",
    )

    journal = _table(problems, data, "journal", "journal")
    _check_unknown(problems, journal, "journal", JOURNAL_KEYS)
    default_journal = JOURNAL_PATH_TEMPLATE.format(table=table_id or "TABLE")
    journal_text = _string(
        problems, journal, "path", "journal.path", default=default_journal, what="a file path"
    )
    journal_options = _journal_options(problems, journal)

    metrics = _table(problems, data, "metrics", "metrics")
    _check_unknown(problems, metrics, "metrics", ("listen",))
    listen = _string(
        problems,
        metrics,
        "listen",
        "metrics.listen",
        default=f"{DEFAULT_METRICS_HOST}:{DEFAULT_METRICS_PORT}",
        what="HOST:PORT",
    )
    metrics_host, metrics_port = DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT
    if listen:
        try:
            metrics_host, metrics_port = parse_listen_address(listen)
        except ValueError as error:
            problems.add("metrics.listen", f"{error}; allowed: HOST:PORT with an IP address")

    operator = _table(problems, data, "operator", "operator")
    _check_unknown(problems, operator, "operator", OPERATOR_KEYS)
    default_socket = OPERATOR_SOCKET_TEMPLATE.format(table=table_id or "TABLE")
    socket_text = _string(
        problems, operator, "socket", "operator.socket", default=default_socket, what="a path"
    )
    if socket_text and len(socket_text.encode()) > 107:
        problems.add("operator.socket", "is longer than a Unix socket path may be (107 bytes)")
    group = _string(
        problems,
        operator,
        "group",
        "operator.group",
        default=OPERATOR_GROUP,
        pattern=GROUP_NAME_PATTERN,
        what="a group name (e.g. 'tablectl-op')",
    )

    supervisor_group = _string(
        problems,
        operator,
        "supervisor_group",
        "operator.supervisor_group",
        default=SUPERVISOR_GROUP,
        pattern=GROUP_NAME_PATTERN,
        what="a group name (e.g. 'tablectl-sup')",
    )
    limits = _operator_limits(problems, operator)

    if "gaming_day_start" in options:
        problems.add("table.options.gaming_day_start", "set it once, as table.gaming_day_start")
    # The engine needs the gaming day's start (H1: the reader's daily inspection); the table
    # section is where a technician looks for it, so it is carried into the options here.
    options = {**options, "gaming_day_start": gaming_day_start.strftime("%H:%M")}
    # Q1, Q2: a real table watches its shuffles unless its configuration says otherwise
    # (the engine's default is off for hand-written scenario files: interpretations.py).
    chosen = options.get("interpretations", {})
    implied: tuple[str, ...] = ()
    if isinstance(chosen, dict) and "shuffle_integrity" not in chosen:
        options["interpretations"] = {**chosen, "shuffle_integrity": True}
        implied = ("shuffle_integrity",)

    devices = _devices(problems, data)
    floor = _floor(problems, data)
    witness = _witness(problems, data)
    if game is not None and not problems.items:
        # the engine's own check of the options (the service builds its TableSpec from the
        # journal's table row, so nothing here keeps it)
        try:
            TableSpec.from_dict({"game": game, "options": dict(options)})
        except TableSpecError as error:
            problems.add("table.options", str(error))

    if problems.items:
        raise ConfigError(problems.items)
    assert table_id and game and journal_text and socket_text and group and log_level
    assert supervisor_group
    return TableConfig(
        source=source,
        table_id=table_id,
        game=game,
        options=dict(options),
        devices=devices,
        journal_path=Path(journal_text),
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        operator_socket=Path(socket_text),
        operator_group=group,
        gaming_day_start=gaming_day_start,
        timezone=timezone,
        log_level=log_level,
        floor=floor,
        witness=witness,
        supervisor_group=supervisor_group,
        operator_limits=limits,
        implied_options=implied,
        **journal_options,
    )


def _journal_options(problems: _Problems, journal: Mapping[str, Any]) -> dict[str, Any]:
    """[journal] sealing_key, checkpoint_rounds, retain_days, archive_dir (docs/journal.md)."""
    options: dict[str, Any] = {}
    if "sealing" in journal:
        word = journal["sealing"]
        if word not in SEALING_CHOICES:
            problems.add(
                "journal.sealing",
                f'{word!r} is not allowed; expected "on" (the default: the journal sealed '
                'under the key `tablectl journal setup-keys` writes) or "off", in words',
            )
        else:
            options["sealing"] = word == "on"
    if "archive_same_filesystem" in journal:
        words = journal["archive_same_filesystem"]
        if words != ARCHIVE_SAME_FILESYSTEM_WORDS:
            problems.add(
                "journal.archive_same_filesystem",
                f'{words!r} is not allowed; the only value is "{ARCHIVE_SAME_FILESYSTEM_WORDS}",'
                " in words: an archive on the journal's filesystem is refused unless meant",
            )
        else:
            options["archive_same_filesystem"] = True
    for key in ("sealing_key", "archive_dir"):
        if key in journal:
            text = _string(problems, journal, key, f"journal.{key}", what="an absolute path")
            if text is not None and not text.startswith("/"):
                problems.add(f"journal.{key}", f"{text!r} is not an absolute path")
            elif text is not None:
                options[key] = Path(text)
    for key, low, default in (
        ("checkpoint_rounds", 1, DEFAULT_CHECKPOINT_ROUNDS),
        ("retain_days", 0, 0),
        ("clock_step_hours", 1, DEFAULT_CLOCK_STEP_HOURS),
    ):
        value = journal.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            problems.add(
                f"journal.{key}", f"{value!r} is not allowed; expected an integer >= {low}"
            )
        else:
            options[key] = value
    return options


def load_config(path: str | Path) -> TableConfig:
    """Read and validate one table's TOML file; raises ConfigError naming file and key."""
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise ConfigError([f"{source}: cannot read: {error.strerror}"]) from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"{source}: not valid TOML: {error}"]) from error
    except UnicodeDecodeError as error:
        raise ConfigError(
            [f"{source}: not UTF-8 text (TOML must be): byte {error.start} is {error.reason}"]
        ) from error
    return parse_config(data, source)
