"""`tablectl proof verify BUNDLE --table-key K [--witness-key W ...]`: a round's proof checked
offline, without the journal (docs/journal.md, "A proof for one round").

Exit status: 0 the proof holds (the round's rows are printed, each with its row number as
the citation), 1 it does not (the reason on stderr), 2 not readable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tablectl.controller.record.note import NoteError, Verifier
from tablectl.controller.record.round_proof import ProofError, describe_row, verify_bundle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser(
        "verify", help="check a round's proof offline; print its cards and decisions"
    )
    verify.add_argument("bundle", type=Path, metavar="BUNDLE", help="`journal prove`'s output")
    verify.add_argument(
        "--table-key",
        required=True,
        metavar="KEY",
        help="the table's public key (setup-keys printed it: NAME+KEYID+BASE64)",
    )
    verify.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a witness's public key: its cosignature must be on the checkpoint (repeat)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        table_key = Verifier.parse(args.table_key)
        witness_keys = [Verifier.parse(text) for text in args.witness_key]
    except NoteError as error:
        print(f"tablectl proof verify: {error}", file=sys.stderr)
        return 2
    try:
        bundle = json.loads(args.bundle.read_text())
    except (OSError, UnicodeError, ValueError) as error:
        print(f"tablectl proof verify: {args.bundle}: not readable: {error}", file=sys.stderr)
        return 2
    try:
        proven = verify_bundle(bundle, table_key, witness_keys)
    except ProofError as error:
        print(f"tablectl proof verify: {args.bundle}: REFUSED: {error}", file=sys.stderr)
        return 1
    rows = proven.rows
    print(
        f"{args.bundle}: round {proven.round} of {proven.origin}: rows {rows[0].seq}-"
        f"{rows[-1].seq} proven in its log of {proven.tree_size} rows (root "
        f"{proven.root.hex()}), signed by the table"
        + "".join(f", cosigned by {name} at {when}" for name, when in proven.cosigned_by)
    )
    for row in rows:
        print(describe_row(row))
    if proven.held_back:
        print(f"({proven.held_back} later rows of the round wait for the next collection)")
    return 0
