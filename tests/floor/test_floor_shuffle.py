"""Shuffle integrity on the floor (docs/shuffle-integrity.md): Q1 across tables with
`tablectl floor shuffle-check`, and Q3 in `tablectl floor report`, on a real PostgreSQL.

Journals are written the way the table service writes them (the engine's decisions after
each event, tests/journal/test_seat_bias.py) and shipped by the real shipper; the floor's
release mark then says which rounds are over.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.engine.cards import STANDARD_DECK
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.record.journal import Journal
from tests.floor.floorkit import FloorDb, ship_until_caught_up, unique_table_id

TABLE = {"type": "table", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}}
PLAYERS = [1, 2, 3, 4, 5, 6, 7]
ORDER = [*PLAYERS, "dealer"] * 5  # 40.7(d): round the table five times; 40 cards a round
LOW = [c for c in STANDARD_DECK if c[0] in "23456"]


def write_table(
    path: Path,
    decks: list[list[str]],
    *,
    last_collected_unreleased: bool = False,
    open_round: list[str] | None = None,
) -> None:
    """A HILO table dealing one shuffled deck a round, each `decks` entry in that order.

    After the last round the next shuffle is recorded (the row after the collection's
    decisions: what releases that round on the floor), unless `last_collected_unreleased`:
    then the journal ends on the last round's collection, which the floor holds back until
    a row follows it. `open_round`: a round dealt after them and never collected."""
    engine = Engine(TableSpec.from_dict(TABLE))
    with Journal(path) as journal:
        journal.append("table", TABLE, durable=True)

        def feed(event: dict[str, Any]) -> None:
            seq = journal.append("event", event, round_number=engine.round_number)
            for decision in engine.handle(event, seq):
                journal.append("decision", decision.to_dict(), round_number=engine.round_number)

        def deal(deck: list[str]) -> None:
            feed({"type": "shuffle_completed", "count": 52})
            feed({"type": "bets_closed", "positions": PLAYERS})
            for card in deck[: len(ORDER)]:
                feed({"type": "card_drawn", "card": card})

        feed({"type": "deck_received"})
        for deck in decks:
            deal(deck)
            feed({"type": "deal_completed"})
            feed({"type": "stub_counted", "count": 52 - len(ORDER)})  # S1, every round
            feed({"type": "hands_collected"})
        if open_round is not None:
            deal(open_round)
        elif not last_collected_unreleased:
            feed({"type": "shuffle_completed", "count": 52})
        journal.flush()


def shuffled(rng: random.Random, rounds: int) -> list[list[str]]:
    return [rng.sample(STANDARD_DECK, 52) for _ in range(rounds)]


def ship(floor_db: FloorDb, tmp_path: Path, decks: list[list[str]], **how: Any) -> str:
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    write_table(path, decks, **how)
    ship_until_caught_up(table_id, path, config)
    return table_id


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tablectl.controller", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def shuffle_check(floor_db: FloorDb, *extra: str) -> tuple[int, dict[str, Any], str]:
    done = tablectl("floor", "shuffle-check", "--dsn", floor_db.admin_dsn, "--json", *extra)
    assert done.returncode in (0, 1, 2), done.stderr
    text = tablectl("floor", "shuffle-check", "--dsn", floor_db.admin_dsn, *extra)
    assert text.returncode == done.returncode, text.stderr
    return done.returncode, json.loads(done.stdout), text.stdout + text.stderr


def no_card_in(text: str) -> bool:
    """H7: a finding names tables and rounds, never a card: no card's text ("7H", "TC") as a
    word of its own (table ids are lowercase hex after a "t"; rounds and days are digits)."""
    return not [c for c in STANDARD_DECK if re.search(rf"\b{c}\b", text)]


def test_Q1_a_stacked_order_replayed_at_another_table_is_found_naming_both(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    rng = random.Random(11)
    first, second = shuffled(rng, 6), shuffled(rng, 6)
    second[3] = list(first[2])  # table B's round 4 deals table A's round 3, card for card
    table_a = ship(floor_db, tmp_path, first)
    table_b = ship(floor_db, tmp_path, second)
    code, report, text = shuffle_check(floor_db, "--days", "2")
    assert code == 1, text
    assert report["rounds"] == 12 and report["runs_checked"] == 12 * (40 - 12 + 1)
    [found] = report["findings"]
    today = found["first"]["gaming_day"]
    assert sorted([found["first"], found["second"]], key=lambda w: w["table"]) == sorted(
        [
            {"table": table_a, "round": 3, "gaming_day": today},
            {"table": table_b, "round": 4, "gaming_day": today},
        ],
        key=lambda w: w["table"],
    )
    assert found["runs"] == 40 - 12 + 1  # every run of the round: the whole deal replayed
    assert f"table {table_b} round 4" in text and f"table {table_a} round 3" in text
    assert no_card_in(text) and no_card_in(json.dumps(report))


def test_Q1_the_same_table_replaying_its_own_earlier_shoe_is_found(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    rng = random.Random(12)
    decks = shuffled(rng, 5)
    decks[4] = decks[1][:20] + rng.sample(decks[1][20:], 32)  # half a deal replayed
    table_id = ship(floor_db, tmp_path, decks)
    code, report, text = shuffle_check(floor_db)
    assert code == 1, text
    [found] = report["findings"]
    assert (found["first"]["table"], found["first"]["round"]) == (table_id, 2)
    assert (found["second"]["table"], found["second"]["round"]) == (table_id, 5)
    assert found["runs"] == 20 - 12 + 1


def test_Q1_honest_tables_are_no_finding(floor_db: FloorDb, tmp_path: Path) -> None:
    rng = random.Random(13)
    for _ in range(3):
        ship(floor_db, tmp_path, shuffled(rng, 8))
    code, report, text = shuffle_check(floor_db)
    assert code == 0, text
    assert report["findings"] == [] and report["rounds"] == 24 and "no replayed order" in text


def test_a_surveillance_reader_runs_the_check(floor_db: FloorDb, tmp_path: Path) -> None:
    """A reader login (ended rounds only, the released view) finds it as the DBA does."""
    from tablectl.controller.floor.schema import READER_GROUP

    rng = random.Random(16)
    first, second = shuffled(rng, 3), shuffled(rng, 3)
    second[2] = list(first[0])
    table_a = ship(floor_db, tmp_path, first)
    table_b = ship(floor_db, tmp_path, second)
    reader = unique_table_id("reader_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
    local = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    done = tablectl("floor", "shuffle-check", "--dsn", f"{local} user={reader}", "--json")
    assert done.returncode == 1, done.stderr
    [found] = json.loads(done.stdout)["findings"]
    assert {(w["table"], w["round"]) for w in (found["first"], found["second"])} == {
        (table_a, 1),
        (table_b, 3),
    }


def test_a_table_that_cannot_be_replayed_is_named_not_skipped(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """A table whose game this install does not know: named as not checked; with no finding
    the answer is "cannot say" (exit 2); the other tables are still checked (exit 1 on a
    replay among them); the report still counts its day and says why Q3 did not run."""
    from tests.floor.floorkit import shipped_journal

    stranger, _ = shipped_journal(floor_db, tmp_path, 30, "no_such_game")
    code, report, text = shuffle_check(floor_db)
    assert code == 2 and f"{stranger}: NOT CHECKED" in text and "no_such_game" in text, text
    assert list(report["not_checked"]) == [stranger]

    rng = random.Random(17)
    first, second = shuffled(rng, 3), shuffled(rng, 3)
    second[1] = list(first[2])
    ship(floor_db, tmp_path, first)
    ship(floor_db, tmp_path, second)
    code, report, text = shuffle_check(floor_db)
    assert code == 1 and len(report["findings"]) == 1, text
    assert list(report["not_checked"]) == [stranger]

    out = tmp_path / "report"
    made = tablectl(
        "floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day", _floor_day(floor_db),
        "--output", str(out),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = {row["table"]: row for row in csv.DictReader(next(out.glob("*.csv")).open())}
    assert lines[stranger]["seat_bias"].startswith("not tested (cannot replay: game")


def _floor_day(floor_db: FloorDb) -> str:
    """The floor's current gaming day (its settings' start and zone)."""
    with floor_db.admin() as conn:
        day = conn.execute(
            "SELECT ((now() AT TIME ZONE time_zone) - gaming_day_start)::date FROM floor.settings"
        ).fetchone()[0]
    assert isinstance(day, datetime.date)
    return day.isoformat()


def test_Q1_a_round_not_yet_released_on_the_floor_is_never_read(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """Table B's last round deals table A's order; the journal ends on its collection, so the
    floor holds that round back (its release waits for the row after the collection's
    decisions) — and B has a round in play dealing A's order too. Neither is read: no
    finding. Once B's next row arrives, the collected round is released and found."""
    rng = random.Random(14)
    first = shuffled(rng, 3)
    table_a = ship(floor_db, tmp_path, first)
    second = [*shuffled(rng, 2), list(first[1])]
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    write_table(path, second, last_collected_unreleased=True)
    ship_until_caught_up(table_id, path, config)
    with floor_db.admin() as conn:
        head, released = conn.execute(
            "SELECT head_seq, released_seq FROM floor.tables WHERE table_id = %s", (table_id,)
        ).fetchone()
    assert released < head  # the last round's collection is not released yet
    code, report, text = shuffle_check(floor_db)
    assert code == 0 and report["rounds"] == 3 + 2, text

    # the next round begins (a shuffle, and A's order dealt again while it is in play)
    engine_rows = _continue_with_open_round(path, list(first[0]))
    assert engine_rows
    ship_until_caught_up(table_id, path, config)
    code, report, text = shuffle_check(floor_db)
    assert code == 1, text
    [found] = report["findings"]  # round 3, now released; the round in play, not
    assert {(w["table"], w["round"]) for w in (found["first"], found["second"])} == {
        (table_a, 2),
        (table_id, 3),
    }
    assert report["rounds"] == 3 + 3


def _continue_with_open_round(path: Path, deck: list[str]) -> int:
    """Append to a journal written by write_table: the next shuffle and a round in play."""
    from tablectl.controller.record.journal import ReplayedDraws, engine_from_table_row, read_rows

    rows = list(read_rows(path))
    engine = engine_from_table_row(TABLE, ReplayedDraws(()))
    for row in rows:
        if row.kind == "event":
            engine.handle(row.body, row.seq)
    added = 0
    with Journal(path) as journal:

        def feed(event: dict[str, Any]) -> None:
            nonlocal added
            seq = journal.append("event", event, round_number=engine.round_number)
            added += 1
            for decision in engine.handle(event, seq):
                journal.append("decision", decision.to_dict(), round_number=engine.round_number)

        feed({"type": "shuffle_completed", "count": 52})
        feed({"type": "bets_closed", "positions": PLAYERS})
        for card in deck[: len(ORDER)]:
            feed({"type": "card_drawn", "card": card})
        journal.flush()
    return added


def append_rounds(
    path: Path, decks: list[list[str]], *, checkpoint_after: int = 0, stamp: bool = False
) -> None:
    """Append rounds to a journal written by write_table (the engine rebuilt from its events),
    each dealing its deck, and the next shuffle; with `checkpoint_after` an engine checkpoint
    row, as the table service writes one at a gaming day's start, after that many rounds;
    with `stamp` each event carries its local `time`, as the table service stamps it."""
    from tablectl.controller.record.journal import ReplayedDraws, engine_from_table_row, read_rows

    engine = engine_from_table_row(TABLE, ReplayedDraws(()))
    for row in read_rows(path):
        if row.kind == "event":
            engine.handle(row.body, row.seq)
    with Journal(path) as journal:

        def feed(event: dict[str, Any]) -> None:
            if stamp:
                event["time"] = datetime.datetime.now().astimezone().isoformat()
            seq = journal.append("event", event, round_number=engine.round_number)
            for decision in engine.handle(event, seq):
                journal.append("decision", decision.to_dict(), round_number=engine.round_number)

        for number, deck in enumerate(decks):
            if checkpoint_after and number == checkpoint_after:
                body = {"type": "checkpoint", "engine": engine.snapshot()}
                journal.append("checkpoint", body, round_number=engine.round_number)
            feed({"type": "bets_closed", "positions": PLAYERS})
            for card in deck[: len(ORDER)]:
                feed({"type": "card_drawn", "card": card})
            feed({"type": "deal_completed"})
            feed({"type": "stub_counted", "count": 52 - len(ORDER)})
            feed({"type": "hands_collected"})
            feed({"type": "shuffle_completed", "count": 52})
        journal.flush()


_APPEND_THEN = """
import json, sys
from pathlib import Path
from tests.floor.test_floor_shuffle import append_rounds, write_table
path, decks = Path(sys.argv[1]), json.loads(sys.argv[2])
write_table(path, decks[:1])
append_rounds(path, decks[1:], checkpoint_after=2)
"""


def test_Q1_reads_the_last_N_gaming_days_from_the_checkpoint_before_them(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """Rounds 1-4 dealt three days ago (a checkpoint before round 4), rounds 5-7 today:
    round 6 deals round 4's order, round 7 round 2's. `--days 1` checks today's rounds only
    (no finding: both earlier shoes are outside); `--days 5` finds both. The replay of a
    window starts at the last checkpoint before it, not at row 1."""
    from tablectl.controller.floor.report import CHECKPOINT_REACH as REPORT_REACH
    from tablectl.controller.floor.shuffle import EndedRound, TableReplay, replay_table

    rng = random.Random(18)
    decks = shuffled(rng, 7)
    decks[5], decks[6] = list(decks[3]), list(decks[1])
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["faketime", "-f", "-3d", sys.executable, "-c", _APPEND_THEN, str(path),
         json.dumps(decks[:4])],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    append_rounds(path, decks[4:])
    ship_until_caught_up(table_id, path, config)

    code, report, text = shuffle_check(floor_db, "--days", "1")
    assert code == 0 and report["rounds"] == 3, text
    code, report, text = shuffle_check(floor_db, "--days", "5")
    assert code == 1 and report["rounds"] == 7, text
    pairs = {
        tuple((w["round"], w["gaming_day"]) for w in (f["first"], f["second"]))
        for f in report["findings"]
    }
    today = datetime.date.fromisoformat(_floor_day(floor_db))
    before = (today - datetime.timedelta(days=3)).isoformat()
    assert pairs == {((4, before), (6, today.isoformat())), ((2, before), (7, today.isoformat()))}

    with floor_db.admin() as conn:
        since = conn.execute(
            "SELECT (%s::date + gaming_day_start) AT TIME ZONE time_zone FROM floor.settings",
            (today,),
        ).fetchone()[0]
        read = replay_table(conn, table_id, since, info=TableReplay(table_id))
        assert [r.number for r in read if isinstance(r, EndedRound)] == [4, 5, 6, 7]
        # a day's report reaches back a day and a half for its checkpoint, no further: the
        # checkpoint three days back is out of reach, and it says so rather than read the
        # table's older rows (with a reach of four days it replays as above)
        far = replay_table(
            conn, table_id, since, info=TableReplay(table_id), reach=since - REPORT_REACH
        )
        with pytest.raises(ValueError, match="no engine checkpoint on the floor between"):
            list(far)
        near = replay_table(
            conn, table_id, since, info=TableReplay(table_id),
            reach=since - datetime.timedelta(days=4),
        )  # fmt: skip
        assert [r.number for r in near if isinstance(r, EndedRound)] == [4, 5, 6, 7]


def _biased(rng: random.Random, rounds: int) -> list[list[str]]:
    """Position 1's five cards are low ones far more often than a shuffle gives."""
    decks = []
    for _ in range(rounds):
        deck = rng.sample(STANDARD_DECK, 52)
        ones = [c for c in deck if c in LOW][:5] if rng.random() < 0.6 else deck[:5]
        rest = [c for c in deck if c not in ones]
        dealt = [ones[i // 8] if t == 1 else rest.pop() for i, t in enumerate(ORDER)]
        decks.append(dealt + rest)
    return decks


def test_Q3_the_floor_report_flags_a_biased_seat_and_says_not_tested_when_too_few(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    rng = random.Random(15)
    biased = ship(floor_db, tmp_path, _biased(rng, 60))
    honest = ship(floor_db, tmp_path, shuffled(rng, 60))
    few = ship(floor_db, tmp_path, shuffled(rng, 2))
    out = tmp_path / "report"
    made = tablectl(
        "floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day", _floor_day(floor_db),
        "--output", str(out),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = {row["table"]: row for row in csv.DictReader(next(out.glob("*.csv")).open())}
    assert lines[biased]["seat_bias"] == "flagged" and float(lines[biased]["seat_p_value"]) < 1e-4
    assert lines[biased]["seat_cards"] == str(60 * 35)
    assert lines[honest]["seat_bias"] == "ok" and float(lines[honest]["seat_p_value"]) > 1e-4
    assert lines[few]["seat_bias"] == "not tested" and lines[few]["seat_chi_square"] == ""
    page = next(out.glob("*.html")).read_text()
    row = page[page.index(f"<tr><td>{biased}</td><td>{60 * 35}</td>") :].split("</tr>")[0]
    assert "<span class='alert'>flagged</span>" in row
    assert "not tested" in page.split("Seat bias (Q3)")[1]
    assert no_card_in(page.split("Seat bias (Q3)")[1].split("</table>")[0])


def test_the_day_report_in_worker_processes_is_the_report_of_one(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """`floor report --workers 2` (tables replayed in two processes, each its own connection)
    writes the CSV `--workers 1` writes, byte for byte: counts, Q3, table order; a table
    that cannot be replayed says so the same way."""
    rng = random.Random(21)
    ship(floor_db, tmp_path, _biased(rng, 30))
    for rounds in (12, 2, 7):
        ship(floor_db, tmp_path, shuffled(rng, rounds))
    broken = ship(floor_db, tmp_path, shuffled(rng, 3))
    with floor_db.admin() as conn:  # a game this install does not know
        conn.execute(
            "UPDATE floor.tables SET table_row = replace(table_row, 'five_card_hilo', 'unknown')"
            " WHERE table_id = %s",
            (broken,),
        )
    written = {}
    for workers in ("1", "2"):
        out = tmp_path / f"report-{workers}"
        made = tablectl(
            "floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day",
            _floor_day(floor_db), "--output", str(out), "--workers", workers,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        written[workers] = next(out.glob("*.csv")).read_text()
    assert written["1"] == written["2"]
    assert written["2"].count("\n") == 7 and "cannot replay" in written["2"]  # 5 + FLOOR
    refused = tablectl("floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day",
                       _floor_day(floor_db), "--workers", "0")  # fmt: skip
    assert refused.returncode == 2 and "number of worker processes" in refused.stderr


_APPEND = """
import json, sys
from pathlib import Path
from tests.floor.test_floor_shuffle import append_rounds, write_table
path, decks, checkpoint_after = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
if not path.exists():
    write_table(path, decks[:1])
    decks = decks[1:]
append_rounds(path, decks, checkpoint_after=checkpoint_after, stamp=True)
"""


def test_the_day_report_reads_its_day_once_from_the_checkpoint_before_it(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """A table's gaming day in the report is one pass over its rows: from the engine
    checkpoint before the day's window (Q3 replays them) through the window's last row (the
    counts read the window's). Rounds dealt two days before (out of Q3's reach), the evening
    before (with a checkpoint), on the day (with a round between recorded by a clock a day
    ahead: the engine replays it, read by its seq; the counts leave it to its own day) and
    two days after, each under libfaketime. The server's own count of the rows this backend
    fetched (pg_stat_xact_user_tables) is the rows from that checkpoint to the day's last,
    and the counts and Q3 are what the day's rows alone give. Reading the window for the
    counts and again for Q3, on to the first round after the day (what the report did),
    fails it; so does skipping the round recorded out of the window."""
    from tablectl.controller.engine.gaming_day import DEFAULT_START
    from tablectl.controller.floor.report import (
        _rows_between,
        day_window,
        summarize_table,
        table_day,
    )
    from tablectl.controller.record.journal import read_rows

    rng = random.Random(23)
    decks = shuffled(rng, 14)
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    path = tmp_path / f"{table_id}.sqlite"
    day = datetime.date(2026, 11, 20)
    with floor_db.admin() as conn:
        low, high = day_window(conn, day)
    root = Path(__file__).resolve().parents[2]
    hours = datetime.timedelta(hours=1)
    plays = [  # (when, decks, checkpoint after that many rounds)
        (low - 50 * hours, decks[:3], 0),
        (low - 10 * hours, decks[3:5], 1),
        (low + 5 * hours, decks[5:7], 0),
        (high + 5 * hours, decks[7:8], 0),  # the table's clock a day ahead, then put back
        (low + 8 * hours, decks[8:10], 0),
        (high + 30 * hours, decks[10:], 0),
    ]
    for when, dealt, checkpoint_after in plays:
        clock = f"@{when.astimezone(datetime.UTC):%Y-%m-%d %H:%M:%S}"
        done = subprocess.run(
            ["faketime", "-f", clock, sys.executable, "-c", _APPEND, str(path),
             json.dumps(dealt), str(checkpoint_after)],
            capture_output=True, text=True, timeout=60, cwd=root, env={**os.environ, "TZ": "UTC"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    ship_until_caught_up(table_id, path, config)

    rows = list(read_rows(path))
    at = {row.seq: datetime.datetime.fromisoformat(row.recorded_at) for row in rows}
    (checkpoint,) = [r.seq for r in rows if r.kind == "checkpoint" and at[r.seq] < low]
    in_window = [seq for seq, moment in at.items() if low <= moment < high]
    assert len(in_window) > 100 and max(at.values()) >= high  # rows after the day to skip
    with floor_db.admin() as conn, conn.transaction():
        summary = table_day(conn, table_id, TABLE, day, (low, high))
        read = conn.execute(
            "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))"
            " FROM pg_stat_xact_user_tables"
            " WHERE schemaname = 'floor' AND relname LIKE 'journal\\_rows\\_%'"
        ).fetchone()[0]
        alone = summarize_table(
            table_id,
            _rows_between(conn, table_id, low, high),
            day,
            DEFAULT_START,
        )
    once = max(in_window) - checkpoint + 1  # the checkpoint's row through the window's last
    assert once <= read <= once + 5, (read, once, len(in_window))
    assert summary.counts == alone.counts and summary.counts["rounds"] == 4
    assert summary.decisions == alone.decisions
    assert not summary.seat_untested and summary.seat_cards == 4 * 35  # 7 players, 5 cards


def _check_held_bytes(floor_db: FloorDb) -> tuple[int, Any]:
    """What the Q1 check still holds in this process once it has read every run (the memory
    that grows with the days checked), and the check."""
    import gc
    import tracemalloc

    from tablectl.controller.floor.shuffle import floor_shuffle_check

    with floor_db.admin() as conn:
        floor_shuffle_check(conn)  # the modules it imports, loaded before it is measured
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            check, _ = floor_shuffle_check(conn)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    return held, check


@pytest.mark.long  # minutes under load: make test-long
def test_Q1_the_fingerprints_live_in_the_floor_not_in_the_checking_process(
    floor_db: FloorDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check over 8x the rounds (what more days add) holds no more in the process than one
    over the first ones: the runs went to floor.shuffle_runs as they were read (at most
    FLUSH_RUNS held at once, 200 here), not into a dict of every run (~114 bytes a run: ~1 MB
    more for the 9,000 runs added here); each check removes its runs at its end."""
    from tablectl.controller.floor import shuffle

    monkeypatch.setattr(shuffle, "FLUSH_RUNS", 200, raising=False)
    rng = random.Random(19)
    ship(floor_db, tmp_path, shuffled(rng, 40))
    few_held, few = _check_held_bytes(floor_db)
    ship(floor_db, tmp_path, shuffled(rng, 320))
    many_held, many = _check_held_bytes(floor_db)
    assert many.runs_checked > 8 * few.runs_checked > 0
    assert many_held - few_held < 100_000, (few_held, many_held)
    assert many.runs_stored == many.runs_checked and many.most_held <= 200
    with floor_db.admin() as conn:
        assert conn.execute("SELECT count(*) FROM floor.shuffle_runs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM floor.shuffle_checks").fetchone()[0] == 0


def test_a_check_s_fingerprints_are_its_login_s_alone(floor_db: FloorDb, tmp_path: Path) -> None:
    """floor.shuffle_runs is reached through the check's functions only: a reader cannot
    read the table, nor add to, read the repeats of, or end another login's check; a call
    sends at most SHUFFLE_RUNS_PER_CALL runs."""
    import psycopg

    from tablectl.controller.floor.schema import READER_GROUP, SHUFFLE_RUNS_PER_CALL

    local = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    one, other = unique_table_id("reader_"), unique_table_id("reader_")
    with floor_db.admin() as conn:
        for role in (one, other):
            conn.execute(f"CREATE ROLE {role} LOGIN IN ROLE {READER_GROUP}")
    add = "SELECT floor.shuffle_check_add(%s, %s, %s, %s, %s, %s)"
    run = ([1], [b"\x00" * 10], [1], [0], [1])
    with psycopg.connect(f"{local} user={one}", autocommit=True) as mine:
        check = mine.execute("SELECT floor.shuffle_check_begin()").fetchone()[0]
        mine.execute(add, (check, *run))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            mine.execute("SELECT count(*) FROM floor.shuffle_runs")
        many = tuple(column * (SHUFFLE_RUNS_PER_CALL + 1) for column in run)
        with pytest.raises(psycopg.errors.RaiseException, match="at most"):
            mine.execute(add, (check, *many))
        with psycopg.connect(f"{local} user={other}", autocommit=True) as theirs:
            for call, args in (
                (add, (check, *run)),
                ("SELECT * FROM floor.shuffle_check_repeats(%s)", (check,)),
                ("SELECT floor.shuffle_check_end(%s)", (check,)),
            ):
                with pytest.raises(psycopg.errors.RaiseException, match="no check of login"):
                    theirs.execute(call, args)
        mine.execute("SELECT floor.shuffle_check_end(%s)", (check,))
    with floor_db.admin() as conn:
        assert conn.execute("SELECT count(*) FROM floor.shuffle_runs").fetchone()[0] == 0
