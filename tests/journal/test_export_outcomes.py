"""`tablectl journal export` never reports a round completed that ended without an outcome
(issue 22): completed only when its collection was taken, voided when a void was decided,
"no outcome" when a later round began with neither (journals written before issue 22)."""

from __future__ import annotations

import asyncio
import csv
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import parse_config
from tablectl.controller.record.export import export_records
from tablectl.controller.record.journal import Journal, read_rows
from tablectl.controller.service.service import open_service

T21 = {"type": "table", "game": "three_card_21", "options": {}}


def export_rounds(path: Path) -> list[dict[str, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "export", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [r for r in csv.DictReader(io.StringIO(done.stdout)) if r["record"] == "round"]


def at(minute: int) -> str:
    return f"2026-11-25T14:{minute:02d}:00"


def test_a_round_replaced_silently_in_an_old_journal_is_no_outcome_not_completed(tmp_path):
    """The issue's restart case as the journal before issue 22 holds it: round 1 open, the
    next bets_closed took no decision and the journal's rows went on as round 2."""
    path = tmp_path / "journal.sqlite"
    journal = Journal(path)
    rows: list[tuple[str, dict[str, Any], int]] = [
        ("table", T21, 0),
        ("event", {"type": "shoe_loaded", "time": at(0)}, 0),
        ("event", {"type": "card_drawn", "card": "Qd", "time": at(1)}, 0),
        ("decision", {"decision": "burn_card", "rule": "13:69F-2C.6(c)", "rule_id": "G2"}, 0),
        ("event", {"type": "bets_closed", "positions": [1, 2], "time": at(2)}, 0),
        ("event", {"type": "card_drawn", "card": "8d", "time": at(3)}, 1),
        ("event", {"type": "controller_restarted", "time": at(4)}, 1),
        ("decision", {"decision": "continue_play", "rule": "13:69F-2C.14(h)", "rule_id": "X1"}, 1),
        # the old engine: this bets_closed ended round 1 with no decision at all
        ("event", {"type": "bets_closed", "positions": [1], "time": at(5)}, 1),
        *(
            ("event", {"type": "card_drawn", "card": card, "time": at(6)}, 2)
            for card in ("2c", "Kh", "3c", "9d", "4c")
        ),
        ("event", {"type": "deal_completed", "time": at(7)}, 2),
        ("event", {"type": "bonus_settled", "time": at(7)}, 2),
        ("event", {"type": "dealer_turn", "time": at(8)}, 2),
        ("event", {"type": "hands_collected", "time": at(9)}, 2),
    ]
    for kind, body, round_number in rows:
        journal.append(kind, body, round_number=round_number)
    journal.close()
    rounds = export_rounds(path)
    assert [(r["round"], r["outcome"]) for r in rounds] == [("1", "no outcome"), ("2", "completed")]
    assert rounds[0]["time"]  # when the journal went on without it, never empty
    assert rounds[0]["outcome"] != "completed"


def config_for(tmp_path: Path) -> Any:
    return parse_config(
        {
            "table": {"id": "t1", "game": "five_card_hilo", "options": {}},
            "journal": {"path": str(tmp_path / "journal.sqlite")},
            "devices": {
                "shoe": {
                    "kind": "shoe",
                    "driver": "reference",
                    "allowed_serials": ["S1"],
                    "allowed_firmware_sha256": ["ab" * 32],
                    "transport": {"type": "serial", "port": "/dev/null"},
                }
            },
        },
        "test.toml",
    )


CARDS = ["As", "Kd", "7h", "7c", "2s", "3c", "4d", "5h", "6s", "8c", "9d", "Th", "Js", "Qc", "Kh"]


async def _hurried_dealer(tmp_path: Path) -> list[dict[str, Any]]:
    """The issue's hurried dealer at a real service, journal on disk, then a restart."""
    config = config_for(tmp_path)
    service = await open_service(config)
    said: list[dict[str, Any]] = []
    deal = [{"type": "card_drawn", "card": card} for card in CARDS]
    try:
        for event in [
            {"type": "shuffle_completed", "count": 52},
            {"type": "bets_closed", "positions": [1, 2]},
            deal[0],
            {"type": "bets_closed", "positions": [1, 2]},  # L1: refused, round 1 goes on
            *deal[1:4],
            {"type": "hands_collected"},  # L2: mid-deal: round 1 void
            {"type": "shuffle_completed", "count": 52},
            {"type": "bets_closed", "positions": [1, 2]},
            *deal[:3],
        ]:
            said += await service.handle_event(event, source="operator")
    finally:
        service.close()
    # the daemon restarts mid-round 2: the journal's round is the engine's; X1 voids it
    service = await open_service(config)
    try:
        said += await service.handle_event({"type": "shuffle_completed", "count": 52})
        said += await service.handle_event({"type": "bets_closed", "positions": [1]})
        for event in [*deal[3:13], {"type": "deal_completed"}, {"type": "hands_collected"}]:
            said += await service.handle_event(event, source="operator")
    finally:
        service.close()
    return said


def test_a_journal_written_now_has_only_completed_and_voided_rounds(tmp_path):
    asyncio.run(_hurried_dealer(tmp_path))
    ruled = [
        (row.body["decision"], row.body["rule_id"])
        for row in read_rows(tmp_path / "journal.sqlite")
        if row.kind == "decision"
    ]
    assert ("rejected", "L1") in ruled and ("void_round", "L2") in ruled
    assert ("void_round", "X1") in ruled
    rounds = [r for r in export_records(tmp_path / "journal.sqlite") if r["record"] == "round"]
    assert [(r["round"], r["outcome"]) for r in rounds] == [
        (1, "voided"),
        (2, "voided"),
        (3, "completed"),
    ]
    assert all(r["time"] for r in rounds)
