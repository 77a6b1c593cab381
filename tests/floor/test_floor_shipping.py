"""Shipping to a real PostgreSQL: outages, kill -9, divergence, twenty tables at once."""

from __future__ import annotations

import argparse
import asyncio
import grp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tablectl.controller.common import metrics
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.controller.floor.store import compare, connect, verify_table
from tablectl.controller.record.journal import Journal, verify_journal
from tablectl.controller.service.daemon import Daemon
from tablectl.controller.service.status_words import describe
from tablectl.simulators import demo
from tablectl.simulators.autodealer import RoundReport
from tests.floor.floorkit import (
    FloorDb,
    local_rows,
    rewrite_journal,
    ship_until_caught_up,
    shipped_journal,
    truncate_journal,
    unique_table_id,
    wait_for,
)
from tests.unsealed import UNSEALED

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def demo_args(state_dir: Path, rounds: int, floor_db: FloorDb, table_id: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(
        [
            "--rounds", str(rounds),
            "--state-dir", str(state_dir),
            "--metrics-listen", "127.0.0.1:0",
            "--table", table_id,
            "--floor-dsn", floor_db.config(table_id).dsn,
            "--floor-passfile", str(floor_db.passfile),
            "--fast",
        ]
    )  # fmt: skip


def assert_floor_equals_local(floor_db: FloorDb, table_id: str, journal: Path) -> None:
    """Every local row on the floor, once, in order, unchanged; the floor's chain intact."""
    on_floor = floor_db.floor_rows(table_id)
    here = local_rows(journal)
    assert [row[0] for row in on_floor] == list(range(1, len(here) + 1))  # no gap, no duplicate
    assert on_floor == here
    with connect(floor_db.admin_dsn) as conn:
        assert verify_table(conn, table_id).ok
        assert compare(conn, table_id, journal).verdict == "identical"


def test_postgres_stopped_mid_play_and_started_again(floor_db: FloorDb, tmp_path: Path) -> None:
    """The daemon deals on while the floor is down; it catches up, no duplicate, no gap."""
    table_id = unique_table_id()
    floor_db.provision(table_id)
    server = floor_db.server
    seen: dict[str, Any] = {}

    async def on_round(report: RoundReport, daemon: Daemon) -> None:
        shipper = daemon.floor
        assert shipper is not None
        loop = asyncio.get_running_loop()
        if report.number == 2:
            shipper.retry_max = 0.5  # the test's patience, not the product's
            await loop.run_in_executor(None, server.stop)
            seen["stopped_at_seq"] = daemon.service.journal.last_seq
        elif report.number == 6:
            status = daemon.status()["floor"]
            seen["while_down"] = status
            seen["rendered"] = describe(daemon.status())
            seen["gauge_rows_behind"] = metrics.FLOOR_ROWS_BEHIND._value.get()
            await loop.run_in_executor(None, server.start)
            deadline = loop.time() + 20
            while shipper.rows_behind or shipper.state != "caught_up":
                assert loop.time() < deadline, shipper.status()
                await asyncio.sleep(0.05)
            seen["caught_up"] = daemon.status()["floor"]

    args = demo_args(tmp_path / "table", 10, floor_db, table_id)
    try:
        status = asyncio.run(demo.play_demo(args, 11, "127.0.0.1", 0, on_round=on_round))
    finally:
        if not server.running:
            server.start()
    assert status == 0
    down = seen["while_down"]
    assert down["state"] in {"disconnected", "connecting"}, down
    assert down["rows_behind"] > 0 and down["last_error"].startswith("connection"), down
    assert seen["gauge_rows_behind"] > 0
    # `tablectl status` shows it (the operator client renders the daemon's status)
    rendered = "\n".join(seen["rendered"])
    assert "floor:" in rendered and "rows_behind: " in rendered
    assert "last_error: connection" in rendered
    assert seen["caught_up"]["rows_behind"] == 0
    journal = tmp_path / "table" / "journal.sqlite"
    assert seen["caught_up"]["acknowledged_seq"] > seen["stopped_at_seq"]
    assert_floor_equals_local(floor_db, table_id, journal)


def _table_config(path: Path, floor_db: FloorDb, table_id: str, state: Path) -> Path:
    """The demo table's configuration without devices: the daemon restarted on its journal."""
    options = demo.demo_table_options("three_card_21")
    lines = [
        "[table]",
        f'id = "{table_id}"',
        'game = "three_card_21"',
        "[table.options]",
        *(f"{key} = {value!r}".replace("'", '"') for key, value in options.items()),
        "[journal]",
        f'path = "{state / "journal.sqlite"}"',
        UNSEALED,
        "[metrics]",
        'listen = "127.0.0.1:0"',
        "[operator]",
        f'socket = "{state / "operator2.sock"}"',
        f'group = "{grp.getgrgid(os.getgid()).gr_name}"',
        f'supervisor_group = "{grp.getgrgid(os.getgid()).gr_name}"',
        "[floor]",
        f'dsn = "{floor_db.config(table_id).dsn}"',
        f'passfile = "{floor_db.passfile}"',
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_daemon_killed_while_shipping_resumes_without_loss_or_duplicate(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    table_id = unique_table_id()
    floor_db.provision(table_id)
    state = tmp_path / "table"
    args = demo_args(state, 400, floor_db, table_id)
    command = [*TABLECTL, "demo", *_argv(args)]
    player = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(floor_db.floor_rows(table_id)) > 120, 60, "rows on the floor")
    finally:
        player.send_signal(signal.SIGKILL)
        player.wait(10)
    journal = state / "journal.sqlite"
    assert verify_journal(journal).ok
    shipped = floor_db.floor_rows(table_id)
    here = local_rows(journal)
    assert shipped == here[: len(shipped)]  # a prefix: what was acknowledged is intact
    # the daemon again (`tablectl run`), on the same journal: it ships the rest and its own
    # restart rows (controller_restarted, the void of the round cut short)
    config = _table_config(tmp_path / "table.toml", floor_db, table_id, state)
    daemon = subprocess.Popen(
        [*TABLECTL, "run", "--config", str(config), "--log-format", "json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: (
                len(floor_db.floor_rows(table_id)) > len(here)
                and len(floor_db.floor_rows(table_id)) == len(local_rows(journal))
            ),
            30,
            "the restarted daemon to catch up",
        )
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, errors = daemon.communicate(timeout=20)
    assert daemon.returncode == 0, errors[-2000:]
    assert "controller_restarted" in {
        row[4].split('"type":"')[-1].split('"')[0] for row in local_rows(journal)[len(here) :]
    }
    assert_floor_equals_local(floor_db, table_id, journal)


def _argv(args: argparse.Namespace) -> list[str]:
    return [
        "--rounds", str(args.rounds),
        "--state-dir", str(args.state_dir),
        "--metrics-listen", args.metrics_listen,
        "--table", args.table_id,
        "--floor-dsn", args.floor_dsn,
        "--floor-passfile", str(args.floor_passfile),
        "--seed", "5",
        "--fast",
    ]  # fmt: skip


def _ship(floor_db: FloorDb, tmp_path: Path, rows: int) -> tuple[str, Path]:
    return shipped_journal(floor_db, tmp_path, rows, "five_card_hilo")


@pytest.mark.parametrize("damage", ["truncated", "rewritten"])
def test_floor_compare_names_the_first_differing_row(
    floor_db: FloorDb, tmp_path: Path, damage: str
) -> None:
    table_id, journal = _ship(floor_db, tmp_path, 60)
    if damage == "truncated":
        truncate_journal(journal, 41)
        expected_seq = 42
    else:
        rewrite_journal(journal, 23, '{"type":"card_drawn","index":999}')
        expected_seq = 23
        assert verify_journal(journal).ok  # the local chain alone cannot tell
    done = subprocess.run(
        [*TABLECTL, "floor", "compare", "--dsn", floor_db.admin_dsn, "--journal", str(journal)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert damage in done.stderr
    assert f"row {expected_seq}" in done.stderr or f"rows {expected_seq}-60" in done.stderr
    with connect(floor_db.admin_dsn) as conn:
        result = compare(conn, table_id, journal)
    assert (result.verdict, result.first_differing_seq) == (damage, expected_seq)
    # and the table's shipper refuses to go on from a journal that left the floor's copy,
    # and says so in the gauge TablectlFloorDiverged reads (a state: it stays 1)
    shipper = FloorShipper(table_id, journal, floor_db.config(table_id), publish_metrics=True)
    assert REGISTRY.get_sample_value("tablectl_floor_diverged") == 0
    shipper.start()
    try:
        wait_for(lambda: shipper.state == "diverged", 15, "the shipper to see the divergence")
    finally:
        shipper.stop()
    assert shipper.last_error is not None and shipper.last_error.startswith("diverged")
    assert REGISTRY.get_sample_value("tablectl_floor_diverged") == 1
    assert REGISTRY.get_sample_value("tablectl_floor_ship_errors_total", {"error": "diverged"}) >= 1
    assert len(floor_db.floor_rows(table_id)) == 60


def test_twenty_tables_ship_at_once_into_one_server(floor_db: FloorDb, tmp_path: Path) -> None:
    """Twenty journals written in bursts at once, each shipped by its own thread."""
    base = tmp_path
    tables = [unique_table_id() for _ in range(20)]
    journals = {}
    shippers = {}
    for table_id in tables:
        config = floor_db.provision(table_id)
        journal = Journal(base / f"{table_id}.sqlite")
        journal.append("table", {"type": "table", "game": "heads_up_holdem"}, durable=True)
        shipper = FloorShipper(table_id, journal.path, config, publish_metrics=False)
        journal.commit_listeners.append(shipper.notify)
        shipper.start()
        journals[table_id], shippers[table_id] = journal, shipper
    try:
        for burst in range(5):
            for journal in journals.values():
                for index in range(40):
                    journal.append("event", {"type": "card_drawn", "i": index}, round_number=burst)
                journal.flush()
            started = time.monotonic()
            wait_for(
                lambda: all(s.head_known and s.rows_behind == 0 for s in shippers.values()),
                30,
                "every table caught up",
            )
            assert time.monotonic() - started < 30
    finally:
        for table_id in tables:
            journals[table_id].close()
            shippers[table_id].stop()
    for table_id in tables:
        assert_floor_equals_local(floor_db, table_id, journals[table_id].path)


def test_a_backlog_ships_in_bounded_batches(
    floor_db: FloorDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory is one batch whatever the backlog: 500 rows waiting go 40 at a time."""
    table_id = unique_table_id()
    journal = Journal(tmp_path / "backlog.sqlite")
    journal.append("table", {"type": "table", "game": "asia_poker"}, durable=True)
    for index in range(499):
        journal.append("event", {"type": "card_drawn", "i": index}, round_number=1)
    journal.close()
    floor_db.provision(table_id)
    batches: list[int] = []
    original = FloorShipper._insert

    def counting(self: FloorShipper, conn: Any, batch: list[Any]) -> None:
        batches.append(len(batch))
        original(self, conn, batch)

    monkeypatch.setattr(FloorShipper, "_insert", counting)
    shipper = FloorShipper(
        table_id, journal.path, floor_db.config(table_id, batch_rows=40), publish_metrics=False
    )
    shipper.start()
    try:
        wait_for(lambda: shipper.head_known and shipper.rows_behind == 0, 20, "the backlog")
    finally:
        shipper.stop()
    assert max(batches) == 40 and sum(batches) == 500
    assert_floor_equals_local(floor_db, table_id, journal.path)


def test_new_row_kinds_and_columns_flow_without_a_change(floor_db: FloorDb, tmp_path: Path) -> None:
    """A journal that grew a column and a row kind (say a seal) ships them as they are."""
    import sqlite3

    from tablectl.controller.record.journal import row_hash

    table_id = unique_table_id()
    journal = Journal(tmp_path / "grown.sqlite")
    journal.append("table", {"type": "table", "game": "asia_poker"}, durable=True)
    journal.append("event", {"type": "shuffle_started"}, round_number=0, durable=True)
    journal.close()
    db = sqlite3.connect(journal.path)
    db.execute("ALTER TABLE journal ADD COLUMN epoch INTEGER DEFAULT 7")
    db.execute("ALTER TABLE journal ADD COLUMN mac BLOB DEFAULT x'beef'")
    prev = db.execute("SELECT hash FROM journal WHERE seq = 2").fetchone()[0]
    body = '{"epoch":7,"type":"seal"}'
    at = "2026-11-23T06:00:00.000000+00:00"
    digest = row_hash(prev, 3, "seal", 0, at, body)
    db.execute(
        "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash, epoch, mac)"
        " VALUES (3, 'seal', 0, ?, ?, ?, ?, 8, x'c0ffee')",
        (at, body, prev, digest),
    )
    db.commit()
    db.close()
    ship_until_caught_up(table_id, journal.path, floor_db.provision(table_id))
    assert_floor_equals_local(floor_db, table_id, journal.path)
    with floor_db.admin() as conn:
        rows = list(
            conn.execute(
                "SELECT seq, kind, columns FROM floor.journal_rows WHERE table_id = %s"
                " ORDER BY seq",
                (table_id,),
            )
        )
    assert rows[-1] == (3, "seal", {"epoch": 8, "mac": {"hex": "c0ffee"}})
    assert rows[0][2] == {"epoch": 7, "mac": {"hex": "beef"}}


def test_rows_ship_across_gaming_day_segments(floor_db: FloorDb, tmp_path: Path) -> None:
    """Rows left in a closed segment ship from it; a roll-over under the shipper is followed."""
    from tests.floor.floorkit import append_chain, roll_over

    table_id = unique_table_id()
    floor_db.provision(table_id)
    live = tmp_path / "journal.sqlite"
    append_chain(live, 60, kind="note")
    roll_over(live, "2026-11-22")
    append_chain(live, 20)
    shipper = FloorShipper(table_id, live, floor_db.config(table_id), publish_metrics=False)
    shipper.start()
    try:
        wait_for(lambda: shipper.acknowledged_seq == 80, 20, "both segments shipped")
        roll_over(live, "2026-11-23")  # while the shipper holds the live file open
        append_chain(live, 15)
        shipper.notify(95)
        wait_for(lambda: shipper.acknowledged_seq == 95, 20, "the new live file shipped")
    finally:
        shipper.stop()
    assert [row[0] for row in floor_db.floor_rows(table_id)] == list(range(1, 96))
    with connect(floor_db.admin_dsn) as conn:
        assert verify_table(conn, table_id).ok
        assert compare(conn, table_id, live).verdict == "identical"
        assert compare(conn, table_id, tmp_path).verdict == "identical"  # the directory
