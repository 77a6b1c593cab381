"""`tablectl journal verify|show|export|backup|setup-keys`: the journal's tools (docs/journal.md).

`verify` exits 0 (intact), 1 (tampered or damaged at a named row, or sealed only until earlier
than `--expect-until`) or 2 (not a readable journal), whatever the file holds.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import json
import os
import pwd
import sys
from pathlib import Path
from typing import Any, TextIO

from tablectl.controller.common.config import SERVICE_USER, ConfigError, load_config
from tablectl.controller.record.checkpoints import default_origin, identity_key_path
from tablectl.controller.record.durable import write_private_file
from tablectl.controller.record.export import COLUMNS, export_records
from tablectl.controller.record.journal import (
    EXIT_TAMPERED,
    EXIT_UNREADABLE,
    JournalError,
    JournalRow,
    VerifyResult,
    backup_journal,
    closed_segment_first_seq,
    hands_in_deal_order,
    ordered_segment_files,
    read_rows,
    recipient_name,
    round_cards,
    segment_files,
    verify_journal,
)
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import (
    IdentityKey,
    NoteError,
    Verifier,
    create_identity_key,
    load_identity_key,
)
from tablectl.controller.record.round_proof import ProofError, prove_round_in
from tablectl.controller.record.sealing import (
    DEFAULT_EPOCH_SECONDS,
    SealingError,
    VerificationKey,
    setup_keys,
)
from tablectl.controller.record.seat_bias import day_report
from tablectl.controller.record.witnessed import verify_witnessed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser(
        "verify",
        help="check the hash chain (and the seals); exit 0 intact, 1 tampered, 2 unreadable",
    )
    verify.add_argument(
        "path", metavar="PATH", help="a journal file, or a directory of its segments"
    )
    verify.add_argument(
        "--verify-key",
        metavar="KEY",
        help="the verification key `journal setup-keys` printed: prove every seal",
    )
    verify.add_argument(
        "--expect-until",
        metavar="TIME",
        type=_time,
        help="ISO time the table ran until (e.g. 2026-11-23T05:59:00+00:00): a journal sealed "
        "only until earlier fails (a cut tail); needs --verify-key",
    )
    verify.add_argument(
        "--archive",
        metavar="DIR",
        help="the directory retention moved closed segments to (journal.archive_dir): verified "
        "with PATH as one chain; with --expect-until, a history whose first rows are in "
        "neither fails",
    )
    verify.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness's public key: check the journal against every checkpoint it cosigned "
        "(held beside the journal, or --cosigned) and report the span they prove; needs "
        "--table-key (repeat for several witnesses)",
    )
    verify.add_argument(
        "--table-key",
        metavar="VKEY",
        help="the table's public key (`journal setup-keys` printed it): the checkpoints' signer",
    )
    verify.add_argument(
        "--cosigned",
        action="append",
        default=[],
        metavar="FILE",
        help="a cosigned checkpoint from elsewhere (e.g. a witness's GET /checkpoint), checked "
        "like those held beside the journal",
    )
    show = actions.add_parser("show", help="a round's cards, hand by hand, in the order dealt")
    show.add_argument(
        "path",
        metavar="PATH",
        help="the journal's SQLite file, or its directory (the segment that holds the round)",
    )
    show.add_argument("--round", type=int, required=True, metavar="N", help="the round number")
    show.add_argument("--json", action="store_true", help="the cards as JSON, in the order dealt")
    export = actions.add_parser(
        "export",
        help="rounds, decisions with rule IDs and device faults as CSV or JSON lines",
        description="Rounds, decisions (with rule IDs and citations) and device faults, one "
        "record per line. A round's cards are included once the round is over; the round in "
        "progress never shows one.",
    )
    export.add_argument(
        "path", metavar="PATH", help="the journal's SQLite file, or its directory (every segment)"
    )
    export.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    export.add_argument(
        "--gaming-day", type=_day, default=None, metavar="YYYY-MM-DD", help="only this gaming day"
    )
    export.add_argument("--no-cards", action="store_true", help="leave every card out")
    export.add_argument(
        "--output", "-o", default="-", metavar="FILE", help="write to FILE (default stdout)"
    )

    bias = actions.add_parser(
        "seat-bias",
        help="Q3: did ranks land on positions as the deck says, over a gaming day's ended "
        "rounds? exit 0 no finding, 1 flagged, 2 unreadable",
    )
    bias.add_argument(
        "path", metavar="PATH", help="a segment of the journal (one gaming day's file)"
    )
    bias.add_argument("--json", action="store_true", help="the figures as one JSON object")
    backup = actions.add_parser(
        "backup", help="copy the journal (all segments) consistently while the daemon runs"
    )
    backup.add_argument("dest", metavar="DEST", help="a directory for the copy (created)")
    source = backup.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="FILE", help="the table's configuration")
    source.add_argument("--journal", metavar="PATH", help="the live journal file")
    prove = actions.add_parser(
        "prove",
        help="a proof for one ended round: its rows, inclusion proofs, the signed checkpoint",
    )
    prove.add_argument(
        "path", metavar="PATH", help="the journal's directory of segments, or its live file"
    )
    prove.add_argument("--round", type=int, required=True, metavar="N", help="the round")
    prove.add_argument(
        "--output", required=True, metavar="BUNDLE", help="where to write the proof (JSON)"
    )
    prove.add_argument(
        "--archive", type=Path, metavar="DIR", help="the directory retention moved segments to"
    )
    prove.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        help="a signed (cosigned) checkpoint note to prove against (default: the newest beside "
        "the journal, the cosigned one when it covers the round)",
    )
    keys = actions.add_parser(
        "setup-keys", help="write the sealing key; print the verification key (keep it away)"
    )
    keys.add_argument("--config", required=True, metavar="FILE", help="the table's configuration")
    keys.add_argument(
        "--interval",
        type=int,
        default=DEFAULT_EPOCH_SECONDS,
        metavar="SECONDS",
        help=f"seal epoch length (default {DEFAULT_EPOCH_SECONDS} s)",
    )
    keys.add_argument(
        "--force",
        action="store_true",
        help="replace an existing sealing key (a new seed) and identity key",
    )
    keys.add_argument(
        "--origin",
        metavar="NAME",
        help="the name of the table's identity key and its checkpoints' origin (default "
        "tablectl/TABLE-ID; make it unique, e.g. casino.example/tables/TABLE-ID)",
    )
    keys.add_argument(
        "--user",
        default=SERVICE_USER,
        help=f"owner of the key file when run as root (default {SERVICE_USER})",
    )


def _time(text: str) -> datetime.datetime:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO time") from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def _day(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "verify":
            return _verify(args)
        if args.action == "export":
            return _export(args)
        if args.action == "backup":
            return _backup(args)
        if args.action == "setup-keys":
            return _setup_keys(args)
        if args.action == "prove":
            return _prove(args)
        if args.action == "seat-bias":
            return _seat_bias(args.path, as_json=args.json)
        return _show(args.path, args.round, as_json=args.json)
    except (JournalError, SealingError, NoteError) as error:
        print(f"tablectl journal: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    except BrokenPipeError:
        raise  # the reader went away (`| head`): tablectl's main stops quietly
    except OSError as error:  # a backup's destination, a key file's directory
        where = f"{error.filename}: " if error.filename else ""
        print(f"tablectl journal {args.action}: {where}{error.strerror}", file=sys.stderr)
        return EXIT_UNREADABLE
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_UNREADABLE


def describe(result: VerifyResult) -> str:
    """The lines `verify` and `backup` print: rows, head, seals."""
    lines = [
        f"rows {result.first_seq or 0}-{result.last_seq} ({result.rows})",
        f"head {result.head}",
    ]
    if result.seals:
        proven = "proven" if result.seals_verified else "not checked (no --verify-key)"
        lines.append(
            f"sealed until {result.sealed_until} (last seal row {result.last_seal_seq}, "
            f"{result.seals} seals, {proven}); {result.unsealed_rows} rows unsealed after it"
        )
    else:
        lines.append(f"no seals; {result.rows} rows unsealed")
    if result.seals_verified and result.ok:
        lines.extend(proven_span(result))
    return "\n".join(lines)


def proven_span(result: VerifyResult) -> list[str]:
    """What the seals prove, and what no seal can (docs/journal.md, "What a seal proves")."""
    after = result.unsealed_rows
    if not result.seals:
        return [
            f"proven: nothing; {after} rows after: unsealed",
            "cannot prove: any row (no seal: the chain alone can be recomputed by anyone)",
        ]
    origin = result.first_seq or 0
    lines = [
        f"proven from {result.proven_from} to {result.sealed_until}: rows {origin}-"
        f"{result.last_seal_seq} under {result.seals} seals (epochs {result.first_seal_epoch}-"
        f"{result.last_seal_epoch}), every row stamped inside its seal's span; "
        f"{after} rows after: unsealed",
        "cannot prove: "
        + (
            f"rows {result.last_seal_seq + 1}-{result.last_seq} (unsealed until the next seal); "
            if after and result.last_seal_seq is not None
            else ""
        )
        + f"that the journal went on after {result.sealed_until} (a history cut at a seal and "
        "followed by rows of the current epoch looks like a table that was down: check "
        "--expect-until, `tablectl floor compare`, or a backup)",
    ]
    return lines


def _verify(args: argparse.Namespace) -> int:
    key = None
    if args.verify_key is not None:
        try:
            key = VerificationKey.parse(args.verify_key)
        except ValueError as error:
            print(f"tablectl journal verify: --verify-key: {error}", file=sys.stderr)
            return EXIT_UNREADABLE
    if args.expect_until is not None and key is None:
        print("tablectl journal verify: --expect-until needs --verify-key", file=sys.stderr)
        return EXIT_UNREADABLE
    result = verify_journal(
        args.path, verification_key=key, expect_until=args.expect_until, archive=args.archive
    )
    if result.ok and args.expect_until is not None and (result.first_seq or 1) > 1:
        # The earliest segments are not here: what is kept verifies, but nothing proves the
        # history before it (retention, or someone, removed it). Said, and not intact.
        print(
            f"{args.path}: UNPROVEN START: the proven history starts at row {result.first_seq}"
            f"{_where_it_starts(args.path, args.archive, result.first_seq or 1)}; rows "
            f"1-{(result.first_seq or 1) - 1} are not here"
            + (
                f" nor in {args.archive}"
                if args.archive
                else " (give --archive DIR, the journal's archive_dir, to prove them)"
            ),
            file=sys.stderr,
        )
        print(describe(result), file=sys.stderr)
        return EXIT_TAMPERED
    if result.ok and args.witness_key:
        return _verify_witnessed(args, result)
    if result.ok:
        print(f"{args.path}: {result.message}")
        print(describe(result))
    elif result.readable:
        print(f"{args.path}: TAMPERED: {result.message}", file=sys.stderr)
        print(describe(result), file=sys.stderr)
    else:
        print(f"{args.path}: NOT A READABLE JOURNAL: {result.message}", file=sys.stderr)
    return result.exit_code


def _verify_witnessed(args: argparse.Namespace, result: VerifyResult) -> int:
    """The chain verified: now the journal's Merkle log against what witnesses cosigned."""
    if args.table_key is None:
        print("tablectl journal verify: --witness-key needs --table-key", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        table = Verifier.parse(args.table_key)
        witnesses = [Verifier.parse(text) for text in args.witness_key]
        given = [(path, Path(path).read_text()) for path in args.cosigned]
    except (NoteError, OSError, UnicodeError) as error:
        print(f"tablectl journal verify: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    path = Path(args.path)
    archive = Path(args.archive) if args.archive else None
    with (
        MerkleLog.of_directory(path, archive=archive)
        if path.is_dir()
        else MerkleLog(path, archive=archive)
    ) as log:
        live = _live_file(path)
        verdict = verify_witnessed(live, log.size(), log.root, table, witnesses, given)
    print(f"{args.path}: {result.message}", file=sys.stdout if verdict.ok else sys.stderr)
    if verdict.ok:
        print(describe(result))
        print(verdict.message)
        return 0
    print(f"{args.path}: NOT WITNESSED: {verdict.message}", file=sys.stderr)
    return EXIT_TAMPERED


def _live_file(path: Path) -> Path:
    """The live segment of a journal directory (the one not named as a closed one)."""
    if not path.is_dir():
        return path
    live = [f for f in segment_files(path) if closed_segment_first_seq(f) is None]
    return live[0] if live else path / "journal.sqlite"


def _where_it_starts(path: str, archive: str | None, first_seq: int) -> str:
    """` (FILE, gaming day D, written at T)` for the segment whose first row is `first_seq`."""
    places = [Path(path)] + ([Path(archive)] if archive else [])
    for place in places:
        if not place.is_dir():
            continue
        for segment in segment_files(place):
            first = _first_row(segment)
            if first is not None and first.seq == first_seq:
                day = first.body.get("gaming_day") if first.kind == "segment" else None
                said = f", gaming day {day}" if day else ""
                return f" ({segment.name}{said}, written at {first.recorded_at})"
    return ""


def _first_row(segment: Path) -> JournalRow | None:
    try:
        return next(read_rows(segment), None)
    except JournalError:
        return None


def _backup(args: argparse.Namespace) -> int:
    live = Path(args.journal) if args.journal else load_config(args.config).journal_path
    copied, result = backup_journal(live, Path(args.dest))
    for path in copied:
        print(f"copied {path}")
    if not result.ok:
        print(f"{args.dest}: the copy does not verify: {result.message}", file=sys.stderr)
        return result.exit_code
    print(f"{args.dest}: {result.message}")
    print(describe(result))
    return 0


def _setup_keys(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    path = config.sealing_key_path
    identity = identity_key_path(path)
    if path.exists() and not args.force and not identity.exists():
        # a table sealed before the Merkle log: its identity key only
        table_key = _identity_key(args, config.table_id, identity)
        print(table_key.vkey)
        print(
            f"table key (checkpoints; proof verify --table-key): {table_key.vkey}", file=sys.stderr
        )
        return 0
    if path.exists() and not args.force:
        print(
            f"tablectl journal setup-keys: {path} exists; --force draws a new seed (seals made "
            "with the old key still verify with the old verification key only)",
            file=sys.stderr,
        )
        return 1
    key = setup_keys(path, interval=args.interval)
    table_key = _identity_key(args, config.table_id, identity)
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(args.user)
            for owned in (path, identity):
                os.chown(owned, user.pw_uid, user.pw_gid)
        except KeyError:
            print(f"warning: no user {args.user!r}: {path} stays root's", file=sys.stderr)
    print(str(key))
    # beside it (stderr: stdout stays the verification key alone, as scripts read it)
    print(f"{TABLE_KEY_SAID}{table_key.vkey}", file=sys.stderr)
    print(
        json.dumps({"sealing_key": str(path), "interval_seconds": args.interval}),
        file=sys.stderr,
    )
    print(
        "Keep the verification key above away from the table PC (print it, store it with the "
        "regulator's copy): `tablectl journal verify PATH --verify-key KEY` proves the seals.",
        file=sys.stderr,
    )
    return 0


TABLE_KEY_SAID = "table key (its checkpoints' signer; proof verify --table-key): "


def _identity_key(args: argparse.Namespace, table_id: str, path: Path) -> IdentityKey:
    """The table's Ed25519 identity key (its checkpoints' signer), written 0600 beside the
    sealing key; a new one with --force."""
    if path.exists() and not args.force:
        return load_identity_key(path)
    return create_identity_key(path, args.origin or default_origin(table_id))


def _prove(args: argparse.Namespace) -> int:
    """`journal prove`: exit 0 written, 1 the round cannot be proved (in play, unsigned)."""
    try:
        bundle = prove_round_in(
            Path(args.path), args.round, archive=args.archive, checkpoint=args.checkpoint
        )
    except ProofError as error:
        print(f"tablectl journal prove: {error}", file=sys.stderr)
        return 1
    write_private_file(Path(args.output), json.dumps(bundle, indent=1) + "\n")
    held = bundle["held_back"]
    print(
        f"{args.output}: round {args.round}, {len(bundle['rows'])} rows under the checkpoint of "
        f"{bundle['origin']}"
        + (f" ({held} later rows of the round wait for the next collection)" if held else "")
    )
    return 0


def _seat_bias(path: str, *, as_json: bool) -> int:
    """Q3 (docs/shuffle-integrity.md): counts by position and the test; no card is printed."""
    report = day_report(path)
    test = report["test"]
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(
            f"{report['path']}: {report['game']}, {report['cards']} players' cards of ended rounds"
        )
        print(
            "cards by position: " + ", ".join(f"{p}: {n}" for p, n in report["by_position"].items())
        )
        if test is None:
            print("not tested: too few cards (every position and rank must expect 5 or more)")
        else:
            verdict = "FLAGGED (Q3)" if test["flagged"] else "no finding"
            print(
                f"chi-square {test['statistic']} on {test['dof']} degrees of freedom, "
                f"p = {test['p_value']:.3g}: {verdict}"
            )
    return 1 if test is not None and test["flagged"] else 0


def _show(path: str, round_number: int, *, as_json: bool) -> int:
    # a journal file, or its directory as `verify` and `export` take it: the round's segment
    if Path(path).is_dir():
        holding = [
            file
            for file in ordered_segment_files(Path(path))
            if any(row.round == round_number for row in read_rows(file))
        ]
        if not holding:
            print(f"tablectl journal show: {path}: no segment holds round {round_number}",
                  file=sys.stderr)  # fmt: skip
            return 2
        path = str(holding[-1])
    cards = round_cards(path, round_number, over_only=True)
    if as_json:
        print(json.dumps(cards))
        return 0
    print_cards(f"round {round_number}", cards)
    return 0


def print_cards(title: str, cards: list[dict[str, Any]]) -> None:
    """A round's cards in the order dealt, then hand by hand (journal show, floor round)."""
    print(f"{title}: {len(cards)} cards in the order dealt")
    for index, card in enumerate(cards, start=1):
        face = "face up" if card.get("face_up") else "face down"
        print(f"  {index:3d}. {card['card']:<3} to {recipient_name(card.get('to'))} ({face})")
    print("hands:")
    for name, hand in hands_in_deal_order(cards):
        print(f"  {name}: {' '.join(str(card['card']) for card in hand)}")


def _export(args: argparse.Namespace) -> int:
    # a journal file, or its directory (every segment in order), as `verify` takes them
    path = Path(args.path)
    files = ordered_segment_files(path) if path.is_dir() else [path]
    records = itertools.chain.from_iterable(
        export_records(file, day=args.gaming_day, cards=not args.no_cards) for file in files
    )
    if args.output == "-":
        _write(records, args.format, sys.stdout)
        return 0
    try:
        with open(args.output, "w", newline="", encoding="utf-8") as out:
            _write(records, args.format, out)
    except OSError as error:
        print(f"tablectl journal: {args.output}: {error.strerror}", file=sys.stderr)
        return 2
    return 0


def _write(records: Any, form: str, out: TextIO) -> None:
    if form == "jsonl":
        for item in records:
            out.write(json.dumps(item) + "\n")
        return
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(records)
