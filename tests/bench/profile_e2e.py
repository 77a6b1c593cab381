"""Profile of one event end to end through the daemon (pyinstrument, the `bench` extra).

The rig of tests/bench/latency.py (run_daemon, a simulated manual shoe on a pty, durable
journal) deals cards under pyinstrument; the profile covers the event loop's whole wall time,
so the pty wake-up and the fsync show as what they are next to the daemon's own Python.

    python -m tests.bench.profile_e2e [--samples N] [--sync-off] [--html PATH] [--show-all]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from tablectl.controller.common.logs import configure_logging
from tests.bench.latency import DaemonRig


async def deal(samples: int, profile: bool, interval: float, sync_off: bool) -> tuple[str, str]:
    from pyinstrument import Profiler

    with tempfile.TemporaryDirectory(prefix="tablectl-profile-") as tmp:
        rig = DaemonRig(Path(tmp))
        await rig.start()
        if sync_off:  # the Python alone, without the disk's minute-to-minute noise
            assert rig.daemon is not None
            rig.daemon.service.journal._db.execute("PRAGMA synchronous=OFF")
        for _ in range(100):
            await rig.sample()
        profiler = Profiler(interval=interval, async_mode="disabled")
        profiler.start()
        for _ in range(samples):
            await rig.sample()
        profiler.stop()
        await rig.close()
    return profiler.output_text(unicode=True, show_all=profile), profiler.output_html()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile_e2e", description=__doc__)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--interval", type=float, default=0.0001, help="sampling seconds")
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML view here")
    parser.add_argument("--show-all", action="store_true", help="library frames too")
    parser.add_argument(
        "--sync-off",
        action="store_true",
        help="journal with synchronous=OFF: the Python's share without the fsync (never the "
        "daemon's setting; for reading the profile only)",
    )
    args = parser.parse_args(argv)
    with open("/dev/null", "w") as sink:
        configure_logging("info", mode="json", stream=sink)
        text, html = asyncio.run(deal(args.samples, args.show_all, args.interval, args.sync_off))
    print(text)
    if args.html is not None:
        args.html.write_text(html)
    return 0


if __name__ == "__main__":
    sys.exit(main())
