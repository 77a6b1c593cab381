"""H7 through the service: legal rounds of every game; no card in any log line or status."""

from __future__ import annotations

import asyncio
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import structlog

from tablectl.controller.common import logs
from tablectl.controller.common.config import parse_config
from tablectl.controller.engine import table as table_module
from tablectl.controller.service.service import open_service
from tablectl.simulators import roundgen

GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
CARD = re.compile(
    r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[cdhs](?![A-Za-z0-9])|(?<![A-Za-z])JK(?![A-Za-z])"
)


def play_logged(tmp_path: Path, game: str, seed: int) -> tuple[str, list[dict[str, Any]], int]:
    config = parse_config(
        {
            "table": {"id": "h7", "game": game},
            "journal": {"path": str(tmp_path / game / "journal.sqlite")},
        },
        "h7.toml",
    )
    spec = table_module.TableSpec.from_dict({"game": game, "options": dict(config.options)})
    events = roundgen.legal_stream(spec, random.Random(seed), 5)
    stream = io.StringIO()
    logs.configure_logging("debug", mode="json", stream=stream)

    async def run() -> list[dict[str, Any]]:
        service = await open_service(config)
        statuses = []
        for event in events:
            await service.handle_event(event)
            statuses.append(service.status())
        service.close()
        return statuses

    try:
        statuses = asyncio.run(run())
    finally:
        structlog.reset_defaults()
    cards_dealt = sum(1 for e in events if e["type"] == "card_drawn") + sum(
        len(e.get("cards", [])) for e in events if e["type"] == "stack_dispensed"
    )
    return stream.getvalue(), statuses, cards_dealt


@pytest.mark.parametrize("game", GAMES)
def test_no_card_reaches_a_log_line_or_the_status(tmp_path, game):
    output, statuses, cards_dealt = play_logged(tmp_path, game, seed=7)
    assert cards_dealt > 0, "the rounds must deal cards for this test to mean anything"
    lines = output.splitlines()
    assert lines, "the service logs"
    for line in lines:
        json.loads(line)
        assert not CARD.search(line), line
    for status in statuses:
        assert not CARD.search(json.dumps(status)), status


def test_the_log_follows_the_play_event_by_event(tmp_path):
    output, _statuses, _cards = play_logged(tmp_path, "five_card_hilo", seed=3)
    records = [json.loads(line) for line in output.splitlines()]
    drawn = [
        r
        for r in records
        if r["event"] == "event" and r["type"] in ("card_drawn", "stack_dispensed")
    ]
    assert drawn, "every event is logged (type only) at debug level"
    assert len([r for r in records if r["event"] == "round_ended"]) >= 4
