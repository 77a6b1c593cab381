"""Every device kind has a fault event of its own, the discard rack's sensor included: in
the protocol (RACK_FAULT), the events (docs/events.md), the reference driver, the simulator's
hands, the conformance kit and the round engine (a fault kept until the sensor counts again).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tablectl.controller.engine.events import EVENT_TYPES
from tablectl.controller.service.status_words import degraded_reasons
from tablectl.drivers.base import FAULT_EVENTS, KIND_CLASSES
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import Frame
from tablectl.drivers.reference import FRAME_EVENTS
from tablectl.simulators.conformance import conformance

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "engine"))
from engine_helpers import ev, feed, table


def test_each_kind_has_its_fault_event_and_frame() -> None:
    assert set(FAULT_EVENTS) == set(KIND_CLASSES)
    frames = {
        "shuffler": m.Msg.SHUFFLER_FAULT,
        "shoe": m.Msg.SHOE_FAULT,
        "hole_card_reader": m.Msg.READER_FAULT,
        "discard_rack": m.Msg.RACK_FAULT,
    }
    for kind, event in FAULT_EVENTS.items():
        spec = EVENT_TYPES[event]
        assert spec.source == "device" and {f.name for f in spec.fields} >= {"fault", "detail"}
        payload = m.pack_fault(m.Fault.SENSOR, "blocked")
        decoded = FRAME_EVENTS[kind](Frame(type=int(frames[kind]), seq=1, payload=payload))
        assert decoded == (event, {"fault": "sensor", "detail": "blocked"}), kind


def test_the_conformance_kit_makes_the_rack_fail_and_sees_its_fault() -> None:
    report = conformance("discard_rack", "reference")
    assert report.passed, report.markdown()
    assert "| fault: rack_fault | PASS |" in report.markdown()


def test_the_engine_keeps_a_rack_fault_until_the_sensor_counts_again() -> None:
    engine = table("three_card_21")
    assert feed(engine, ev("rack_fault", fault="sensor", detail="blocked")) == []
    status = engine.status()
    assert status["device_faults"] == {"discard_rack": "sensor"}
    assert "discard_rack fault: sensor" in degraded_reasons({**status, "devices": {}})
    feed(engine, ev("rack_level", cards=0), start=3)
    assert "discard_rack" not in engine.status()["device_faults"]
