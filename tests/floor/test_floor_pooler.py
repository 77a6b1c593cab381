"""Many table connections through a real PgBouncer (transaction mode) into one PostgreSQL.

Sixty table shippers, each with its own client connection to the pooler, share five server
connections; every table's rows arrive once, in order, and the server never sees more than
the pool's connections from the tables (the bench runs 400 this way: tests/bench/floor_scale).
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.common.config import FloorConfig
from tablectl.controller.floor.schema import writer_role
from tablectl.controller.floor.shipper import FloorShipper
from tablectl.simulators.pgbouncer import PgBouncerUnavailable, ThrowawayPgBouncer
from tests.floor.floorkit import FloorDb, append_chain, unique_table_id, wait_for

TABLES = 60
POOL = 5


@pytest.mark.long
def test_sixty_tables_ship_through_pgbouncer_on_five_server_connections(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    tables = [unique_table_id() for _ in range(TABLES)]
    for table_id in tables:
        floor_db.provision(table_id)
    try:
        bouncer = ThrowawayPgBouncer(floor_db.server, floor_db.name, pool_size=POOL)
        bouncer.start([writer_role(t) for t in tables])
    except PgBouncerUnavailable as error:
        pytest.skip(str(error))
    shippers = []
    most = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal most
        with floor_db.admin() as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'tablectl_table_%%'"
                    " AND datname = %s",
                    (floor_db.name,),
                ).fetchone()
                most = max(most, int(row[0]) if row else 0)
                stop.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for table_id in tables:
            journal = tmp_path / f"{table_id}.sqlite"
            append_chain(journal, 40)
            config = FloorConfig(
                dsn=bouncer.table_dsn(writer_role(table_id)), passfile=floor_db.passfile
            )
            shipper = FloorShipper(table_id, journal, config, publish_metrics=False)
            shipper.start()
            shippers.append(shipper)
        wait_for(
            lambda: all(s.head_known and s.rows_behind == 0 for s in shippers), 60, "all shipped"
        )
    finally:
        stop.set()
        watcher.join(5)
        for shipper in shippers:
            shipper.stop(0.5)
        bouncer.stop()
    with psycopg.connect(floor_db.admin_dsn) as conn:
        heads = conn.execute(
            "SELECT count(*) FROM floor.tables WHERE table_id = ANY(%s) AND head_seq = 40",
            (tables,),
        ).fetchone()
    assert heads == (TABLES,)
    assert 0 < most <= POOL
