"""Honest shipping health: a floor that hangs, crawls or is away moves the gauges at once.

Rows and seconds behind are the daemon's own figures (the journal's head against the last row
the floor acknowledged; the recorded time of the oldest row not acknowledged), recomputed on
the daemon's loop every second whatever the shipper thread is doing. Each test makes the
floor misbehave for real: a table's backend stopped with SIGSTOP, the postmaster stopped (a
connection that is accepted and never answered), a table locked by the DBA (a statement that
waits until its statement_timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tablectl.controller.common import metrics
from tablectl.controller.floor.shipper import GAUGE_SECONDS, FloorShipper
from tablectl.controller.record.journal import Journal
from tablectl.controller.service.daemon import Daemon
from tablectl.simulators import demo
from tablectl.simulators.autodealer import RoundReport
from tests.floor.floorkit import FloorDb, local_rows, unique_table_id, wait_for


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("tablectl_floor_rows_behind", "tablectl_floor_seconds_behind"):
            found[name] = float(value)
    return found


def _backend_pid(floor_db: FloorDb, table_id: str) -> int:
    with floor_db.admin() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (f"tablectl {table_id}",),
        ).fetchall()
    assert len(rows) == 1, f"the table's backends: {rows}"
    return int(rows[0][0])


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.long  # make test stays under 10 minutes
def test_a_hung_backend_moves_the_gauges_within_a_scrape_interval(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """SIGSTOP the table's backend mid-play: the scraped gauges grow every second while the
    shipper is stuck; the stuck statement is abandoned; after SIGCONT it all ships once."""
    table_id = unique_table_id()
    floor_db.provision(table_id)
    seen: dict[str, Any] = {}

    async def on_round(report: RoundReport, daemon: Daemon) -> None:
        shipper = daemon.floor
        assert shipper is not None and daemon.port is not None
        loop = asyncio.get_running_loop()
        if report.number == 2:
            await loop.run_in_executor(
                None,
                wait_for,
                lambda: shipper.rows_behind == 0 and shipper.head_known,
                20,
                "caught up",
            )
            shipper.stuck_seconds = 4.0  # the test's patience (the product's: 35 s)
            shipper.statement_timeout_ms = 1000
            seen["pid"] = _backend_pid(floor_db, table_id)
            os.kill(seen["pid"], signal.SIGSTOP)
            seen["stopped_at"] = time.monotonic()
        elif report.number == 4:
            await asyncio.sleep(GAUGE_SECONDS * 1.5)  # one refresh of the gauges
            first = _scrape(daemon.port)
            await asyncio.sleep(GAUGE_SECONDS * 2.5)
            second = _scrape(daemon.port)
            seen["scrapes"] = (first, second, shipper.state)
            seen["committed"] = daemon.service.journal.last_seq
            await asyncio.sleep(4.0)  # past stuck_seconds: the statement is abandoned
            seen["after_abandon"] = dict(shipper.status())
            os.kill(seen.pop("pid"), signal.SIGCONT)
            await loop.run_in_executor(
                None, wait_for, lambda: shipper.rows_behind == 0, 60, "caught up again"
            )

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args(
        [
            "--rounds", "6",
            "--state-dir", str(tmp_path / "table"),
            "--metrics-listen", "127.0.0.1:0",
            "--table-id", table_id,
            "--floor-dsn", floor_db.config(table_id).dsn,
            "--floor-passfile", str(floor_db.passfile),
            "--fast",
        ]
    )  # fmt: skip
    try:
        status = asyncio.run(demo.play_demo(args, 5, "127.0.0.1", 0, on_round=on_round))
    finally:
        if "pid" in seen:
            os.kill(seen["pid"], signal.SIGCONT)
    assert status == 0
    first, second, _state = seen["scrapes"]
    assert first["tablectl_floor_rows_behind"] > 0, seen
    assert second["tablectl_floor_rows_behind"] >= first["tablectl_floor_rows_behind"]
    # the oldest waiting row is as old as the hang: it grows scrape after scrape
    assert first["tablectl_floor_seconds_behind"] > 0, seen
    grown = second["tablectl_floor_seconds_behind"] - first["tablectl_floor_seconds_behind"]
    assert grown >= GAUGE_SECONDS, seen
    assert "connection" in str(seen["after_abandon"]["last_error"]), seen
    journal = tmp_path / "table" / "journal.sqlite"
    shipped = [row[0] for row in floor_db.floor_rows(table_id)]
    assert shipped == list(range(1, len(local_rows(journal)) + 1))  # no gap, no duplicate


def _journal_with_rows(path: Path, count: int) -> Journal:
    journal = Journal(path)
    journal.append("table", {"type": "table", "game": "three_card_21"}, durable=True)
    for index in range(count):
        journal.append(
            "event",
            {"type": "card_drawn", "index": index},
            round_number=1,
            durable=index == count - 1,
        )
    return journal


@pytest.mark.long
def test_connect_timeout_against_a_postmaster_that_never_answers(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """The server accepts the connection (the kernel does) and never answers: connect_timeout
    ends the attempt; meanwhile the gauges say how far behind the table is."""
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = _journal_with_rows(tmp_path / "j.sqlite", 30)
    postmaster = int((floor_db.server.data / "postmaster.pid").read_text().split()[0])
    shipper = FloorShipper(
        table_id, journal.path, config, connect_timeout=2, retry_min=0.2, retry_max=0.5
    )
    journal.commit_listeners.append(shipper.notify)
    with _stopped(postmaster):
        began = time.monotonic()
        shipper.start()
        try:
            wait_for(lambda: shipper.last_error is not None, 10, "the connect attempt to time out")
            took = time.monotonic() - began
            shipper.refresh()
            assert shipper.last_error.startswith("connection"), shipper.last_error
            assert 1.5 <= took < 6, took
            assert metrics.FLOOR_ROWS_BEHIND._value.get() == 31
            assert metrics.FLOOR_SECONDS_BEHIND._value.get() > 1.5
        except BaseException:
            shipper.stop(0)
            raise
    try:
        wait_for(lambda: shipper.rows_behind == 0 and shipper.head_known, 20, "shipped")
        shipper.refresh()
        assert metrics.FLOOR_ROWS_BEHIND._value.get() == 0
        assert metrics.FLOOR_SECONDS_BEHIND._value.get() == 0
    finally:
        shipper.stop()
        journal.close()


def test_statement_timeout_against_a_table_the_dba_holds_locked(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """A floor that answers too slowly (the rows table locked): statement_timeout fails each
    attempt, which is tried again; the gauges grow meanwhile; it ships once the lock goes."""
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = _journal_with_rows(tmp_path / "j.sqlite", 20)
    shipper = FloorShipper(
        table_id,
        journal.path,
        config,
        statement_timeout_ms=500,
        retry_min=0.2,
        retry_max=0.5,
        publish_metrics=False,
    )
    with psycopg.connect(floor_db.admin_dsn) as dba:
        dba.execute("LOCK TABLE floor.journal_rows IN ACCESS EXCLUSIVE MODE")
        shipper.start()
        try:
            wait_for(
                lambda: "statement timeout" in (shipper.last_error or ""),
                10,
                "a statement timeout",
            )
            time.sleep(1.2)
            shipper.refresh()
            assert shipper.rows_behind == 21
            assert shipper.seconds_behind() > 1.0
        except BaseException:
            shipper.stop(0)
            raise
        dba.rollback()
    try:
        wait_for(lambda: shipper.rows_behind == 0 and shipper.head_known, 20, "shipped")
        assert len(floor_db.floor_rows(table_id)) == 21
    finally:
        shipper.stop()
        journal.close()


def test_a_restart_while_the_floor_is_away_counts_from_the_last_acknowledged_row(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """The hint beside the journal: after a restart the gauges count only the rows the floor
    has not acknowledged, not the whole journal, though the floor cannot be asked."""
    from tablectl.controller.common.config import FloorConfig
    from tablectl.simulators.ports import port_held_for_life

    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    journal = _journal_with_rows(tmp_path / "j.sqlite", 30)
    first = FloorShipper(table_id, journal.path, config, publish_metrics=False)
    first.start()
    wait_for(lambda: first.head_known and first.rows_behind == 0, 20, "shipped")
    first.stop()
    for index in range(5):
        journal.append("event", {"type": "card_drawn", "n": index}, round_number=2, durable=True)
    away = FloorConfig(dsn=f"host=127.0.0.1 port={port_held_for_life()} dbname=x user=y")
    second = FloorShipper(table_id, journal.path, away, publish_metrics=False, retry_min=0.1)
    journal.commit_listeners.append(second.notify)
    second.start()
    try:
        wait_for(lambda: second.last_error is not None, 10, "the floor found away")
        second.refresh()
        assert second.rows_behind == 5, second.status()
        assert second.seconds_behind() >= 0
    finally:
        second.stop(0)
        journal.close()
