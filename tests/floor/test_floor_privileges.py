"""Least privilege on a real server: a table's role inserts its own rows and nothing else."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tablectl.controller.floor.schema import (
    AUDITOR_GROUP,
    MAX_CHECKPOINT_NOTE_BYTES,
    MAX_DAYS_AHEAD,
    MAX_NOTES_PER_SIZE,
    OWN_TABLE_CHECK,
    READER_GROUP,
    RELEASED_ROWS,
    SCHEMA,
    SHIP_CHECKPOINT,
    SUMMARIES,
    SUMMARIES_PER_CALL,
    SUMMARY_MAX_BYTES,
    WRITER_GROUP,
    writer_role,
)
from tablectl.controller.floor.shipper import _COPY, _COPY_TYPES, floor_time
from tests.floor.floorkit import FloorDb, shipped_journal, unique_table_id

INSERT = (
    f"INSERT INTO {SCHEMA}.journal_rows (table_id, seq, kind, round, recorded_at, body,"
    " prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _at(text: str) -> object:
    return floor_time(text)[0]


def _shipped_table(floor_db: FloorDb, tmp_path: Path, rows: int = 5) -> tuple[str, Path]:
    table_id, journal = shipped_journal(floor_db, tmp_path, rows, "three_card_21")
    assert len(floor_db.floor_rows(table_id)) == rows
    return table_id, journal


def test_the_writer_role_is_refused_update_delete_and_truncate(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    table_id, _ = _shipped_table(floor_db, tmp_path)
    with floor_db.as_writer(table_id) as conn:
        for statement in (
            f"UPDATE {SCHEMA}.journal_rows SET body = '{{}}' WHERE seq = 2",
            f"DELETE FROM {SCHEMA}.journal_rows WHERE seq = 5",
            f"TRUNCATE {SCHEMA}.journal_rows",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        # nor can it read what it wrote: only its chain's head, in floor.tables
        for statement in (
            f"SELECT body FROM {SCHEMA}.journal_rows",
            f"SELECT max(seq) FROM {SCHEMA}.journal_rows",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        heads = conn.execute(f"SELECT table_id, head_seq FROM {SCHEMA}.tables").fetchall()
        assert heads == [(table_id, 5)]
    assert len(floor_db.floor_rows(table_id)) == 5


def test_the_writer_role_is_refused_another_tables_rows(floor_db: FloorDb, tmp_path: Path) -> None:
    mine, _ = _shipped_table(floor_db, tmp_path)
    other, _ = _shipped_table(floor_db, tmp_path)
    row = floor_db.floor_rows(other)[-1]
    with floor_db.as_writer(mine) as conn:
        # a row for the other table, continuing its chain: the rows table's check refuses it
        forged = (other, row[0] + 1, "event", 1, row[3], "{}", row[6], "f" * 64)
        with pytest.raises(psycopg.errors.CheckViolation, match=OWN_TABLE_CHECK):
            conn.execute(INSERT, forged)
        # by the shipper's own statement (COPY) too
        with (
            pytest.raises(psycopg.errors.CheckViolation, match=OWN_TABLE_CHECK),
            conn.cursor() as cursor,
            cursor.copy(_COPY) as copy,
        ):
            copy.set_types(_COPY_TYPES)
            copy.write_row(
                (other, row[0] + 1, "event", 1, _at(row[3]), None, "{}", row[6], "f" * 64, {})
            )
        # a SET ROLE to the writers' group changes nothing (the check is on the login)
        conn.execute(f"SET ROLE {WRITER_GROUP}")
        with pytest.raises(psycopg.errors.CheckViolation, match=OWN_TABLE_CHECK):
            conn.execute(INSERT, forged)
        conn.execute("RESET ROLE")
        # and it sees none of the other table's rows, not even their head
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.journal_rows WHERE table_id = %s", (other,)
            )
        assert conn.execute(
            f"SELECT count(*) FROM {SCHEMA}.tables WHERE table_id = %s", (other,)
        ).fetchone() == (0,)
    assert len(floor_db.floor_rows(other)) == 5


def test_the_floor_keeps_the_chain_even_against_its_own_table(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    table_id, _ = _shipped_table(floor_db, tmp_path)
    rows = floor_db.floor_rows(table_id)
    with floor_db.as_writer(table_id) as conn:
        # a row the floor holds, sent again as it is or changed: refused (the shipper's own
        # statement skips the rows at or below the floor's head, which it verified)
        with pytest.raises(psycopg.Error, match=r"duplicate key|repeats the floor's copy"):
            conn.execute(INSERT, (table_id, *rows[2]))
        changed = (table_id, *rows[2][:4], json.dumps({"type": "edited"}), rows[2][5], "a" * 64)
        with pytest.raises(psycopg.Error, match=r"duplicate key|differs from"):
            conn.execute(INSERT, changed)
        moved = (table_id, 3, "event", 1, rows[0][3], json.dumps({"type": "x"}), "f" * 64, "a" * 64)
        with pytest.raises(psycopg.Error, match="differs from or repeats the floor's copy"):
            conn.execute(INSERT, moved)
        # a gap: refused
        gap = (table_id, 7, "event", 1, rows[0][3], "{}", "b" * 64, "c" * 64)
        with pytest.raises(psycopg.Error, match="floor keeps no gap"):
            conn.execute(INSERT, gap)
        # the next row with a prev_hash that is not the floor's head: refused
        unlinked = (table_id, 6, "event", 1, rows[0][3], "{}", "d" * 64, "e" * 64)
        with pytest.raises(psycopg.Error, match="does not follow row 5"):
            conn.execute(INSERT, unlinked)
    assert floor_db.floor_rows(table_id) == rows


def test_readers_select_and_nothing_else(floor_db: FloorDb, tmp_path: Path) -> None:
    table_id, _ = _shipped_table(floor_db, tmp_path)
    reader = unique_table_id("reader_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
    dsn = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    with psycopg.connect(f"{dsn} user={reader}", autocommit=True) as conn:
        # no round of this journal ended (no collection): only its table row is released
        count = conn.execute(
            f"SELECT count(*) FROM {SCHEMA}.{RELEASED_ROWS}(%s)", (table_id,)
        ).fetchone()
        assert count == (1,)
        # the rows table itself is the auditor's: refused to a reader
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT count(*) FROM {SCHEMA}.journal_rows")
        row = floor_db.floor_rows(table_id)[-1]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(INSERT, (table_id, 6, "event", 1, row[3], "{}", row[6], "f" * 64))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"DELETE FROM {SCHEMA}.journal_rows")


def test_the_auditor_reads_every_row_and_writes_none(floor_db: FloorDb, tmp_path: Path) -> None:
    table_id, _ = _shipped_table(floor_db, tmp_path)
    auditor = unique_table_id("lab_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {auditor} LOGIN IN ROLE {AUDITOR_GROUP}")
    dsn = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    with psycopg.connect(f"{dsn} user={auditor}", autocommit=True) as conn:
        count = conn.execute(
            f"SELECT count(*) FROM {SCHEMA}.journal_rows WHERE table_id = %s", (table_id,)
        ).fetchone()
        assert count == (5,)  # the round in play included
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"DELETE FROM {SCHEMA}.journal_rows")


def test_even_the_owner_cannot_rewrite_the_floor(floor_db: FloorDb, tmp_path: Path) -> None:
    """A grant made by mistake still meets the append-only triggers."""
    table_id, _ = _shipped_table(floor_db, tmp_path)
    with floor_db.admin() as conn:
        for statement in (
            f"UPDATE {SCHEMA}.journal_rows SET body = '{{}}'",
            f"DELETE FROM {SCHEMA}.journal_rows",
            f"TRUNCATE {SCHEMA}.journal_rows",
        ):
            with pytest.raises(psycopg.Error, match="append-only"):
                conn.execute(statement)
    assert len(floor_db.floor_rows(table_id)) == 5


def test_a_writers_bad_row_for_another_table_learns_nothing_of_it(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """Rows that would meet the other table's unique key or chain check (a row it holds, seq
    and time exactly; a seq after its head with a wrong link): refused by the own-table check
    on the row, before any index or the chain is looked at. The error names no seq, hash or
    id of the other table beyond the forged row's own values, echoed back."""
    mine, _ = _shipped_table(floor_db, tmp_path)
    other, _ = _shipped_table(floor_db, tmp_path)
    theirs = floor_db.floor_rows(other)
    with floor_db.as_writer(mine) as conn:
        for forged in (
            (other, 3, "event", 1, theirs[2][3], "{}", theirs[1][6], "a" * 64),  # held row
            (other, 6, "event", 1, theirs[2][3], "{}", "b" * 64, "c" * 64),  # bad link
        ):
            # not a duplicate key (which would confirm the other table's row 3 and its time)
            with pytest.raises(psycopg.errors.CheckViolation, match=OWN_TABLE_CHECK) as refused:
                conn.execute(INSERT, forged)
            primary = refused.value.diag.message_primary or ""
            detail = refused.value.diag.message_detail or ""
            assert other not in primary
            assert not detail or detail.startswith("Failing row contains")
            for row in theirs:
                if row[6] not in forged:
                    assert row[6][:8] not in primary + detail  # no hash of theirs not sent
            assert "row 5" not in primary + detail and "row 3" not in primary + detail


def test_no_table_password_reaches_the_server_log(floor_db: FloorDb, tmp_path: Path) -> None:
    """floor init with log_statement = all: the passwords it writes to the passfile are sent
    as SCRAM verifiers; the log holds none of them, and the tables still log in."""
    server = floor_db.server
    with floor_db.admin() as conn:
        conn.execute("ALTER SYSTEM SET log_statement = 'all'")
        conn.execute("SELECT pg_reload_conf()")
    passfile = tmp_path / "init.pgpass"
    tables = [unique_table_id(), unique_table_id()]
    try:
        argv = ["floor", "init", "--dsn", floor_db.admin_dsn, "--write-passfile", str(passfile)]
        for table_id in tables:
            argv += ["--table", table_id]
        done = subprocess.run(
            [sys.executable, "-m", "tablectl.controller", *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    finally:
        with floor_db.admin() as conn:
            conn.execute("ALTER SYSTEM RESET log_statement")
            conn.execute("SELECT pg_reload_conf()")
    passwords = [line.rsplit(":", 1)[1] for line in passfile.read_text().splitlines()]
    assert len(passwords) == 2
    log = server.log.read_text(errors="replace")
    assert "ALTER ROLE" in log  # the statements were logged
    for password in passwords:
        assert password not in log
    assert "SCRAM-SHA-256$" in log  # as verifiers
    for table_id in tables:
        dsn = server.table_dsn(floor_db.name, writer_role(table_id))
        with psycopg.connect(dsn, passfile=str(passfile)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (writer_role(table_id),)


def test_an_earlier_floor_is_brought_to_these_privileges(floor_db: FloorDb, tmp_path: Path) -> None:
    """`floor init` on a floor made by the previous tablectl (row-level security on the rows
    table, readers granted it, no own-table check, an index by round): the shippers' COPY is
    refused there ("COPY FROM not supported with row-level security") until init runs again;
    after it, readers are refused the rows table, a table's role is refused another table's
    row by the check, the round index is gone, and shipping goes on from the floor's head."""
    from tablectl.controller.floor.schema import create_schema
    from tablectl.controller.floor.shipper import FloorShipper

    table_id, journal = _shipped_table(floor_db, tmp_path)
    with floor_db.admin() as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows DROP CONSTRAINT {OWN_TABLE_CHECK}")
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows ENABLE ROW LEVEL SECURITY")
        conn.execute(
            f"CREATE POLICY writer_inserts_own_table ON {SCHEMA}.journal_rows FOR INSERT"
            f" TO {WRITER_GROUP} WITH CHECK ('tablectl_table_' || table_id = current_user)"
        )
        conn.execute(f"GRANT SELECT ON {SCHEMA}.journal_rows TO {READER_GROUP}")
        conn.execute(
            f"CREATE INDEX journal_rows_round ON {SCHEMA}.journal_rows (table_id, round, seq)"
        )
    with (
        floor_db.as_writer(table_id) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported),
        conn.cursor() as cursor,
        cursor.copy(_COPY) as copy,
    ):
        copy.set_types(_COPY_TYPES)
    with floor_db.admin() as conn:
        create_schema(conn)
        assert conn.execute(
            "SELECT relrowsecurity FROM pg_class WHERE oid = 'floor.journal_rows'::regclass"
        ).fetchone() == (False,)
        assert (
            conn.execute(
                "SELECT count(*) FROM pg_constraint WHERE conname = %s", (OWN_TABLE_CHECK,)
            ).fetchone()[0]
            >= 1
        )
        assert conn.execute("SELECT to_regclass('floor.journal_rows_round')").fetchone() == (None,)
        reader = f"reader_{table_id}"
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
    dsn = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    with (
        psycopg.connect(f"{dsn} user={reader}", autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(f"SELECT count(*) FROM {SCHEMA}.journal_rows")
    # the table's next rows ship by COPY again
    from tablectl.controller.record.journal import Journal

    with Journal(journal) as local:
        local.append("note", {"type": "after_the_upgrade"}, durable=True)
    shipper = FloorShipper(table_id, journal, floor_db.config(table_id), publish_metrics=False)
    shipper.start()
    try:
        deadline = time.monotonic() + 20
        while len(floor_db.floor_rows(table_id)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        shipper.stop(1)
    assert len(floor_db.floor_rows(table_id)) == 6


def _other_tables_state(floor_db: FloorDb, other: str) -> tuple[Any, ...]:
    with floor_db.admin() as conn:
        row = conn.execute(f"SELECT * FROM {SCHEMA}.tables WHERE table_id = %s", (other,))
        checkpoints = conn.execute(
            f"SELECT * FROM {SCHEMA}.checkpoints WHERE table_id = %s ORDER BY 2, 3", (other,)
        ).fetchall()
        return (tuple(row.fetchone() or ()), tuple(floor_db.floor_rows(other)), tuple(checkpoints))


def _note(size: int, *, signatures: int = 1, pad: int = 0) -> str:
    """A well-formed checkpoint note of tree `size` (its signature is not checked here)."""
    root = base64.b64encode(bytes(32)).decode()
    lines = "".join(
        f"\u2014 tablectl/x {base64.b64encode(bytes([n]) * (64 + pad)).decode()}\n"
        for n in range(signatures)
    )
    return f"tablectl/x\n{size}\n{root}\n\n{lines}"


def _partitions(floor_db: FloorDb) -> set[str]:
    with floor_db.admin() as conn:
        return {
            row[0]
            for row in conn.execute(
                "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid"
                f" WHERE i.inhparent = '{SCHEMA}.journal_rows'::regclass"
            )
        }


def test_every_function_a_writer_may_call_is_bounded_and_touches_no_other_table(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """The functions a table's login may EXECUTE, from the catalog (a new grant fails this
    test until it has a probe here): each is tried against another table and past its
    bounds; the other table's row on the floor and its rows stay as they were."""
    mine, _ = _shipped_table(floor_db, tmp_path)
    other, _ = _shipped_table(floor_db, tmp_path)
    role = writer_role(mine)
    with floor_db.admin() as conn:
        granted = {
            row[0]
            for row in conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc AS p JOIN pg_namespace AS n"
                " ON n.oid = p.pronamespace WHERE n.nspname = %s"
                " AND has_function_privilege(%s, p.oid, 'EXECUTE')"
                " AND p.prorettype <> 'trigger'::regtype",
                (SCHEMA, role),
            )
        }
    before = _other_tables_state(floor_db, other)
    partitions = _partitions(floor_db)
    probed: set[str] = set()
    with floor_db.as_writer(mine) as conn:
        # ensure_partitions_ahead: a few days at most; the work once in a while per login
        probed.add(f"{SCHEMA}.ensure_partitions_ahead(integer)")
        for days in (2000, MAX_DAYS_AHEAD + 1, -1):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="days ahead"):
                conn.execute(f"SELECT {SCHEMA}.ensure_partitions_ahead(%s)", (days,))
        assert _partitions(floor_db) == partitions
        with floor_db.admin() as admin:  # the shipper's own call at connecting: forgotten
            admin.execute(f"DELETE FROM {SCHEMA}.writer_calls")
        conn.execute(f"SELECT {SCHEMA}.ensure_partitions_ahead(%s)", (MAX_DAYS_AHEAD,))
        made = _partitions(floor_db) - partitions
        assert 0 < len(made) <= MAX_DAYS_AHEAD  # the days up to the bound, no more
        newest = max(made)
        with floor_db.admin() as admin:
            admin.execute(f"DROP TABLE {SCHEMA}.{newest}")
        # asked again at once by the same login: no work done (rate-limited), 0 made
        again = conn.execute(
            f"SELECT {SCHEMA}.ensure_partitions_ahead(%s)", (MAX_DAYS_AHEAD,)
        ).fetchone()
        assert again == (0,) and newest not in _partitions(floor_db)
        # durable_elsewhere: its own table only
        probed.add(f"{SCHEMA}.durable_elsewhere(text)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="its own table only"):
            conn.execute(f"SELECT {SCHEMA}.durable_elsewhere(%s)", (other,))
        assert conn.execute(f"SELECT {SCHEMA}.durable_elsewhere(%s)", (mine,)).fetchone() == (0,)
        # add_round_summaries: its own table only, within its released rows, bounded a call
        probed.add(
            f"{SCHEMA}.add_round_summaries(text,bigint[],bigint[],timestamp with time zone[],"
            "timestamp with time zone[],timestamp with time zone[],jsonb[])"
        )
        add = f"SELECT {SCHEMA}.add_round_summaries(%s, %s, %s, %s, %s, %s, %s::jsonb[])"
        now = datetime.datetime.now(datetime.UTC)

        def summaries(table: str, spans: list[tuple[int, int]], body: str = "{}") -> Any:
            n = len(spans)
            return (
                table, [a for a, _ in spans], [b for _, b in spans], [now] * n, [now] * n,
                [now] * n, [body] * n,
            )  # fmt: skip

        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="its own table"):
            conn.execute(add, summaries(other, [(1, 1)]))
        # no round ended (nothing released): nothing is taken, its own table's included
        assert conn.execute(add, summaries(mine, [(1, 1)])).fetchone() == (0,)
        with floor_db.admin() as admin:  # as if row 1 ended a round: released up to it
            admin.execute(
                f"UPDATE {SCHEMA}.tables SET released_seq = 1 WHERE table_id = %s", (mine,)
            )
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="bytes"):
            big = '{"x": "' + "a" * SUMMARY_MAX_BYTES + '"}'
            conn.execute(add, summaries(mine, [(1, 1)], big))
        # within the released rows only: a span past the mark (a round in play) is not taken
        assert conn.execute(add, summaries(mine, [(1, 1), (2, 5)])).fetchone() == (1,)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="at most"):
            conn.execute(add, summaries(mine, [(1, 1)] * (SUMMARIES_PER_CALL + 1)))
        with floor_db.admin() as admin:
            held = admin.execute(
                f"SELECT table_id, from_seq, to_seq FROM {SCHEMA}.{SUMMARIES} ORDER BY 1, 3"
            ).fetchall()
        assert held == [(mine, 1, 1)]
        # ship_checkpoint: its own table only; a bounded, well-formed note; never a tree past
        # the release mark (a round in play); at most MAX_NOTES_PER_SIZE notes of one tree
        probed.add(f"{SCHEMA}.{SHIP_CHECKPOINT}(text,text)")
        ship = f"SELECT {SCHEMA}.{SHIP_CHECKPOINT}(%s, %s)"
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="its own table's"):
            conn.execute(ship, (other, _note(1)))
        for bad in (_note(1, pad=MAX_CHECKPOINT_NOTE_BYTES), "1\n2\n3\n", _note(0)):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute(ship, (mine, bad))
        assert conn.execute(ship, (mine, _note(5))).fetchone() == ("held",)  # nothing released
        with floor_db.admin() as admin:  # as if row 1 of this table were released
            admin.execute(
                f"UPDATE {SCHEMA}.tables SET released_seq = 1 WHERE table_id = %s", (mine,)
            )
        for n in range(MAX_NOTES_PER_SIZE):
            assert conn.execute(ship, (mine, _note(1, signatures=n + 1))).fetchone() == ("stored",)
        assert conn.execute(ship, (mine, _note(1))).fetchone() == ("known",)
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute(ship, (mine, _note(1, signatures=MAX_NOTES_PER_SIZE + 1)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints")
    assert granted == probed, f"functions granted to writers without a probe: {granted - probed}"
    assert _other_tables_state(floor_db, other) == before
