"""`tablectl probe KIND --port PATH`: who is on that port? `tablectl probe --list`: what is here?

``--list`` shows the serial ports and USB devices a registered driver matches, with the
configuration lines to paste (drivers.discovery).

Connects through the real driver and transport, handshakes, prints the
identity as JSON (kind, model, serial, firmware, firmware_sha256) and exits 0;
exits 1 with a clear message when nothing answers in time or the device is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

import structlog

from tablectl.drivers.base import DriverSettings
from tablectl.drivers.registry import DriverNotFound, create_driver, get_driver_class
from tablectl.drivers.usb_ids import DEVICE_KINDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", nargs="?", choices=DEVICE_KINDS, help="the device kind expected")
    parser.add_argument("--port", help="serial device path or pyserial URL")
    parser.add_argument(
        "--list",
        action="store_true",
        help="list serial ports and USB devices a registered driver matches, with config lines",
    )
    parser.add_argument("--driver", default="reference", help="driver name (default: reference)")
    parser.add_argument("--baudrate", type=int, default=None, help="default: the driver's")
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for the handshake"
    )


async def probe(args: argparse.Namespace) -> tuple[int, str]:
    from tablectl.drivers.transport.serial import SerialTransport

    # the serial line the driver's device uses (its manual), unless --baudrate says otherwise
    line = dict(get_driver_class(args.kind, args.driver).serial_defaults)
    if args.baudrate is not None:
        line["baudrate"] = args.baudrate
    transport = SerialTransport(args.port, **line)
    settings = DriverSettings(
        handshake_timeout=min(args.timeout, 1.0), heartbeat_interval=None, backoff_max=0.5
    )
    driver = create_driver(args.kind, args.driver, transport, name=args.kind, settings=settings)
    refusals: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "device_refused":
            refusals.append(event)

    await driver.start(asyncio.get_running_loop(), on_event)
    try:
        if await driver.wait_connected(args.timeout) and driver.identity is not None:
            return 0, json.dumps(driver.identity.as_dict())
    finally:
        await driver.stop()
    if refusals:
        return 1, f"tablectl probe: device on {args.port} refused: {refusals[-1]['reason']}"
    why = f" (last error: {driver.last_error})" if driver.last_error else ""
    return 1, f"tablectl probe: no {args.kind} answered on {args.port} within {args.timeout}s{why}"


def run(args: argparse.Namespace) -> int:
    if args.list:
        from tablectl.drivers.discovery import listing

        sys.stdout.write(listing())
        return 0
    if args.kind is None or args.port is None:
        print("tablectl probe: give KIND and --port PORT, or --list", file=sys.stderr)
        return 2
    # stdout carries only the identity; the outcome's message says what went wrong
    saved = structlog.get_config()
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
    )
    try:
        status, text = asyncio.run(probe(args))
    except (DriverNotFound, ValueError) as bad:
        print(f"tablectl probe: {bad}", file=sys.stderr)
        return 2
    finally:
        structlog.configure(**saved)
    print(text, file=sys.stdout if status == 0 else sys.stderr)
    return status
