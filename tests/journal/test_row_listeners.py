"""Journal.row_listeners: each row told as it is appended is the row as it reads back.

The floor's per-round summaries are counted from what the listeners are told
(floor/summary.TableSummaries) and checked only by the chain link of the row after each span:
the told row must be the stored row, column for column, body for body (nonce kept apart as
parse_row keeps it), in seq order, seals included."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tablectl.controller.record.journal import Journal, JournalRow, parse_row


def test_each_row_told_is_the_row_as_it_reads_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    told: list[JournalRow] = []
    journal.row_listeners.append(told.append)
    journal.append("table", {"game": "five_card_hilo", "options": {"b": [1, 2], "a": "é"}})
    event = {"type": "card_drawn", "card": "AS", "time": "2026-03-02T10:00:00+00:00"}
    journal.append("event", event, round_number=1)
    journal.append("decision", {"decision": "accept", "rule_id": "D1"}, round_number=1)
    journal.append("seal", {"epoch": 1, "mac": "00"})
    journal.append("note", {"text": "x" * 300}, durable=True)
    journal.close()
    assert event == {"type": "card_drawn", "card": "AS", "time": "2026-03-02T10:00:00+00:00"}
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    stored = [
        parse_row(raw)
        for raw in db.execute(
            "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal ORDER BY seq"
        )
    ]
    db.close()
    assert told == stored
    assert [row.nonce is None for row in told] == [False, False, False, True, False]
    assert all("nonce" not in row.body for row in told)
