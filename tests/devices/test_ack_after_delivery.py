"""The host acknowledges a device frame right after delivering its event, in the same cycle.

The ACK's write is kept off the path from a frame to its event (and the journal behind it);
it must still go out before the loop waits for anything, long before the device retransmits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tablectl.drivers.base import DriverSettings
from tablectl.drivers.protocol.frame import OVERHEAD
from tablectl.drivers.reference import ReferenceShoe
from tablectl.simulators.cards import composition
from tablectl.simulators.inprocess import InProcessTransport
from tablectl.simulators.shoe import ShoeSim


def test_card_is_delivered_before_its_ack_and_acked_in_the_same_loop_cycle() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        sim = ShoeSim(seed=3)
        transport = InProcessTransport(sim)
        driver = ReferenceShoe(transport, settings=DriverSettings(heartbeat_interval=None))
        written_at_delivery: list[int] = []

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "card_drawn":
                written_at_delivery.append(transport.bytes_to_device)

        await driver.start(loop, on_event)
        assert await driver.wait_connected(2)
        sim.cards = composition(1)
        for _ in range(3):
            sim.draw()
            for _ in range(20):  # a few loop cycles: device write, host read, ACK back
                if not sim.link.idle:
                    await asyncio.sleep(0)
            assert sim.link.idle, "the device never got its ACK"
        assert len(written_at_delivery) == 3
        # each card's ACK (one empty frame) went out after the card was delivered
        assert transport.bytes_to_device - written_at_delivery[-1] == OVERHEAD
        assert sim.link.retransmissions == 0
        await driver.stop()

    asyncio.run(go())
