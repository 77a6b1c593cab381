"""Retention without an archive: a closed segment is removed only once the floor store (a real
PostgreSQL, shipped to by the real shipper) confirms its rows; before that it is the only
copy and stays."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.record.journal import verify_journal
from tablectl.controller.record.journal_upkeep import apply_retention
from tests.floor.floorkit import FloorDb, unique_table_id, wait_for
from tests.journal.history import write_config
from tests.journal.test_clock_steps import _today, seven_closed_segments


@pytest.mark.long
def test_without_an_archive_only_what_the_floor_confirmed_is_removed(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "t")
    closed, _ = seven_closed_segments(config)
    live = config.parent / "journal.sqlite"
    table_id = unique_table_id()
    floor_db.provision(table_id)
    shipper = FloorShipper(table_id, live, floor_db.config(table_id), publish_metrics=False)
    live_day = _today() - datetime.timedelta(days=1)
    # nothing shipped: old enough, sealed and verified, but held nowhere else
    before = apply_retention(
        live, _today(), 3, None, live_day=live_day, floor_confirmed_seq=shipper.confirmed_seq
    )
    assert before.retired == [] and len(before.kept) == 5
    assert all("the floor store confirmed rows up to 0 only" in why for _, why in before.kept)
    shipper.start()
    try:
        last = verify_journal(config.parent).last_seq
        wait_for(lambda: shipper.confirmed_seq() == last, 30, "every segment shipped")
        after = apply_retention(
            live, _today(), 3, None, live_day=live_day, floor_confirmed_seq=shipper.confirmed_seq
        )
    finally:
        shipper.stop()
    assert [p.name for p, _ in after.retired] == [p.name for p in closed[:5]]
    assert all("floor store confirmed" in how for _, how in after.retired)
    assert sorted(config.parent.glob("journal-*.sqlite")) == closed[5:]
    kept = verify_journal(config.parent)
    assert kept.ok and "earlier segments archived" in kept.message
