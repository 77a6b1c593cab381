"""The demo's parts in-process: the summary line, the dealer's standing rule, the event feed,
the service's observer seam, and the demo's generated configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from demo_helpers import CARD_TOKEN

from tablectl.controller.common.config import parse_config
from tablectl.controller.record.journal import Journal
from tablectl.controller.service.service import TableService
from tablectl.simulators.autodealer import (
    FAULTS,
    AutoDealer,
    DealerStuck,
    EventFeed,
    HandledEvent,
    RoundReport,
    dealer_stands,
    expected_decision,
)
from tablectl.simulators.demo import GAME_OPTIONS, demo_config, demo_table_options
from tablectl.simulators.table import SimulatedTable


def test_summary_line_shows_rules_and_latency_but_no_card() -> None:
    handled = [
        HandledEvent({"type": "card_drawn", "card": "Ah", "face_up": True}, [], 0.0004, "device"),
        HandledEvent(
            {"type": "card_drawn", "card": "Kd"},
            [{"decision": "discard_card", "rule_id": "C1", "card": "Ah"}],
            0.0010,
            "device",
        ),
        HandledEvent({"type": "card_drawn", "card": "Qs"}, [], 0.0002, "device"),
        HandledEvent({"type": "reader_result", "blackjack": False}, [], 0.0003, "device"),
    ]
    report = RoundReport(7, "three_card_21", [1, 4], 12, ["face_up_card"], handled)
    line = report.summary_line()
    assert line.startswith("round    7 three_card_21")
    assert "completed" in line and "positions 1,4" in line and "C1:discard_card" in line
    assert "fault face_up_card" in line
    assert "p50 0.35ms" in line and "max 1.00ms" in line
    assert not CARD_TOKEN.search(line), line


def test_a_void_shows_as_the_rounds_outcome() -> None:
    voided = [{"decision": "void_round", "rule_id": "C5"}, {"decision": "reshuffle"}]
    report = RoundReport(1, "heads_up_holdem", handled=[HandledEvent({}, voided, 0.001, "device")])
    assert report.outcome == "voided"
    assert RoundReport(2, "asia_poker").outcome == "completed"


@pytest.mark.parametrize(
    ("cards", "hits_soft_17", "stands"),
    [
        (["Ts", "6h"], False, False),  # hard 16 draws
        (["Ts", "7h"], False, True),  # hard 17 stands
        (["As", "6h"], False, True),  # soft 17 stands
        (["As", "6h"], True, False),  # ... unless the table hits soft 17
        (["As", "7h"], True, True),  # soft 18 stands
        (["As", "5h", "Kc", "Ad"], False, True),  # 17 hard after the ace counts one
    ],
)
def test_dealer_stands_as_2c11_says(cards: list[str], hits_soft_17: bool, stands: bool) -> None:
    assert dealer_stands(cards, hits_soft_17) is stands


def test_the_feed_names_what_never_came() -> None:
    async def wait() -> None:
        await EventFeed().wait_for("shuffle_completed", since=0, timeout=0.05)

    with pytest.raises(DealerStuck, match="shuffle_completed"):
        asyncio.run(wait())


def test_the_feed_wakes_the_dealer_when_the_event_is_handled() -> None:
    async def scenario() -> HandledEvent:
        feed = EventFeed()
        waiter = asyncio.ensure_future(feed.wait_for("card_drawn", since=0, timeout=2))
        await asyncio.sleep(0)
        feed.record({"type": "shoe_loaded"}, [], 0.001, "device")
        feed.record({"type": "card_drawn", "card": "9c"}, [], 0.002, "device")
        return await waiter

    assert asyncio.run(scenario()).event["type"] == "card_drawn"


def test_unknown_fault_kinds_are_refused_by_name() -> None:
    async def build() -> None:
        AutoDealer(
            SimulatedTable(),
            game="five_card_hilo",
            options={},
            operator=None,  # type: ignore[arg-type]
            feed=EventFeed(),
            cables={},
            rng=__import__("random").Random(1),
            fault_kinds=("jam_everything",),
        )

    with pytest.raises(ValueError, match="jam_everything"):
        asyncio.run(build())
    assert expected_decision("unplug_shoe", "automated_shoe") == ("void_round", "C5")
    assert expected_decision("unplug_shoe", "manual_shoe") is None
    assert set(FAULTS) >= {"shuffler_jam", "face_up_card", "ads_jam", "unplug_rack"}


def test_the_service_tells_its_observers_what_the_journal_got(tmp_path: Path) -> None:
    config = parse_config(
        {
            "table": {"id": "t1", "game": "five_card_hilo", "options": {}},
            "journal": {"path": str(tmp_path / "journal.sqlite")},
        },
        "test.toml",
    )

    async def scenario() -> list[tuple[str, list[dict[str, object]], float, str]]:
        seen: list[tuple[str, list[dict[str, object]], float, str]] = []
        service = TableService(config, Journal(config.journal_path))
        service.observers.append(
            lambda event, decisions, seconds, source: seen.append(
                (str(event["type"]), decisions, seconds, source)
            )
        )
        await service.start()
        await service.handle_event({"type": "bets_closed", "positions": [9]}, source="operator")
        await service.handle_event({"type": "shuffle_started"})
        service.close()
        return seen

    seen = asyncio.run(scenario())
    assert [(kind, source) for kind, _, _, source in seen] == [
        ("bets_closed", "operator"),
        ("shuffle_started", "device"),
    ]
    assert seen[0][1][0]["decision"] == "rejected"  # C11: position 9 at a 7-position table
    assert all(seconds >= 0 for _, _, seconds, _ in seen)


@pytest.mark.parametrize("game", sorted(GAME_OPTIONS))
def test_the_demo_configuration_validates_like_a_file(game: str, tmp_path: Path) -> None:
    identities = {"shuffler": ("SIM-1", "ab" * 32), "shoe": ("SIM-2", "cd" * 32)}
    config = demo_config(
        game,
        demo_table_options(game),
        tmp_path,
        identities,
        {"shoe": (0x1209, 0x7A02)},
        "127.0.0.1:0",
    )
    assert config.game == game and config.journal_path == tmp_path / "journal.sqlite"
    transports = {d.name: d.transport.type for d in config.devices}
    assert transports == {"shuffler": "serial", "shoe": "usb"}
    shoe = next(d for d in config.devices if d.name == "shoe")
    assert shoe.allowed_serials == ("SIM-2",)


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    from tablectl.simulators.demo import histogram_quantile

    # cumulative buckets scraped from a 3C21 demo run (tablectl_event_processing_seconds)
    buckets = [
        (0.0001, 0.0),
        (0.00025, 3884.0),
        (0.0005, 7752.0),
        (0.001, 8247.0),
        (0.0025, 8410.0),
        (0.005, 8538.0),
        (0.01, 8551.0),
        (float("inf"), 8551.0),
    ]
    median = histogram_quantile(buckets, 0.5)
    p99 = histogram_quantile(buckets, 0.99)
    assert median is not None and p99 is not None
    assert 0.00025 < median < 0.0005 and median == pytest.approx(0.000275, rel=0.01)
    assert 0.0025 < p99 < 0.005 and p99 == pytest.approx(0.003584, rel=0.01)
    assert histogram_quantile([], 0.5) is None
    assert histogram_quantile([(0.1, 0.0), (float("inf"), 0.0)], 0.5) is None
    # everything above the last finite bucket: the answer is that bucket's bound
    assert histogram_quantile([(0.1, 0.0), (float("inf"), 5.0)], 0.5) == 0.1


def test_the_feed_forgets_old_rounds_but_keeps_its_marks() -> None:
    feed = EventFeed()
    for number in range(5):
        feed.record({"type": "card_drawn", "n": number}, [], 0.001, "device")
    mark = feed.mark()
    feed.forget_before(3)
    assert len(feed.handled) == 2 and feed.mark() == mark == 5
    assert [h.event["n"] for h in feed.since(4)] == [4]
    assert [h.event["n"] for h in feed.since(0)] == [3, 4]
    feed.record({"type": "shoe_loaded"}, [], 0.001, "device")

    async def wait() -> HandledEvent:
        return await feed.wait_for("shoe_loaded", since=mark, timeout=1)

    assert asyncio.run(wait()).event["type"] == "shoe_loaded"


def test_the_shuffler_button_starts_a_cycle_or_says_why_not() -> None:
    from tablectl.simulators.shuffler import ShufflerSim

    async def scenario() -> str:
        shuffler = ShufflerSim(shuffle_seconds=0.01)
        shuffler.press_start("A")
        await asyncio.sleep(0.05)
        assert shuffler.state == "ready" and shuffler.shuffles == 1
        shuffler.take_deck()
        with pytest.raises(RuntimeError, match="no cards in the shuffler"):
            shuffler.press_start()
        return shuffler.state

    assert asyncio.run(scenario()) == "idle"


def test_play_demo_calls_the_round_seam_with_the_running_daemon(tmp_path: Path) -> None:
    """on_plugged sees the simulated table before the daemon starts; on_round sees each
    round's report after its line is printed, while the daemon still serves its metrics."""
    import argparse
    import urllib.request

    from tablectl.simulators.demo import add_arguments, play_demo

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--game", "five_card_hilo", "--rounds", "2", "--seed", "3", "--fast"])
    args.state_dir = tmp_path
    plugged: list[object] = []
    rounds: list[tuple[int, int, bool]] = []

    async def on_round(report: RoundReport, daemon: object) -> None:
        port = daemon.port  # type: ignore[attr-defined]
        url = f"http://127.0.0.1:{port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
        engine = daemon.service.engine  # type: ignore[attr-defined]
        rounds.append((report.number, engine.round_number, b"tablectl_rounds_total" in text))

    status = asyncio.run(
        play_demo(
            args,
            3,
            "127.0.0.1",
            0,
            on_round=on_round,
            on_plugged=plugged.append,
            shuffle_seconds=0.01,
        )
    )
    assert status == 0
    assert len(plugged) == 1 and plugged[0].table.shuffler.shuffle_seconds == 0.01  # type: ignore[attr-defined]
    assert [(number, engine) for number, engine, _ in rounds] == [(1, 1), (2, 2)]
    assert all(served for _, _, served in rounds)
