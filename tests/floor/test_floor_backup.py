"""A floor backup that restores (issue 31, point 4).

Real servers and tools: a throwaway PostgreSQL archiving its WAL to a throwaway pgBackRest
repository (Debian's `pgbackrest`, simulators.pgbackrest), tables shipping through real
FloorShippers between a full and an incremental backup, a point-in-time restore into a fresh
cluster, and `tablectl floor verify` over the restored floor: every table's chain intact up
to the chosen time, nothing after it. `tablectl floor backup-check` refuses a stanza without a
backup, a stale backup and a damaged repository, and names the last verified backup.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.commands.cli import main as tablectl
from tablectl.controller.floor.schema import create_schema
from tablectl.simulators.pgbackrest import STANZA, ThrowawayBackRest
from tablectl.simulators.pgserver import PostgresUnavailable, ThrowawayPostgres
from tests.floor.floorkit import FloorDb, append_chain, ship_until_caught_up, unique_table_id

pytestmark = pytest.mark.long

TABLES = 4


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture
def archived(tmp_path: Path) -> Iterator[tuple[ThrowawayPostgres, ThrowawayBackRest]]:
    """A server whose every WAL segment goes to a pgBackRest repository (stanza created)."""
    server: ThrowawayPostgres | None = None
    repository: ThrowawayBackRest | None = None
    try:
        server = ThrowawayPostgres(settings={"fsync": "on"})
        repository = ThrowawayBackRest(server)
        server.init()
        repository.write_config()
        server.start()
    except PostgresUnavailable as error:  # BackRestUnavailable is one
        if server is not None:
            server.destroy()
        if _under_ci():
            pytest.fail(f"{error} (CI=true: tests/tools/install-system-tools.sh must provide it)")
        pytest.skip(str(error))
    try:
        repository.run("stanza-create")
        yield server, repository
    finally:
        server.destroy()
        repository.destroy()


def _backup_check(
    repository: ThrowawayBackRest, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    code = tablectl(
        [
            "floor",
            "backup-check",
            "--stanza",
            STANZA,
            "--pgbackrest-config",
            str(repository.config),
            *extra,
        ]
    )
    out = capsys.readouterr()
    return code, out.out + out.err


def _heads(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            str(t): int(h) for t, h in conn.execute("SELECT table_id, head_seq FROM floor.tables")
        }


def test_a_point_in_time_restore_verifies_up_to_the_chosen_time(
    archived: tuple[ThrowawayPostgres, ThrowawayBackRest],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, repository = archived
    server.create_database("floor")
    floor = FloorDb(server, "floor", tmp_path / "floor.pgpass")
    with floor.admin() as conn:
        create_schema(conn)
    tables = {unique_table_id(): tmp_path / f"j{n}.sqlite" for n in range(TABLES)}
    configs = {t: floor.provision(t) for t in tables}

    def ship(rows: int) -> None:
        for table_id, journal in tables.items():
            append_chain(journal, rows)
            ship_until_caught_up(table_id, journal, configs[table_id])

    # no backup yet: backup-check refuses, saying so
    code, said = _backup_check(repository, capsys)
    assert code == 1 and "NO BACKUP" in said, said

    ship(40)
    repository.run("backup", "--type=full")
    ship(25)
    repository.run("backup", "--type=incr")
    ship(30)
    with floor.admin() as conn:  # the chosen time: after these rows, before the next
        target = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    heads_at_target = _heads(floor.admin_dsn)
    deadline = time.monotonic() + 30
    while datetime.datetime.now(datetime.UTC) <= target + datetime.timedelta(milliseconds=50):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ship(20)  # after the chosen time: not in the restore
    with floor.admin() as conn:
        conn.execute("SELECT pg_switch_wal()")
    repository.run("check")  # waits until the segment holding those rows is archived

    code, said = _backup_check(repository, capsys)
    assert code == 0, said
    assert "last backup" in said and "incr" in said and "verified" in said

    restored = repository.restore_to(
        target.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    )
    try:
        restored_dsn = restored.admin_dsn("floor")
        assert _heads(restored_dsn) == heads_at_target
        assert all(head == 95 for head in heads_at_target.values())
        # floor verify over the restored floor: every chain intact from row 1 to the target
        code = tablectl(["floor", "verify", "--dsn", restored_dsn, "--from-start"])
        out = capsys.readouterr().out
        assert code == 0, out
        for table_id in tables:
            assert f"{table_id}: intact" in out and "95 rows" in out, out
        # and it is the tables' own chain: the restored rows are the first 95 of each journal
        with psycopg.connect(restored_dsn, autocommit=True) as conn:
            for table_id in tables:
                restored_rows = conn.execute(
                    "SELECT seq, hash FROM floor.journal_rows WHERE table_id = %s ORDER BY seq",
                    (table_id,),
                ).fetchall()
                assert restored_rows == [(s, h) for s, *_, h in floor.floor_rows(table_id)][:95]
    finally:
        restored.destroy()


def test_backup_check_refuses_a_stale_backup_and_a_damaged_repository(
    archived: tuple[ThrowawayPostgres, ThrowawayBackRest],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, repository = archived
    repository.run("backup", "--type=full")
    code, said = _backup_check(repository, capsys)
    assert code == 0, said

    # stale: older than the allowed age (an allowed age of 36 seconds, waited out)
    deadline = time.monotonic() + 120
    while (code := _backup_check(repository, capsys, "--max-age-hours", "0.01")[0]) == 0:
        assert time.monotonic() < deadline, "the backup never became stale"
        time.sleep(1)
    code, said = _backup_check(repository, capsys, "--max-age-hours", "0.01")
    assert code == 1 and "STALE" in said, said

    # damaged: one file of the backup changed on the repository's disk
    backup_files = sorted(
        p
        for p in (repository.repo / "backup" / STANZA).rglob("*")
        if p.is_file() and "pg_data" in p.parts and p.stat().st_size > 0
    )
    assert backup_files
    victim = backup_files[len(backup_files) // 2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    code, said = _backup_check(repository, capsys)
    assert code == 1 and "NOT VERIFIED" in said, said
