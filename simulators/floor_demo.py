"""`tablectl demo --floor` (`make demo-floor`): three tables shipping to a throwaway PostgreSQL.

A PostgreSQL server is initialised in the state dir and started as an unprivileged user
(simulators.pgserver); `floor init` creates the store, one INSERT-only role per table (their
passwords in a libpq passfile, 0600, never in a configuration) and a read-only surveillance
role. Three simulated tables of three games (each the whole daemon, as `tablectl demo` runs
it, with a `[floor]` section) deal their rounds concurrently; the Heads Up Hold'em table deals
from an automated shoe that jams now and then, so the floor holds voided rounds. Then the
gaming day's report is written (CSV and HTML) and the demo prints its path and a `tablectl
floor round` command, as surveillance would type it, for a voided round.
The server is left running for those commands; the demo prints how to stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import signal
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.controller.floor.report import build_report, write_csv, write_html
from tablectl.controller.floor.schema import READER_GROUP, add_table, create_schema
from tablectl.controller.floor.store import connect, table_rows_sql, verify_table
from tablectl.simulators.pgserver import PostgresUnavailable, ThrowawayPostgres

#: table id -> (game, fault rate, the faults injected)
FLOOR_TABLES: dict[str, tuple[str, float, tuple[str, ...]]] = {
    "t-3c21": ("three_card_21", 0.1, ("reader_misuse", "face_up_card")),
    "t-huh": ("heads_up_holdem", 0.3, ("ads_jam",)),
    "t-hilo": ("five_card_hilo", 0.1, ("shuffler_jam",)),
}
DEFAULT_ROUNDS = 30
#: simulators.demo.play_demo(args, seed, host, port) -> exit status
PlayDemo = Callable[..., Awaitable[int]]
DATABASE = "floor"
SURVEILLANCE = "demo_surveillance"


#: Seconds a round took at --pace 0.8 (the demo's default), measured: 3 tables x 30 rounds
#: in 8 min 44 s, the tables dealing at once; a round is a score of steps, each then a pause.
SECONDS_PER_ROUND = 17.5
MEASURED_AT_PACE = 0.8


def about_how_long(rounds: int, args: argparse.Namespace) -> str:
    """How long the tables will deal, said before they start (a person waits for it)."""
    if getattr(args, "fast", False):
        return "as fast as the daemons answer (--fast: a minute or two)"
    pace = float(getattr(args, "pace", MEASURED_AT_PACE))
    minutes = rounds * SECONDS_PER_ROUND * max(pace, 0.05) / MEASURED_AT_PACE / 60
    if minutes >= 1.5:
        return f"about {minutes:.0f} minutes at --pace {pace:g}"
    return f"about a minute at --pace {pace:g}"


async def run_floor_demo(args: argparse.Namespace, seed: int, play_demo: PlayDemo) -> int:
    """`play_demo` is the demo's own (simulators/demo.py, which calls this): passed in, so that
    the demo imports the floor demo and not the other way round."""
    state_dir: Path = args.state_dir or Path(tempfile.mkdtemp(prefix="tablectl-floor-demo-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = ThrowawayPostgres(server_base(state_dir))
        server.init()
        server.start()
    except PostgresUnavailable as error:
        print(f"tablectl demo --floor: {error}", flush=True)
        return 1
    print(f"floor store: PostgreSQL in {server.root} (as {server.run_as or 'this user'})")
    reader_dsn = f"host={server.sockets} port={server.port} user={SURVEILLANCE} dbname={DATABASE}"
    stop = _stop_command(server)
    # written at once: a demo interrupted while it plays still says how to stop its server
    _write_server_info(state_dir, server, reader_dsn, stop)
    server.create_database(DATABASE)
    passfile = state_dir / "floor.pgpass"
    with connect(server.admin_dsn(DATABASE)) as conn:
        create_schema(conn)
        for table_id in FLOOR_TABLES:
            add_table(conn, table_id, passfile=passfile, dbname=DATABASE)
        conn.execute(f"CREATE ROLE {SURVEILLANCE} LOGIN IN ROLE {READER_GROUP}")
    rounds = args.rounds or DEFAULT_ROUNDS
    print(
        f"{len(FLOOR_TABLES)} tables deal {rounds} rounds each at once, "
        f"{about_how_long(rounds, args)}; Ctrl-C stops every table",
        flush=True,
    )
    # One handler for every table: add_signal_handler keeps one callback a signal (each
    # table's own would replace the last, and Ctrl-C stopped only the table added last).
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupted.set)
    plays = []
    for index, (table_id, (game, rate, faults)) in enumerate(FLOOR_TABLES.items()):
        table_args = argparse.Namespace(**vars(args))
        table_args.game = game
        table_args.rounds = rounds
        table_args.faults = rate
        table_args.fault_kind = list(faults)
        table_args.dealing = None
        table_args.dual_deck = False
        table_args.state_dir = state_dir / table_id
        table_args.table_id = table_id
        table_args.floor_dsn = server.table_dsn(DATABASE, f"tablectl_table_{table_id}")
        table_args.floor_passfile = passfile
        plays.append(play_demo(table_args, seed + index, "127.0.0.1", 0, interrupted=interrupted))
    statuses = await asyncio.gather(*plays)
    with connect(reader_dsn) as conn:
        for table_id in FLOOR_TABLES:
            print(f"floor verify {table_id}: {verify_table(conn, table_id).message}")
        day = gaming_day_of(datetime.datetime.now(), datetime.time(6, 0))
        report = build_report(conn, day)
        csv_path = write_csv(report, state_dir / f"floor-report-{day}.csv")
        html_path = write_html(report, state_dir / f"floor-report-{day}.html")
        voided = None
        for table_id in FLOOR_TABLES:
            source, where, params = table_rows_sql(conn, table_id, kind="decision")
            voided = conn.execute(
                f"SELECT %s, r.round FROM {source} WHERE {where}"
                " AND r.body::jsonb ->> 'decision' = 'void_round' ORDER BY r.seq LIMIT 1",
                (table_id, *params),
            ).fetchone()
            if voided:
                break
    print(f"report (gaming day {day}): {html_path}")
    print(f"report as CSV: {csv_path}")
    if voided:
        print("a voided round, as surveillance reads it from the floor:")
        print(
            f"  tablectl floor round --dsn '{reader_dsn}' --table {voided[0]} --round {voided[1]}"
        )
    else:
        print("no round was voided this time (run again, or with more --rounds)")
    print(f"the floor server keeps running for these commands; stop it with:\n  {stop}")
    return max(statuses) if statuses else 0


def _write_server_info(
    state_dir: Path, server: ThrowawayPostgres, reader_dsn: str, stop: str
) -> None:
    info = {
        "reader_dsn": reader_dsn,
        "stop": stop,
        "data": str(server.data),
        "root": str(server.root),
    }
    (state_dir / "floor-server.json").write_text(json.dumps(info) + "\n")


def server_base(state_dir: Path) -> Path | None:
    """Where the throwaway server's dir goes: in the state dir when the server's user (nobody,
    when this runs as root) can reach it as it is; else in the system's temp dir (a state dir
    under a private parent, such as one made by mktemp -d). Nothing of the caller's is made
    more open than it was."""
    user = ThrowawayPostgres.server_user()
    if user is None or traversable_by(state_dir, user):
        return state_dir
    print(
        f"floor store: {state_dir} is not reachable by the server's user {user} "
        "(a private directory above it): its PostgreSQL goes in the system's temp dir",
        flush=True,
    )
    return None


def traversable_by(path: Path, user: str) -> bool:
    """Whether `user` may search every directory from / down to `path` (and write in it)."""
    import pwd

    entry = pwd.getpwnam(user)
    groups = {entry.pw_gid}
    current = path.resolve()
    for directory in [current, *current.parents]:
        info = directory.stat()
        if info.st_uid == entry.pw_uid:
            bits = info.st_mode >> 6
        elif info.st_gid in groups:
            bits = info.st_mode >> 3
        else:
            bits = info.st_mode
        if not bits & 0o1:
            return False
    return True


def _stop_command(server: ThrowawayPostgres) -> str:
    pg_ctl = f"{server.bindir / 'pg_ctl'} -D {server.data} stop"
    return f"runuser -u {server.run_as} -- {pg_ctl}" if server.run_as else pg_ctl


def stop_floor_server(state_dir: Path) -> Any:
    """Stop the server a floor demo left running in `state_dir` (tests, scripts)."""
    import shlex
    import subprocess

    info = json.loads((state_dir / "floor-server.json").read_text())
    return subprocess.run(shlex.split(info["stop"]), capture_output=True, text=True, check=False)
