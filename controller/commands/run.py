"""`tablectl run --config FILE`: the table's daemon (what tablectl@TABLE.service starts)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tablectl.controller.config import ConfigError, load_config
from tablectl.controller.daemon import DEFAULT_DEVICE_WAIT, run_daemon
from tablectl.controller.logs import configure_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="the table's TOML configuration"
    )
    parser.add_argument(
        "--device-wait",
        type=float,
        default=DEFAULT_DEVICE_WAIT,
        metavar="SECONDS",
        help="how long to wait for every device's handshake before READY regardless "
        f"(default {DEFAULT_DEVICE_WAIT:g})",
    )
    parser.add_argument(
        "--accept-damaged-journal",
        action="store_true",
        help="start even when the journal fails its start check (exit 2 otherwise): the fact "
        "is journaled and an alarm raised (docs/journal.md)",
    )
    parser.add_argument(
        "--log-format",
        choices=("auto", "journald", "json", "console"),
        default="auto",
        help="log rendering (auto: journald under systemd, console on a terminal, else JSON)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{args.config}: {len(error.problems)} problem(s); not started", file=sys.stderr)
        return 2
    if args.device_wait < 0:
        print("tablectl run: --device-wait: must be 0 or more seconds", file=sys.stderr)
        return 2
    configure_logging(config.log_level, mode=args.log_format)
    return asyncio.run(
        run_daemon(
            config,
            device_wait=args.device_wait,
            accept_damaged_journal=args.accept_damaged_journal,
        )
    )
