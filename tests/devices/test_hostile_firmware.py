"""Device firmware is untrusted: arbitrary frames from a device never break its driver.

Whatever message types and payloads a device sends after its handshake, the
driver raises nothing on the loop, emits only its kind's EVENTS.md events with
well-formed fields, and counts the rest as protocol errors.
"""

from __future__ import annotations

import asyncio
import re

from device_bench import bench
from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.drivers.base import ALARM_EVENTS, STATUS_EVENTS
from tablectl.drivers.protocol.messages import Msg
from tablectl.drivers.reference import REFERENCE_DRIVERS
from tablectl.simulators.scenario import SIMULATORS

CARD = re.compile(r"^(?:[A2-9TJQK][cdhs]|JK)$")
SESSION_EVENTS = {"device_connected", "device_lost", "device_refused"}
KIND_EVENTS = {
    "shuffler": {
        "shuffle_started",
        "shuffle_progress",
        "shuffle_completed",
        "shuffler_fault",
        "shuffler_status",
        "deck_locked",
        "deck_released",
    },
    "shoe": {
        "card_drawn",
        "stack_dispensed",
        "cut_card_reached",
        "shoe_loaded",
        "shoe_fault",
        "dispensing_locked",
    },
    "hole_card_reader": {"reader_inserted", "reader_result", "reader_fault", "reader_self_test"},
    # rack_fault: a fault it reports, or a frame it cannot decode; device_fault is kept for
    # journals written before the rack had a fault event of its own
    "discard_rack": {"rack_level", "rack_cleared", "rack_fault", "device_fault"},
}

frames = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([int(t) for t in Msg]), st.integers(0, 255)),
        st.binary(max_size=24),
    ),
    min_size=1,
    max_size=12,
)


@given(st.sampled_from(sorted(KIND_EVENTS)), frames)
@settings(max_examples=60, deadline=None)
def test_arbitrary_frames_never_break_the_driver(kind, sent):
    async def go():
        loop = asyncio.get_running_loop()
        failures: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: failures.append(context))
        sim = SIMULATORS[kind](seed=1)
        async with bench(sim, REFERENCE_DRIVERS[kind]) as b:
            for msg_type, payload in sent:
                if msg_type not in (Msg.ACK, Msg.NAK):
                    sim.send_frame(msg_type, payload)
            async with asyncio.timeout(3):  # every frame delivered and acknowledged
                while not sim.link.idle and sim.handshaken:
                    await asyncio.sleep(0.001)
        assert failures == []
        for event in b.events:
            assert event["type"] in KIND_EVENTS[kind] | SESSION_EVENTS
            assert event["device"] == kind and event["kind"] == kind
            if "card" in event:
                assert CARD.match(event["card"])
            if event["type"] == "stack_dispensed":
                assert all(CARD.match(card) for card in event["cards"])
            if event["type"] == "rack_level":
                assert isinstance(event["cards"], int) and event["um_per_card"] > 0

    asyncio.run(go())


def test_status_and_alarm_events_are_exactly_what_the_engine_does_not_take():
    events_md = {
        "shuffle_started",
        "shuffle_completed",
        "shuffler_fault",
        "card_drawn",
        "stack_dispensed",
        "cut_card_reached",
        "shoe_loaded",
        "shoe_fault",
        "reader_inserted",
        "reader_result",
        "reader_fault",
        "rack_level",
        "rack_cleared",  # the engine takes it as a rack level of 0
        "rack_fault",  # the engine takes it (R1: the round's reconciliation dropped)
        "device_lost",
        "device_connected",
    }
    emitted = set().union(*KIND_EVENTS.values()) | SESSION_EVENTS
    assert emitted - events_md == STATUS_EVENTS | ALARM_EVENTS
