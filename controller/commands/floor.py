"""`tablectl floor ...`: the floor store in PostgreSQL (docs/floor.md).

    floor init    --dsn DSN [--table ID ... --passfile FILE] [--reader ROLE ...]
    floor verify  --dsn DSN [--table ID]
    floor compare --dsn DSN --journal PATH [--table ID]
    floor round   --dsn DSN --table ID --round N [--json]
    floor prove   --dsn DSN --table ID --round N --output BUNDLE
    floor report  --dsn DSN --gaming-day YYYY-MM-DD [--out DIR] [--recompute]
    floor shuffle-check --dsn DSN [--days N (7)] [--json]
    floor backup-check --stanza NAME [--pgbackrest-config FILE] [--max-age-hours H (26)]

Exit status: 0 good, 1 a finding (a broken chain, a local journal that left the floor's copy),
2 cannot say (unreachable store, unknown table, bad arguments); `shuffle-check`: 1 a replayed
order (Q1) found; `report --recompute`: 1 a per-round summary that differs from its rows;
`prove`: 1 the round cannot be proved from the floor (the reason said).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tablectl.controller.commands.cli import add_old_option_name
from tablectl.controller.commands.journal import print_cards
from tablectl.controller.record.journal import JournalError, JournalRow, replay_round
from tablectl.controller.service.operator_client import render_decision

#: what `floor round` shows of each event besides its type (the cards are listed above)
EVENT_FIELDS_SHOWN = ("time", "device", "fault", "positions", "by", "deck", "count")
EXIT_OK = 0
EXIT_FINDING = 1
EXIT_ERROR = 2
#: `floor shuffle-check`'s window: a week of a 400-table floor is ~8 GB of fingerprints
DEFAULT_SHUFFLE_DAYS = 7


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def command(name: str, help_text: str, *, dsn: bool = True) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        if not dsn:
            return sub
        sub.add_argument(
            "--dsn",
            required=True,
            help="libpq connection string (no password: use --passfile, ~/.pgpass or a service)",
        )
        sub.add_argument("--passfile", type=Path, default=None, help="libpq password file")
        return sub

    init = command("init", "create the floor's schema and roles (a DBA, as the database owner)")
    init.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="ID",
        help="register a table and create its INSERT-only login role (repeatable)",
    )
    init.add_argument(
        "--write-passfile",
        type=Path,
        default=None,
        metavar="FILE",
        help="give each new table role a random password, appended to this libpq passfile "
        "(0600) for the table PC; without it the roles have none (certificates, peer)",
    )
    init.add_argument(
        "--reader",
        action="append",
        default=[],
        metavar="ROLE",
        help="grant the read-only floor reader role to an existing role (repeatable): "
        "the rows of ended rounds only",
    )
    init.add_argument(
        "--auditor",
        action="append",
        default=[],
        metavar="ROLE",
        help="grant the auditor role (the regulator's lab: every row, rounds in play "
        "included) to an existing role (repeatable)",
    )
    init.add_argument(
        "--require-sync-standby",
        action="store_true",
        help="refuse (exit 1) a floor whose acknowledgement is not on two machines: no "
        "synchronous standby streaming, or synchronous_commit below on (docs/floor.md)",
    )
    verify = command("verify", "check every table's chain on the floor (as journal verify)")
    verify.add_argument("--table", metavar="ID", help="only this table")
    verify.add_argument(
        "--from-start",
        action="store_true",
        help="walk from row 1, not from the last row a verify proved (rows still on the floor)",
    )
    cmp = command("compare", "the local journal against the floor's copy")
    cmp.add_argument("--journal", required=True, type=Path, metavar="PATH")
    cmp.add_argument("--table", metavar="ID", help="default: the table whose row 1 matches")
    rnd = command("round", "a round from the floor: its cards in deal order and its decisions")
    rnd.add_argument("--table", required=True, metavar="ID")
    rnd.add_argument("--round", required=True, type=int, metavar="N")
    rnd.add_argument("--json", action="store_true", help="cards and decisions as JSON")
    prove = command(
        "prove",
        "a round's proof from the floor: its rows, their inclusion proofs and a cosigned "
        "checkpoint, for `tablectl proof verify` (ended rounds only; any floor reader)",
    )
    prove.add_argument("--table", required=True, metavar="ID")
    prove.add_argument("--round", required=True, type=int, metavar="N")
    prove.add_argument(
        "--output", "-o", required=True, type=Path, metavar="BUNDLE", help="the bundle (JSON)"
    )
    retire = command(
        "retire",
        "archive a verified gaming day's partition (a proved COPY and its hashes), then drop it",
    )
    retire.add_argument("--gaming-day", required=True, type=_date, metavar="YYYY-MM-DD")
    retire.add_argument("--archive", required=True, type=Path, metavar="DIR")
    maintain = command(
        "maintain", "make the partitions of the coming gaming days; retire the old verified ones"
    )
    maintain.add_argument("--days-ahead", type=int, default=7, metavar="N")
    maintain.add_argument(
        "--retire-before",
        type=_date,
        default=None,
        metavar="YYYY-MM-DD",
        help="retire every gaming day before this one (each verified first, else refused)",
    )
    maintain.add_argument("--archive", type=Path, default=None, metavar="DIR")
    migrate = command(
        "migrate", "copy an earlier, unpartitioned floor (its schema renamed) into this one"
    )
    migrate.add_argument("--from", dest="old_schema", required=True, metavar="SCHEMA")
    report = command("report", "the gaming day's report: CSV and one HTML page")
    report.add_argument(
        "--gaming-day", required=True, type=_date, metavar="YYYY-MM-DD", help="the gaming day"
    )
    report.add_argument(
        "--output",
        "-o",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the directory to write the CSV and the HTML page into (default .)",
    )
    add_old_option_name(report, "--out", "output", type=Path, metavar="DIR")
    report.add_argument(
        "--workers",
        type=_workers,
        default=os.cpu_count() or 1,
        metavar="N",
        help="tables replayed in N worker processes at once, each with its own connection "
        "(default: the CPUs here; at most that many)",
    )
    report.add_argument(
        "--recompute",
        action="store_true",
        help="replay every table's rows instead of reading the per-round summaries the "
        "tables shipped, and check each summary the replay passes: one that differs from its "
        "rows is named and the exit status is 1",
    )
    shuffle = command(
        "shuffle-check",
        "Q1 across the floor: a run of 12 cards dealt, in the same order, after two different "
        "shuffles of any tables (ended rounds only; prints tables and rounds, never a card)",
    )
    shuffle.add_argument(
        "--days",
        type=_positive,
        default=DEFAULT_SHUFFLE_DAYS,
        metavar="N",
        help="the rounds of the last N gaming days, today's included (default "
        f"{DEFAULT_SHUFFLE_DAYS}); memory grows with them: about 1.1 GB a gaming day of 400 "
        "busy tables (docs/shuffle-integrity.md)",
    )
    shuffle.add_argument("--json", action="store_true", help="the findings as JSON")
    backups = command(
        "backup-check",
        "when the floor's last backup finished (pgBackRest), and whether the repository "
        "verifies: exit 1 when there is none, it is stale or damaged",
        dsn=False,
    )
    backups.add_argument(
        "--stanza", required=True, metavar="NAME", help="the floor's pgBackRest stanza"
    )
    backups.add_argument(
        "--pgbackrest-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="pgBackRest's configuration (default: its own, /etc/pgbackrest/pgbackrest.conf)",
    )
    backups.add_argument(
        "--max-age-hours",
        type=_positive_hours,
        default=26.0,
        metavar="H",
        help="a last backup older than this is stale (default 26: a nightly backup and slack)",
    )


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


_Number = TypeVar("_Number", int, float)


def _above_zero(parse: Callable[[str], _Number], what: str) -> Callable[[str], _Number]:
    """An argparse type: a number above 0 as `parse` reads it (int: 1 or more); an error
    says "'TEXT' is not WHAT"."""

    def number(text: str) -> _Number:
        try:
            value: _Number | None = parse(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return number


_positive = _above_zero(int, "a whole number of days, 1 or more")
_workers = _above_zero(int, "a number of worker processes, 1 or more")
_positive_hours = _above_zero(float, "a number of hours above 0")


def run(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.store import FloorError

    try:
        handler = {
            "init": _init,
            "verify": _verify,
            "compare": _compare,
            "round": _round,
            "prove": _prove,
            "report": _report,
            "retire": _retire,
            "maintain": _maintain,
            "migrate": _migrate,
            "shuffle-check": _shuffle_check,
            "backup-check": _backup_check,
        }[args.action]
        return handler(args)
    except (FloorError, JournalError) as error:
        print(f"tablectl floor {args.action}: {error}", file=sys.stderr)
        return EXIT_ERROR


def _backup_check(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.backup import BackupCheckError, check_backups

    try:
        finding = check_backups(
            args.stanza, config=args.pgbackrest_config, max_age_hours=args.max_age_hours
        )
    except BackupCheckError as error:
        print(f"tablectl floor backup-check: {error}", file=sys.stderr)
        return EXIT_ERROR
    for line in finding.lines:
        print(line, file=sys.stdout if finding.ok else sys.stderr)
    return EXIT_OK if finding.ok else EXIT_FINDING


def _connect(args: argparse.Namespace) -> Any:
    from tablectl.controller.floor.store import connect

    return connect(args.dsn, passfile=args.passfile)


def _init(args: argparse.Namespace) -> int:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from tablectl.controller.floor.replication import replication_state
    from tablectl.controller.floor.schema import (
        AUDITOR_GROUP,
        READER_GROUP,
        WRITER_GROUP,
        FloorSetupError,
        add_reader,
        add_table,
        create_schema,
        ensure_monitoring_owner,
    )

    conn = _connect(args)
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(args.dsn).items()}
        dbname = params.get("dbname") or str(conn.info.dbname)
        replication = replication_state(conn)
        if replication.in_recovery:
            print(
                "tablectl floor init: the DSN reached a standby (read-only): name the primary, "
                "or list every server with target_session_attrs=read-write",
                file=sys.stderr,
            )
            return EXIT_ERROR
        granted = ensure_monitoring_owner(conn)
        if granted:
            print(f"granted pg_monitor to {granted}: durable_elsewhere() sees the standbys")
        hidden = create_schema(conn)
        print(f"floor schema ready in database {dbname} (groups {WRITER_GROUP}, {READER_GROUP})")
        if not hidden:
            print(
                "tablectl floor init: warning: not a superuser, so the server's row counters "
                "(pg_stat_*, relation sizes, pg_locks, the transaction counter) stay readable "
                "by every login: readers could count the rows of a round in play; run "
                "`tablectl floor init` once as a superuser (docs/floor.md, Roles)",
                file=sys.stderr,
            )
        for table_id in args.table:
            done = add_table(conn, table_id, passfile=args.write_passfile, dbname=dbname)
            where = f"; password in {args.write_passfile}" if done.password_written else ""
            print(f"table {done.table_id}: ships as role {done.role} (INSERT only){where}")
        for role in args.reader:
            add_reader(conn, role)
            print(f"{role}: reads the floor (SELECT only, rounds once they are over)")
        for role in args.auditor:
            add_reader(conn, role, group=AUDITOR_GROUP)
            print(f"{role}: audits the floor (SELECT only, every row)")
        said = f"replication: {replication.describe()}"
        if args.require_sync_standby and not replication.two_machines:
            print(f"tablectl floor init: {said}", file=sys.stderr)
            return EXIT_FINDING
        print(said)
    except (psycopg.Error, FloorSetupError) as error:
        print(f"tablectl floor init: {str(error).strip()}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        conn.close()
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.store import (
        require_table,
        rows_relation,
        table_ids,
        verify_table,
    )

    conn = _connect(args)
    try:
        if args.table:
            require_table(conn, args.table)
        tables = [args.table] if args.table else table_ids(conn)
        # the DBA's and the auditor's verify (every row) moves the verified mark; a reader's
        # (ended rounds only) does not, nor does any verify on a standby (read-only: the mark
        # is the primary's to move)
        standby = bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])
        record = rows_relation(conn).endswith(".journal_rows") and not standby
        if standby:
            print("a standby (read-only): verifying its copy; the verified mark is not moved")
        bad = 0
        for table_id in tables:
            result = verify_table(conn, table_id, from_start=args.from_start, record=record)
            if result.ok:
                print(f"{table_id}: {result.message}")
            else:
                bad += 1
                print(f"{table_id}: TAMPERED: {result.message}", file=sys.stderr)
        if not tables:
            print("no table on the floor yet")
    finally:
        conn.close()
    return EXIT_FINDING if bad else EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.store import compare, identify_table

    conn = _connect(args)
    try:
        table_id = args.table or identify_table(conn, args.journal)
        result = compare(conn, table_id, args.journal)
    finally:
        conn.close()
    stream = sys.stdout if result.same else sys.stderr
    print(f"{args.journal} vs floor table {table_id}: {result.message}", file=stream)
    return EXIT_OK if result.same else EXIT_FINDING


def _round(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.store import require_table, round_rows

    conn = _connect(args)
    try:
        require_table(conn, args.table)
        rows = list(_through_round(round_rows(conn, args.table, args.round), args.round))
    finally:
        conn.close()
    where = f"floor table {args.table}"
    cards = replay_round(rows, args.round, where=where, over_only=True)
    decisions = [row.body for row in rows if row.kind == "decision" and row.round == args.round]
    # An event row carries the round before it was handled; the row after it (its decisions
    # or the next event) carries the round after: the bets_closed that opened round N is N's.
    events = [
        row
        for row, after in zip(rows, [*rows[1:], None], strict=True)
        if row.kind == "event" and (after.round if after is not None else row.round) == args.round
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "table": args.table,
                    "round": args.round,
                    "cards": cards,
                    "events": [{"seq": row.seq, **row.body} for row in events],
                    "decisions": decisions,
                }
            )
        )
        return EXIT_OK
    print_cards(f"{where}, round {args.round}", cards)
    print(f"events ({len(events)}):")
    for event in events:
        said = ", ".join(
            f"{key}={event.body[key]}" for key in EVENT_FIELDS_SHOWN if key in event.body
        )
        print(f"  seq {event.seq}: {event.body.get('type')}" + (f" ({said})" if said else ""))
    print(f"decisions ({len(decisions)}):")
    for decision in decisions:
        print(f"  seq {decision.get('at')}: {render_decision(decision)}")
    return EXIT_OK


def _prove(args: argparse.Namespace) -> int:
    import psycopg

    from tablectl.controller.floor.proof import prove_round_on_floor
    from tablectl.controller.record.durable import write_private_file
    from tablectl.controller.record.round_proof import ProofError

    conn = _connect(args)
    try:
        bundle = prove_round_on_floor(conn, args.table, args.round)
    except ProofError as error:
        print(f"tablectl floor prove: {error}", file=sys.stderr)
        return EXIT_FINDING
    except psycopg.errors.InsufficientPrivilege as error:
        print(
            f"tablectl floor prove: this login may not read the floor's released state "
            f"({str(error).strip()}): floor prove is a reader's, the auditor's or the DBA's",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except psycopg.Error as error:
        print(f"tablectl floor prove: the floor store: {str(error).strip()}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        conn.close()
    write_private_file(args.output, json.dumps(bundle, indent=1) + "\n")
    held = bundle["held_back"]
    print(
        f"{args.output}: table {args.table}, round {args.round}: {len(bundle['rows'])} rows "
        f"from the floor under the cosigned checkpoint of {bundle['origin']}"
        + (f" ({held} later rows of the round wait for the next collection)" if held else "")
    )
    return EXIT_OK


def _through_round(rows: Iterable[JournalRow], round_number: int) -> Iterator[JournalRow]:
    """The rows up to the end of the round, and the one row after (it holds the round that
    followed the round's last event): a round early in a long history reads little."""
    for row in rows:
        yield row
        if row.round is not None and row.round > round_number:
            return


def _report(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.report import build_report, write_csv, write_html

    conn = _connect(args)
    try:
        report = build_report(
            conn,
            args.gaming_day,
            workers=args.workers,
            dsn=args.dsn,
            passfile=args.passfile,
            recompute=args.recompute,
        )
    finally:
        conn.close()
    args.output.mkdir(parents=True, exist_ok=True)
    stem = f"floor-report-{args.gaming_day.isoformat()}"
    csv_path = write_csv(report, args.output / f"{stem}.csv")
    html_path = write_html(report, args.output / f"{stem}.html")
    print(f"gaming day {args.gaming_day}: {len(report.tables)} tables")
    print(f"csv:  {csv_path}")
    print(f"html: {html_path}")
    replayed = sorted(t for t, how in report.sources.items() if how != "summaries")
    if not args.recompute and replayed:
        print(f"replayed from rows (no summary, or rounds without one): {', '.join(replayed)}")
    for finding in report.findings:
        print(f"tablectl floor report: SUMMARY DIFFERS: {finding}", file=sys.stderr)
    if args.recompute:
        print(f"recomputed from the rows; summaries that differ: {len(report.findings)}")
    return EXIT_FINDING if report.findings else EXIT_OK


def _retire(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.retention import RetireRefused, retire_day

    conn = _connect(args)
    try:
        done = retire_day(conn, args.gaming_day, args.archive)
    except RetireRefused as refused:
        print(f"tablectl floor retire: {refused}", file=sys.stderr)
        return EXIT_FINDING
    finally:
        conn.close()
    print(
        f"gaming day {done.gaming_day}: {done.rows} rows archived to {done.archive} "
        f"(sha256 {done.sha256}, manifest {done.manifest}); {done.partition} dropped"
    )
    return EXIT_OK


def _maintain(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.retention import (
        RetireRefused,
        ensure_days,
        partition_name,
        retire_day,
    )
    from tablectl.controller.floor.schema import SCHEMA

    conn = _connect(args)
    refused = 0
    try:
        today = datetime.datetime.now(datetime.UTC).date()
        made = ensure_days(conn, today - datetime.timedelta(days=1), args.days_ahead + 2)
        print(f"partitions made ahead: {made} new")
        if args.retire_before is not None:
            if args.archive is None:
                print("tablectl floor maintain: --retire-before needs --archive", file=sys.stderr)
                return EXIT_ERROR
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                    " JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n"
                    " ON n.oid = p.relnamespace WHERE n.nspname = %s"
                    " AND p.relname = 'journal_rows' ORDER BY 1",
                    (SCHEMA,),
                )
            ]
            for name in names:
                if not name[len("journal_rows_") :].isdigit():
                    continue
                day = datetime.datetime.strptime(name[-8:], "%Y%m%d").date()
                if day >= args.retire_before or partition_name(day) != name:
                    continue
                try:
                    done = retire_day(conn, day, args.archive)
                    print(f"gaming day {day}: {done.rows} rows archived to {done.archive}")
                except RetireRefused as error:
                    refused += 1
                    print(f"gaming day {day}: kept: {error}", file=sys.stderr)
    finally:
        conn.close()
    return EXIT_FINDING if refused else EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    import psycopg

    from tablectl.controller.floor.retention import migrate_from

    conn = _connect(args)
    try:
        copied = migrate_from(conn, args.old_schema)
    except psycopg.Error as error:
        print(f"tablectl floor migrate: {str(error).strip()}", file=sys.stderr)
        return EXIT_FINDING
    finally:
        conn.close()
    for table_id, rows in copied.items():
        print(f"table {table_id}: {rows} rows copied through the chain check")
    return EXIT_OK


def _shuffle_check(args: argparse.Namespace) -> int:
    from tablectl.controller.floor.schema import SCHEMA
    from tablectl.controller.floor.shuffle import floor_shuffle_check

    conn = _connect(args)
    try:
        # the start of the gaming day N - 1 days before the floor's current one
        first_day, since = conn.execute(
            "SELECT day, (day + gaming_day_start) AT TIME ZONE time_zone FROM ("
            " SELECT ((now() AT TIME ZONE time_zone) - gaming_day_start)::date - %s AS day,"
            f" gaming_day_start, time_zone FROM {SCHEMA}.settings) AS floor_day",
            (args.days - 1,),
        ).fetchone()
        check, findings = floor_shuffle_check(conn, since, first_day)
    finally:
        conn.close()
    if args.json:
        print(
            json.dumps(
                {
                    "run": check.run,
                    "tables": len(check.tables),
                    "rounds": check.rounds_read,
                    "runs_checked": check.runs_checked,
                    "not_watched": check.not_watched,
                    "not_checked": check.unreadable,
                    "findings": [
                        {
                            "rule_id": "Q1",
                            "runs": f.runs,
                            "first": _where_json(f.first),
                            "second": _where_json(f.second),
                        }
                        for f in findings
                    ],
                }
            )
        )
        return _shuffle_exit(findings, check.unreadable)
    window = f"the last {args.days} gaming days"
    print(
        f"Q1 across the floor ({window}): {len(check.tables)} tables, {check.rounds_read} "
        f"ended rounds, {check.runs_checked} runs of {check.run} cards checked"
    )
    for table_id in check.not_watched:
        print(f"  {table_id}: not watched (a Bart Carter shoe is never shuffled whole)")
    for table_id, why in check.unreadable.items():
        print(f"  {table_id}: NOT CHECKED: {why}", file=sys.stderr)
    for f in findings:
        print(
            f"Q1 replayed order: table {f.first.table_id} round {f.first.round} (gaming day "
            f"{f.first.gaming_day}) and table {f.second.table_id} round {f.second.round} "
            f"(gaming day {f.second.gaming_day}) dealt {f.runs} run(s) of {check.run} cards "
            "in the same order after two different shuffles",
            file=sys.stderr,
        )
    if not findings:
        print("no replayed order" + (" among the tables checked" if check.unreadable else ""))
    return _shuffle_exit(findings, check.unreadable)


def _shuffle_exit(findings: list[Any], unreadable: dict[str, str]) -> int:
    """1 a finding; else 2 when a table could not be replayed (cannot say for it); else 0."""
    if findings:
        return EXIT_FINDING
    return EXIT_ERROR if unreadable else EXIT_OK


def _where_json(where: Any) -> dict[str, Any]:
    return {
        "table": where.table_id,
        "round": where.round,
        "gaming_day": where.gaming_day.isoformat(),
    }
