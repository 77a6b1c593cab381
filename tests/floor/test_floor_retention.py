"""Retention without an archive: a closed segment is removed only once the floor store (a real
PostgreSQL, shipped to by the real shipper) says its rows are durable on two machines
(floor.durable_elsewhere: a synchronous standby flushed them, or the WAL archive holds them).
A floor's acknowledgement alone is one server's disk: before that the segment is the only
other copy and stays."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.floor.schema import SCHEMA, create_schema
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.record.journal import verify_journal
from tablectl.controller.record.journal_upkeep import apply_retention
from tablectl.simulators.pgserver import ThrowawayPostgres
from tests.floor.floorkit import FloorDb, unique_table_id, wait_for
from tests.journal.history import write_config
from tests.journal.test_clock_steps import _today, seven_closed_segments

LIVE_DAY = _today() - datetime.timedelta(days=1)


def _checked(floor_db: FloorDb, table_id: str) -> bool:
    with floor_db.admin() as conn:
        row = conn.execute(
            f"SELECT durable_checked_at IS NOT NULL FROM {SCHEMA}.tables WHERE table_id = %s",
            (table_id,),
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.long
def test_a_floors_acknowledgement_on_one_server_removes_nothing(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "t")
    closed, _ = seven_closed_segments(config)
    live = config.parent / "journal.sqlite"
    table_id = unique_table_id()
    floor_db.provision(table_id)
    shipper = FloorShipper(table_id, live, floor_db.config(table_id), publish_metrics=False)
    before = apply_retention(
        live, _today(), 3, None, live_day=LIVE_DAY, floor_confirmed_seq=shipper.confirmed_seq
    )
    assert before.retired == [] and len(before.kept) == 5
    shipper.start()
    try:
        last = verify_journal(config.parent).last_seq
        wait_for(lambda: shipper.acknowledged_seq == last, 30, "every segment shipped")
        wait_for(lambda: _checked(floor_db, table_id), 30, "the floor asked for durability")
        after = apply_retention(
            live, _today(), 3, None, live_day=LIVE_DAY, floor_confirmed_seq=shipper.confirmed_seq
        )
        status = shipper.status()
    finally:
        shipper.stop()
    # acknowledged, every row: but one server, no standby, no archive
    assert status["acknowledged_seq"] == last and status["durable_elsewhere_seq"] == 0
    assert after.retired == [] and len(after.kept) == 5
    assert all("durable on two machines" in why for _, why in after.kept), after.kept
    assert sorted(config.parent.glob("journal-*.sqlite")) == closed


@pytest.mark.long
def test_rows_the_wal_archive_holds_are_durable_elsewhere_and_only_then_removed(
    tmp_path: Path,
) -> None:
    server = ThrowawayPostgres(settings={"archive_mode": "on", "wal_level": "replica"})
    try:
        server.init()
        server.start()
        wal_archive = server.root / "wal-archive"
        wal_archive.mkdir()
        server._own(wal_archive)  # the server's user writes it
        name = f"floor_{uuid.uuid4().hex[:8]}"
        server.create_database(name)
        floor_db = FloorDb(server, name, tmp_path / "floor.pgpass")
        with floor_db.admin() as conn:
            create_schema(conn)
            conn.execute(f"ALTER SYSTEM SET archive_command = 'cp %p {wal_archive}/%f'")
            conn.execute("SELECT pg_reload_conf()")
        config = write_config(tmp_path / "t")
        closed, _ = seven_closed_segments(config)
        live = config.parent / "journal.sqlite"
        table_id = unique_table_id()
        floor_db.provision(table_id)
        shipper = FloorShipper(table_id, live, floor_db.config(table_id), publish_metrics=False)
        shipper.start()
        try:
            last = verify_journal(config.parent).last_seq
            wait_for(lambda: shipper.acknowledged_seq == last, 30, "every segment shipped")

            def archived() -> bool:
                with psycopg.connect(floor_db.admin_dsn, autocommit=True) as conn:
                    conn.execute("SELECT pg_switch_wal()")  # close the segment for the archiver
                return shipper.confirmed_seq() == last

            wait_for(archived, 60, "the WAL archive to hold the rows, and the floor to say so")
            after = apply_retention(
                live,
                _today(),
                3,
                None,
                live_day=LIVE_DAY,
                floor_confirmed_seq=shipper.confirmed_seq,
            )
        finally:
            shipper.stop()
        assert [p.name for p, _ in after.retired] == [p.name for p in closed[:5]]
        assert all("durable on two machines" in how for _, how in after.retired)
        assert sorted(config.parent.glob("journal-*.sqlite")) == closed[5:]
        assert any(wal_archive.iterdir())
        kept = verify_journal(config.parent)
        assert kept.ok and "earlier segments archived" in kept.message
    finally:
        server.destroy()
