"""`tablectl status`: the running table's public state in plain words (never a face-down card).

`--json` prints the machine form as the daemon sends it; `--watch` redraws every few seconds
until Ctrl-C (for a live view with alarms and acknowledgement, `tablectl watch`).

The exit status follows the monitoring plugins' convention, with or without `--json`, so a
script or a Nagios/Icinga check reads it as is: 0 healthy, 1 degraded (a device down or
faulted, a supervisor notification pending, dealing stopped or held), 2 the daemon stopped or
unreachable.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from tablectl.controller.commands.op import add_socket_arguments
from tablectl.controller.service.operator_client import OperatorClientError, default_socket, request
from tablectl.controller.service.status_words import UNREACHABLE, describe, health_line

#: ANSI: cursor home and clear the screen (the redraw of `--watch` on a terminal)
CLEAR = "\x1b[H\x1b[2J"


EXIT_STATUS = (
    "exit status (with or without --json; the monitoring plugins' convention): 0 healthy; "
    "1 degraded: a device down or faulted, a supervisor notification pending, dealing stopped "
    "or held; 2 the daemon stopped or unreachable"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXIT_STATUS
    add_socket_arguments(parser)
    parser.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until Ctrl-C",
    )


def run(args: argparse.Namespace) -> int:
    try:
        path = args.socket or default_socket(args.table)
    except OperatorClientError as error:
        print(f"tablectl status: {error}", file=sys.stderr)
        return 2
    if args.watch is None:
        return _once(path, args)
    if args.watch <= 0:
        print("tablectl status: --watch: SECONDS must be more than 0", file=sys.stderr)
        return 2
    try:
        while True:
            if sys.stdout.isatty():
                print(CLEAR, end="")
            now = datetime.datetime.now().strftime("%H:%M:%S")
            print(f"{now}, every {args.watch:g} s (Ctrl-C ends)", flush=True)
            _once(path, args)
            print(flush=True)
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0


def _once(path: str | Path, args: argparse.Namespace) -> int:
    try:
        reply = request(path, {"type": "status"}, timeout=args.timeout)
    except OperatorClientError as error:
        print(f"tablectl status: {error}", file=sys.stderr)
        return UNREACHABLE
    if reply.get("reply") != "status":
        print(f"tablectl status: {reply.get('reply')}: {reply.get('error')}", file=sys.stderr)
        return UNREACHABLE
    status: dict[str, Any] = reply.get("status", {})
    code, health = health_line(status)
    if args.json:
        print(json.dumps(status), flush=True)
    else:
        print("\n".join([*describe(status), health]), flush=True)
    return code
