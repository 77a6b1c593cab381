"""`tablectl conformance KIND --driver NAME [--port P]`: put a driver through every check.

Without ``--port`` the device is the driver's registered simulator on a pty; with it, the
device on that port (a real one), relayed through a pty the kit controls. Prints the report
(markdown table, or JSON), optionally writes it to ``--report FILE``; exit 0 when every check
passed or was skipped, 1 when one failed, 2 when the driver or simulator cannot be found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from tablectl.controller.commands.cli import add_old_option_name
from tablectl.drivers.base import DriverError
from tablectl.drivers.registry import DriverNotFound
from tablectl.drivers.usb_ids import DEVICE_KINDS
from tablectl.simulators.conformance.kit import MAX_RESPONSE_MS, resolve, run_conformance
from tablectl.simulators.registry import SimulatorNotFound


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=DEVICE_KINDS, help="the device kind the driver drives")
    parser.add_argument("--driver", required=True, help="a registered driver name, or module:Class")
    parser.add_argument("--port", help="a real device's serial port (default: its simulator)")
    parser.add_argument(
        "--simulator", help="the simulator to use (default: the one registered as the driver)"
    )
    parser.add_argument("--baudrate", type=int, help="serial line (default: the driver's own)")
    parser.add_argument("--parity", choices=("N", "E", "O", "M", "S"))
    parser.add_argument("--bytesize", type=int, choices=(5, 6, 7, 8))
    parser.add_argument("--stopbits", type=float, choices=(1, 1.5, 2))
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="real device: ask the person at it to deal, jam... (else those rows are skipped)",
    )
    parser.add_argument(
        "--max-response-ms",
        type=float,
        default=MAX_RESPONSE_MS,
        help=f"a command's slowest answer allowed (default {MAX_RESPONSE_MS:.0f})",
    )
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument(
        "--output", "-o", type=Path, metavar="FILE", help="also write the report to this file"
    )
    add_old_option_name(parser, "--report", "output", type=Path, metavar="FILE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulator and noise")


def run(args: argparse.Namespace) -> int:
    line = {
        key: value
        for key in ("baudrate", "parity", "bytesize", "stopbits")
        if (value := getattr(args, key)) is not None
    }
    if line.get("stopbits") in (1.0, 2.0):
        line["stopbits"] = int(line["stopbits"])
    try:
        target = resolve(args.kind, args.driver, args.port, args.simulator, line)
    except (DriverNotFound, SimulatorNotFound, DriverError) as error:
        print(f"tablectl conformance: {error}", file=sys.stderr)
        return 2

    def ask(text: str) -> None:
        print(f">>> {text}", file=sys.stderr, flush=True)

    report = asyncio.run(
        run_conformance(
            target,
            interactive=args.interactive,
            ask=ask,
            max_response_ms=args.max_response_ms,
            seed=args.seed,
        )
    )
    text = (
        json.dumps(report.as_dict(), indent=2) + "\n"
        if args.format == "json"
        else report.markdown()
    )
    sys.stdout.write(text)
    if args.output is not None:
        args.output.write_text(text)
    return 0 if report.passed else 1
