"""One real PostgreSQL server for every floor test (session-scoped), one database per test.

The server is Debian's, started by initdb/pg_ctl in a temp dir as an unprivileged user
(simulators.pgserver). Without the server binaries the tests skip on a developer's machine and
fail under CI=true (tests/tools/install-system-tools.sh installs `postgresql`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablectl.controller.floor.schema import create_schema
from tablectl.simulators.pgserver import PostgresUnavailable, ThrowawayPostgres
from tests.floor.floorkit import FloorDb


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def postgres() -> Iterator[ThrowawayPostgres]:
    try:
        server = ThrowawayPostgres()
        server.init()
        server.start()
    except PostgresUnavailable as error:
        if _under_ci():
            pytest.fail(f"{error} (CI=true: tests/tools/install-system-tools.sh must provide it)")
        pytest.skip(str(error))
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def floor_db(postgres: ThrowawayPostgres, tmp_path: Path) -> Iterator[FloorDb]:
    if not postgres.running:  # a test that stopped it and failed before starting it again
        postgres.start()
    name = f"floor_{uuid.uuid4().hex[:10]}"
    postgres.create_database(name)
    db = FloorDb(postgres, name, tmp_path / "floor.pgpass")
    with db.admin() as conn:
        create_schema(conn)
    yield db
