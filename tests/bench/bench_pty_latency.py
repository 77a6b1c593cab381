"""Device frame on a pty -> EVENTS.md event on the loop (run by `make bench`; no assertions).

A simulated shoe draws a card: its CARD_DRAWN frame goes onto a real pseudo-terminal,
the host's SerialTransport (pyserial, ``loop.add_reader``) reads it, the reference
codec and link layer decode and acknowledge it, and the ReferenceShoe driver delivers
``card_drawn`` to its callback. The time from the draw to the callback is compared
with the frame's wire time at 115200 baud 8N1 (goal: median <= 0.2x, p99 <= 1x).
Figures are printed and written to .bench/pty_latency.json.
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from drivers.base import DriverSettings
from drivers.protocol import messages as m
from drivers.protocol.frame import OVERHEAD, wire_time
from drivers.reference import ReferenceShoe
from drivers.transport.serial import SerialTransport
from simulators.cards import composition
from simulators.pty import PtyAttachment
from simulators.shoe import ShoeSim

SAMPLES = 3000
WARMUP = 100


async def measure(samples: int = SAMPLES) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sim = ShoeSim(seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        attachment = PtyAttachment(sim, loop, link_path=Path(tmp) / "shoe")
        path = attachment.plug()
        driver = ReferenceShoe(
            SerialTransport(path), settings=DriverSettings(heartbeat_interval=None)
        )
        arrived: asyncio.Future[float] | None = None

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "card_drawn" and arrived is not None and not arrived.done():
                arrived.set_result(time.perf_counter())

        await driver.start(loop, on_event)
        assert await driver.wait_connected(5)
        latencies: list[float] = []
        for i in range(samples + WARMUP):
            if not sim.cards:
                sim.cards = composition(1)
            while not sim.link.idle:  # the previous frame's ACK is back
                await asyncio.sleep(0)
            arrived = loop.create_future()
            start = time.perf_counter()
            sim.draw()
            end = await arrived
            if i >= WARMUP:
                latencies.append(end - start)
        await driver.stop()
        attachment.close()
    frame_size = OVERHEAD + len(m.pack_card_drawn("As", False))
    wire = wire_time(frame_size, 115200)
    latencies.sort()
    median = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return {
        "samples": len(latencies),
        "frame_bytes": frame_size,
        "wire_time_us": round(wire * 1e6, 1),
        "median_us": round(median * 1e6, 1),
        "p99_us": round(p99 * 1e6, 1),
        "median_vs_wire": round(median / wire, 4),
        "p99_vs_wire": round(p99 / wire, 4),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": sys.version.split()[0],
    }


def main() -> None:
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    # the drivers log as the daemon does: JSON lines, every event at debug, to a file here
    with (out / "pty_latency.log").open("w") as log_file:
        structlog.configure(
            processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
            logger_factory=structlog.PrintLoggerFactory(log_file),
        )
        result = asyncio.run(measure())
    (out / "pty_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"pty frame -> driver event: median {result['median_us']} us "
        f"({result['median_vs_wire']}x wire), p99 {result['p99_us']} us "
        f"({result['p99_vs_wire']}x wire); wire time of the {result['frame_bytes']}-byte "
        f"frame at 115200 baud: {result['wire_time_us']} us ({result['samples']} samples)"
    )


if __name__ == "__main__":
    main()
