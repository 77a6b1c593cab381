"""The journal: SQLite WAL on disk, append-only, hash-chained, durable, private to its user."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.common import metrics
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    Journal,
    JournalError,
    hands_in_deal_order,
    read_rows,
    round_cards,
    verify_journal,
)

TABLE = {"type": "table", "game": "five_card_hilo", "options": {}}


def filled_journal(path: Path, events: int = 10) -> Path:
    with Journal(path) as journal:
        journal.append("table", TABLE)
        for index in range(events):
            journal.append(
                "event", {"type": "card_drawn", "card": "As", "n": index}, round_number=1
            )
            journal.append(
                "decision", {"decision": "continue_play", "rule_id": "C3"}, round_number=1
            )
    return path


def tamper(path: Path, *statements: str) -> None:
    """What an intruder with the sqlite3 shell would do: drop the triggers, then edit."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER journal_no_update")
    db.execute("DROP TRIGGER journal_no_delete")
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def committed_count(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    finally:
        db.close()


def test_rows_read_back_in_order_with_a_chain(tmp_path):
    path = filled_journal(tmp_path / "j.sqlite", events=3)
    rows = list(read_rows(path))
    assert [r.seq for r in rows] == list(range(1, 8))
    assert rows[0].body == TABLE
    assert rows[1].body == {"type": "card_drawn", "card": "As", "n": 0}
    assert rows[1].round == 1
    for before, after in itertools.pairwise(rows):
        assert after.prev_hash == before.hash
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_continues_the_chain(tmp_path):
    path = filled_journal(tmp_path / "j.sqlite", events=2)
    with Journal(path) as journal:
        assert journal.last_seq == 5
        assert journal.append("event", {"type": "hands_collected"}) == 6
    assert verify_journal(path).ok


def test_update_and_delete_refused_by_sqlite(tmp_path):
    path = filled_journal(tmp_path / "j.sqlite", events=1)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE journal SET body = '{}' WHERE seq = 2")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM journal WHERE seq = 2")


def test_verify_intact_exit_0(tmp_path, capsys):
    path = filled_journal(tmp_path / "j.sqlite")
    assert cli.main(["journal", "verify", str(path)]) == 0
    assert "intact: 21 rows" in capsys.readouterr().out


def test_verify_names_the_edited_row(tmp_path, capsys):
    path = filled_journal(tmp_path / "j.sqlite")
    tamper(
        path,
        """UPDATE journal SET body = '{"type":"card_drawn","card":"Kd","n":4}' WHERE seq = 10""",
    )
    assert cli.main(["journal", "verify", str(path)]) == 1
    assert "row 10 edited" in capsys.readouterr().err


def test_verify_names_the_deleted_row(tmp_path, capsys):
    path = filled_journal(tmp_path / "j.sqlite")
    tamper(path, "DELETE FROM journal WHERE seq = 7")
    assert cli.main(["journal", "verify", str(path)]) == 1
    assert "row 7 deleted" in capsys.readouterr().err


def test_verify_names_a_deleted_row_hidden_by_renumbering(tmp_path):
    path = filled_journal(tmp_path / "j.sqlite")
    # Delete row 7, renumber the rest down, and recompute nothing: the chain breaks at row 7.
    tamper(
        path,
        "DELETE FROM journal WHERE seq = 7",
        "UPDATE journal SET seq = -(seq - 1) WHERE seq > 7",
        "UPDATE journal SET seq = -seq WHERE seq < 0",
    )
    result = verify_journal(path)
    assert not result.ok
    assert result.first_bad_seq == 7


def test_verify_names_the_reordered_row(tmp_path, capsys):
    path = filled_journal(tmp_path / "j.sqlite")
    tamper(
        path,
        "UPDATE journal SET seq = -1 WHERE seq = 4",
        "UPDATE journal SET seq = 4 WHERE seq = 5",
        "UPDATE journal SET seq = 5 WHERE seq = -1",
    )
    assert cli.main(["journal", "verify", str(path)]) == 1
    assert "row 4 reordered: it holds row 5's content" in capsys.readouterr().err


def test_verify_a_file_that_is_not_a_journal(tmp_path, capsys):
    path = tmp_path / "x.sqlite"
    path.write_text("hello")
    assert cli.main(["journal", "verify", str(path)]) == 2
    assert "not a tablectl journal" in capsys.readouterr().err
    assert cli.main(["journal", "verify", str(tmp_path / "absent")]) == 2
    assert "no such journal file" in capsys.readouterr().err


def test_durable_append_is_committed_before_it_returns(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(path, max_batch=1000)
    journal.append("event", {"type": "shuffle_started"})
    assert committed_count(path) == 0, "a plain append waits for its group commit"
    journal.append("decision", {"decision": "reshuffle"}, durable=True)
    assert committed_count(path) == 2, "a durable append commits the batch with it"
    journal.close()


def test_group_commit_flushes_on_the_loop_timer(tmp_path):
    path = tmp_path / "j.sqlite"

    async def scenario() -> tuple[int, int]:
        journal = Journal(path, flush_interval=0.01, max_batch=1000)
        for index in range(50):
            journal.append("event", {"type": "rack_level", "cards": index})
        before = committed_count(path)
        await asyncio.sleep(0.1)
        after = committed_count(path)
        journal.close()
        return before, after

    before, after = asyncio.run(scenario())
    assert (before, after) == (0, 50)


def test_full_batch_commits_without_a_loop(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(path, max_batch=8)
    for index in range(8):
        journal.append("event", {"type": "rack_level", "cards": index})
    assert committed_count(path) == 8
    journal.close()


def test_commit_time_is_observed_in_the_histogram(tmp_path):
    def count() -> float:
        for metric in metrics.JOURNAL_WRITE_SECONDS.collect():
            for sample in metric.samples:
                if sample.name.endswith("_count"):
                    return sample.value
        raise AssertionError("no _count sample")

    before = count()
    with Journal(tmp_path / "j.sqlite") as journal:
        journal.append("event", {"type": "shuffle_started"}, durable=True)
    assert count() == before + 1


def test_files_are_private_to_the_service_user(tmp_path):
    old_umask = os.umask(0)
    try:
        path = tmp_path / "state" / "j.sqlite"
        journal = Journal(path)
        journal.append("event", {"type": "shuffle_started"}, durable=True)
        for name in ("j.sqlite", "j.sqlite-wal", "j.sqlite-shm"):
            mode = stat.S_IMODE((path.parent / name).stat().st_mode)
            assert mode == 0o600, f"{name} is {oct(mode)}"
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        journal.close()
    finally:
        os.umask(old_umask)


def test_a_loose_existing_file_is_tightened(tmp_path):
    path = filled_journal(tmp_path / "j.sqlite", events=1)
    os.chmod(path, 0o644)
    Journal(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


WRITER = """
import sys
from tablectl.controller.record.journal import Journal
from tablectl.controller.common.logs import configure_logging
configure_logging("info", mode="json")  # to stderr; stdout carries the acknowledged seqs
journal = Journal(sys.argv[1])
journal.append("table", {"type": "table", "game": "five_card_hilo", "options": {}}, durable=True)
n = 0
while True:
    n += 1
    seq = journal.append("event", {"type": "rack_level", "cards": n}, durable=(n % 3 == 0))
    if n % 3 == 0:
        print(seq, flush=True)
"""


def test_kill_9_loses_no_durable_row(tmp_path):
    path = tmp_path / "j.sqlite"
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    acknowledged = [int(process.stdout.readline()) for _ in range(200)]
    process.send_signal(signal.SIGKILL)
    process.wait()
    rows = list(read_rows(path))
    assert rows[-1].seq >= acknowledged[-1]
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert verify_journal(path).ok
    with Journal(path) as journal:  # the next start appends after whatever survived
        journal.append("note", {"type": "restarted"}, durable=True)
    assert verify_journal(path).ok


class CardRecordingEngine:
    """A minimal engine for reconstruction tests: rounds begin at bets_closed, cards follow."""

    def __init__(self, table: Mapping[str, Any], random_source: Callable[[int], int]) -> None:
        self.round_number = 0
        self.random_source = random_source
        self.cards: list[dict[str, Any]] = []
        self.start = 0

    def handle(self, event: Mapping[str, Any], at: int) -> list[Any]:
        if event["type"] == "bets_closed":
            self.round_number += 1
            self.cards = []
            self.start = self.random_source(7)
        elif event["type"] == "card_drawn":
            to = (len(self.cards) + self.start) % 2 + 1
            self.cards.append(
                {"card": event["card"], "to": to, "face_up": event.get("face_up", False)}
            )
        return []

    def dealt_cards(self) -> list[dict[str, Any]]:
        return list(self.cards)


def test_round_cards_replays_events_and_journaled_draws(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal(path) as journal:
        journal.append("table", TABLE)
        for round_cards_drawn, draw in ((["As", "Kd", "7h"], 0), (["2c", "3d", "4h", "5s"], 1)):
            journal.append("note", {"type": RANDOM_DRAW, "bound": 7, "value": draw})
            journal.append("event", {"type": "bets_closed", "positions": [1, 2]})
            for card in round_cards_drawn:
                journal.append("event", {"type": "card_drawn", "card": card})
                journal.append("decision", {"decision": "continue_play"})
        journal.append("event", {"type": "bets_closed", "positions": [1]})
        journal.append("note", {"type": RANDOM_DRAW, "bound": 7, "value": 0})
    cards = round_cards(path, 2, engine_factory=CardRecordingEngine)
    assert [c["card"] for c in cards] == ["2c", "3d", "4h", "5s"]
    assert [c["to"] for c in cards] == [2, 1, 2, 1]  # the journaled draw (1) shifted the start
    assert hands_in_deal_order(cards)[0] == ("position 2", [cards[0], cards[2]])
    with pytest.raises(JournalError, match="round 9 is not in the journal"):
        round_cards(path, 9, engine_factory=CardRecordingEngine)


def test_head_is_logged_at_open_and_close_as_an_outside_anchor(tmp_path):
    import io
    import json as json_module

    import structlog

    from tablectl.controller.common import logs

    stream = io.StringIO()
    logs.configure_logging("info", mode="json", stream=stream)
    try:
        path = filled_journal(tmp_path / "j.sqlite", events=1)
    finally:
        structlog.reset_defaults()
    records = [json_module.loads(line) for line in stream.getvalue().splitlines()]
    closed = [r for r in records if r["event"] == "journal_closed"][-1]
    last = list(read_rows(path))[-1]
    assert (closed["last_seq"], closed["head"]) == (last.seq, last.hash)


def test_the_documented_independent_check_accepts_a_journal_and_catches_an_edit(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "journal.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    path = filled_journal(tmp_path / "journal.sqlite", events=3)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(snippet, "docs/journal.md", "exec"), {})
        tamper(path, "UPDATE journal SET round = 9 WHERE seq = 3")
        with pytest.raises(AssertionError):
            exec(compile(snippet, "docs/journal.md", "exec"), {})
    finally:
        os.chdir(cwd)
