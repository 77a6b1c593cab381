"""The harness's progress check (tests/powercut/harness.py `PoweredTable.stalled`): a table
whose restarted daemon plays no whole round is a finding, however many cuts it then takes.
Its proof on a real table: the HILO stall (docs/journal.md), which the long run reports as
"made no progress" with the demo dealer's stub-count fix reverted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.powercut import harness
from tests.powercut.harness import PoweredTable

HOLDS = {"devices": {"shoe": False, "shuffler": False}, "holds": {}, "last_seq": 7, "round": 3}


def _table(tmp_path: Path, holds_lines: int) -> PoweredTable:
    table = PoweredTable("five_card_hilo", tmp_path)
    harness.TABLES.remove(table)  # no cut of it belongs in the session's tally
    table.acks.write_text('{"ack": "x", "source": "old", "type": "card_drawn"}\n')
    table.acks_offset = table.acks.stat().st_size  # the restarted daemon's records from here
    with open(table.acks, "a") as acks:
        for _ in range(holds_lines):
            acks.write(json.dumps(HOLDS, sort_keys=True) + "\n")
            acks.write('{"ack": "y", "source": "shoe", "type": "card_drawn"}\n')
    return table


def test_a_restarted_table_that_played_no_whole_round_is_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness, "PROGRESS_TIMEOUT", 0.2)
    stalled = _table(tmp_path, holds_lines=1).stalled(seq_at_start=7)
    assert stalled is not None and "made no progress" in stalled


def test_a_restarted_table_that_played_a_round_is_not(tmp_path: Path) -> None:
    assert _table(tmp_path, holds_lines=2).stalled(seq_at_start=7) is None
