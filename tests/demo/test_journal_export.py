"""`tablectl journal export`: CSV and JSON lines of a journal the demo wrote, checked against the
journal's own rows; no card of a round still in progress."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from demo_helpers import CARD_TOKEN, decisions, events, journal_rows, run_demo

from tablectl.controller.record.journal import Journal, hands_in_deal_order, round_cards


def export(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "export", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("export")
    result = run_demo(state, "--game", "three_card_21", "--rounds", "3", "--seed", "8")
    assert result.returncode == 0, result.stderr
    return state / "journal.sqlite"


def test_csv_holds_every_round_decision_and_fault_of_the_journal(journal: Path) -> None:
    result = export(journal, "--format", "csv")
    assert result.returncode == 0, result.stderr
    records = list(csv.DictReader(io.StringIO(result.stdout)))
    rows = journal_rows(journal)
    ruled = decisions(rows)
    assert [r["rule_id"] for r in records if r["record"] == "decision"] == [
        d["rule_id"] for d in ruled
    ]
    rounds = [r for r in records if r["record"] == "round"]
    assert len(rounds) == len(events(rows, "hands_collected")) == 3
    for record in rounds:
        number = int(record["round"])
        assert record["outcome"] == "completed" and record["gaming_day"]
        expected = "; ".join(
            f"{name}: {' '.join(card['card'] for card in hand)}"
            for name, hand in hands_in_deal_order(round_cards(journal, number))
        )
        assert record["cards"] == expected and CARD_TOKEN.search(record["cards"])


def test_jsonl_by_gaming_day_and_without_cards(journal: Path) -> None:
    day = json.loads(export(journal, "--format", "jsonl").stdout.splitlines()[-1])["gaming_day"]
    same = export(journal, "--format", "jsonl", "--gaming-day", day, "--no-cards")
    lines = [json.loads(line) for line in same.stdout.splitlines()]
    assert len([r for r in lines if r["record"] == "round"]) == 3
    assert all(r["cards"] == "" for r in lines)
    other = export(journal, "--format", "jsonl", "--gaming-day", "2001-01-01")
    assert other.returncode == 0 and other.stdout == ""
    bad = export(journal, "--gaming-day", "yesterday")
    assert bad.returncode == 2 and "'yesterday' is not a date" in bad.stderr


def test_a_round_in_progress_shows_no_card(journal: Path, tmp_path: Path) -> None:
    """The journal as it stands mid-deal of round 3 (its later rows cut off)."""
    copy = tmp_path / "journal.sqlite"
    rows = journal_rows(journal)
    third = [r.seq for r in rows if r.kind == "event" and r.body.get("type") == "bets_closed"][2]
    cut = Journal(copy)  # the journal is append-only: the same rows, up to mid-deal, anew
    for row in rows:
        if row.seq <= third + 4:
            cut.append(row.kind, row.body, round_number=row.round)
    cut.close()
    records = [json.loads(line) for line in export(copy, "--format", "jsonl").stdout.splitlines()]
    rounds = [r for r in records if r["record"] == "round"]
    assert [r["outcome"] for r in rounds] == ["completed", "completed", "in progress"]
    assert rounds[-1]["cards"] == "" and not CARD_TOKEN.search(json.dumps(rounds[-1]))
    assert rounds[0]["cards"]


def test_export_takes_the_journals_directory_as_verify_does(journal: Path, tmp_path: Path) -> None:
    from_file = export(journal, "--format", "jsonl")
    from_directory = export(journal.parent, "--format", "jsonl")
    assert from_directory.returncode == 0, from_directory.stderr
    assert from_directory.stdout == from_file.stdout and from_file.stdout
    empty = export(tmp_path, "--format", "jsonl")
    assert empty.returncode == 2
    assert empty.stderr.strip() == (
        f"tablectl journal: {tmp_path}: no journal segments (*.sqlite) here"
    )


def test_export_into_a_closed_pipe_stops_quietly(journal: Path) -> None:
    """`tablectl journal export J | head -1` once head has gone: no "Broken pipe", no traceback,
    the status of a SIGPIPE (the pipe's reader is closed before the export writes)."""
    import os

    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tablectl.controller", "journal", "export", str(journal),
             "--format", "jsonl"],
            stdout=writer, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert done.stderr == b""
    assert done.returncode == 141
