"""The shuffle watch (Q1, Q2) in the table service: journaled decisions, metrics, and a
journal begun by a version without the watch goes on as written until its next gaming day."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from tablectl.controller.record.journal import Journal, read_rows
from tablectl.controller.service.service import open_service
from tests.daemon.test_service import CARDS, SETUP, config_for, fixed_clock, play, sample

# One round of five card hi-lo for two players (15 cards), then a shuffle that moved nothing.
ROUND = [
    {"type": "bets_closed", "positions": [1, 2]},
    *({"type": "card_drawn", "card": card} for card in CARDS),
    {"type": "deal_completed"},
    {"type": "hands_collected"},
]
UNSHUFFLED = [{"type": "shuffle_completed", "count": 52}, {"type": "shoe_loaded"}]


def test_an_unshuffled_deck_is_journaled_as_Q1_and_Q2_and_blocks_nothing(tmp_path: Path) -> None:
    config = config_for(tmp_path)

    async def scenario() -> list[dict]:
        service = await open_service(config, clock=fixed_clock)
        try:
            return await play(service, [*SETUP, *ROUND, *UNSHUFFLED, *ROUND, *UNSHUFFLED, *ROUND])
        finally:
            service.close()

    before = sample("tablectl_decisions_total", {"decision": "shuffle_suspect", "rule_id": "Q2"})
    decisions = asyncio.run(scenario())
    suspects = [d for d in decisions if d["decision"] == "shuffle_suspect"]
    assert {d["rule_id"] for d in suspects} == {"Q1", "Q2"}
    assert not any(d["decision"] == "deal_blocked" for d in decisions)  # it tells, never blocks
    after = sample("tablectl_decisions_total", {"decision": "shuffle_suspect", "rule_id": "Q2"})
    assert after > before
    journaled = [r.body for r in read_rows(config.journal_path) if r.kind == "decision"]
    assert [d for d in journaled if d["decision"] == "shuffle_suspect"]
    for d in suspects:
        text = str(d)
        assert not any(card in text.replace("'", " ").split() for card in CARDS), text


def test_a_journal_begun_without_the_watch_goes_on_and_watches_from_the_next_day(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path)
    assert "shuffle_integrity" in config.implied_options
    old = Journal(config.journal_path)  # as the version before the watch wrote it
    old.append("table", config.table_dict_as_stated(), durable=True)
    old.close()

    async def scenario() -> tuple[list[dict], list[dict], bool, bool]:
        service = await open_service(config, clock=fixed_clock)
        try:
            watching_before = service.engine.shuffle_watch is not None
            first = await play(service, [*SETUP, *ROUND, *UNSHUFFLED, *ROUND])
            service.roll_segment(datetime.date(2026, 11, 22), "2026-11-21")
            watching_after = service.engine.shuffle_watch is not None
            second = await play(service, [*UNSHUFFLED, *ROUND, *UNSHUFFLED, *ROUND])
            return first, second, watching_before, watching_after
        finally:
            service.close()

    first, second, before, after = asyncio.run(scenario())
    assert not before and after
    assert not [d for d in first if d["decision"] == "shuffle_suspect"]
    assert [d for d in second if d["decision"] == "shuffle_suspect"]
    table_rows = [r.body for r in read_rows(config.journal_path) if r.kind == "table"]
    assert table_rows == [config.table_dict()]  # the new segment's row is the configuration's


def test_a_changed_configuration_is_still_refused(tmp_path: Path) -> None:
    import pytest

    from tablectl.controller.service.service import ServiceError

    config = config_for(tmp_path)
    old = Journal(config.journal_path)
    old.append("table", config_for(tmp_path, dual_deck=True).table_dict_as_stated(), durable=True)
    old.close()

    async def start() -> None:
        service = await open_service(config, clock=fixed_clock)
        service.close()

    with pytest.raises(ServiceError, match="restore the configuration"):
        asyncio.run(start())
