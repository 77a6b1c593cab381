"""`tablectl floor ...` against a real server: init, verify, round, report; demo --floor."""

from __future__ import annotations

import asyncio
import csv
import datetime
import json
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tablectl.controller.common.config import ConfigError, parse_config
from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.controller.record.journal import read_rows, round_cards
from tablectl.simulators import demo
from tablectl.simulators.floor_demo import stop_floor_server
from tests.floor.floorkit import FloorDb, unique_table_id
from tests.floor.test_floor_shipping import assert_floor_equals_local, demo_args

TABLECTL = [sys.executable, "-m", "tablectl.controller"]
#: rounds of the table whose record the commands read (its automated shoe jams half the time)
ROUNDS = 8


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TABLECTL, *args], capture_output=True, text=True, check=False, timeout=120
    )


def _play_hilo_with_faults(floor_db: FloorDb, state: Path, table_id: str) -> Path:
    floor_db.provision(table_id)
    args = demo_args(state, ROUNDS, floor_db, table_id)
    args.game = "heads_up_holdem"
    args.faults = 0.5
    args.fault_kind = ["ads_jam"]
    assert asyncio.run(demo.play_demo(args, 21, "127.0.0.1", 0)) == 0
    return state / "journal.sqlite"


def test_init_provisions_tables_with_a_passfile_and_no_password_anywhere_else(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    passfile = tmp_path / "t.pgpass"
    table_id = unique_table_id()
    done = tablectl(
        "floor", "init", "--dsn", floor_db.admin_dsn, "--table", table_id,
        "--write-passfile", str(passfile),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"tablectl_table_{table_id} (INSERT only)" in done.stdout
    assert stat.S_IMODE(passfile.stat().st_mode) == 0o600
    password = passfile.read_text().strip().split(":")[-1]
    assert len(password) >= 24 and password not in done.stdout + done.stderr
    # idempotent: a second run changes nothing it should not
    again = tablectl("floor", "init", "--dsn", floor_db.admin_dsn)
    assert again.returncode == 0, again.stderr
    # a table provisioned again gets a new password: its passfile line is replaced, and the
    # role logs in with it
    other = unique_table_id()
    floor_db.passfile = passfile
    floor_db.provision(other)
    renewed = tablectl(
        "floor", "init", "--dsn", floor_db.admin_dsn, "--table", table_id,
        "--write-passfile", str(passfile),
    )  # fmt: skip
    assert renewed.returncode == 0, renewed.stderr
    lines = passfile.read_text().splitlines()
    assert len(lines) == 2 and password not in passfile.read_text()
    with floor_db.as_writer(table_id) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (f"tablectl_table_{table_id}",)


def test_a_password_in_the_configured_dsn_is_refused() -> None:
    base = {"table": {"id": "t1", "game": "five_card_hilo"}}
    for dsn in ("host=db user=x password=secret", "postgresql://x:secret@db/floor"):
        with pytest.raises(ConfigError, match=r"floor\.dsn: holds a password in clear"):
            parse_config({**base, "floor": {"dsn": dsn}}, "t1.toml")
    config = parse_config(
        {**base, "floor": {"dsn": "service=tablectl-floor", "passfile": "/etc/x"}}, "t1.toml"
    )
    assert config.floor is not None and config.floor.dsn == "service=tablectl-floor"
    with pytest.raises(ConfigError, match=r"floor\.batch_rows"):
        parse_config({**base, "floor": {"dsn": "service=f", "batch_rows": 0}}, "t1.toml")


def test_a_dsn_over_several_servers_must_ask_for_the_primary() -> None:
    """A replicated floor's DSN lists its servers; without target_session_attrs=read-write
    libpq keeps the first that answers, a standby after a failover: refused, with the fix."""
    base = {"table": {"id": "t1", "game": "five_card_hilo"}}
    for dsn in (
        "host=a,b,c port=5432,5432,5432 dbname=floor user=tablectl_table_t1",
        "host=a,b dbname=floor target_session_attrs=any",
        "host=a,b dbname=floor target_session_attrs=standby",
        "postgresql://a:5432,b:5432/floor?user=tablectl_table_t1",
    ):
        with pytest.raises(ConfigError, match=r"floor\.dsn: names several servers.*read-write"):
            parse_config({**base, "floor": {"dsn": dsn}}, "t1.toml")
    for dsn in (
        "host=a,b,c port=5432,5432,5432 dbname=floor target_session_attrs=read-write",
        "host=a,b dbname=floor target_session_attrs=primary",
        "postgresql://a:5432,b:5432/floor?target_session_attrs=read-write",
        "host=floor.casino dbname=floor",
        "service=tablectl-floor",
    ):
        config = parse_config({**base, "floor": {"dsn": dsn}}, "t1.toml")
        assert config.floor is not None and config.floor.dsn == dsn


def test_floor_init_says_whether_a_synchronous_standby_holds_the_rows(
    floor_db: FloorDb, capsys: pytest.CaptureFixture[str]
) -> None:
    """One server alone: `floor init` says the rows are on one machine; asked to require a
    synchronous standby, it refuses (the replicated case: tests/floor/test_floor_failover.py)."""
    from tablectl.controller.commands.cli import main as tablectl

    assert tablectl(["floor", "init", "--dsn", floor_db.admin_dsn]) == 0
    said = capsys.readouterr()
    assert "no synchronous standby" in said.out + said.err
    code = tablectl(["floor", "init", "--dsn", floor_db.admin_dsn, "--require-sync-standby"])
    said = capsys.readouterr()
    assert code == 1
    assert "no synchronous standby" in said.err and "synchronous_standby_names" in said.err


def test_verify_round_and_report_from_the_floor(floor_db: FloorDb, tmp_path: Path) -> None:
    table_id = unique_table_id()
    journal = _play_hilo_with_faults(floor_db, tmp_path / "table", table_id)
    assert_floor_equals_local(floor_db, table_id, journal)
    rows = list(read_rows(journal))

    verified = tablectl("floor", "verify", "--dsn", floor_db.admin_dsn, "--table", table_id)
    assert verified.returncode == 0 and f"{table_id}: intact: {len(rows)} rows" in verified.stdout

    # a voided round, as journal show would rebuild it, plus its decisions with citations
    voided = [r for r in rows if r.kind == "decision" and r.body["decision"] == "void_round"]
    assert voided, "the demo's ADS jams void rounds"
    number = int(voided[0].round or 0)
    shown = tablectl(
        "floor", "round", "--dsn", floor_db.admin_dsn, "--table", table_id,
        "--round", str(number), "--json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["cards"] == round_cards(journal, number)
    assert {d["decision"] for d in answer["decisions"]} >= {"void_round"}
    assert answer["events"][0]["type"] == "bets_closed"  # the event that opened the round
    assert any(e.get("fault") == "jam" for e in answer["events"])
    assert all(d["rule_id"] and d["rule"] for d in answer["decisions"])
    text = tablectl(
        "floor", "round", "--dsn", floor_db.admin_dsn, "--table", table_id, "--round", str(number)
    )
    assert re.search(r"void_round \[C5; 13:69F-39\.12\(f\)\]", text.stdout), text.stdout

    # the gaming day's report: its counts are the journal's own
    day = gaming_day_of(datetime.datetime.now(), datetime.time(6, 0))
    out = tmp_path / "report"
    made = tablectl(
        "floor", "report", "--dsn", floor_db.admin_dsn, "--gaming-day", day.isoformat(),
        "--output", str(out),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = {row["table"]: row for row in csv.DictReader(next(out.glob("*.csv")).open())}
    mine = lines[table_id]
    decisions = [r.body for r in rows if r.kind == "decision"]
    assert int(mine["voids"]) == len(voided)
    assert int(mine["rounds"]) == ROUNDS
    by_rule = Counter(d["rule_id"] for d in decisions)
    for rule, count in by_rule.items():
        assert int(mine[f"rule_{rule}"]) == count
    page = next(out.glob("*.html")).read_text()
    assert (
        page.count("<svg") >= 2
        and "<script" not in page
        and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert f"--table {table_id} --round {number}" in page


def test_floor_verify_names_a_row_edited_on_the_floor(floor_db: FloorDb, tmp_path: Path) -> None:
    """The DBA (or an intruder with the owner's rights) disables the guard and edits a row."""
    from tests.floor.test_floor_shipping import _ship

    table_id, _ = _ship(floor_db, tmp_path, 30)
    with floor_db.admin() as conn:
        conn.execute("ALTER TABLE floor.journal_rows DISABLE TRIGGER append_only")
        conn.execute(
            'UPDATE floor.journal_rows SET body = \'{"type":"edited"}\''
            " WHERE table_id = %s AND seq = 17",
            (table_id,),
        )
        conn.execute("ALTER TABLE floor.journal_rows ENABLE TRIGGER append_only")
    done = tablectl("floor", "verify", "--dsn", floor_db.admin_dsn)
    assert done.returncode == 1
    assert f"{table_id}: TAMPERED: row 17 edited" in done.stderr


def test_unknown_table_and_unreachable_store_are_named(floor_db: FloorDb) -> None:
    done = tablectl("floor", "verify", "--dsn", floor_db.admin_dsn, "--table", "nosuch")
    assert done.returncode == 2 and "table 'nosuch' is not on the floor" in done.stderr
    gone = tablectl("floor", "verify", "--dsn", "host=127.0.0.1 port=1 dbname=x user=y")
    assert gone.returncode == 2 and "cannot reach the floor store" in gone.stderr


def test_demo_floor_prints_the_report_and_a_round_command_that_works() -> None:
    state = Path(tempfile.mkdtemp(prefix="tablectl-demo-floor-"))
    done = tablectl(
        "demo", "--floor", "--fast", "--rounds", "5", "--seed", "4", "--state-dir", str(state)
    )
    try:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        html = re.search(r"^report \(gaming day .*\): (\S+\.html)$", done.stdout, re.MULTILINE)
        assert html and Path(html.group(1)).is_file()
        command = re.search(r"^  (tablectl floor round .*)$", done.stdout, re.MULTILINE)
        assert command, done.stdout
        argv = command.group(1).split("'")
        dsn = argv[1]
        rest = argv[2].split()
        shown = tablectl("floor", "round", "--dsn", dsn, *rest)
        assert shown.returncode == 0, shown.stderr
        assert "void_round [C5;" in shown.stdout
        assert done.stdout.count(": intact:") == 3
    finally:
        stop_floor_server(state)
        shutil.rmtree(json.loads((state / "floor-server.json").read_text())["root"], True)
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.long
def test_demo_floor_from_a_state_dir_under_a_private_parent_plays_at_its_pace() -> None:
    """`mktemp -d` makes a 0700 directory: the server's user cannot go through it, so the
    server goes to the system's temp dir (nothing of the caller's is opened up); the three
    tables deal at --pace, step after step, not all at once."""
    parent = Path(tempfile.mkdtemp(prefix="tablectl-private-"))
    state = parent / "demo"
    pace = 0.1
    done = tablectl(
        "demo", "--floor", "--rounds", "2", "--seed", "3", "--pace", str(pace),
        "--state-dir", str(state),
    )  # fmt: skip
    try:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700  # left as it was
        assert done.stdout.count(": intact:") == 3
        rows = list(read_rows(state / "t-3c21" / "journal.sqlite"))
        events = [row for row in rows if row.kind == "event" and row.round]
        span = datetime.datetime.fromisoformat(
            events[-1].recorded_at
        ) - datetime.datetime.fromisoformat(events[0].recorded_at)
        # each round is a dozen steps or more, each followed by the pace's pause
        assert span.total_seconds() >= 2 * 10 * pace, span
    finally:
        info = state / "floor-server.json"
        if info.exists():
            stop_floor_server(state)
            shutil.rmtree(json.loads(info.read_text())["root"], ignore_errors=True)
        shutil.rmtree(parent, ignore_errors=True)


def test_verify_and_round_start_from_their_marks_not_row_1(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """Two sessions of one table (the first's clean stop writes an engine checkpoint): a round
    of the second is rebuilt from that checkpoint and the table row kept in floor.tables, not
    from row 1; a second verify starts after the row the first one proved."""
    from tablectl.controller.floor.store import connect, round_rows

    table_id = unique_table_id()
    floor_db.provision(table_id)
    state = tmp_path / "table"
    for seed in (31, 32):
        assert (
            asyncio.run(
                demo.play_demo(demo_args(state, 3, floor_db, table_id), seed, "127.0.0.1", 0)
            )
            == 0
        )
    journal = state / "journal.sqlite"
    rows = list(read_rows(journal))
    checkpoint = max(r.seq for r in rows if r.kind == "checkpoint" and (r.round or 0) < 5)
    with connect(floor_db.admin_dsn) as conn:
        read = list(round_rows(conn, table_id, 5))
    assert read[0].kind == "table" and read[1].seq == checkpoint  # not rows 2 .. checkpoint
    shown = tablectl(
        "floor", "round", "--dsn", floor_db.admin_dsn, "--table", table_id, "--round", "5",
        "--json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cards"] == round_cards(journal, 5)
    first = tablectl("floor", "verify", "--dsn", floor_db.admin_dsn, "--table", table_id)
    assert f"intact: {len(rows)} rows" in first.stdout, first.stdout
    again = tablectl("floor", "verify", "--dsn", floor_db.admin_dsn, "--table", table_id)
    assert f"intact: 0 rows after row {rows[-1].seq} (verified before)" in again.stdout


@pytest.mark.long  # make test stays under 10 minutes
def test_demo_floor_says_how_long_and_ctrl_c_stops_every_table_within_seconds() -> None:
    """Three tables under one asyncio.gather: Ctrl-C (SIGINT) ends them all, each after the
    round in play, not just the one whose signal handler the loop kept (issue 34: the process
    exited 115 s after Ctrl-C, two tables dealing on). At the start it says how long."""
    import signal
    import threading
    import time

    state = Path(tempfile.mkdtemp(prefix="tablectl-demo-floor-int-"))
    demo_run = subprocess.Popen(
        [*TABLECTL, "demo", "--floor", "--rounds", "30", "--pace", "0.2", "--seed", "6",
         "--state-dir", str(state)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    assert demo_run.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(demo_run.stdout or []), daemon=True)
    reader.start()
    try:
        # all three dealing: every table's daemon has journaled a round's first event
        deadline = time.monotonic() + 120
        journals = [state / table / "journal.sqlite" for table in ("t-3c21", "t-huh", "t-hilo")]

        def dealing(journal: Path) -> bool:
            return journal.exists() and any(
                r.round for r in read_rows(journal) if r.kind == "event"
            )

        while not all(dealing(journal) for journal in journals):
            assert time.monotonic() < deadline and demo_run.poll() is None, "".join(lines)
            time.sleep(0.2)
        start = next(line for line in lines if "tables deal 30 rounds each" in line)
        assert "about 2 minutes at --pace 0.2; Ctrl-C stops every table" in start, start
        demo_run.send_signal(signal.SIGINT)
        sent = time.monotonic()
        demo_run.wait(timeout=60)  # 30 rounds at this pace take minutes
        assert time.monotonic() - sent < 30, "".join(lines)
        reader.join(10)
        played = {j.parent.name: max(r.round or 0 for r in read_rows(j)) for j in journals}
        assert all(rounds < 30 for rounds in played.values()), played
    finally:
        if demo_run.poll() is None:
            demo_run.kill()
            demo_run.wait()
        info = state / "floor-server.json"
        if info.exists():
            stop_floor_server(state)
            shutil.rmtree(json.loads(info.read_text())["root"], ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
