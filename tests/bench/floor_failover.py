"""The replicated floor failing over under load: kill -9 the primary's postmaster mid-batch.

A Patroni cluster (etcd, three PostgreSQL nodes, one synchronous standby, strict:
simulators.pgcluster) takes the rows of N synthetic tables (the engine's real rows of legal
rounds, each table its own chain: tests/bench/floor_scale.py), each shipped by its own real
`FloorShipper` over a multi-host DSN (`target_session_attrs=read-write`). A writer commits a
few rows to every table's journal at a live pace; once the shippers are caught up and a batch
is in flight, the primary's postmaster is killed with SIGKILL. Patroni promotes the
synchronous standby; the shippers find it by themselves. Measured:

    floor_failover_seconds    the kill to the first batch acknowledged by the new primary
    floor_failover_rows_lost  rows some table saw acknowledged by the old primary that the new
                              primary did not hold when the table reconnected (goal 0): the
                              head each shipper resumed from against the last row it had
                              acknowledged, and, on the server, rows at or below that mark
                              stored after the table reconnected (sent again)

and checked: every table's rows on the new primary are its journal's, one to one (no gap, no
duplicate); the table's gauges said rows were waiting throughout.

    python -m tests.bench.floor_failover [--tables N] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablectl.controller.common import metrics
from tablectl.controller.common.config import FloorConfig
from tablectl.controller.floor.schema import add_reader, add_table, create_schema, writer_role
from tablectl.controller.floor.shipper import GAUGE_SECONDS, FloorShipper, LocalRow
from tablectl.controller.record.journal import Journal
from tablectl.simulators.pgcluster import PatroniNode, ThrowawayPatroniCluster
from tests.bench.floor_scale import SyntheticTable, Template, templates

DATABASE = "floor"
TABLES = 400
READER = "surveillance"
RESULT_KEYS = ("floor_failover_seconds", "floor_failover_rows_lost")
GOALS = {"floor_failover_rows_lost": ("<=", 0)}
#: rows each table commits per writer tick, and the tick: ~4 rows/s a table, a busy table's
#: pace (~1,000 rounds a day of ~31 rows is ~0.4 rows/s; a burst is ~10 rows in a second)
ROWS_A_TICK = 2
TICK_SECONDS = 0.5
#: kills of a primary Patroni keeps restarting in place before the test gives up
MAX_KILLS = 3


class WatchedShipper(FloorShipper):
    """A real FloorShipper that notes when each batch was acknowledged and what head it
    resumed from at each connection (the test's witness; nothing of the shipping changes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acks: list[tuple[float, int]] = []  # (monotonic, last seq of the batch)
        self.resumes: list[tuple[float, int]] = []  # (monotonic, the floor's head)
        self.resumed_wall: list[float] = []  # the same moments, by the wall clock

    def _insert(self, conn: Any, batch: list[LocalRow]) -> None:
        super()._insert(conn, batch)
        self.acks.append((time.monotonic(), batch[-1].seq))

    def _resume(self, conn: Any, local: Any) -> None:
        super()._resume(conn, local)
        self.resumed_wall.append(time.time())
        self.resumes.append((time.monotonic(), self.acknowledged_seq))


@dataclass
class SyntheticJournal:
    table: SyntheticTable
    path: Path
    db: sqlite3.Connection
    committed: int = 0

    def commit(self, count: int) -> int:
        now = datetime.datetime.now(datetime.UTC)
        rows = list(self.table.rows(count, now, 0.001))
        self.db.executemany(
            "INSERT INTO journal (seq, kind, round, recorded_at, body, prev_hash, hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.db.commit()
        self.committed = rows[-1][0]
        return self.committed


@dataclass
class GaugeSample:
    at: float
    state: str
    committed: int
    acknowledged: int
    rows_behind_published: float
    seconds_behind_published: float


@dataclass
class FailoverRun:
    """What one failover did (figures and the evidence the test checks)."""

    tables: int
    killed: str = ""
    promoted: str = ""
    #: kills of the primary's postmaster (more than one when Patroni restarted it in place)
    kills: int = 1
    kill_wall: float = 0.0
    kill_at: float = 0.0
    promoted_seconds: float = 0.0
    first_resume_seconds: float = 0.0
    failover_seconds: float = 0.0
    in_flight_at_kill: int = 0
    #: per table, the last row acknowledged by the old primary (before the kill, or just after
    #: it, before the table reconnected)
    acked_before_kill: dict[str, int] = field(default_factory=dict)
    resumed_after_kill: dict[str, int] = field(default_factory=dict)
    reconnected_wall: dict[str, float] = field(default_factory=dict)
    lost_by_resume: dict[str, int] = field(default_factory=dict)
    sent_again_on_server: dict[str, int] = field(default_factory=dict)
    mismatched: dict[str, str] = field(default_factory=dict)
    gauges: list[GaugeSample] = field(default_factory=list)
    catch_up_seconds: float = 0.0
    rows_total: int = 0

    @property
    def rows_lost(self) -> int:
        return sum(self.lost_by_resume.values()) + sum(self.sent_again_on_server.values())

    def figures(self) -> dict[str, Any]:
        return {
            "floor_failover_seconds": round(self.failover_seconds, 2),
            "floor_failover_rows_lost": self.rows_lost,
            "tables": self.tables,
            "promoted_seconds": round(self.promoted_seconds, 2),
            "first_reconnect_seconds": round(self.first_resume_seconds, 2),
            "killed": self.killed,
            "kills": self.kills,
            "promoted": self.promoted,
            "batches_in_flight_at_kill": self.in_flight_at_kill,
            "rows_acknowledged_before_kill": sum(self.acked_before_kill.values()),
            "catch_up_seconds": round(self.catch_up_seconds, 2),
            "rows_total": self.rows_total,
            "tables_not_identical": len(self.mismatched),
        }


class ShippingFloor:
    """N synthetic tables shipping to a Patroni cluster's primary through one multi-host DSN."""

    def __init__(
        self,
        cluster: ThrowawayPatroniCluster,
        workdir: Path,
        tables: int,
        *,
        made: list[Template] | None = None,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.passfile = workdir / "floor.pgpass"
        made = made or templates(workdir, rounds=12)
        cluster.create_database(DATABASE)
        leader = cluster.leader()
        assert leader is not None
        import psycopg

        self.table_ids = [f"ha{n:03d}" for n in range(tables)]
        with psycopg.connect(leader.admin_dsn(DATABASE), autocommit=True) as conn:
            create_schema(conn)
            for table_id in self.table_ids:
                add_table(conn, table_id, passfile=self.passfile, dbname=DATABASE)
            conn.execute(f"CREATE ROLE {READER} LOGIN")
            add_reader(conn, READER)
        self.journals: dict[str, SyntheticJournal] = {}
        for n, table_id in enumerate(self.table_ids):
            path = workdir / f"{table_id}.sqlite"
            Journal(path).close()
            db = sqlite3.connect(path, check_same_thread=False)
            db.execute("PRAGMA synchronous = OFF")  # the simulated table PCs' disks
            synthetic = SyntheticTable(table_id, made[n % len(made)], n * 7)
            self.journals[table_id] = SyntheticJournal(synthetic, path, db)
        metrics.register_floor_metrics()
        self.shippers = {
            table_id: WatchedShipper(
                table_id,
                self.journals[table_id].path,
                FloorConfig(
                    dsn=cluster.table_dsn(DATABASE, writer_role(table_id)),
                    passfile=self.passfile,
                ),
                publish_metrics=(n == 0),  # one table's gauges, as its daemon publishes them
            )
            for n, table_id in enumerate(self.table_ids)
        }
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.watched = self.table_ids[0]
        self.gauges: list[GaugeSample] = []

    # -- the tables' side ---------------------------------------------------------------------

    def commit_all(self, count: int) -> None:
        for table_id, journal in self.journals.items():
            self.shippers[table_id].notify(journal.commit(count))

    def _writer(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.commit_all(ROWS_A_TICK)

    def _daemon_loop(self) -> None:
        """What each daemon's loop does every GAUGE_SECONDS (refresh), and the watched table's
        published gauges sampled several times a second."""
        next_refresh = 0.0
        shipper = self.shippers[self.watched]
        while not self._stop.wait(0.05):
            now = time.monotonic()
            if now >= next_refresh:
                for each in self.shippers.values():
                    each.refresh()
                next_refresh = now + GAUGE_SECONDS
            self.gauges.append(
                GaugeSample(
                    now,
                    shipper.state,
                    self.journals[self.watched].committed,
                    shipper.acknowledged_seq,
                    metrics.FLOOR_ROWS_BEHIND._value.get(),
                    metrics.FLOOR_SECONDS_BEHIND._value.get(),
                )
            )

    def start(self, initial_rows: int = 60) -> None:
        self.commit_all(initial_rows)
        for shipper in self.shippers.values():
            shipper.start()
        self.wait_caught_up(300)
        for target in (self._writer, self._daemon_loop):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop_writing(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self._threads = []

    def stop(self) -> None:
        self.stop_writing()
        for shipper in self.shippers.values():
            shipper.stop(0)
        for journal in self.journals.values():
            with contextlib.suppress(sqlite3.Error):
                journal.db.close()

    def caught_up(self) -> bool:
        return all(
            s.head_known and s.acknowledged_seq == self.journals[t].committed
            for t, s in self.shippers.items()
        )

    def wait_caught_up(self, timeout: float) -> float:
        began = time.monotonic()
        while not self.caught_up():
            if time.monotonic() - began > timeout:
                behind = {
                    t: (self.journals[t].committed, s.acknowledged_seq, s.state, s.last_error)
                    for t, s in self.shippers.items()
                    if s.acknowledged_seq != self.journals[t].committed
                }
                raise AssertionError(
                    f"not caught up after {timeout} s: {len(behind)} tables, e.g. "
                    f"{list(behind.items())[:3]}"
                )
            time.sleep(0.05)
        return time.monotonic() - began

    def committed_now(self) -> dict[str, int]:
        return {t: j.committed for t, j in self.journals.items()}

    def wait_acknowledged_beyond(self, marks: dict[str, int], timeout: float) -> None:
        """Until every table has a row acknowledged past its mark (rows committed since)."""
        deadline = time.monotonic() + timeout
        while not all(self.shippers[t].acknowledged_seq > marks[t] for t in marks):
            if time.monotonic() > deadline:
                raise AssertionError(f"the tables did not ship past their marks in {timeout} s")
            time.sleep(0.05)

    # -- the failover ---------------------------------------------------------------------------

    def fail_over(self, run: FailoverRun, timeout: float = 120) -> PatroniNode:
        """Wait for a batch in flight, kill -9 the primary's postmaster, wait for a new primary
        and for the first batch it acknowledges."""
        deadline = time.monotonic() + 30
        while not any(s._in_flight is not None for s in self.shippers.values()):
            if time.monotonic() > deadline:
                raise AssertionError("no batch in flight in 30 s: the writer is not writing")
            time.sleep(0.001)
        run.kill_wall = time.time()
        run.kill_at = time.monotonic()
        dead = self.cluster.kill_primary_postmaster()
        run.in_flight_at_kill = sum(1 for s in self.shippers.values() if s._in_flight is not None)
        run.killed = dead.name
        for table_id, shipper in self.shippers.items():
            run.acked_before_kill[table_id] = max(
                (seq for at, seq in list(shipper.acks) if at < run.kill_at), default=0
            )
        killed_pid = dead.postmaster_pid()
        deadline = time.monotonic() + timeout
        promoted: PatroniNode | None = None
        while promoted is None or promoted is dead:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no standby promoted {timeout} s after the kill of {dead.name} "
                    f"({run.kills} kills)\n" + self.cluster.diagnosis()
                )
            time.sleep(0.05)
            promoted = self.cluster.leader()
            if promoted is dead and dead.postmaster_pid() not in (None, killed_pid):
                # Patroni may legitimately restart a crashed primary in place (no standby
                # within maximum_lag_on_failover of its last published LSN): what was
                # acknowledged there is still acknowledged; kill it again, so that this
                # test still sees a failover (the outage is timed from the last kill)
                if run.kills >= MAX_KILLS:
                    raise AssertionError(
                        f"{dead.name} came back as primary after {run.kills} kills\n"
                        + self.cluster.diagnosis()
                    )
                killed_pid = dead.postmaster_pid()
                run.kill_wall = time.time()
                run.kill_at = time.monotonic()
                if killed_pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(killed_pid, signal.SIGKILL)
                run.kills += 1
                promoted = None
        run.promoted = promoted.name
        run.promoted_seconds = time.monotonic() - run.kill_at

        def first_ack_after_kill() -> float | None:
            found = [
                at
                for s in self.shippers.values()
                for at, _ in list(s.acks)
                if at > run.kill_at
                and any(r_at > run.kill_at and r_at <= at for r_at, _ in list(s.resumes))
            ]
            return min(found) if found else None

        while (first := first_ack_after_kill()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no batch acknowledged {timeout} s after the kill\n" + self.cluster.diagnosis()
                )
            time.sleep(0.05)
        run.failover_seconds = first - run.kill_at
        run.first_resume_seconds = (
            min(at for s in self.shippers.values() for at, _ in s.resumes if at > run.kill_at)
            - run.kill_at
        )
        return promoted

    def settle(self, run: FailoverRun, promoted: PatroniNode, timeout: float = 300) -> None:
        """Stop writing, wait until every table is caught up, then gather the evidence."""
        self.stop_writing()
        run.catch_up_seconds = self.wait_caught_up(timeout)
        run.gauges = list(self.gauges)
        for table_id, shipper in self.shippers.items():
            after = [(at, head) for at, head in shipper.resumes if at > run.kill_at]
            run.resumed_after_kill[table_id] = after[0][1] if after else shipper.acknowledged_seq
            # a batch the dying primary still acknowledged (its standby flushed it before the
            # walsender died) counts as acknowledged: the new primary must hold it too
            reconnected = after[0][0] if after else run.kill_at
            walls = shipper.resumed_wall[len(shipper.resumes) - len(after) :]
            run.reconnected_wall[table_id] = walls[0] if walls else run.kill_wall
            run.acked_before_kill[table_id] = max(
                (seq for at, seq in shipper.acks if at < reconnected), default=0
            )
            run.lost_by_resume[table_id] = max(
                0, run.acked_before_kill[table_id] - run.resumed_after_kill[table_id]
            )
        import psycopg

        with psycopg.connect(promoted.admin_dsn(DATABASE), autocommit=True) as conn:
            for table_id in self.table_ids:
                run.sent_again_on_server[table_id] = int(
                    conn.execute(
                        "SELECT count(*) FROM floor.journal_rows WHERE table_id = %s"
                        " AND seq <= %s AND shipped_at >= to_timestamp(%s)",
                        (
                            table_id,
                            run.acked_before_kill[table_id],
                            run.reconnected_wall[table_id],
                        ),
                    ).fetchone()[0]
                )
            run.rows_total = 0
            for table_id, journal in self.journals.items():
                floor_chain = conn.execute(
                    "SELECT seq, hash FROM floor.journal_rows WHERE table_id = %s ORDER BY seq",
                    (table_id,),
                ).fetchall()
                local_chain = journal.db.execute(
                    "SELECT seq, hash FROM journal ORDER BY seq"
                ).fetchall()
                run.rows_total += len(floor_chain)
                if [tuple(r) for r in floor_chain] != [tuple(r) for r in local_chain]:
                    seqs = [r[0] for r in floor_chain]
                    run.mismatched[table_id] = (
                        f"floor {len(seqs)} rows ({len(set(seqs))} distinct, max "
                        f"{max(seqs, default=0)}), local {len(local_chain)}"
                    )


def measure(tables: int = TABLES, base: Path | None = None) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tablectl-failover-", dir=base))
    cluster = ThrowawayPatroniCluster(
        nodes=3, settings={"max_connections": str(tables + 100), "shared_buffers": "256MB"}
    )
    floor: ShippingFloor | None = None
    try:
        cluster.start()
        floor = ShippingFloor(cluster, workdir, tables)
        run = FailoverRun(tables)
        floor.start()
        floor.wait_acknowledged_beyond(floor.committed_now(), 120)  # a live pace under way
        promoted = floor.fail_over(run)
        floor.wait_acknowledged_beyond(floor.committed_now(), 300)  # play on the new primary
        floor.settle(run, promoted)
        return run.figures()
    finally:
        if floor is not None:
            floor.stop()
        cluster.destroy()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=TABLES)
    args = parser.parse_args(argv)
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    print(json.dumps(measure(args.tables), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
