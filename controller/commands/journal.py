"""`tablectl journal verify PATH`, `journal show PATH --round N` and `journal export PATH`."""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import sys
from typing import Any, TextIO

from tablectl.controller.export import COLUMNS, export_records
from tablectl.controller.journal import (
    JournalError,
    hands_in_deal_order,
    recipient_name,
    round_cards,
    verify_journal,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser("verify", help="check the hash chain; exit 1 at the first bad row")
    verify.add_argument("path", metavar="PATH", help="the journal's SQLite file")
    show = actions.add_parser("show", help="a round's cards, hand by hand, in the order dealt")
    show.add_argument("path", metavar="PATH", help="the journal's SQLite file")
    show.add_argument("--round", type=int, required=True, metavar="N", help="the round number")
    show.add_argument("--json", action="store_true", help="the cards as JSON, in the order dealt")
    export = actions.add_parser(
        "export",
        help="rounds, decisions with rule IDs and device faults as CSV or JSON lines",
        description="Rounds, decisions (with rule IDs and citations) and device faults, one "
        "record per line. A round's cards are included once the round is over; the round in "
        "progress never shows one.",
    )
    export.add_argument("path", metavar="PATH", help="the journal's SQLite file")
    export.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    export.add_argument(
        "--gaming-day", type=_day, default=None, metavar="YYYY-MM-DD", help="only this gaming day"
    )
    export.add_argument("--no-cards", action="store_true", help="leave every card out")
    export.add_argument(
        "--output", "-o", default="-", metavar="FILE", help="write to FILE (default stdout)"
    )


def _day(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "verify":
            return _verify(args.path)
        if args.action == "export":
            return _export(args)
        return _show(args.path, args.round, as_json=args.json)
    except JournalError as error:
        print(f"tablectl journal: {error}", file=sys.stderr)
        return 2


def _verify(path: str) -> int:
    result = verify_journal(path)
    if result.ok:
        print(f"{path}: {result.message}")
        return 0
    print(f"{path}: TAMPERED: {result.message}", file=sys.stderr)
    return 1


def _show(path: str, round_number: int, *, as_json: bool) -> int:
    cards = round_cards(path, round_number)
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
    records = export_records(args.path, day=args.gaming_day, cards=not args.no_cards)
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
