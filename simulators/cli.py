"""`tablectl sim KIND [--transport pty|usb] [--seed N] [--scenario FILE]`.

Starts one simulated device, attached to a new pseudo-terminal (the host opens
the printed path with pyserial) or to a simulated pyusb bus in this process,
prints one JSON line ``{"kind": ..., "port": ...}`` and serves until
interrupted (Ctrl-C or SIGTERM ends it with status 0). When a scenario pulls the
cable and plugs it back, a pty comes back under a new path (unless ``--link``
keeps a stable one), announced on another line with ``"replugged": true``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

from tablectl.drivers.usb_ids import DEVICE_KINDS, REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.registry import SimulatorNotFound, simulator_class
from tablectl.simulators.scenario import SIMULATORS, Pluggable, Scenario, ScenarioError, Target
from tablectl.simulators.shoe import ShoeSim


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=DEVICE_KINDS, help="the device kind to simulate")
    parser.add_argument("--transport", choices=("pty", "usb"), default="pty")
    parser.add_argument("--seed", type=int, default=0, help="seed of shuffles and noise")
    parser.add_argument("--scenario", metavar="FILE", help="JSON Lines of timed steps")
    parser.add_argument("--serial", help="the serial number the device reports")
    parser.add_argument(
        "--link", metavar="PATH", help="pty: keep a stable symlink to the pty at PATH"
    )
    parser.add_argument("--decks", type=int, default=1, help="shuffler, shoe: decks of 52")
    parser.add_argument(
        "--automated", action="store_true", help="shoe: an automated dealing shoe (stacks)"
    )
    parser.add_argument(
        "--driver",
        default="reference",
        help="whose device: a driver with a registered simulator (default: reference)",
    )


class PtyCable:
    """Unplug/replug of the pty; a replug makes a new pty, announced on a new JSON line."""

    def __init__(self, kind: str, attachment: Any) -> None:
        self.kind = kind
        self.attachment = attachment

    def unplug(self) -> None:
        self.attachment.unplug()

    def replug(self) -> None:
        port = self.attachment.replug()
        print(json.dumps({"kind": self.kind, "port": port, "replugged": True}), flush=True)


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> int:
    loop = asyncio.get_running_loop()
    scenario = Scenario.load(args.scenario, args.kind) if args.scenario else None
    kwargs: dict[str, Any] = {"seed": args.seed}
    if args.serial:
        kwargs["serial"] = args.serial
    if args.kind in ("shuffler", "shoe"):
        kwargs["decks"] = args.decks
    if args.kind == "shoe":
        kwargs["automated"] = args.automated
    sim = (
        SIMULATORS[args.kind]
        if args.driver == "reference"
        else simulator_class(args.kind, args.driver)
    )(**kwargs)
    if isinstance(sim, ShoeSim):
        sim.load()  # a shoe on the table holds a shuffled deck
    wire = FaultyWire(sim)
    cable: Pluggable
    port: Any
    closer: Any = None
    if args.transport == "pty":
        from tablectl.simulators.pty import PtyAttachment

        attachment = PtyAttachment(wire, loop, link_path=args.link)
        port = attachment.plug()
        cable, closer = PtyCable(args.kind, attachment), attachment.close
    elif args.driver != "reference":
        raise ValueError(f"the {args.driver} simulator is served on a pty only")
    else:
        from tablectl.simulators.harness import UsbCable
        from tablectl.simulators.usb_backend import SimulatedUsbBackend

        backend = SimulatedUsbBackend(loop)
        device = backend.add_reference_device(args.kind, sim.identity.serial, wire)
        port = {
            "vendor_id": f"0x{REFERENCE_VENDOR_ID:04x}",
            "product_id": f"0x{REFERENCE_PRODUCT_IDS[args.kind]:04x}",
            "serial": sim.identity.serial,
        }
        cable = UsbCable(backend, device)
    print(json.dumps({"kind": args.kind, "port": port}), flush=True)
    task = scenario.start(Target(sim, wire, cable)) if scenario is not None else None
    try:
        await stop.wait()
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if closer is not None:
            closer()
    return 0


def run(args: argparse.Namespace) -> int:
    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await serve(args, stop)

    try:
        return asyncio.run(main())
    except ScenarioError as bad:
        print(f"tablectl sim: {bad}", file=sys.stderr)
        return 2
    except SimulatorNotFound as missing:
        print(f"tablectl sim: {missing}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"tablectl sim: cannot start the {args.kind} simulator: {exc}", file=sys.stderr)
        return 1
