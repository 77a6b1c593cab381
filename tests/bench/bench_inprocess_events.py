"""Device events per second through the in-process pairing (run by `make bench`; no assertions).

A simulated shoe draws cards one after another; each CARD_DRAWN frame goes through
the codec, the link layer (with its ACK) and the ReferenceShoe driver to the event
callback. This is the device layer's share of an in-process soak run.
Figures are printed and written to .bench/inprocess_events.json.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import structlog

from drivers.base import DriverSettings
from drivers.reference import ReferenceShoe
from simulators.cards import composition
from simulators.inprocess import InProcessTransport
from simulators.shoe import ShoeSim

EVENTS = 30000


async def measure(events: int = EVENTS) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sim = ShoeSim(seed=1)
    driver = ReferenceShoe(
        InProcessTransport(sim), settings=DriverSettings(heartbeat_interval=None)
    )
    seen = 0

    def on_event(event: dict[str, Any]) -> None:
        nonlocal seen
        if event["type"] == "card_drawn":
            seen += 1

    await driver.start(loop, on_event)
    assert await driver.wait_connected(5)
    start = time.perf_counter()
    for _ in range(events):
        if not sim.cards:
            sim.cards = composition(1)
        target = seen + 1
        sim.draw()
        while seen < target:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - start
    await driver.stop()
    return {
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_second": round(events / elapsed),
    }


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    result = asyncio.run(measure())
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    (out / "inprocess_events.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"in-process device events: {result['events_per_second']}/s ({result['events']} events)")


if __name__ == "__main__":
    main()
