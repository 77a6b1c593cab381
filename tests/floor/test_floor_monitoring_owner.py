"""`tablectl floor init` and the owner of durable_elsewhere(), on a real PostgreSQL.

The floor's SECURITY DEFINER functions run as their owner. An owner that is neither a
superuser nor in pg_monitor sees no standby's flushed position in pg_stat_replication (and may
not read the WAL position the DBA's init took from PUBLIC): durable_elsewhere() would answer 0
for ever and no table would retire a segment, with nothing said. init gives the owner
pg_monitor when its login may, and otherwise refuses before making anything.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tablectl.controller.floor.schema import _ROLES
from tablectl.simulators.pgserver import ThrowawayPostgres

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def _tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TABLECTL, *args], capture_output=True, text=True, check=False, timeout=120
    )


def _admin(postgres: ThrowawayPostgres, dbname: str = "postgres") -> psycopg.Connection[object]:
    return psycopg.connect(postgres.admin_dsn(dbname), autocommit=True)


@pytest.fixture
def owner_db(postgres: ThrowawayPostgres) -> Iterator[tuple[str, str]]:
    """A database owned by a login that is neither a superuser nor in pg_monitor, nor may it
    create roles (on PostgreSQL 15 a CREATEROLE login may grant itself pg_monitor): a DBA's
    delegate, the floor's group roles made for it beforehand. (role, database)."""
    if not postgres.running:
        postgres.start()
    suffix = uuid.uuid4().hex[:8]
    role, dbname = f"floorowner_{suffix}", f"floor_owned_{suffix}"
    with _admin(postgres) as conn:
        conn.execute(_ROLES)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(dbname), sql.Identifier(role)
            )
        )
    yield role, dbname


def _owner_dsn(postgres: ThrowawayPostgres, role: str, dbname: str) -> str:
    """The delegate over the server's Unix socket (trusted: the test's own server)."""
    return f"host={postgres.sockets} port={postgres.port} user={role} dbname={dbname}"


def _schema_exists(postgres: ThrowawayPostgres, dbname: str) -> bool:
    with _admin(postgres, dbname) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'floor'").fetchone()
    return bool(row and row[0])


def _in_monitoring(postgres: ThrowawayPostgres, role: str) -> bool:
    with _admin(postgres) as conn:
        row = conn.execute(
            "SELECT pg_has_role(%s, 'pg_read_all_stats', 'USAGE')", (role,)
        ).fetchone()
    return bool(row and row[0])


def test_init_refuses_an_owner_that_cannot_see_the_standbys_and_makes_nothing(
    postgres: ThrowawayPostgres, owner_db: tuple[str, str]
) -> None:
    role, dbname = owner_db
    assert not _in_monitoring(postgres, role)
    dsn = _owner_dsn(postgres, role, dbname)
    refused = _tablectl("floor", "init", "--dsn", dsn)
    assert refused.returncode != 0, refused.stdout
    assert f"role {role}" in refused.stderr
    assert f"GRANT pg_monitor TO {role}" in refused.stderr
    assert not _schema_exists(postgres, dbname)  # refused before anything was made

    # the DBA grants it: the same init goes through, and the function answers as its owner
    with _admin(postgres) as conn:
        conn.execute(sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(role)))
    done = _tablectl("floor", "init", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    assert _schema_exists(postgres, dbname)
    # a table, and durable_elsewhere() answers (its owner may read the WAL position now)
    table = _tablectl("floor", "init", "--dsn", postgres.admin_dsn(dbname), "--table", "t1")
    assert table.returncode == 0, table.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT floor.durable_elsewhere('t1')").fetchone() is not None


def test_init_as_a_superuser_grants_pg_monitor_to_the_functions_owner(
    postgres: ThrowawayPostgres, owner_db: tuple[str, str]
) -> None:
    role, dbname = owner_db
    with _admin(postgres) as conn:
        conn.execute(sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(role)))
    made = _tablectl("floor", "init", "--dsn", _owner_dsn(postgres, role, dbname))
    assert made.returncode == 0, made.stderr
    with _admin(postgres) as conn:  # taken away later (a tidy-up of roles, say)
        conn.execute(sql.SQL("REVOKE pg_monitor FROM {}").format(sql.Identifier(role)))
    assert not _in_monitoring(postgres, role)

    again = _tablectl("floor", "init", "--dsn", postgres.admin_dsn(dbname), "--table", "t1")
    assert again.returncode == 0, again.stderr
    assert f"granted pg_monitor to {role}" in again.stdout
    assert _in_monitoring(postgres, role)
    with _admin(postgres, dbname) as conn:  # the functions still run as the delegate
        owner = conn.execute(
            "SELECT proowner::regrole::text FROM pg_proc WHERE proname = 'durable_elsewhere'"
        ).fetchone()
        assert owner is not None and owner[0] == role
        assert conn.execute("SELECT floor.durable_elsewhere('t1')").fetchone() is not None
