"""A reader holding the live segment at the roll-over loses no row (issue 33, "unchecked
doubts": the roll-over deleted the WAL without checking that its checkpoint completed).

A reader's snapshot (the floor's shipper, the background walk, `journal verify`, a backup)
keeps SQLite from copying the WAL into the file; the roll-over then closed the file, deleted
its WAL and renamed it: the closed segment held none of the rows written since the file's last
checkpoint (0 of 40 here), and `journal verify` took the empty file for an archived one. Now
the roll-over is deferred, nothing changed, until the reader lets go.
"""

from __future__ import annotations

import asyncio
import datetime
import sqlite3
from pathlib import Path

import pytest

from tablectl.controller.record.journal import (
    Journal,
    SegmentBusy,
    closed_segment_name,
    read_rows,
    verify_journal,
)
from tablectl.controller.record.journal_upkeep import JournalUpkeep
from tests.journal.history import build_history, write_config
from tests.journal.test_segments import _service, moment


def _hold(live: Path) -> sqlite3.Connection:
    """Another connection in a read transaction: its snapshot is held until it ends."""
    reader = sqlite3.connect(live, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM journal").fetchone()
    return reader


def test_the_roll_over_waits_for_a_reader_and_then_closes_every_row(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    journal = Journal(live)
    for i in range(20):
        journal.append("event", {"type": "card", "i": i}, round_number=1)
    journal.flush()
    reader = _hold(live)
    for i in range(20):  # after the reader's snapshot: in the WAL only
        journal.append("event", {"type": "card", "i": 100 + i}, round_number=2)
    journal.flush()
    first = journal.first_row()
    assert first is not None
    closed = closed_segment_name(live, "2026-11-01", first.seq)
    with pytest.raises(SegmentBusy, match="a reader holds it"):
        journal.roll_over(closed, {"gaming_day": "2026-11-02"})
    assert not closed.exists()
    assert len(list(read_rows(live))) == 40  # nothing changed
    journal.append("event", {"type": "card", "i": 200}, round_number=3)  # still writable
    journal.flush()
    reader.execute("COMMIT")
    reader.close()
    journal.roll_over(closed, {"gaming_day": "2026-11-02"})
    journal.close()
    assert [row.seq for row in read_rows(closed)] == list(range(1, 42))
    verdict = verify_journal(tmp_path)
    assert verdict.ok and verdict.first_seq == 1, verdict.message


def test_the_upkeep_defers_the_roll_over_while_a_reader_holds_the_segment(tmp_path: Path) -> None:
    config_path = write_config(tmp_path / "t")
    build_history(config_path, 6)
    directory = config_path.parent
    first_day = datetime.date.today()
    tomorrow = first_day + datetime.timedelta(days=1)

    async def scenario() -> None:
        service = await _service(config_path)
        upkeep = JournalUpkeep(service, asyncio.Lock())
        upkeep.segment_day = first_day
        await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
        rows = service.journal.last_seq
        reader = _hold(service.journal.path)
        await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
        upkeep.step(moment(tomorrow))
        assert upkeep.segment_day == first_day, "rolled over under a reader"
        assert service.journal.failure is None
        assert not list(directory.glob("journal-*.sqlite"))
        reader.execute("COMMIT")
        reader.close()
        upkeep._roll_deferred_until = 0.0  # the retry's second has passed
        upkeep.step(moment(tomorrow))
        assert upkeep.segment_day == tomorrow
        (closed,) = directory.glob("journal-*.sqlite")
        assert max(row.seq for row in read_rows(closed)) > rows
        service.close()

    asyncio.run(scenario())
    assert verify_journal(directory).ok


def test_verify_refuses_a_closed_segment_that_holds_no_rows(tmp_path: Path) -> None:
    """What the old roll-over left under a reader: `journal verify` called it intact
    ("earlier segments archived")."""
    live = tmp_path / "journal.sqlite"
    journal = Journal(live)
    for i in range(5):
        journal.append("event", {"type": "card", "i": i}, round_number=1)
    journal.flush()
    first = journal.first_row()
    assert first is not None
    closed = closed_segment_name(live, "2026-11-01", first.seq)
    journal.roll_over(closed, {"gaming_day": "2026-11-02"})
    journal.close()
    assert verify_journal(tmp_path).ok
    closed.chmod(0o600)
    db = sqlite3.connect(closed)
    db.execute("DROP TRIGGER IF EXISTS journal_append_only")
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        db.execute(f"DROP TRIGGER {name}")
    db.execute("DELETE FROM journal")
    db.commit()
    db.close()
    verdict = verify_journal(tmp_path)
    assert not verdict.ok
    assert f"{closed.name} is a closed segment that holds no rows" in verdict.message
