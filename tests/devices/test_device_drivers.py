"""Every reference driver against its simulator, and every fault.

Runs over each attachment in conftest.ATTACHMENTS (in-process; real pty and
pyusb backend when the transports are installed).
"""

from __future__ import annotations

import asyncio
import random
import subprocess

import pytest
from device_bench import bench
from prometheus_client import REGISTRY, generate_latest
from structlog.testing import capture_logs

from tablectl.drivers.base import AllowList, CommandRefused, DeviceTimeout, DeviceUnavailable
from tablectl.drivers.protocol.messages import Fault
from tablectl.drivers.reference import (
    ReferenceDiscardRack,
    ReferenceHoleCardReader,
    ReferenceShoe,
    ReferenceShuffler,
)
from tablectl.simulators.cards import composition
from tablectl.simulators.discard_rack import DiscardRackSim
from tablectl.simulators.hole_card_reader import HoleCardReaderSim
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim
from tablectl.simulators.table import SimulatedTable


def run(coro):
    return asyncio.run(coro)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# -- shuffler -----------------------------------------------------------------


def test_shuffler_shuffles_counts_and_never_sends_the_order(attachment):
    async def go():
        sim = ShufflerSim(seed=7, shuffle_seconds=0.05)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            await b.driver.start_shuffle("A")
            done = await b.wait_for("shuffle_completed")
            assert done == {
                "type": "shuffle_completed",
                "deck": "A",
                "count": 52,
                "device": "shuffler",
                "kind": "shuffler",
            }
            assert b.of_type("shuffle_started")[0]["deck"] == "A"
            assert [e["percent"] for e in b.of_type("shuffle_progress")] == [25, 50, 75]
            assert sorted(sim.cards) == sorted(composition(1)) and sim.cards != composition(1)
            # the shuffled order appears in no event
            for event in b.events:
                assert not {"card", "cards", "order"} & set(event)

    run(go())


def test_shuffler_seeded_shuffle_is_repeatable():
    async def shuffle(seed: int) -> list[str]:
        sim = ShufflerSim(seed=seed, shuffle_seconds=0.01)
        async with bench(sim, ReferenceShuffler) as b:
            await b.driver.start_shuffle()
            await b.wait_for("shuffle_completed")
            return list(sim.cards)

    assert run(shuffle(3)) == run(shuffle(3)) != run(shuffle(4))


def test_shuffler_lock_and_release_the_deck(attachment):
    async def go():
        sim = ShufflerSim(seed=1, shuffle_seconds=0.02)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            await b.driver.start_shuffle()
            await b.wait_for("shuffle_completed")
            await b.driver.lock_deck()
            await b.wait_for("deck_locked")
            with pytest.raises(RuntimeError, match="locked"):
                sim.take_deck()
            with pytest.raises(CommandRefused, match="WRONG_STATE"):
                await b.driver.start_shuffle()
            await b.driver.release_deck()
            await b.wait_for("deck_released")
            assert len(sim.take_deck()) == 52

    run(go())


@pytest.mark.parametrize("fault", [Fault.JAM, Fault.STOPPED, Fault.INCOMPLETE])
def test_shuffler_fault_mid_shuffle(attachment, fault):
    async def go():
        sim = ShufflerSim(seed=1, shuffle_seconds=0.1)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            sim.fault(fault)  # armed: strikes at the next shuffle's midpoint
            await b.driver.start_shuffle()
            event = await b.wait_for("shuffler_fault")
            assert event["fault"] == fault.name.lower()
            await b.settle(0.15)
            assert b.of_type("shuffle_completed") == []
            with pytest.raises(CommandRefused, match="faulted"):
                await b.driver.start_shuffle()
            sim.clear_fault()
            await b.driver.start_shuffle()
            await b.wait_for("shuffle_completed")

    run(go())


@pytest.mark.parametrize(
    ("fault", "count"), [("missing_card", 51), ("extra_card", 53), ("foreign_card", 53)]
)
def test_shuffler_count_shows_missing_extra_or_foreign_card(attachment, fault, count):
    async def go():
        sim = ShufflerSim(seed=2, shuffle_seconds=0.02)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            getattr(sim, fault)()
            await b.driver.start_shuffle()
            assert (await b.wait_for("shuffle_completed"))["count"] == count

    run(go())


def test_shuffler_door_and_empty_status(attachment):
    async def go():
        sim = ShufflerSim(seed=2, shuffle_seconds=0.02)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            first = await b.wait_for("shuffler_status")
            assert (first["door_open"], first["empty"]) == (False, False)
            sim.set_door(True)
            assert (await b.wait_for("shuffler_status", 2))["door_open"] is True
            with pytest.raises(CommandRefused, match="door open"):
                await b.driver.start_shuffle()

    run(go())


def test_batch_shuffler_reports_no_count():
    async def go():
        sim = ShufflerSim(seed=2, shuffle_seconds=0.02, counting=False)
        async with bench(sim, ReferenceShuffler) as b:
            await b.driver.start_shuffle()
            assert "count" not in await b.wait_for("shuffle_completed")

    run(go())


# -- shoe ---------------------------------------------------------------------


def test_manual_shoe_deals_the_loaded_order_with_face_up_flag(attachment):
    async def go():
        sim = ShoeSim(seed=3)
        async with bench(sim, ReferenceShoe, attachment) as b:
            order = composition(1)
            sim.load(order, deck="B")
            assert (await b.wait_for("shoe_loaded"))["deck"] == "B"
            sim.face_up_next()
            for _ in range(4):
                sim.draw()
            await b.wait_for("card_drawn", 4)
            drawn = b.of_type("card_drawn")
            assert [e["card"] for e in drawn] == order[:4]
            assert [e["face_up"] for e in drawn] == [True, False, False, False]

    run(go())


def test_automated_shoe_dispenses_stacks_and_reaches_the_cut_card(attachment):
    async def go():
        sim = ShoeSim(seed=4, automated=True, decks=6, stack_size=5, cut_card_after=10)
        async with bench(sim, ReferenceShoe, attachment) as b:
            sim.load()
            await b.wait_for("shoe_loaded")
            first = sim.cards[:10]
            sim.dispense()
            sim.dispense()
            await b.wait_for("stack_dispensed", 2)
            await b.wait_for("cut_card_reached")
            stacks = [e["cards"] for e in b.of_type("stack_dispensed")]
            assert stacks == [first[:5], first[5:]]
            assert b.events.index(b.of_type("cut_card_reached")[0]) > b.events.index(
                b.of_type("stack_dispensed")[1]
            )

    run(go())


def test_shoe_jam_mid_deal_and_lock(attachment):
    async def go():
        sim = ShoeSim(seed=5, automated=True)
        async with bench(sim, ReferenceShoe, attachment) as b:
            sim.load()
            sim.dispense()
            sim.jam()
            assert sim.dispense() is None
            assert (await b.wait_for("shoe_fault"))["fault"] == "jam"
            with pytest.raises(CommandRefused, match="jam"):
                await b.driver.unlock_dispensing()
            await b.driver.lock_dispensing()
            assert (await b.wait_for("dispensing_locked"))["locked"] is True
            sim.clear_fault()
            assert sim.dispense() is None  # locked: no card leaves the shoe
            await b.driver.unlock_dispensing()
            assert (await b.wait_for("dispensing_locked", 2))["locked"] is False
            assert sim.dispense() is not None
            await b.wait_for("stack_dispensed", 2)

    run(go())


def test_shoe_stop_fault(attachment):
    async def go():
        sim = ShoeSim(seed=5)
        async with bench(sim, ReferenceShoe, attachment) as b:
            sim.load()
            sim.stop()
            assert (await b.wait_for("shoe_fault"))["fault"] == "stopped"

    run(go())


def test_shoe_missing_extra_and_foreign_cards(attachment):
    async def go():
        sim = ShoeSim(seed=6)
        async with bench(sim, ReferenceShoe, attachment) as b:
            order = composition(1)
            sim.load(order)
            sim.missing_card()  # As is gone
            sim.draw()
            sim.extra_card()  # a duplicate comes next
            sim.draw()
            sim.foreign_card()  # a joker in a 52-card game
            sim.draw()
            await b.wait_for("card_drawn", 3)
            cards = [e["card"] for e in b.of_type("card_drawn")]
            assert cards[0] == order[1]
            assert cards[1] in order[2:]
            assert cards[2] == "JK"

    run(go())


def test_shoe_reports_running_empty(attachment):
    async def go():
        sim = ShoeSim(seed=6)
        async with bench(sim, ReferenceShoe, attachment) as b:
            sim.load(["As", "Kd"])
            for _ in range(3):
                sim.draw()
            assert (await b.wait_for("shoe_fault"))["fault"] == "empty"

    run(go())


# -- hole-card reader -----------------------------------------------------------


@pytest.mark.parametrize(
    ("up", "hole", "blackjack"), [("As", "Kd", True), ("Th", "Ac", True), ("As", "9d", False)]
)
def test_reader_answers_yes_or_no_only(attachment, up, hole, blackjack):
    async def go():
        sim = HoleCardReaderSim(seed=1, read_seconds=0.01)
        async with bench(sim, ReferenceHoleCardReader, attachment) as b:
            with capture_logs() as logs:
                sim.insert(up, hole)
                await b.wait_for("reader_inserted")
                result = await b.wait_for("reader_result")
            assert result == {
                "type": "reader_result",
                "blackjack": blackjack,
                "device": "hole_card_reader",
                "kind": "hole_card_reader",
            }
            assert f"'{hole}'" not in repr(b.events) and f"'{hole}'" not in repr(logs)

    run(go())


def test_reader_self_test_and_fault(attachment):
    async def go():
        sim = HoleCardReaderSim(seed=1, read_seconds=0.01, self_test_seconds=0.01)
        async with bench(sim, ReferenceHoleCardReader, attachment) as b:
            assert await b.driver.self_test() is True
            sim.fault()
            assert (await b.wait_for("reader_fault"))["fault"] == "sensor"
            assert await b.driver.self_test() is False
            sim.insert("As", "Kd")
            await b.wait_for("reader_fault", 2)
            assert b.of_type("reader_result") == []

    run(go())


# -- discard rack ---------------------------------------------------------------


def test_rack_fills_as_rounds_end_and_clears(attachment):
    async def go():
        sim = DiscardRackSim(seed=1, um_per_card=300, noise_um=100)
        async with bench(sim, ReferenceDiscardRack, attachment) as b:
            await b.wait_for("rack_level")  # reported at the handshake
            sim.add(20)
            sim.add(15)
            level = await b.wait_for("rack_level", 3)
            assert level["cards"] == 35 and level["um_per_card"] == 300
            assert abs(level["height_um"] - 35 * 300) <= 100
            assert await b.driver.read_level() == 35
            sim.clear()
            await b.wait_for("rack_cleared")
            assert (await b.wait_for("rack_level", 5))["cards"] == 0

    run(go())


# -- wire faults, health, identity -------------------------------------------------


def test_garbage_bytes_are_skipped_and_counted(attachment):
    async def go():
        sim = ShoeSim(seed=8)
        async with bench(sim, ReferenceShoe, attachment) as b:
            before = metric("tablectl_driver_errors_total", device="shoe", error="garbage")
            sim.load(composition(1))
            b.wire.garbage(b"\x00\xff noise \xa5 more noise")
            sim.draw()
            b.wire.garbage(bytes(range(256)))
            sim.draw()
            await b.wait_for("card_drawn", 2)
            assert [e["card"] for e in b.of_type("card_drawn")] == composition(1)[:2]
            after = metric("tablectl_driver_errors_total", device="shoe", error="garbage")
            assert after > before
            assert b.driver.up

    run(go())


def test_bad_crc_is_nakked_retransmitted_and_delivered_once(attachment):
    async def go():
        sim = ShoeSim(seed=9)
        async with bench(sim, ReferenceShoe, attachment) as b:
            before = metric("tablectl_driver_errors_total", device="shoe", error="crc")
            sim.load(composition(1))
            await b.wait_for("shoe_loaded")
            b.wire.bad_crc(2)
            sim.draw()
            await b.wait_for("card_drawn")
            await b.settle(0.1)
            assert [e["card"] for e in b.of_type("card_drawn")] == ["Ac"]
            assert metric("tablectl_driver_errors_total", device="shoe", error="crc") >= before + 1
            assert sim.link.retransmissions >= 1

    run(go())


def test_slow_answers_within_timeouts_still_work_and_too_slow_is_lost(attachment):
    async def go():
        sim = ShufflerSim(seed=1, shuffle_seconds=0.02)
        async with bench(sim, ReferenceShuffler, attachment) as b:
            b.wire.slow(0.03)  # below the 0.05 s ACK timeout
            await b.driver.start_shuffle()
            await b.wait_for("shuffle_completed")
            b.wire.slow(0.8)  # beyond every retransmission: the device is as good as gone
            with pytest.raises((DeviceTimeout, DeviceUnavailable)):
                await b.driver.start_shuffle()
            await b.wait_for("device_lost")
            b.wire.slow(0)
            await b.wait_for("device_connected", 2, timeout=4)

    run(go())


def test_silent_device_is_lost_then_reconnects_with_a_new_handshake(attachment):
    async def go():
        sim = ReaderFactory()
        async with bench(sim, ReferenceHoleCardReader, attachment) as b:
            b.wire.go_silent()
            lost = await b.wait_for("device_lost")
            assert lost == {
                "type": "device_lost",
                "device": "hole_card_reader",
                "kind": "hole_card_reader",
            }
            assert not b.driver.up
            b.wire.come_back()
            await b.wait_for("device_connected", 2)
            assert b.driver.up
            assert await b.driver.self_test() is True

    run(go())


def ReaderFactory() -> HoleCardReaderSim:
    return HoleCardReaderSim(seed=1, read_seconds=0.01, self_test_seconds=0.01)


def test_unplugged_device_is_lost_and_comes_back(attachment):
    async def go():
        sim = ShoeSim(seed=1)
        async with bench(sim, ReferenceShoe, attachment) as b:
            b.cable.unplug()
            await b.wait_for("device_lost")
            await b.settle(0.15)  # a few reconnection attempts fail meanwhile
            assert not b.driver.up
            assert b.driver.health["up"] is False
            assert b.driver.health["last_error"]  # the latest failed reconnection
            b.cable.replug()
            await b.wait_for("device_connected", 2)
            health = b.driver.health
            assert health["up"] and health["sessions"] == 2 and health["connected_at"]
            assert health["identity"]["serial"] == sim.identity.serial
            sim.load()
            await b.wait_for("shoe_loaded")

    run(go())


def test_device_not_on_the_allow_list_is_refused_with_an_alarm(attachment):
    async def go():
        sim = ShoeSim(seed=1, serial="ROGUE-1")
        allow = AllowList.of(serials=["SHOE-42"])
        async with bench(sim, ReferenceShoe, attachment, allow_list=allow, expect_up=False) as b:
            alarm = await b.wait_for("device_refused")
            assert "ROGUE-1" in alarm["reason"] and alarm["serial"] == "ROGUE-1"
            await b.settle(0.1)
            assert not b.driver.up
            assert b.of_type("device_connected") == []

    run(go())


def test_firmware_hash_not_allowed_is_refused(attachment):
    async def go():
        sim = ShoeSim(seed=1)
        allow = AllowList.of(serials=[sim.identity.serial], firmware_sha256=["ab" * 32])
        async with bench(sim, ReferenceShoe, attachment, allow_list=allow, expect_up=False) as b:
            alarm = await b.wait_for("device_refused")
            assert "firmware hash" in alarm["reason"]

    run(go())


def test_impostor_after_reconnect_is_refused(attachment):
    async def go():
        sim = ShufflerSim(seed=1)
        allow = AllowList.of(
            serials=[sim.identity.serial, "IMPOSTOR"],
            firmware_sha256=[sim.identity.firmware_sha256],
        )
        async with bench(sim, ReferenceShuffler, attachment, allow_list=allow) as b:
            genuine = b.driver.identity
            b.wire.go_silent()
            await b.wait_for("device_lost")
            sim.impersonate(serial="IMPOSTOR", firmware_sha256=genuine.firmware_sha256)
            b.wire.come_back()
            alarm = await b.wait_for("device_refused")
            assert "identity changed" in alarm["reason"]
            assert alarm["serial"] == "IMPOSTOR"
            assert not b.driver.up and b.driver.identity == genuine

    run(go())


def test_wrong_kind_is_refused():
    async def go():
        sim = DiscardRackSim(seed=1)
        async with bench(sim, ReferenceShoe, expect_up=False) as b:
            alarm = await b.wait_for("device_refused")
            assert "expected a shoe" in alarm["reason"]
            assert alarm["kind"] == "shoe" and alarm["claimed_kind"] == "discard_rack"

    run(go())


def test_no_common_protocol_version_is_refused():
    async def go():
        sim = ShoeSim(seed=1, versions=(2, 3))
        async with bench(sim, ReferenceShoe, expect_up=False) as b:
            alarm = await b.wait_for("device_refused")
            assert "protocol" in alarm["reason"]

    run(go())


def test_face_down_cards_never_reach_a_log_line():
    async def go():
        sim = ShoeSim(seed=11, automated=True)
        with capture_logs() as logs:
            async with bench(sim, ReferenceShoe) as b:
                sim.load()
                dealt = sim.cards[:20]
                for _ in range(4):
                    sim.dispense()
                await b.wait_for("stack_dispensed", 4)
        text = repr(logs)
        for card in set(dealt):
            assert f"'{card}'" not in text
        assert any(entry.get("card_count") == 5 for entry in logs)

    run(go())


def test_driver_metrics_count_frames_per_device():
    async def go():
        sim = DiscardRackSim(seed=1)
        before = metric("tablectl_driver_frames_received_total", device="discard_rack")
        async with bench(sim, ReferenceDiscardRack) as b:
            sim.add(10)
            await b.wait_for("rack_level", 2)
        assert metric("tablectl_driver_frames_received_total", device="discard_rack") >= before + 3

    run(go())


def test_every_card_arrives_exactly_once_in_order_through_line_faults(attachment):
    """Garbage, corrupted CRCs and slow stretches between draws: no card lost, doubled or moved."""

    async def go():
        sim = ShoeSim(seed=12, decks=2)
        async with bench(sim, ReferenceShoe, attachment) as b:
            sim.load()
            expected = list(sim.cards[:80])
            rng = random.Random(5)
            for i in range(80):
                fault = rng.random()
                if fault < 0.15:
                    b.wire.garbage(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))
                elif fault < 0.3:
                    b.wire.bad_crc()
                elif fault < 0.35:
                    b.wire.slow(0.005)
                elif fault < 0.4:
                    b.wire.slow(0)
                sim.draw()
                if i % 10 == 9:
                    await b.wait_for("card_drawn", i + 1, timeout=5)
            await b.wait_for("card_drawn", 80, timeout=5)
            await b.settle(0.2)
            assert [e["card"] for e in b.of_type("card_drawn")] == expected
            assert b.of_type("device_lost") == []

    run(go())


def test_cards_from_the_shuffler_are_dealt_by_the_shoe_and_fill_the_rack(attachment):
    """A simulated table: shuffle, release, the shuffled deck into the shoe, deal, collect."""

    async def go():
        table = SimulatedTable(seed=21, automated_shoe=True, shuffle_seconds=0.02)
        table.rack.noise_um = 0
        async with (
            bench(table.shuffler, ReferenceShuffler, attachment) as asd,
            bench(table.shoe, ReferenceShoe, attachment) as ads,
            bench(table.rack, ReferenceDiscardRack, attachment) as sensor,
        ):
            await asd.driver.start_shuffle()
            assert (await asd.wait_for("shuffle_completed"))["count"] == 52
            await asd.driver.release_deck()
            deck = list(table.shuffler.cards)
            table.shuffled_deck_to_shoe()
            for round_number in range(1, 4):
                for _ in range(3):  # two players and the dealer
                    table.dispense()
                await ads.wait_for("stack_dispensed", 3 * round_number)
                assert table.collect_round() == 15
                level = await sensor.wait_for("rack_level", 1 + round_number)
                assert level["cards"] == 15 * round_number
            dealt = [c for e in ads.of_type("stack_dispensed") for c in e["cards"]]
            assert dealt == deck[:45]
            table.cards_back_to_shuffler()
            await sensor.wait_for("rack_cleared")
            await asd.driver.start_shuffle()
            assert (await asd.wait_for("shuffle_completed", 2))["count"] == 52

    run(go())


class FlakyShoe(ReferenceShoe):
    """A driver with a bug in its first handshake, as a vendor's driver might have."""

    calls = 0

    async def open_session(self):
        FlakyShoe.calls += 1
        if FlakyShoe.calls == 1:
            raise RuntimeError("vendor bug")
        return await super().open_session()


def test_a_driver_bug_does_not_end_supervision():
    async def go():
        before = metric("tablectl_driver_errors_total", device="shoe", error="driver_error")
        async with bench(ShoeSim(seed=1), FlakyShoe) as b:
            assert b.driver.up and FlakyShoe.calls == 2
        assert metric("tablectl_driver_errors_total", device="shoe", error="driver_error") == (
            before + 1
        )

    run(go())


def test_driver_metrics_pass_promtool_and_carry_no_card(tmp_path):
    """The exposition of the driver metrics is valid, and labels name devices and errors only."""

    async def go():
        sim = ShoeSim(seed=31)
        async with bench(sim, ReferenceShoe) as b:
            sim.load(composition(1))
            b.wire.bad_crc()
            b.wire.garbage(b"\x00\x01")
            for _ in range(5):
                sim.draw()
            await b.wait_for("card_drawn", 5)

    run(go())
    exposition = generate_latest(REGISTRY).decode()
    driver_lines = [line for line in exposition.splitlines() if "tablectl_driver_" in line]
    assert any('error="crc"' in line for line in driver_lines)
    for card in composition(1):
        assert f'"{card}"' not in exposition
    for line in driver_lines:
        if not line.startswith("#") and "{" in line:
            labels = {
                pair.split("=")[0]
                for pair in line[line.index("{") + 1 : line.index("}")].split(",")
            }
            assert labels <= {"device", "error"}
    path = tmp_path / "metrics.txt"
    path.write_text("\n".join(driver_lines) + "\n")
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=path.read_text(), capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_versions_are_negotiated_to_the_highest_common_one():
    async def go():
        sim = ShoeSim(seed=1, versions=(1, 3))
        async with bench(sim, ReferenceShoe) as b:
            assert b.driver.protocol_version == 1

    run(go())


def test_a_multi_deck_shoe_places_its_cut_card_at_three_quarters():
    assert ShoeSim(decks=6).cut_card_after == 234
    assert ShoeSim(decks=1).cut_card_after is None
    assert ShoeSim(decks=6, cut_card_after=200).cut_card_after == 200
