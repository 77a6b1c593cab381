"""`tablectl op EVENT [--field value ...]`: send one operator event to the running daemon."""

from __future__ import annotations

import argparse
import json
import sys

from tablectl.controller.operator_client import (
    OperatorClientError,
    default_socket,
    parse_fields,
    render_decision,
    request,
)


def add_socket_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH", help="the operator socket")
    where.add_argument(
        "--table", metavar="ID", help="the table id (/run/tablectl/ID/operator.sock)"
    )
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--json", action="store_true", help="print the daemon's reply as JSON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_socket_arguments(parser)
    parser.add_argument(
        "event", metavar="EVENT", help="an EVENTS.md operator event, e.g. bets_closed"
    )
    parser.add_argument(
        "fields",
        nargs=argparse.REMAINDER,
        metavar="--field value",
        help="the event's fields: --positions 1,2,4  --by alice  --hand_counts '{\"1\": 5}'",
    )


def run(args: argparse.Namespace) -> int:
    try:
        fields = parse_fields(args.fields)
    except ValueError as error:
        print(f"tablectl op: {error}", file=sys.stderr)
        return 2
    event = {"type": args.event, **fields}
    try:
        path = args.socket or default_socket(args.table)
        reply = request(path, event, timeout=args.timeout)
    except OperatorClientError as error:
        print(f"tablectl op: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reply))
    if reply.get("reply") != "decisions":
        print(f"tablectl op: {reply.get('reply')}: {reply.get('error')}", file=sys.stderr)
        return 1
    decisions = reply.get("decisions", [])
    if not args.json:
        for decision in decisions:
            print(render_decision(decision))
        if not decisions:
            print(f"{args.event}: accepted")
    return 1 if any(d.get("decision") == "rejected" for d in decisions) else 0
