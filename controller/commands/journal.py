"""`tablectl journal verify PATH` and `tablectl journal show PATH --round N`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "verify":
            return _verify(args.path)
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
