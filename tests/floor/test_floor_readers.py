"""H7 on the floor: a reader polling during real play sees no card of a round in play.

Three real daemons (the demo's, one per game) deal at the demo's pace and ship to a real
PostgreSQL; a reader login polls the floor every 50 ms through the released view (the rows
table itself is refused to it). Afterwards each local journal says when every
round ended (the recorded time of its accepted collection): a card row seen by a poll that
began before its round ended is a leak. Every ended round must also reach the reader.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tablectl.controller.floor.schema import AUDITOR_GROUP, READER_GROUP, RELEASED_ROWS, SCHEMA
from tablectl.simulators import demo
from tests.floor.floorkit import FloorDb, local_rows, unique_table_id

GAMES = ("three_card_21", "heads_up_holdem", "five_card_hilo")
POLL_SECONDS = 0.05


def _table_args(state_dir: Path, floor_db: FloorDb, table_id: str, game: str) -> Any:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(
        [
            "--game", game,
            "--rounds", "3",
            "--state-dir", str(state_dir),
            "--metrics-listen", "127.0.0.1:0",
            "--table-id", table_id,
            "--floor-dsn", floor_db.config(table_id).dsn,
            "--floor-passfile", str(floor_db.passfile),
            "--pace", "0.03",
        ]
    )  # fmt: skip


def _carries_cards(body: dict[str, Any]) -> bool:
    return "card" in body or "cards" in body


def _round_ends(rows: list[tuple[Any, ...]]) -> dict[int, float]:
    """seq of every card row -> when its round ended (the accepted collection's recorded
    time, UTC seconds); a card whose round never ended maps to infinity."""
    collections: list[tuple[int, float]] = []
    for index, (seq, kind, _rnd, at, body, _prev, _hash) in enumerate(rows):
        if kind != "event" or json.loads(body).get("type") != "hands_collected":
            continue
        refused = False
        for later in rows[index + 1 :]:
            if later[1] != "decision":
                break
            decision = json.loads(later[4])
            refused = refused or (decision.get("decision") == "rejected")
        if not refused:
            collections.append((seq, datetime.datetime.fromisoformat(at).timestamp()))
    ends: dict[int, float] = {}
    for seq, kind, _rnd, _at, body, _prev, _hash in rows:
        if kind == "event" and _carries_cards(json.loads(body)):
            ends[seq] = next((when for c, when in collections if c > seq), float("inf"))
    return ends


def test_a_reader_polling_live_play_sees_no_card_of_a_round_in_play(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    tables = {unique_table_id(): game for game in GAMES}
    for table_id in tables:
        floor_db.provision(table_id)
    reader, auditor = unique_table_id("reader_"), unique_table_id("lab_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
        conn.execute(f"CREATE ROLE {auditor} LOGIN IN ROLE {AUDITOR_GROUP}")
    local = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    # the rows table itself is the auditor's and the DBA's: a reader is refused it
    with (
        psycopg.connect(f"{local} user={reader}", autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(f"SELECT count(*) FROM {SCHEMA}.journal_rows")
    ids = list(tables)
    polls: list[tuple[float, str, set[tuple[str, int]]]] = []
    auditor_saw_live = threading.Event()
    stop = threading.Event()

    def poll() -> None:
        queries = {
            RELEASED_ROWS: f"SELECT r.table_id, r.seq, r.kind, r.body FROM unnest(%s::text[]) AS t,"
            f" {SCHEMA}.{RELEASED_ROWS}(t) AS r"
        }
        with (
            psycopg.connect(f"{local} user={reader}", autocommit=True) as conn,
            psycopg.connect(f"{local} user={auditor}", autocommit=True) as lab,
        ):
            while not stop.is_set():
                for relation, query in queries.items():
                    began = time.time()
                    seen = {
                        (table_id, int(seq))
                        for table_id, seq, kind, body in conn.execute(query, (ids,))
                        if kind == "event" and _carries_cards(json.loads(body))
                    }
                    polls.append((began, relation, seen))
                count = lab.execute(
                    f"SELECT count(*) FROM {SCHEMA}.journal_rows WHERE table_id = ANY(%s)",
                    (ids,),
                ).fetchone()
                if count and count[0] > 50:
                    auditor_saw_live.set()
                stop.wait(POLL_SECONDS)

    poller = threading.Thread(target=poll)
    poller.start()

    async def play() -> list[int]:
        plays = [
            demo.play_demo(
                _table_args(tmp_path / table_id, floor_db, table_id, game), 7 + n, "127.0.0.1", 0
            )
            for n, (table_id, game) in enumerate(tables.items())
        ]
        return list(await asyncio.gather(*plays))

    try:
        statuses = asyncio.run(play())
        played_until = time.time()
        time.sleep(0.5)  # a last poll after the final collections were shipped
    finally:
        stop.set()
        poller.join(10)
    assert statuses == [0, 0, 0]
    assert auditor_saw_live.is_set()

    leaks: list[str] = []
    released_during_play = 0
    for table_id in tables:
        ends = _round_ends(local_rows(tmp_path / table_id / "journal.sqlite"))
        assert ends, f"{table_id} dealt no card"
        for began, relation, seen in polls:
            for seq, ended in ends.items():
                if (table_id, seq) in seen and began < ended:
                    leaks.append(
                        f"{tables[table_id]} row {seq} via {relation}, "
                        f"{ended - began:.2f} s before its round ended"
                    )
                if (table_id, seq) in seen and began < played_until:
                    released_during_play += 1
        # every card of an ended round reached the reader
        ended_cards = {(table_id, seq) for seq, end in ends.items() if end < float("inf")}
        assert ended_cards <= polls[-1][2], f"ended rounds of {table_id} not released"
    assert not leaks, f"{len(leaks)} cards of rounds in play read: {leaks[:5]}"
    assert released_during_play > 0  # rounds reach the reader as play goes on, not at the end
