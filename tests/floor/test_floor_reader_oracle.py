"""H7 against a reader who counts: nothing a reader can read moves while a round is played.

A table ships an ended round and a round in play; a reader login then reads, and EXPLAINs
(ANALYZE, BUFFERS, VERBOSE), everything it is granted on the floor, enumerated from the
catalog (every relation and column it may SELECT, every function it may EXECUTE), so a grant
added later is read here too. The round in play then grows by a hundred rows, shipped by the
real shipper: every answer and every plan must be the same as before (a count, a seq, a time,
a hash or a size that moved would be a count of the round's rows). The server's own counters
(pg_stat_*, sizes, locks, the transaction counter, pg_class's counts, a temporary table's
xmin) must be refused to the reader.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tablectl.controller.floor.schema import (
    HIDDEN_CLASS_COLUMNS,
    HIDDEN_STATISTICS_FUNCTIONS,
    READER_GROUP,
    SCHEMA,
)
from tablectl.controller.record.journal import Journal
from tests.floor.floorkit import FloorDb, ship_until_caught_up, unique_table_id
from tests.floor.test_floor_shuffle import shuffled, write_table


def _reader(floor_db: FloorDb) -> str:
    reader = unique_table_id("reader_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
    return reader


def _login(floor_db: FloorDb, role: str) -> psycopg.Connection[Any]:
    server = floor_db.server
    return psycopg.connect(
        f"host={server.sockets} port={server.port} dbname={floor_db.name} user={role}",
        autocommit=True,
    )


def _granted_reads(conn: psycopg.Connection[Any], table_id: str) -> dict[str, str]:
    """Every query the login may run over the floor's schema: each relation's readable
    columns, each function (a table's id for its text argument). From the catalog."""
    queries: dict[str, str] = {}
    relations = conn.execute(
        "SELECT c.oid, c.relname FROM pg_class AS c JOIN pg_namespace AS n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm')"
        " ORDER BY 2",
        (SCHEMA,),
    ).fetchall()
    for oid, name in relations:
        columns = [
            row[0]
            for row in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0"
                " AND NOT attisdropped AND has_column_privilege(%s, attnum, 'SELECT')"
                " ORDER BY attnum",
                (oid, oid),
            )
        ]
        if columns:
            listed = ", ".join(f'"{column}"' for column in columns)
            queries[name] = f"SELECT {listed} FROM {SCHEMA}.{name} ORDER BY {listed}"
    functions = conn.execute(
        "SELECT p.oid::regprocedure::text, p.proname, p.pronargs,"
        " pg_get_function_identity_arguments(p.oid) FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %s AND has_function_privilege(p.oid, 'EXECUTE')"
        " AND p.prorettype <> 'trigger'::regtype ORDER BY 1",
        (SCHEMA,),
    ).fetchall()
    for signature, name, _, arguments in functions:
        if name in _SHUFFLE_CHECK_CALLS:  # a check number of the login's own, not a table
            queries[signature] = _SHUFFLE_CHECK_CALLS[name]
            continue
        assert arguments.split(",")[0].split()[-1] == "text", signature
        queries[signature] = f"SELECT * FROM {SCHEMA}.{name}('{table_id}')"
    return queries


_NEW_CHECK = f"{SCHEMA}.shuffle_check_begin()"
#: `floor shuffle-check`'s functions, called as a check calls them (each on a new check of
#: the reader's: its number moves with the checks begun, never with play, so it is compared
#: as "a number was given")
_SHUFFLE_CHECK_CALLS = {
    "shuffle_check_begin": f"SELECT {_NEW_CHECK} > 0",
    "shuffle_check_add": f"SELECT {SCHEMA}.shuffle_check_add({_NEW_CHECK},"
    " '{}', '{}', '{}', '{}', '{}')",
    "shuffle_check_repeats": f"SELECT * FROM {SCHEMA}.shuffle_check_repeats({_NEW_CHECK})",
    "shuffle_check_end": f"SELECT {SCHEMA}.shuffle_check_end({_NEW_CHECK})",
}


_TIMES = re.compile(r'"(Actual (Startup|Total) Time|Planning Time|Execution Time)": [0-9.]+')
#: the pages a plan touched: the released rows' own, and the index pages above and beside
#: them (a page split among the table's entries, or a new level of the partition's index,
#: moves this by one now and then: said in docs/floor.md, bounded below)
_PAGES = re.compile(r'"Shared (Hit|Read) Blocks": ([0-9]+)')


def _pages(plan: str) -> int:
    return sum(int(found[1]) for found in _PAGES.findall(plan))


def _read_everything(conn: psycopg.Connection[Any], queries: dict[str, str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for name, query in queries.items():
        seen[name] = [tuple(map(str, row)) for row in conn.execute(query)]
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, VERBOSE, TIMING OFF, SUMMARY OFF, FORMAT JSON) " + query
        ).fetchone()
        assert plan is not None
        text = json.dumps(plan[0], sort_keys=True)
        seen[f"EXPLAIN {name}"] = _PAGES.sub("", _TIMES.sub("", text))
        seen[f"pages {name}"] = _pages(text)
    return seen


def _grow_round_in_play(path: Path, rows: int) -> None:
    """The round in play goes on: `rows` more cards drawn (and nothing ends it)."""
    with Journal(path) as journal:
        in_play = journal.tail_rows(1)[0].round
        for card in random.Random(5).choices(["2c", "7d", "Qs", "Ah"], k=rows):
            journal.append("event", {"type": "card_drawn", "card": card}, round_number=in_play)
        journal.flush()


def test_nothing_a_reader_reads_or_explains_moves_while_a_round_is_played(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    decks = shuffled(random.Random(31), 3)
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    write_table(path, decks[:2], open_round=decks[2])
    ship_until_caught_up(table_id, path, config)
    reader = _reader(floor_db)
    with _login(floor_db, reader) as conn:
        queries = _granted_reads(conn, table_id)
        assert queries, "the reader is granted nothing"
        before = _read_everything(conn, queries)
        _grow_round_in_play(path, 100)
        ship_until_caught_up(table_id, path, config)
        with floor_db.admin() as admin:
            head, released = admin.execute(
                f"SELECT head_seq, released_seq FROM {SCHEMA}.tables WHERE table_id = %s",
                (table_id,),
            ).fetchone()
        assert head - released > 140  # the round in play, on the floor
        after = _read_everything(conn, queries)
    moved = [
        name
        for name in before
        if before[name] != after[name]
        and not (name.startswith("pages ") and abs(after[name] - before[name]) <= 2)
    ]
    assert not moved, f"moved in play: {moved}: {before[moved[0]]} -> {after[moved[0]]}"


def test_the_servers_row_counters_are_refused_to_a_reader(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    write_table(path, shuffled(random.Random(3), 1), open_round=shuffled(random.Random(4), 1)[0])
    ship_until_caught_up(table_id, path, config)
    reader = _reader(floor_db)
    with floor_db.admin() as admin:
        partition = admin.execute(
            "SELECT c.oid::regclass::text FROM pg_inherits AS i JOIN pg_class AS c"
            " ON c.oid = i.inhrelid WHERE i.inhparent = 'floor.journal_rows'::regclass"
            " AND EXISTS (SELECT 1 FROM floor.journal_rows AS r WHERE r.tableoid = c.oid)"
        ).fetchone()[0]
    probes = [
        f"SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = '{partition}'::regclass",
        f"SELECT pg_stat_get_tuples_inserted('{partition}'::regclass)",
        f"SELECT pg_stat_get_xact_tuples_inserted('{partition}'::regclass)",
        f"SELECT idx_scan FROM pg_stat_all_indexes WHERE relid = '{partition}'::regclass",
        f"SELECT heap_blks_read FROM pg_statio_all_tables WHERE relid = '{partition}'::regclass",
        "SELECT tup_inserted, xact_commit FROM pg_stat_database",
        f"SELECT reltuples FROM pg_class WHERE oid = '{partition}'::regclass",
        f"SELECT relpages FROM pg_class WHERE oid = '{partition}'::regclass",
        "SELECT * FROM pg_class LIMIT 1",
        "SELECT count(*) FROM pg_locks",
        "SELECT state, xact_start, backend_xid FROM pg_stat_activity",
        "SELECT age('3'::xid)",
        "CREATE TEMPORARY TABLE counter (n int)",
    ]
    probes += [
        f"SELECT {name}('{partition}'::regclass)" for name in HIDDEN_STATISTICS_FUNCTIONS[:4]
    ]
    probes += [
        "SELECT pg_current_wal_lsn()",
        "SELECT pg_current_wal_insert_lsn()",
        "SELECT txid_current_snapshot()",
        "SELECT pg_current_snapshot()",
        "SELECT txid_current()",
        "SELECT pg_current_xact_id()",
        "SELECT pg_database_size(current_database())",
    ]
    with _login(floor_db, reader) as conn:
        for probe in probes:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(probe)
        # what stays: pg_class's names and kinds (clients list relations), and the time
        assert conn.execute(
            "SELECT relkind FROM pg_class WHERE oid = %s::regclass", (partition,)
        ).fetchone() == ("r",)
        for column in HIDDEN_CLASS_COLUMNS:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT {column} FROM pg_class LIMIT 1")
    # the DBA's monitoring keeps them (pg_read_all_stats)
    with floor_db.admin() as admin:
        admin.execute(f"GRANT pg_read_all_stats TO {reader}")
    with _login(floor_db, reader) as conn:
        assert conn.execute(
            f"SELECT pg_stat_get_tuples_inserted('{partition}'::regclass) >= 0"
        ).fetchone() == (True,)
