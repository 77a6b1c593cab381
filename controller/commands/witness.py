"""`tablectl witness setup-key|serve`: a witness for tables' journals, run by a regulator.

`setup-key` draws the witness's Ed25519 key (a C2SP cosignature/v1 key) and prints its public
key, which each table's `[witness]` configuration names. `serve` answers C2SP tlog-witness
`add-checkpoint` requests for the logs it is told of (each table's origin and public key, as
`tablectl journal setup-keys` printed them): it cosigns a checkpoint only when it extends the
last one it cosigned for that table (docs/journal.md, "The witness").
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import tomllib
from pathlib import Path

from tablectl.controller.common.config import parse_listen_address
from tablectl.controller.common.logs import configure_logging, get_logger
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    NoteError,
    Verifier,
    create_identity_key,
    load_identity_key,
)
from tablectl.controller.record.witness_state import WitnessError, WitnessState
from tablectl.controller.service.witness_server import WitnessHTTPServer

EXIT_CODES = """exit status:
  0  stopped cleanly (SIGTERM or SIGINT)
  1  failed while serving (its state could not be written: it answers nothing it cannot keep)
  2  refused to start: a bad key, log list or address (each problem named)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    setup = actions.add_parser(
        "setup-key", help="draw the witness's key; print the public key tables configure"
    )
    setup.add_argument("--key", required=True, metavar="KEYFILE", help="where to write it (0600)")
    setup.add_argument(
        "--name",
        required=True,
        metavar="NAME",
        help="the witness's name, e.g. regulator.example/witness1 (it names its cosignatures)",
    )
    setup.add_argument("--force", action="store_true", help="replace an existing key file")
    serve = actions.add_parser(
        "serve",
        help="cosign tables' checkpoints that extend what it cosigned (C2SP tlog-witness)",
    )
    serve.formatter_class = argparse.RawDescriptionHelpFormatter
    serve.epilog = EXIT_CODES
    serve.add_argument(
        "--state",
        required=True,
        metavar="DIR",
        help="the witness's state: what it cosigned for each table, and evidence/ of refusals",
    )
    serve.add_argument(
        "--listen", required=True, metavar="ADDR", help="HOST:PORT to serve on (port 0: any)"
    )
    serve.add_argument("--key", required=True, metavar="KEYFILE", help="from `witness setup-key`")
    serve.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="[ORIGIN=]VKEY",
        help="a table's log: its public key (`journal setup-keys` prints it; its name is the "
        "checkpoints' origin unless ORIGIN= says another); repeat for each table",
    )
    serve.add_argument(
        "--logs",
        metavar="FILE",
        help='a TOML file of tables: [[log]] origin = "..." key = "..." (with or instead of --log)',
    )
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def run(args: argparse.Namespace) -> int:
    if args.action == "setup-key":
        return _setup_key(args)
    return _serve(args)


def _setup_key(args: argparse.Namespace) -> int:
    path = Path(args.key)
    if path.exists() and not args.force:
        print(
            f"tablectl witness setup-key: {path} exists; --force draws a new key (the tables "
            "must then be configured with the new public key)",
            file=sys.stderr,
        )
        return 1
    try:
        key = create_identity_key(path, args.name, ALG_COSIGNATURE_V1)
    except NoteError as error:
        print(f"tablectl witness setup-key: {error}", file=sys.stderr)
        return 2
    print(key.vkey)
    print(
        f"The witness's public key is above; each table's [witness] configuration names it "
        f"(key = ...). Keep {path} on this machine only.",
        file=sys.stderr,
    )
    return 0


def known_logs(pairs: list[str], file: str | None) -> dict[str, Verifier]:
    """origin -> the table's verifier key, from --log ORIGIN=VKEY and --logs FILE; ValueError
    naming every bad entry."""
    entries: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for pair in pairs:
        try:  # a table's key alone: its name is its checkpoints' origin (C2SP convention)
            alone = Verifier.parse(pair)
        except NoteError:
            alone = None
        if alone is not None:
            entries.append((f"--log {alone.name}", alone.name, pair))
            continue
        origin, equals, vkey = pair.partition("=")
        if not equals or not origin or not vkey:
            problems.append(f"--log {pair!r}: expected VKEY or ORIGIN=VKEY")
            continue
        entries.append((f"--log {origin}", origin, vkey))
    if file is not None:
        try:
            with open(file, "rb") as handle:
                data = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{file}: cannot read the log list: {error}") from error
        logs = data.get("log", [])
        if not isinstance(logs, list) or set(data) - {"log"}:
            problems.append(f"{file}: expected only [[log]] tables (origin, key)")
            logs = []
        for index, entry in enumerate(logs):
            where = f"{file}: log[{index}]"
            if not isinstance(entry, dict) or set(entry) != {"origin", "key"}:
                problems.append(f'{where}: expected exactly origin = "..." and key = "..."')
                continue
            if not isinstance(entry["origin"], str) or not isinstance(entry["key"], str):
                problems.append(f"{where}: origin and key must be strings")
                continue
            entries.append((where, entry["origin"], entry["key"]))
    logs_by_origin: dict[str, Verifier] = {}
    for where, origin, vkey in entries:
        try:
            verifier = Verifier.parse(vkey)
        except NoteError as error:
            problems.append(f"{where}: {error}")
            continue
        if verifier.alg == ALG_COSIGNATURE_V1:
            problems.append(f"{where}: a witness's key, not a table's (type 0x04)")
        elif origin in logs_by_origin and logs_by_origin[origin] != verifier:
            problems.append(f"{where}: origin {origin!r} is given twice with different keys")
        else:
            logs_by_origin[origin] = verifier
    if problems:
        raise ValueError("\n".join(problems))
    if not logs_by_origin:
        raise ValueError("no log to witness: give --log ORIGIN=VKEY or --logs FILE")
    return logs_by_origin


def _serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    log = get_logger("witness")
    try:
        host, port = parse_listen_address(args.listen)
        key = load_identity_key(args.key)
        if key.alg != ALG_COSIGNATURE_V1:
            raise ValueError(f"{args.key}: not a witness key (draw one with `witness setup-key`)")
        logs = known_logs(args.log, args.logs)
    except (ValueError, NoteError) as error:
        print(f"tablectl witness serve: {error}", file=sys.stderr)
        return 2
    try:
        state = WitnessState(Path(args.state), logs, key)
    except WitnessError as error:
        print(f"tablectl witness serve: {error}", file=sys.stderr)
        return 2
    try:
        server = WitnessHTTPServer(state, host, port)
    except OSError as error:
        state.close()
        print(f"tablectl witness serve: cannot listen on {args.listen}: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    where = f"http://{host if ':' not in host else f'[{host}]'}:{server.port}"
    # One line on stdout a script (or a test) reads for the address; the rest is the log.
    print(f"witness {key.name} listening on {where} for {len(logs)} log(s); key {key.vkey}")
    sys.stdout.flush()
    log.info("witness_serving", url=where, logs=sorted(logs), key=key.vkey)
    while not stop.wait(1.0):
        if state.failure is not None:
            break
    server.close()
    state.close()
    if state.failure is not None:
        print(f"tablectl witness serve: {state.failure}", file=sys.stderr)
        return 1
    return 0
