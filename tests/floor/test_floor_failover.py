"""A replicated floor that fails over losing nothing (issue 31, point 3).

Real servers: etcd and three PostgreSQL nodes under Patroni (Debian's packages), started here
as unprivileged processes in a temp dir on loopback (simulators.pgcluster), one synchronous
standby, `synchronous_mode_strict`. Synthetic tables ship through real FloorShippers over one
multi-host DSN (`target_session_attrs=read-write`) while a writer commits rows to every
journal; the primary's postmaster is killed with SIGKILL while batches are in flight.

Forty tables here, not the bench's 400 (tests/bench/floor_failover.py, `make bench`): 400
shipper threads under one interpreter lock and 400 logins on each reconnection take minutes
on the shared 2-core machine; forty keep every path (batches in flight at the kill, tables
idle at the kill, the reconnection storm, the sync standby's promotion) in a test of about
a minute.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.commands.cli import main as tablectl
from tablectl.simulators.pgcluster import ClusterUnavailable, ThrowawayPatroniCluster
from tests.bench.floor_failover import READER, FailoverRun, ShippingFloor

pytestmark = pytest.mark.long

TABLES = 40


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture
def cluster() -> Iterator[ThrowawayPatroniCluster]:
    try:
        made = ThrowawayPatroniCluster(nodes=3)
    except ClusterUnavailable as error:
        if _under_ci():
            pytest.fail(f"{error} (CI=true: tests/tools/install-system-tools.sh must provide it)")
        pytest.skip(str(error))
    try:
        made.start()
        yield made
    finally:
        made.destroy()


def _replayed_to(node_dsn: str, lsn: str) -> bool:
    with psycopg.connect(node_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
        return bool(row and row[0])


def _admin_dsn_over_every_node(cluster: ThrowawayPatroniCluster, dbname: str) -> str:
    """The DBA's DSN as the tables' is written: every node, the one taking writes chosen."""
    sockets = ",".join(str(n.sockets) for n in cluster.nodes)
    ports = ",".join(str(n.port) for n in cluster.nodes)
    return (
        f"host={sockets} port={ports} user=postgres dbname={dbname} target_session_attrs=read-write"
    )


def test_killing_the_primary_mid_batch_loses_no_acknowledged_row(
    cluster: ThrowawayPatroniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    floor = ShippingFloor(cluster, tmp_path, TABLES)
    # floor init checks the replicated setup: the acknowledgement is on two machines
    init = ["floor", "init", "--dsn", _admin_dsn_over_every_node(cluster, "floor")]
    assert tablectl([*init, "--require-sync-standby"]) == 0
    said = capsys.readouterr().out
    assert "replication: synchronous standby" in said and "on two machines" in said, said
    run = FailoverRun(TABLES)
    try:
        floor.start()
        # play under way: every table acknowledged rows committed since the start
        floor.wait_acknowledged_beyond(floor.committed_now(), 60)
        timeline_before = cluster.cluster_status()["members"][0].get("timeline")
        promoted = floor.fail_over(run)

        # a standby was promoted: another node leads, on a new timeline
        assert run.promoted != run.killed
        assert run.in_flight_at_kill >= 1, "the kill was meant to land mid-batch"
        members = {m["name"]: m for m in cluster.cluster_status()["members"]}
        assert members[run.promoted]["timeline"] > timeline_before

        # play goes on against the new primary: every table ships rows committed after it
        floor.wait_acknowledged_beyond(floor.committed_now(), 120)
        floor.settle(run, promoted)

        # 0 lost: each table resumed from a head at or past the last row it saw acknowledged
        # (by the old primary: before the kill, or in the instant after it), and no row at or
        # below that mark was stored again once it reconnected
        assert sum(run.acked_before_kill.values()) > TABLES * 10
        assert run.lost_by_resume == dict.fromkeys(floor.table_ids, 0)
        assert run.sent_again_on_server == dict.fromkeys(floor.table_ids, 0)
        # catch-up exact: the floor's chain of every table is its journal's, row for row
        assert run.mismatched == {}
        assert run.rows_total == sum(j.committed for j in floor.journals.values())

        # the gauges were honest: between the kill and the watched table's first batch on
        # the new primary its published rows behind were never 0 once rows waited, and
        # seconds behind grew; once caught up both are 0
        watched = floor.shippers[floor.watched]
        # (a batch may still be acknowledged by the dying primary just after the kill: its
        # standby flushed it before the walsender died; the outage ends with the first batch
        # after a reconnection)
        reconnected = min(at for at, _ in watched.resumes if at > run.kill_at)
        back = next(at for at, _ in watched.acks if at > reconnected)
        outage = [g for g in run.gauges if run.kill_at + 1.5 < g.at < back - 0.1]
        waiting = [g for g in outage if g.committed > run.acked_before_kill[floor.watched]]
        assert waiting, "the watched table committed nothing during the outage"
        assert all(g.rows_behind_published >= 1 for g in waiting)
        assert max(g.seconds_behind_published for g in waiting) > 0
        assert {g.state for g in outage} <= {"disconnected", "connecting", "shipping"}
        assert watched.last_error is not None and watched.last_error.startswith("connection")
        floor.shippers[floor.watched].refresh()
        assert watched.rows_behind == 0

        # on the new primary, with its synchronous standby, the floor says every table's rows
        # are durable on two machines (floor.durable_elsewhere: what retention may count as
        # held elsewhere), up to the last row acknowledged
        deadline = time.monotonic() + 60
        while not all(
            s.durable_elsewhere_seq == s.acknowledged_seq for s in floor.shippers.values()
        ):
            assert time.monotonic() < deadline, {
                t: (s.durable_elsewhere_seq, s.acknowledged_seq)
                for t, s in floor.shippers.items()
                if s.durable_elsewhere_seq != s.acknowledged_seq
            }
            time.sleep(0.1)

        # readers on a standby see only ended rounds: the released rows up to the last
        # collection the standby holds, nothing of the round in play; the rows table refused
        primary_lsn = ""
        with psycopg.connect(promoted.admin_dsn("floor"), autocommit=True) as conn:
            primary_lsn = str(conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0])
        standby = next(n for n in cluster.nodes if n is not promoted and n.name != run.killed)
        deadline = time.monotonic() + 60
        while not _replayed_to(standby.admin_dsn("floor"), primary_lsn):
            assert time.monotonic() < deadline, "the standby does not replay"
            time.sleep(0.1)
        reader_dsn = standby.admin_dsn("floor").replace("user=postgres", f"user={READER}")
        in_play = 0
        with psycopg.connect(reader_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
            for table_id, journal in floor.journals.items():
                seen = [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT seq FROM floor.released_rows(%s) ORDER BY seq", (table_id,)
                    )
                ]
                bound = _released_bound(journal.db)
                assert bound > 0, f"{table_id}: no round ended: the check would prove nothing"
                late = [seq for seq in seen if seq > bound]
                assert late == [], f"{table_id}: rows of a round in play shown: {late[:3]}"
                assert seen == list(range(1, bound + 1)), f"{table_id}: ended rounds missing"
                in_play += journal.committed - bound
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM floor.journal_rows")
        assert in_play > 0, "no round was in play: the reader's check proved nothing"

        # the DBA verifies the standby's copy: every chain intact, the mark left alone
        capsys.readouterr()
        assert tablectl(["floor", "verify", "--dsn", standby.admin_dsn("floor")]) == 0
        said = capsys.readouterr().out
        assert "a standby (read-only)" in said
        assert said.count(": intact") == TABLES, said
        # and after the failover floor init still finds the acknowledgement on two machines
        assert tablectl([*init, "--require-sync-standby"]) == 0
    finally:
        floor.stop()


def _released_bound(db: sqlite3.Connection) -> int:
    """From the table's own journal: the last row a reader may see, the row before the first
    non-decision row after the last collection (H7; the synthetic rounds refuse none), 0
    before any."""
    rows = list(db.execute("SELECT seq, kind, body FROM journal ORDER BY seq"))
    bound = 0
    for index, (_, kind, body) in enumerate(rows):
        if kind == "event" and '"type":"hands_collected"' in body:
            later = [r for r in rows[index + 1 :] if r[1] != "decision"]
            if later:
                bound = int(later[0][0]) - 1
    return bound
