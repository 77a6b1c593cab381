"""The host PINGs a device only after `heartbeat_interval` of silence from it.

Frames from the device move the silence's start without re-arming a timer per frame; the
timer, firing early, waits out the rest. Timing here is liveness only: the intervals are long
next to a loop cycle, and the checks count PINGs, never durations.
"""

from __future__ import annotations

import asyncio

from tablectl.drivers.base import DriverSettings
from tablectl.drivers.protocol.messages import Msg
from tablectl.drivers.reference import ReferenceShoe
from tablectl.simulators.cards import composition
from tablectl.simulators.inprocess import InProcessTransport
from tablectl.simulators.shoe import ShoeSim

INTERVAL = 0.1


def _counting_pings(sim: ShoeSim) -> list[float]:
    pings: list[float] = []
    dispatch = sim._dispatch

    def counting(frame):  # type: ignore[no-untyped-def]
        if frame.type == Msg.PING:
            pings.append(asyncio.get_running_loop().time())
        dispatch(frame)

    sim._dispatch = counting  # type: ignore[method-assign]
    return pings


def test_no_ping_while_the_device_talks_and_one_per_interval_of_silence() -> None:
    async def go() -> None:
        sim = ShoeSim(seed=3)
        pings = _counting_pings(sim)
        driver = ReferenceShoe(
            InProcessTransport(sim), settings=DriverSettings(heartbeat_interval=INTERVAL)
        )
        await driver.start(asyncio.get_running_loop(), lambda event: None)
        assert await driver.wait_connected(2)
        sim.cards = composition(1)
        for _ in range(12):  # a card every INTERVAL/4: never silent for an interval
            sim.draw()
            await asyncio.sleep(INTERVAL / 4)
        assert pings == []
        quiet_from = driver._last_heard  # the last card's frame
        await asyncio.sleep(INTERVAL * 3.5)  # silence: a PING per interval (ACKed, not frames)
        assert 2 <= len(pings) <= 4
        assert pings[0] - quiet_from >= INTERVAL * 0.9
        await driver.stop()

    asyncio.run(go())
