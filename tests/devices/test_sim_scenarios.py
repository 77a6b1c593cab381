"""Scenario files: parsing errors name the line; a run drives the simulator and its faults."""

from __future__ import annotations

import asyncio

import pytest
from device_bench import bench

from tablectl.drivers.reference import ReferenceShoe, ReferenceShuffler
from tablectl.simulators.scenario import Scenario, ScenarioError, Target
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"at": 0, "step": "fly"}', "x.jsonl:1: unknown step 'fly' for shoe"),
        ('\n# c\n{"at": -1, "step": "draw"}', "x.jsonl:3: 'at' must be a number"),
        ('{"at": 0, "step": "draw", "cnt": 2}', "x.jsonl:1: step 'draw' takes no argument 'cnt'"),
        ('{"at": 0, "step": "draw", "count": "2"}', "x.jsonl:1: draw.count has the wrong type"),
        ('{"at": 0, "step": "slow"}', "x.jsonl:1: step 'slow' needs 'seconds'"),
        ("[1, 2]", "x.jsonl:1: a step must be a JSON object"),
        ("{nope", "x.jsonl:1: not JSON"),
    ],
)
def test_bad_scenario_lines_are_named(text, message):
    with pytest.raises(ScenarioError) as err:
        Scenario.parse(text, "shoe", "x.jsonl")
    assert message in str(err.value)


def test_steps_of_another_kind_are_refused():
    with pytest.raises(ScenarioError, match="unknown step 'jam' for discard_rack"):
        Scenario.parse('{"at": 0, "step": "jam"}', "discard_rack", "s")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match=r"nothing\.jsonl: cannot read"):
        Scenario.load(tmp_path / "nothing.jsonl", "shoe")


def test_scenario_deals_with_faults_through_the_driver(tmp_path):
    path = tmp_path / "deal.jsonl"
    path.write_text(
        "# a deal with a face-up card, line noise, a bad CRC and a jam\n"
        '{"at": 0.00, "step": "load", "deck": "A"}\n'
        '{"at": 0.02, "step": "draw", "count": 2}\n'
        '{"at": 0.04, "step": "face_up"}\n'
        '{"at": 0.04, "step": "garbage", "bytes": 64}\n'
        '{"at": 0.05, "step": "bad_crc"}\n'
        '{"at": 0.06, "step": "draw"}\n'
        '{"at": 0.08, "step": "jam"}\n'
        '{"at": 0.09, "step": "draw"}\n'
    )
    scenario = Scenario.load(path, "shoe")

    async def go():
        sim = ShoeSim(seed=5)
        async with bench(sim, ReferenceShoe) as b:
            done = []
            await scenario.start(Target(sim, b.wire, b.cable), done.append)
            fault = await b.wait_for("shoe_fault")
            assert fault["fault"] == "jam"
            drawn = b.of_type("card_drawn")
            assert [e["face_up"] for e in drawn] == [False, False, True]
            assert len(done) == 8

    asyncio.run(go())


def test_scenario_disconnect_reconnect_and_impostor(tmp_path):
    text = (
        '{"at": 0.0, "step": "disconnect"}\n'
        '{"at": 0.3, "step": "impostor", "serial": "FAKE-9"}\n'
        '{"at": 0.3, "step": "reconnect"}\n'
    )
    scenario = Scenario.parse(text, "shuffler")

    async def go():
        sim = ShufflerSim(seed=1)
        async with bench(sim, ReferenceShuffler) as b:
            await scenario.start(Target(sim, b.wire, b.cable))
            await b.wait_for("device_lost")
            alarm = await b.wait_for("device_refused")
            assert alarm["serial"] == "FAKE-9" and "identity changed" in alarm["reason"]

    asyncio.run(go())


def test_scenario_mid_shuffle_jam():
    scenario = Scenario.parse('{"at": 0.05, "step": "jam"}', "shuffler")

    async def go():
        sim = ShufflerSim(seed=1, shuffle_seconds=0.2)
        async with bench(sim, ReferenceShuffler) as b:
            await b.driver.start_shuffle()
            await scenario.start(Target(sim, b.wire, b.cable))
            assert (await b.wait_for("shuffler_fault"))["fault"] == "jam"
            await asyncio.sleep(0.25)
            assert b.of_type("shuffle_completed") == []

    asyncio.run(go())
