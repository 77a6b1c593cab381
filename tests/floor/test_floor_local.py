"""The floor's reader of a table's journal after weeks of gaming days: which files it opens.

A journal of many closed segments, made by the journal's own roll-over (Journal.roll_over,
real files renamed `STEM-DAY-FIRSTSEQ.sqlite`, mode 0400). Every file LocalJournal opens is
counted by wrapping its one opener, `_connect`: the idle poll of a caught-up shipper must open
no closed segment, rows of an old day only their own segment, and rows cut locally still give
the earliest rows after the gap (the floor refuses it). The last test runs the real shipper
against a real PostgreSQL.
"""

from __future__ import annotations

import datetime
import os
import sqlite3
from pathlib import Path

import pytest

from tablectl.controller.floor import local
from tablectl.controller.floor.local import LocalJournal
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.record.journal import Journal, closed_segment_name
from tests.floor.floorkit import FloorDb, unique_table_id, wait_for

DAYS = 120  # four months of gaming days
ROWS_A_DAY = 5  # events a day, after the segment, table and checkpoint rows


def _day(index: int) -> str:
    return (datetime.date(2026, 1, 1) + datetime.timedelta(days=index)).isoformat()


def make_history(live: Path, days: int = DAYS) -> tuple[Journal, list[Path]]:
    """`days` closed segments and a live one, each as the roll-over leaves it; the journal
    stays open (the daemon's), its closed segments oldest first."""
    journal = Journal(live)
    journal.append("table", {"type": "table", "game": "five_card_hilo"}, durable=True)
    closed = []
    for index in range(days):
        for n in range(ROWS_A_DAY):
            journal.append("event", {"type": "card_drawn", "n": n}, round_number=index)
        first = journal.first_row()
        assert first is not None
        path = closed_segment_name(live, _day(index), first.seq)
        journal.roll_over(
            path,
            {"gaming_day": _day(index + 1)},
            [("table", {"type": "table", "game": "five_card_hilo"}), ("checkpoint", {})],
        )
        closed.append(path)
    journal.append("event", {"type": "card_drawn", "n": 0}, round_number=days, durable=True)
    return journal, closed


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file LocalJournal opens, in order."""
    paths: list[Path] = []
    real = local._connect

    def counting(path: Path) -> sqlite3.Connection:
        paths.append(Path(path))
        return real(path)

    monkeypatch.setattr(local, "_connect", counting)
    return paths


def seqs_of(path: Path) -> list[int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT seq FROM journal ORDER BY seq")]
    finally:
        db.close()


def test_a_caught_up_poll_opens_no_closed_segment(tmp_path: Path, opened: list[Path]) -> None:
    live = tmp_path / "journal.sqlite"
    journal, closed = make_history(live)
    assert len(closed) == DAYS
    reader = LocalJournal(live)
    last = reader.last_seq()
    assert last == journal.last_seq
    opened.clear()
    for _ in range(50):  # the shipper's wakes: every commit, every IDLE_WAKE_SECONDS
        assert reader.rows_after(last, 500) == []
    assert opened == [], f"{len(opened)} files opened by 50 idle polls"
    seq = journal.append("event", {"type": "card_drawn", "n": 1}, durable=True)
    assert [row["seq"] for row in reader.rows_after(last, 500)] == [seq]
    assert reader.hash_at(seq) == journal.last_hash
    assert opened == []
    reader.close()
    journal.close()


def test_rows_of_an_old_day_open_only_that_days_segment(tmp_path: Path, opened: list[Path]) -> None:
    """A floor that was away for months: each batch comes from the one segment holding it."""
    live = tmp_path / "journal.sqlite"
    journal, closed = make_history(live)
    reader = LocalJournal(live)
    old = closed[37]
    in_old = seqs_of(old)
    opened.clear()
    rows = reader.rows_after(in_old[1], 500)
    assert [row["seq"] for row in rows] == in_old[2:]
    assert {row["kind"] for row in rows} <= {"segment", "table", "checkpoint", "event"}
    assert opened == [live, old]  # the live file (kept open), then that segment alone
    opened.clear()
    first = reader.rows_after(0, 3)
    assert [row["seq"] for row in first] == [1, 2, 3]
    assert opened == [closed[0]]
    opened.clear()
    at_seam = reader.rows_after(in_old[-1], 500)  # the last row of a day: the next day's
    assert [row["seq"] for row in at_seam] == seqs_of(closed[38])
    assert opened == [closed[38]]
    opened.clear()
    db = sqlite3.connect(f"file:{old}?mode=ro", uri=True)
    expected = db.execute("SELECT hash FROM journal WHERE seq = ?", (in_old[3],)).fetchone()[0]
    db.close()
    assert reader.hash_at(in_old[3]) == expected
    assert opened == [old]
    reader.close()
    journal.close()


def test_rows_cut_locally_give_the_earliest_rows_after_the_gap(
    tmp_path: Path, opened: list[Path]
) -> None:
    """A day's segment gone (deleted by hand) and another's tail cut: the rows after the gap
    come back all the same, so the floor refuses the gap rather than wait forever."""
    live = tmp_path / "journal.sqlite"
    journal, closed = make_history(live, days=12)
    reader = LocalJournal(live)
    before_gone = seqs_of(closed[4])
    after_gone = seqs_of(closed[6])
    os.unlink(closed[5])
    rows = reader.rows_after(before_gone[-1], 500)
    assert [row["seq"] for row in rows] == after_gone
    cut = closed[8]
    kept = seqs_of(cut)[:3]
    os.chmod(cut, 0o600)
    db = sqlite3.connect(cut)
    db.execute("DROP TRIGGER journal_no_delete")
    db.execute("DELETE FROM journal WHERE seq > ?", (kept[-1],))
    db.commit()
    db.close()
    rows = reader.rows_after(kept[-1], 500)
    assert [row["seq"] for row in rows] == seqs_of(closed[9])
    assert reader.hash_at(kept[-1] + 1) is None
    reader.close()
    journal.close()


def test_a_roll_over_under_the_reader_is_followed(
    tmp_path: Path, opened: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live file renamed away under the reader's open connection: in the instant before
    its successor exists the reader finds nothing new (opening the segment just closed, no
    other), then it reads the new live file."""
    live = tmp_path / "journal.sqlite"
    journal, _ = make_history(live, days=30)
    reader = LocalJournal(live)
    last = reader.last_seq()
    assert reader.rows_after(last, 500) == []
    first = journal.first_row()
    assert first is not None
    closing = closed_segment_name(live, _day(30), first.seq)
    in_the_instant: list[object] = []
    begin_next = journal._open

    def begin_next_after_a_look() -> None:
        assert not live.exists() and closing.exists()
        opened.clear()
        in_the_instant.append(reader.rows_after(last, 500))
        in_the_instant.append(list(opened))
        begin_next()

    monkeypatch.setattr(journal, "_open", begin_next_after_a_look)
    journal.roll_over(closing, {"gaming_day": _day(31)}, [("checkpoint", {})])
    assert in_the_instant == [[], [closing]]
    opened.clear()
    rows = reader.rows_after(last, 500)
    assert [row["kind"] for row in rows] == ["segment", "checkpoint"]
    assert rows[0]["seq"] == last + 1
    assert opened == [live]  # the new live file, reopened
    reader.close()
    journal.close()


@pytest.mark.long  # make test stays under 10 minutes
def test_a_caught_up_shipper_opens_no_segment_while_it_idles(
    floor_db: FloorDb, tmp_path: Path, opened: list[Path]
) -> None:
    """The real shipper, caught up on a journal of many days, woken again and again."""
    table_id = unique_table_id()
    floor_db.provision(table_id)
    live = tmp_path / "journal.sqlite"
    journal, _ = make_history(live, days=60)
    shipper = FloorShipper(table_id, live, floor_db.config(table_id), publish_metrics=False)
    shipper.start()
    try:
        wait_for(lambda: shipper.acknowledged_seq == journal.last_seq, 30, "every day shipped")
        wait_for(lambda: shipper.state == "caught_up", 10, "caught up")
        opened.clear()
        for _ in range(10):  # each wake lingers a moment to gather a burst
            shipper.notify(journal.last_seq)
            wait_for(lambda: not shipper._wake.is_set(), 5, "the wake taken")
        wait_for(lambda: shipper.state == "caught_up", 10, "caught up again")
        assert opened == [], f"{len(opened)} files opened while idle"
        seq = journal.append("event", {"type": "card_drawn", "n": 9}, durable=True)
        shipper.notify(seq)
        wait_for(lambda: shipper.acknowledged_seq == seq, 10, "the new row shipped")
        assert opened == []
    finally:
        shipper.stop()
        journal.close()
    assert [row[0] for row in floor_db.floor_rows(table_id)] == list(range(1, seq + 1))
