"""`tablectl demo`: the whole daemon on a simulated table, with an automatic dealer.

Every device of the chosen game is a simulator: the shuffler, the hole-card reader and the
discard rack on real pseudo-terminals opened with pyserial, the shoe on the simulated pyusb
backend opened with pyusb. The production drivers, the table service (journal first, then the
engine, metrics and logs), the metrics endpoint and the operator socket run as they do under
`tablectl run`; the automatic dealer (simulators.autodealer) plays legal rounds. By default it
plays at a pace a person can follow (`--pace`) and prints one line per step (simulators.
narration: what happened, the cards each hand holds, every decision with its rule ID and
reason), then a line per round; `--fast` plays as fast as the daemon answers and prints the
round lines only. The daemon's log goes to STATE_DIR/daemon.log (`--log-stderr` keeps it on
stderr). A state dir is resumed: the journal goes on from where the last run left it, or the
demo says why it cannot. At the end a summary counted from the journal's rows of this run.
SIGTERM or Ctrl-C ends it cleanly: the journal is closed and verifies.

The daemon is `controller.daemon.run_daemon`, exactly as `tablectl run` runs it, handed the
simulated USB bus; the dealer watches the service's handled events (`TableService.observers`)
and types its operator events on the operator socket, as a dealer's terminal would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import grp
import json
import os
import random
import secrets
import shlex
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

import tablectl.simulators.shuffles as shuffles
from tablectl.controller.commands.cli import add_old_option_name
from tablectl.controller.common.config import (
    SEALING_KEY_NAME,
    ConfigError,
    TableConfig,
    parse_config,
    parse_listen_address,
)
from tablectl.controller.common.logs import configure_logging
from tablectl.controller.engine.registry import bundled_game_names
from tablectl.controller.record.checkpoints import default_origin, identity_key_path
from tablectl.controller.record.durable import write_private_file
from tablectl.controller.record.journal import (
    JournalError,
    read_rows,
    recover_at_start,
)
from tablectl.controller.record.note import NoteError, create_identity_key, load_identity_key
from tablectl.controller.record.sealing import (
    SealingError,
    VerificationKey,
    read_key_file,
    setup_keys,
)
from tablectl.controller.record.tablelock import (
    LockError,
    TableLock,
    TableLocked,
    acquire_table_lock,
)
from tablectl.controller.service.daemon import Daemon, run_daemon
from tablectl.controller.service.preflight import ERROR, check_free_space, check_witness_keys
from tablectl.drivers.registry import get_driver_class
from tablectl.simulators.autodealer import FAULTS, AutoDealer, DealerStuck, EventFeed, RoundReport
from tablectl.simulators.harness import SimulatedTableHarness
from tablectl.simulators.narration import StepPrinter, last_seq, summarise

DEFAULT_GAME = "three_card_21"
DEFAULT_LISTEN = "127.0.0.1:8337"
#: seconds the dealer pauses after each step by default: about a round a minute for 3C21
DEFAULT_PACE = 0.8
#: every simulated device is there at once: a missing handshake is a failure (generous, so a
#: heavily loaded machine is not mistaken for a broken one)
DEVICE_WAIT = 20.0
#: seconds the round in play may take to finish after SIGTERM or Ctrl-C
ROUND_GRACE = 3.0
#: how long the simulated shuffler takes per shuffle in the demo (a soak may shorten it)
SHUFFLE_SECONDS = 0.3

#: Called after each round's summary line is printed, while the daemon is still running
#: (so its metrics endpoint can be read): a soak checks its invariants here.
RoundCallback = Callable[[RoundReport, Daemon], Awaitable[None]]
#: Called once the devices are plugged, before the daemon starts: the simulated table.
HarnessCallback = Callable[[SimulatedTableHarness], None]

#: The demo's table per game: the most each game shows (ADS stacks for HUH, a card-reading
#: manual shoe and the S1 stub-count cadence for HILO, the hole-card reader for 3C21).
GAME_OPTIONS: dict[str, dict[str, Any]] = {
    "three_card_21": {"decks": 6, "dealing": "manual_shoe", "shuffler": "counting"},
    "five_card_hilo": {"dealing": "manual_shoe", "shuffler": "counting"},
    "heads_up_holdem": {"dealing": "automated_shoe", "shuffler": "counting"},
    "asia_poker": {"dealing": "manual_shoe", "shuffler": "counting"},
}
#: device name -> (kind, attachment); the shoe rides the pyusb backend, the others ptys
DEVICES: dict[str, tuple[str, str]] = {
    "shuffler": ("shuffler", "pty"),
    "shoe": ("shoe", "usb"),
    "reader": ("hole_card_reader", "pty"),
    "rack": ("discard_rack", "pty"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--game",
        choices=bundled_game_names(),
        default=DEFAULT_GAME,
        help=f"the game (default {DEFAULT_GAME})",
    )
    parser.add_argument(
        "--rounds", type=_positive, default=None, help="rounds to play (default: until stopped)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the shuffles and the dealer (printed)"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="journal, ptys, socket (default: a new temp dir)",
    )
    parser.add_argument(
        "--metrics-listen",
        default=DEFAULT_LISTEN,
        help=f"HOST:PORT of the metrics endpoint (default {DEFAULT_LISTEN}; port 0: any free)",
    )
    parser.add_argument(
        "--faults",
        type=_rate,
        nargs="?",
        const=0.25,
        default=0.0,
        help="inject a device fault in about this share of rounds (default when given: 0.25)",
    )
    parser.add_argument(
        "--fault-kind",
        action="append",
        choices=FAULTS,
        default=None,
        help="only these faults (repeat the option; default: every fault the table allows)",
    )
    parser.add_argument(
        "--shuffle-fault",
        choices=[m for m in shuffles.MODES if m != "uniform"],
        default=None,
        help="the simulated shuffler completes every cycle but shuffles badly: none, "
        "one_riffle, strip_cut, or replay (a stacked deck); the table's shuffle watch "
        "should tell (docs/shuffle-integrity.md)",
    )
    parser.add_argument(
        "--dealing",
        choices=("manual_shoe", "automated_shoe"),
        default=None,
        help="HILO/HUH: override the demo's dealing method",
    )
    parser.add_argument(
        "--dual-deck",
        action="store_true",
        help="HILO/HUH: two decks alternating, one shuffled while the other is dealt",
    )
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument(
        "--pace",
        type=_pace,
        default=DEFAULT_PACE,
        metavar="SECONDS",
        help=f"pause after each step, one line per step (default {DEFAULT_PACE:g})",
    )
    speed.add_argument(
        "--fast",
        action="store_true",
        help="no pause and one line per round only (tests, soaks, benchmarks)",
    )
    parser.add_argument(
        "--driver",
        action="append",
        default=[],
        metavar="DEVICE=NAME",
        help="a vendor's driver for a device (e.g. shoe=acme-cs9), played on its own simulator",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="three tables of three games shipping to a throwaway PostgreSQL (docs/floor.md); "
        "prints the gaming day's report and a `floor round` command for a voided round",
    )
    parser.add_argument(
        "--floor-dsn",
        default=None,
        metavar="DSN",
        help="ship this table's journal to a floor store (libpq DSN, no password)",
    )
    parser.add_argument(
        "--floor-passfile",
        type=Path,
        default=None,
        metavar="FILE",
        help="the libpq passfile holding the --floor-dsn role's password",
    )
    parser.add_argument(
        "--witness",
        default=None,
        metavar="URL",
        help="send the journal's signed checkpoints to this witness (`tablectl witness serve`, "
        "C2SP tlog-witness) and check the journal against it at start; needs --witness-key",
    )
    parser.add_argument(
        "--witness-key",
        default=None,
        metavar="VKEY",
        help="the witness's public key (`tablectl witness setup-key` printed it)",
    )
    parser.add_argument(
        "--table",
        dest="table_id",
        default="demo",
        metavar="ID",
        help="the table's id (default demo; the floor's key)",
    )
    add_old_option_name(parser, "--table-id", "table_id")
    parser.add_argument(
        "--timezone",
        default=None,
        metavar="ZONE",
        help="the casino's time zone (IANA name, e.g. America/New_York): the gaming day and "
        "the events' local times (default: the PC's zone), as `[table] timezone`",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="daemon log level (default info)",
    )
    parser.add_argument(
        "--log-stderr",
        action="store_true",
        help="the daemon's log on stderr, mixed with the demo's lines (default: "
        "STATE_DIR/daemon.log)",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _bounded(
    low: float, high: float, unit: str, what: str, suffix: str = ""
) -> Callable[[str], float]:
    """An argparse type: a number from `low` to `high`, the error naming the unit and range."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {unit}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{what} is between {low:g} and {high:g}{suffix}, got {value}"
            )
        return value

    return parse


_pace = _bounded(0.0, 60.0, "a number of seconds", "a pause", " seconds")
_rate = _bounded(0.0, 1.0, "a number between 0 and 1", "a share of rounds")


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_listen_address(args.metrics_listen)
    except ValueError as error:
        print(f"tablectl demo: --metrics-listen: {error}", file=sys.stderr)
        return 2
    if args.dealing is not None and args.game not in ("five_card_hilo", "heads_up_holdem"):
        print(
            f"tablectl demo: --dealing: the demo deals {args.game} from a manual shoe only",
            file=sys.stderr,
        )
        return 2
    if args.dual_deck and args.game not in ("five_card_hilo", "heads_up_holdem"):
        print(
            f"tablectl demo: --dual-deck: {args.game} has no two-deck option (HILO, HUH only)",
            file=sys.stderr,
        )
        return 2
    try:
        args.drivers = parse_driver_options(args.driver)
    except ValueError as error:
        print(f"tablectl demo: --driver: {error}", file=sys.stderr)
        return 2
    args.new_state_dir = args.state_dir is None or not (args.state_dir / "journal.sqlite").exists()
    if args.state_dir is None:
        args.state_dir = Path(tempfile.mkdtemp(prefix="tablectl-demo-"))
    args.state_dir.mkdir(parents=True, exist_ok=True)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    if args.log_stderr:
        configure_logging(args.log_level, mode="json" if not sys.stderr.isatty() else "auto")
        return _run(args, seed, host, port)
    log_path = args.state_dir / "daemon.log"
    with open(log_path, "a", encoding="utf-8") as log:
        configure_logging(args.log_level, mode="json", stream=log)
        print(f"daemon log: {log_path}", flush=True)
        return _run(args, seed, host, port)


def _run(args: argparse.Namespace, seed: int, host: str, port: int) -> int:
    if args.floor:
        from tablectl.simulators.floor_demo import run_floor_demo

        # three tables at once: a line per round each (their steps interleaved are noise),
        # at the demo's pace (--pace) unless --fast
        args.step_lines = False
        try:
            return asyncio.run(run_floor_demo(args, seed, play_demo))
        except KeyboardInterrupt:
            return 130
    try:
        return asyncio.run(play_demo(args, seed, host, port))
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        return 130


def parse_driver_options(values: list[str]) -> dict[str, str]:
    """``["shoe=acme-cs9"]`` -> ``{"shoe": "acme-cs9"}``; ValueError names a bad one."""
    drivers: dict[str, str] = {}
    for value in values:
        device, sep, driver = value.partition("=")
        if not sep or device not in DEVICES or not driver:
            raise ValueError(
                f"{value!r}: expected DEVICE=DRIVER, DEVICE one of {', '.join(DEVICES)}"
            )
        drivers[device] = driver
    return drivers


def demo_table_options(
    game: str, dealing: str | None = None, dual_deck: bool = False
) -> dict[str, Any]:
    options = dict(GAME_OPTIONS[game])
    if dealing is not None:
        options["dealing"] = dealing
    if dual_deck:
        options["dual_deck"] = True
    return options


def _operator_group() -> str:
    return grp.getgrgid(os.getgid()).gr_name


def demo_config(
    game: str,
    options: Mapping[str, Any],
    state_dir: Path,
    identities: Mapping[str, tuple[str, str]],
    usb_ids: Mapping[str, tuple[int, int]],
    metrics_listen: str,
    drivers: Mapping[str, str] | None = None,
    *,
    table_id: str = "demo",
    floor: Mapping[str, Any] | None = None,
    witness: Mapping[str, Any] | None = None,
    timezone: str | None = None,
) -> TableConfig:
    """The table's configuration, validated like a file's: devices at the demo's ptys/USB ids.

    ``identities``: device name -> (serial, firmware SHA-256) for the allow-lists.
    """
    devices: dict[str, Any] = {}
    for name, (serial, firmware) in identities.items():
        kind, _attachment = DEVICES[name]
        driver = (drivers or {}).get(name, "reference")
        transport: dict[str, Any]
        if name in usb_ids:
            vendor, product = usb_ids[name]
            transport = {
                "type": "usb",
                "vendor_id": vendor,
                "product_id": product,
                "serial": serial,
            }
        else:
            transport = {"type": "serial", "port": str(state_dir / "dev" / name)}
            if driver != "reference":
                # the serial line the vendor's manual gives, as its driver declares it
                transport.update(get_driver_class(kind, driver).serial_defaults)
        devices[name] = {
            "kind": kind,
            "driver": driver,
            "transport": transport,
            "allowed_serials": [serial],
            "allowed_firmware_sha256": [firmware],
        }
    data: dict[str, Any] = {
        "table": {"id": table_id, "game": game, "options": dict(options), "log_level": "info"},
        "journal": {"path": str(state_dir / "journal.sqlite")},
        "metrics": {"listen": metrics_listen},
        "operator": {
            "socket": str(state_dir / "operator.sock"),
            "group": _operator_group(),
            "supervisor_group": _operator_group(),
        },
        "devices": devices,
    }
    if timezone is not None:
        data["table"]["timezone"] = timezone
    if floor is not None:
        data["floor"] = dict(floor)
    if witness is not None:
        data["witness"] = dict(witness)
    return parse_config(data, "tablectl demo (generated)")


def _floor_section(args: argparse.Namespace) -> dict[str, Any] | None:
    """The [floor] section for --floor-dsn (and its passfile), or None: ship nothing."""
    dsn = getattr(args, "floor_dsn", None)
    if not dsn:
        return None
    section: dict[str, Any] = {"dsn": dsn}
    passfile = getattr(args, "floor_passfile", None)
    if passfile is not None:
        section["passfile"] = str(passfile)
    return section


def _witness_section(args: argparse.Namespace) -> dict[str, Any] | None:
    """The [witness] section for --witness URL --witness-key VKEY, or None."""
    url = getattr(args, "witness", None)
    if not url:
        return None
    return {"witnesses": [{"url": url, "key": getattr(args, "witness_key", None) or ""}]}


VERIFICATION_KEY_FILE = "verification-key"
#: The table's public identity key in the demo's state dir (`proof verify --table-key`).
TABLE_KEY_FILE = "table-key"


def demo_identity_key(state_dir: Path, table_id: str) -> None:
    """The demo signs its Merkle log's checkpoints like a table: an identity key beside the
    sealing key (once), its public key in STATE_DIR/table-key."""
    key_file = identity_key_path(state_dir / SEALING_KEY_NAME)
    if key_file.exists():
        key = load_identity_key(key_file)
    else:
        key = create_identity_key(key_file, default_origin(table_id))
    write_private_file(state_dir / TABLE_KEY_FILE, f"{key.vkey}\n")


def demo_sealing_keys(state_dir: Path) -> str | None:
    """The demo seals its journal like a table: a sealing key in the state dir (once), and
    the verification key beside it in STATE_DIR/verification-key (a table keeps it away).

    Both are written durably (fsynced, renamed, the directory fsynced). A verification key
    file lost to a crash right after the sealing key was drawn is written again from the key
    while it is still at epoch 0 (its key is then the seed); later it cannot be: said (the
    returned text), and the demo goes on sealing.
    """
    key_file = state_dir / SEALING_KEY_NAME
    verification_file = state_dir / VERIFICATION_KEY_FILE
    if not key_file.exists():
        verification = setup_keys(key_file)
        write_private_file(
            verification_file, f"{verification}\n", fault="verification_key.before_rename"
        )
        return None
    with contextlib.suppress(OSError, ValueError):
        VerificationKey.parse(verification_file.read_text())
        return None
    try:
        held = read_key_file(key_file)
        if held.epoch == 0:
            seed = VerificationKey(held.key, held.start, held.interval)
            write_private_file(verification_file, f"{seed}\n")
            return f"{verification_file} was missing or empty: written again from the key"
    except SealingError:
        pass
    return (
        f"{verification_file} is missing or empty and the sealing key has evolved since: the "
        "seals cannot be verified; give a new --state-dir for a verifiable demo"
    )


def histogram_quantile(buckets: list[tuple[float, float]], quantile: float) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket; ``buckets`` = (le, cumulative)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = quantile * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in buckets:
        if cumulative >= rank:
            if upper == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 0.0)
        lower, below = upper, cumulative
    return lower


def event_latency_buckets() -> list[tuple[float, float]]:
    """tablectl_event_processing_seconds' cumulative buckets, as the metrics endpoint has them."""
    buckets: list[tuple[float, float]] = []
    for family in REGISTRY.collect():
        if family.name != "tablectl_event_processing_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                buckets.append((float(sample.labels["le"]), sample.value))
    return sorted(buckets)


def latency_summary() -> str:
    buckets = event_latency_buckets()
    median = histogram_quantile(buckets, 0.5)
    p99 = histogram_quantile(buckets, 0.99)
    if median is None or p99 is None:
        return "no events handled"
    return (
        f"event processing (tablectl_event_processing_seconds, {buckets[-1][1]:.0f} events): "
        f"median {median * 1000:.3f} ms, p99 {p99 * 1000:.3f} ms"
    )


class OperatorTerminal:
    """The dealer's terminal: one connection to the operator socket, a JSON line each way."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_unix_connection(str(self.socket_path))

    async def send(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """One operator event; the decisions it drew. A refusal stops the dealer, named."""
        if self._reader is None or self._writer is None:
            raise DealerStuck(f"{self.socket_path}: the terminal is not connected")
        self._writer.write((json.dumps(event) + "\n").encode())
        await self._writer.drain()
        line = await self._reader.readline()
        if not line:
            raise DealerStuck(f"{self.socket_path}: the daemon closed the operator connection")
        reply = json.loads(line)
        if reply.get("reply") != "decisions":
            raise DealerStuck(f"operator event {event.get('type')!r} refused: {reply}")
        decisions: list[dict[str, Any]] = reply["decisions"]
        return decisions

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
            self._writer = self._reader = None


def metrics_port_taken(host: str, port: int) -> str | None:
    """Why HOST:PORT cannot be bound (before the daemon tries), or None when it can."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            busy = (
                " (the port is busy: another tablectl?)" if error.errno == errno.EADDRINUSE else ""
            )
            return f"cannot serve metrics on {host}:{port}: {error.strerror}{busy}"
    return None


async def play_demo(
    args: argparse.Namespace,
    seed: int,
    host: str,
    port: int,
    *,
    on_round: RoundCallback | None = None,
    on_plugged: HarnessCallback | None = None,
    shuffle_seconds: float = SHUFFLE_SECONDS,
    interrupted: asyncio.Event | None = None,
) -> int:
    """The demo on the running loop; ``args`` as `add_arguments` parses them. Exit status.

    ``interrupted``: set on Ctrl-C by whoever runs several tables at once (the floor demo,
    one handler for all: the loop keeps one handler a signal, the last one added); None, the
    demo's own SIGINT/SIGTERM handler sets its own.

    ``on_round`` and ``on_plugged`` are the seams a soak uses (tests/soak/daemon_soak.py) to
    check every round against the daemon while it runs; the demo itself passes neither.
    """
    state_dir: Path = args.state_dir or Path(tempfile.mkdtemp(prefix="tablectl-demo-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    args.state_dir = state_dir
    options = demo_table_options(args.game, args.dealing, args.dual_deck)
    # One daemon per table: the state dir's lock first, before its ptys are plugged (a second
    # demo on the same state dir must not replace the first one's device links) and before
    # the metrics port (a second demo on a state dir is told the table is running, not that
    # the port the first one holds is busy).
    try:
        lock = acquire_table_lock(state_dir / "journal.sqlite")
    except (TableLocked, LockError) as error:
        print(f"tablectl demo: {error}", file=sys.stderr)
        return 2
    taken = metrics_port_taken(host, port)
    if taken is not None:
        lock.release()
        print(
            f"tablectl demo: {taken}; choose another with --metrics-listen HOST:PORT "
            "(port 0 picks a free one)",
            file=sys.stderr,
        )
        return 1
    # As `tablectl run`: no start on a disk too full to journal, what a crash left behind
    # put right (or refused, said), the keys written durably.
    refused = prepare_state_dir(state_dir, getattr(args, "table_id", "demo"))
    if refused is not None:
        lock.release()
        print(f"tablectl demo: {refused}", file=sys.stderr)
        return 2
    new = getattr(args, "new_state_dir", not (state_dir / "journal.sqlite").exists())
    print(
        f"tablectl demo: {args.game} ({options['dealing']}), seed {seed}, state in {state_dir}"
        + (" (a new table)" if new else " (resumed)"),
        flush=True,
    )
    if not getattr(args, "floor", False):
        print(f"resume this table later with: {resume_command(args)}", flush=True)
    loop = asyncio.get_running_loop()
    if interrupted is None:
        interrupted = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupted.set)
    drivers: dict[str, str] = getattr(args, "drivers", None) or {}
    try:
        harness = SimulatedTableHarness(
            args.game,
            options,
            seed=seed,
            state_dir=state_dir,
            shuffle_seconds=shuffle_seconds,
            drivers=drivers,
        )
    except (ValueError, LookupError) as error:
        lock.release()
        print(f"tablectl demo: {error}", file=sys.stderr)
        return 2
    if getattr(args, "shuffle_fault", None):
        harness.table.shuffler.set_shuffle_fault(args.shuffle_fault)
    harness.plug()
    if on_plugged is not None:
        on_plugged(harness)
    if getattr(args, "witness", None) and not getattr(args, "witness_key", None):
        lock.release()
        harness.unplug()
        print(
            "tablectl demo: --witness needs --witness-key (the witness's public key)",
            file=sys.stderr,
        )
        return 2
    try:
        try:
            config = demo_config(
                args.game,
                options,
                state_dir,
                harness.identities(),
                harness.usb_ids(),
                f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                drivers,
                table_id=getattr(args, "table_id", "demo"),
                floor=_floor_section(args),
                witness=_witness_section(args),
                timezone=getattr(args, "timezone", None),
            )
        except ConfigError as error:  # --timezone: a name the zone database lacks
            print(f"tablectl demo: --timezone: {error}", file=sys.stderr)
            return 2
        if config.witness is not None:
            problems = check_witness_keys(config)
            if problems:
                for problem in problems:
                    print(f"tablectl demo: --witness-key: {problem.message}", file=sys.stderr)
                return 2
            table_key = (state_dir / TABLE_KEY_FILE).read_text().strip()
            print(
                f"witnessed by {config.witness.witnesses[0].url}: the table's key is "
                f"{table_key} (in {state_dir / TABLE_KEY_FILE}); the witness must know it: "
                f'tablectl witness serve ... --log "$(cat {state_dir / TABLE_KEY_FILE})"',
                flush=True,
            )
        why_not = cannot_resume(config)
        if why_not is not None:
            print(f"tablectl demo: {why_not}", file=sys.stderr)
            return 2  # refused to start, nothing changed (as `tablectl run` refuses)
        return await _play(args, config, harness, seed, options, interrupted, on_round, lock)
    finally:
        harness.unplug()
        lock.release()


def open_round(engine: Any) -> tuple[str, list[int], bool] | None:
    """The round the engine holds open (the journal's, after a restart), for the dealer."""
    rnd = engine.round
    if rnd is None or engine.state in ("idle", "shuffling", "deck_removed"):
        return None
    return engine.state, list(rnd.positions), bool(rnd.started)


def prepare_state_dir(state_dir: Path, table_id: str = "demo") -> str | None:
    """Before the demo's daemon starts: why it must not (a full disk, a journal file it
    cannot use), or None; what a crash left behind is put right and said on stderr."""
    journal = state_dir / "journal.sqlite"
    for problem in check_free_space("--state-dir", journal):
        if problem.severity == ERROR:
            return f"{problem.message} (--state-dir {state_dir})"
    try:
        for done in recover_at_start(journal, state_dir / SEALING_KEY_NAME):
            print(f"tablectl demo: {done}", file=sys.stderr)
        said = demo_sealing_keys(state_dir)
        demo_identity_key(state_dir, table_id)
    except (JournalError, SealingError, NoteError, OSError) as error:
        return str(error)
    if said is not None:
        print(f"tablectl demo: {said}", file=sys.stderr)
    return None


def resume_command(args: argparse.Namespace) -> str:
    """The exact command that goes on with this demo's table: its state dir and the options
    that make the table what it is (a resumed journal must be the same table), in the form the
    demo was started with (`make demo` sets MAKELEVEL in its commands' environment)."""
    words = ["--state-dir", str(args.state_dir)]
    if args.game != DEFAULT_GAME:
        words += ["--game", args.game]
    if getattr(args, "dealing", None):
        words += ["--dealing", args.dealing]
    if getattr(args, "dual_deck", False):
        words.append("--dual-deck")
    for driver in getattr(args, "driver", None) or []:
        words += ["--driver", driver]
    if getattr(args, "table_id", "demo") != "demo":
        words += ["--table", args.table_id]
    if getattr(args, "timezone", None):
        words += ["--timezone", args.timezone]
    if getattr(args, "metrics_listen", DEFAULT_LISTEN) != DEFAULT_LISTEN:
        words += ["--metrics-listen", args.metrics_listen]
    if os.environ.get("MAKELEVEL"):
        return f'make demo DEMO_ARGS="{shlex.join(words)}"'
    return shlex.join(["tablectl", "demo", *words])


def cannot_resume(config: TableConfig) -> str | None:
    """Why the state dir's journal cannot go on under this run's table, or None when it can.

    The daemon would refuse too, but in its log; the demo says it here, in a person's words,
    with the options that would resume it.
    """
    path = config.journal_path
    if not path.exists():
        return None
    try:
        first = next(iter(read_rows(path)), None)
    except JournalError as error:
        return f"{path} cannot be read ({error}): give a new --state-dir"
    if first is None or first.kind != "table" or first.body == config.table_dict():
        return None
    was = first.body
    options = was.get("options", {})
    resume = [f"--game {was.get('game')}"]
    if was.get("game") in ("five_card_hilo", "heads_up_holdem"):
        resume.append(f"--dealing {options.get('dealing')}")
        if options.get("dual_deck"):
            resume.append("--dual-deck")
    return (
        f"{path} was written for {was.get('game')} with {options}, but this run asks for "
        f"{config.game} with {dict(config.options)}: resume it with "
        f"{' '.join(resume)}, or give a new --state-dir"
    )


async def _play(
    args: argparse.Namespace,
    config: TableConfig,
    harness: SimulatedTableHarness,
    seed: int,
    options: Mapping[str, Any],
    interrupted: asyncio.Event,
    on_round: RoundCallback | None = None,
    lock: TableLock | None = None,
) -> int:
    """run_daemon over the simulated devices; the dealer plays once it is READY."""
    loop = asyncio.get_running_loop()
    feed = EventFeed()
    stop_daemon = asyncio.Event()
    ready: asyncio.Future[Daemon] = loop.create_future()
    fast = bool(getattr(args, "fast", False))
    # one line per step (the one-table demo at its pace), or one per round (--fast, floor)
    step_lines = not fast and bool(getattr(args, "step_lines", True))
    after_seq = last_seq(config.journal_path)
    if after_seq:
        print(f"resuming {config.journal_path} after its row {after_seq}", flush=True)

    def on_ready(daemon: Daemon) -> None:
        daemon.service.observers.append(feed.record)
        if step_lines:
            daemon.service.observers.append(
                StepPrinter(sys.stdout, lambda: daemon.service.status()["cards_dealt"])
            )
        ready.set_result(daemon)

    daemon_task = loop.create_task(
        run_daemon(
            config,
            stop=stop_daemon,
            usb_backend=harness.usb_backend,
            on_ready=on_ready,
            device_wait=DEVICE_WAIT,
            handle_signals=False,
            lock=lock,
        ),
        name="daemon",
    )
    interrupt = loop.create_task(interrupted.wait())
    starting: set[asyncio.Future[Any]] = {ready, daemon_task, interrupt}
    await asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        interrupt.cancel()
        stop_daemon.set()
        status = await daemon_task
        where = (
            "its log above"
            if getattr(args, "log_stderr", True)
            else f"its log {args.state_dir / 'daemon.log'}"
        )
        print(
            f"tablectl demo: the daemon did not start (exit {status}); {where} says why"
            + (
                f" ({config.journal_path} exists: a state dir of another game or options "
                "needs a new --state-dir)"
                if config.journal_path.exists()
                else ""
            ),
            file=sys.stderr,
        )
        return status or 1
    daemon = ready.result()
    absent = [name for name, driver in daemon.drivers.items() if not driver.up]
    print(f"metrics on http://{config.metrics_host}:{daemon.port}/metrics", flush=True)
    print(
        f"ready in {1000 * (daemon.ready_seconds or 0):.0f} ms: {len(daemon.drivers)} devices"
        + (f" (absent: {', '.join(absent)})" if absent else "")
        + f", journal {config.journal_path}, operator socket {config.operator_socket}",
        flush=True,
    )
    terminal = OperatorTerminal(config.operator_socket)
    status = 0
    try:
        if absent:
            raise DealerStuck(f"devices absent at start: {', '.join(absent)}")
        await terminal.open()
        dealer = AutoDealer(
            harness.table,
            game=args.game,
            options={**options, **config.options},
            operator=terminal.send,
            feed=feed,
            cables=harness.cables,
            rng=random.Random(seed),
            fault_rate=args.faults,
            fault_kinds=tuple(args.fault_kind or FAULTS),
            gaming_day_start=config.gaming_day_start,
            round_number=lambda: daemon.service.engine.round_number,
            pace=0.0 if fast else float(getattr(args, "pace", 0.0)),
            open_round=lambda: open_round(daemon.service.engine),
            status=lambda: daemon.service.engine.status(),
        )
        await dealer.resume()  # a round the journal left open (X1) is finished first
        played = 0
        while args.rounds is None or played < args.rounds:
            if step_lines:
                print(flush=True)  # the steps of each round as a paragraph of their own
            round_task = loop.create_task(dealer.play_round())
            done, _ = await asyncio.wait(
                {round_task, interrupt, daemon_task}, return_when=asyncio.FIRST_COMPLETED
            )
            if daemon_task in done:
                round_task.cancel()
                raise DealerStuck("the daemon stopped under the dealer")
            if round_task not in done:
                # interrupted: the round in play gets a moment to finish, then is abandoned
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(round_task), ROUND_GRACE)
                if not round_task.done():
                    round_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await round_task
                    break
            report = round_task.result()
            played += 1
            print(report.summary_line(), flush=True)
            if on_round is not None:
                await on_round(report, daemon)
            if interrupted.is_set():
                break
    except (DealerStuck, RuntimeError, OSError) as stuck:
        why = str(stuck).strip() or f"{type(stuck).__name__} without a message"
        if not getattr(args, "log_stderr", True):
            why += f" (the daemon's log: {args.state_dir / 'daemon.log'})"
        print(f"tablectl demo: the dealer is stuck: {why}", file=sys.stderr)
        status = 1
    finally:
        interrupt.cancel()
        await terminal.close()
        stop_daemon.set()
        daemon_status = await daemon_task
        status = status or daemon_status
    print(latency_summary(), flush=True)
    key_file = config.journal_path.parent / VERIFICATION_KEY_FILE
    since_ready = feed.mark()
    print(
        f"stopped after {since_ready} events since ready; journal {config.journal_path} "
        f'(tablectl journal verify {config.journal_path} --verify-key "$(cat {key_file})")',
        flush=True,
    )
    with contextlib.suppress(JournalError):
        summary = summarise(read_rows(config.journal_path), after_seq)
        for line in [*summary.lines(), summary.counts_explained(since_ready)]:
            print(line, flush=True)
    if not getattr(args, "floor", False):
        print(f"resume this table with: {resume_command(args)}", flush=True)
    return status
