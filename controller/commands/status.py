"""`tablectl status`: the running table's public state (never a face-down card)."""

from __future__ import annotations

import argparse
import json
import sys

from tablectl.controller.commands.op import add_socket_arguments
from tablectl.controller.operator_client import (
    OperatorClientError,
    default_socket,
    render_status,
    request,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_socket_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        path = args.socket or default_socket(args.table)
        reply = request(path, {"type": "status"}, timeout=args.timeout)
    except OperatorClientError as error:
        print(f"tablectl status: {error}", file=sys.stderr)
        return 2
    if reply.get("reply") != "status":
        print(f"tablectl status: {reply.get('reply')}: {reply.get('error')}", file=sys.stderr)
        return 1
    status = reply.get("status", {})
    print(json.dumps(status) if args.json else "\n".join(render_status(status)))
    return 0
