"""The table service with the real engine: journal first, decisions, metrics, recovery."""

from __future__ import annotations

import asyncio
import datetime
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tablectl.controller.common.config import parse_config
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    Journal,
    read_rows,
    round_cards,
    verify_journal,
)
from tablectl.controller.service.service import ServiceError, TableService, open_service

CARDS = ["As", "Kd", "7h", "7c", "2s", "3c", "4d", "5h", "6s", "8c", "9d", "Th", "Js", "Qc", "Kh"]
SETUP = [
    {"type": "deck_received"},
    {"type": "shuffle_completed", "count": 52},
    {"type": "shoe_loaded"},
]


def config_for(tmp_path: Path, **options: Any):
    data = {
        "table": {
            "id": "t1",
            "game": "five_card_hilo",
            "options": {"dealing": "manual_shoe", **options},
        },
        "journal": {"path": str(tmp_path / "state" / "journal.sqlite")},
        "devices": {
            "shoe": {
                "kind": "shoe",
                "driver": "reference",
                "allowed_serials": ["S1"],
                "allowed_firmware_sha256": ["ab" * 32],
                "transport": {"type": "serial", "port": "/dev/null"},
            }
        },
    }
    return parse_config(data, "test.toml")


def fixed_clock() -> datetime.datetime:
    return datetime.datetime(2026, 11, 21, 14, 30, 0)


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def committed(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        db.close()


async def play(service: TableService, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decisions: list[dict[str, Any]] = []
    for event in events:
        source = (
            "device"
            if event["type"] in ("card_drawn", "shuffle_completed", "shoe_loaded")
            else "operator"
        )
        decisions += await service.handle_event(event, source=source)
    return decisions


ROUND = [
    {"type": "bets_closed", "positions": [1, 2]},
    *({"type": "card_drawn", "card": card} for card in CARDS),
    {"type": "deal_completed"},
    {"type": "hands_collected"},
]


def test_fresh_journal_gets_the_table_row_then_events_and_decisions(tmp_path):
    config = config_for(tmp_path)
    completed = sample("tablectl_rounds_total", {"game": "five_card_hilo", "outcome": "completed"})

    async def scenario() -> None:
        service = await open_service(config, clock=fixed_clock)
        await play(service, SETUP + ROUND)
        status = service.status()
        assert status["table"] == "t1" and status["devices"] == {"shoe": "down"}
        assert not any(card in str(status) for card in CARDS)
        service.close()

    asyncio.run(scenario())
    rows = list(read_rows(config.journal_path))
    assert rows[0].kind == "table" and rows[0].body == config.table_dict()
    events = [row for row in rows if row.kind == "event"]
    assert events[0].body == {"type": "deck_received", "time": "2026-11-21T14:30:00.000000"}
    assert verify_journal(config.journal_path).ok
    assert [c["card"] for c in round_cards(config.journal_path, 1)] == CARDS
    assert (
        sample("tablectl_rounds_total", {"game": "five_card_hilo", "outcome": "completed"})
        == completed + 1
    )


def test_operator_events_are_durable_before_the_reply(tmp_path):
    config = config_for(tmp_path)

    async def scenario() -> None:
        journal = Journal(config.journal_path, max_batch=10_000, flush_interval=60)
        service = TableService(config, journal, clock=fixed_clock, group_commit=True)
        await service.start()
        await service.handle_event({"type": "shoe_loaded"}, source="device")
        assert committed(config.journal_path) < journal.last_seq, "group commit: still pending"
        await service.handle_operator_event({"type": "deck_received"})
        assert committed(config.journal_path) == journal.last_seq
        service.close()

    asyncio.run(scenario())


def test_device_commands_go_out_only_after_their_decision_is_durable(tmp_path):
    config = config_for(tmp_path)
    seen: list[tuple[str, int, int]] = []

    async def scenario() -> list[dict[str, Any]]:
        journal = Journal(config.journal_path, max_batch=10_000, flush_interval=60)
        service = TableService(config, journal, clock=fixed_clock, group_commit=True)
        await service.start()

        async def command(decision):
            seen.append((decision["decision"], committed(config.journal_path), journal.last_seq))

        service.device_commands = command
        await play(service, SETUP)
        decisions = await service.handle_event(
            {"type": "shuffler_fault", "fault": "jam", "device": "shuffler"}
        )
        service.close()
        return decisions

    faults = sample("tablectl_device_faults_total", {"device": "shuffler", "fault": "jam"})
    decisions = asyncio.run(scenario())
    assert "reshuffle" in [d["decision"] for d in decisions]  # C4
    assert [name for name, _, _ in seen] == ["reshuffle"]
    for _name, committed_rows, last_seq in seen:
        assert committed_rows == last_seq, "the command went out before its row was durable"
    assert sample("tablectl_device_faults_total", {"device": "shuffler", "fault": "jam"}) == (
        faults + 1
    )


def test_restart_replays_the_journal_and_the_engine_decides_on_the_open_round(tmp_path):
    config = config_for(tmp_path)

    async def first_life() -> tuple[int, str]:
        service = await open_service(config, clock=fixed_clock)
        await play(service, SETUP + ROUND[:6])  # bets closed, five cards out
        state = (service.engine.round_number, service.engine.state)
        service.journal.flush()
        return state  # no close(): the process "dies" here

    async def second_life() -> tuple[TableService, list[dict[str, Any]]]:
        journal = Journal(config.journal_path)
        service = TableService(config, journal, clock=fixed_clock)
        decisions = await service.start()
        return service, decisions

    round_number, _state = asyncio.run(first_life())
    service, decisions = asyncio.run(second_life())
    assert service.replayed_events == len(SETUP) + 6
    assert service.engine.round_number == round_number
    assert decisions and decisions[0]["rule_id"] == "X1"
    assert decisions[0]["decision"] in ("void_round", "continue_play")
    rows = list(read_rows(config.journal_path))
    assert rows[-len(decisions) - 1].body["type"] == "controller_restarted"
    service.close()
    assert verify_journal(config.journal_path).ok


def test_a_journal_of_another_table_refuses_to_start(tmp_path):
    asyncio.run(_start_and_close(config_for(tmp_path)))
    other = config_for(tmp_path, dual_deck=True)
    with pytest.raises(ServiceError, match="restore the configuration"):
        asyncio.run(_start_and_close(other))


async def _start_and_close(config) -> None:
    service = await open_service(config, clock=fixed_clock)
    service.close()


KILLED_SERVICE = """
import asyncio, sys, datetime
from tablectl.controller.common.config import parse_config
from tablectl.controller.common.logs import configure_logging
from tablectl.controller.service.service import open_service
configure_logging("info", mode="json")
config = parse_config(eval(sys.argv[1]), "test.toml")
events = eval(sys.argv[2])

async def main():
    service = await open_service(config)
    for event in events:
        await service.handle_event(event)
        print(service.journal.last_seq, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_kill_9_mid_round_loses_nothing_and_the_restart_decides(tmp_path):
    import subprocess
    import sys

    config = config_for(tmp_path)
    data = {
        "table": {"id": "t1", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
        "journal": {"path": str(config.journal_path)},
    }
    events = SETUP + ROUND[:8]
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_SERVICE, repr(data), repr(events)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    acknowledged = [int(process.stdout.readline()) for _ in events]
    process.kill()
    process.wait()
    rows = list(read_rows(config.journal_path))
    assert rows[-1].seq == acknowledged[-1], "every handled event and decision survived"
    assert [r.body["type"] for r in rows if r.kind == "event"] == [e["type"] for e in events]

    async def restart() -> None:
        service = await open_service(parse_config(data, "test.toml"))  # replays, then restarts
        service.close()

    asyncio.run(restart())
    rows = list(read_rows(config.journal_path))
    restarted = [r for r in rows if r.kind == "event" and r.body["type"] == "controller_restarted"]
    assert len(restarted) == 1
    after = [r.body for r in rows if r.seq > restarted[0].seq and r.kind == "decision"]
    assert after and after[0]["rule_id"] == "X1"
    assert verify_journal(config.journal_path).ok


def test_operator_socket_drives_the_service_and_status_hides_cards(tmp_path):
    import grp
    import json
    import os

    from tablectl.controller.service.operator import OperatorServer

    config = config_for(tmp_path)
    group = grp.getgrgid(os.getgid()).gr_name

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        service = await open_service(config, clock=fixed_clock)
        server = OperatorServer(
            tmp_path / "op.sock",
            allowed_group=group,
            handle_event=service.handle_operator_event,
            status=service.status,
        )
        service.publish = server.publish
        await server.start()
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "op.sock"))

        async def ask(message: dict[str, Any]) -> dict[str, Any]:
            writer.write((json.dumps(message) + "\n").encode())
            await writer.drain()
            while True:  # subscribed: pushed messages may come before the reply
                line = json.loads(await reader.readline())
                if "reply" in line:
                    return line

        assert await ask({"type": "subscribe"}) == {"reply": "subscribed", "protocol": 1}
        await play(service, SETUP)
        pushed = []
        while True:  # drain what SETUP pushed
            try:
                pushed.append(json.loads(await asyncio.wait_for(reader.readline(), 0.2)))
            except TimeoutError:
                break
        reply = await ask({"type": "bets_closed", "positions": [1, 2, 3, 4, 5, 6, 7, 8]})
        for card in CARDS[:4]:
            await service.handle_event({"type": "card_drawn", "card": card})
        status = await ask({"type": "status"})
        writer.close()
        await server.close()
        service.close()
        return reply, status, pushed

    reply, status, pushed = asyncio.run(scenario())
    assert any(m.get("message") == "state" for m in pushed)
    # C11: too many positions is rejected, nothing changes
    assert reply["reply"] == "decisions"
    assert [d["decision"] for d in reply["decisions"]] == ["rejected"]
    assert status["status"]["table"] == "t1"
    assert not any(card in json.dumps(status) for card in CARDS)


def test_replay_reproduces_every_journaled_decision(tmp_path):
    config = config_for(tmp_path)

    async def scenario() -> TableService:
        service = await open_service(config, clock=fixed_clock)
        await play(service, SETUP + ROUND + [{"type": "card_drawn", "card": "2c"}])
        service.close()
        again = await open_service(config, clock=fixed_clock)
        again.close()
        return again

    again = asyncio.run(scenario())
    assert again.replayed_events == len(SETUP + ROUND) + 1
    assert again.replay_divergences == []


def test_replay_reports_decisions_the_engine_no_longer_makes(tmp_path):
    config = config_for(tmp_path)

    async def scenario() -> TableService:
        service = await open_service(config, clock=fixed_clock)
        await play(service, SETUP)
        # a decision no engine would take for this event, as if an older version had decided
        service.journal.append("decision", {"decision": "void_round", "rule_id": "C5"})
        service.close()
        again = await open_service(config, clock=fixed_clock)
        again.close()
        return again

    again = asyncio.run(scenario())
    assert len(again.replay_divergences) == 1


def test_a_round_open_at_a_restart_is_counted_once_when_it_ends(tmp_path):
    """The round the process died in was never counted: after the restart it is, as voided."""
    config = config_for(tmp_path)
    labels = {"game": "five_card_hilo", "outcome": "voided"}
    completed = {"game": "five_card_hilo", "outcome": "completed"}

    async def scenario() -> None:
        service = await open_service(config, clock=fixed_clock)
        await play(service, SETUP + ROUND + SETUP + ROUND[:4])  # round 2 open, cards out
        service.close()  # as if killed: nothing in memory survives
        voided, done = (
            sample("tablectl_rounds_total", labels),
            sample("tablectl_rounds_total", completed),
        )
        restarted = await open_service(config, clock=fixed_clock)
        assert restarted.engine.round_number == 2
        await restarted.handle_event({"type": "hands_collected"}, source="operator")
        assert sample("tablectl_rounds_total", labels) == voided + 1
        assert sample("tablectl_rounds_total", completed) == done
        restarted.close()

    asyncio.run(scenario())


def test_a_journaled_random_draw_for_another_bound_refuses_to_start(tmp_path):
    """A1's computer-drawn start replays from the journal; a draw that does not fit the
    engine's request (another engine version's journal) stops the start with the row named,
    never feeds the engine a value outside its range."""
    config = config_for(tmp_path)
    data = {
        "table": {"id": "t1", "game": "asia_poker", "options": {"ap_start": "computer"}},
        "journal": {"path": str(config.journal_path)},
        "devices": {},
    }
    asia = parse_config(data, "test.toml")

    async def scenario() -> None:
        service = await open_service(asia, clock=fixed_clock, random_source=lambda n: n - 1)
        await play(service, [{"type": "shuffle_completed", "count": 53}])
        service.journal.append("note", {"type": RANDOM_DRAW, "bound": 3, "value": 2})
        await play(service, [{"type": "bets_closed", "positions": [1, 4]}])
        service.close()
        await _start_and_close(asia)

    with pytest.raises(ServiceError, match=r"row \d+: journaled random draw was for bound 3"):
        asyncio.run(scenario())


def test_state_is_pushed_only_to_someone_subscribed_and_decisions_always(
    tmp_path: Path,
) -> None:
    """After every event the state goes to subscribers; nobody subscribed, it is not even
    built. Decisions (alarms among them) are published whoever listens: they are counted."""
    config = config_for(tmp_path)

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        service = await open_service(config, clock=fixed_clock)
        published: list[dict[str, Any]] = []
        listening = [False]

        async def publish(message: Any) -> None:
            published.append(dict(message))

        service.publish = publish
        service.subscribed = lambda: listening[0]
        await play(service, SETUP)
        await service.handle_operator_event({"type": "bets_closed", "positions": [1, 2]})
        await service.handle_event({"type": "card_drawn", "card": CARDS[0]})
        alone = list(published)
        published.clear()
        listening[0] = True
        await service.handle_event({"type": "card_drawn", "card": CARDS[1]})
        # a face-up card draws a decision (C1): published with or without a subscriber
        listening[0] = False
        await service.handle_event({"type": "card_drawn", "card": CARDS[2], "face_up": True})
        service.close()
        return alone, published

    alone, then = asyncio.run(scenario())
    assert not any(m["message"] == "state" for m in alone)
    assert [m["message"] for m in then] == ["state", "decision"]
    assert then[0]["state"] == "dealing"
    assert then[1]["decision"] == "discard_card" and then[1]["rule_id"] == "C1"
