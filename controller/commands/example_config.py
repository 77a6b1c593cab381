"""`tablectl example-config GAME`: print a commented configuration to start a table from.

The examples ship with the package (controller.resources), so an install from a wheel has
them: ``tablectl example-config five_card_hilo > /etc/tablectl/hilo01.toml``, then edit.
``--path systemd`` prints the folder of the shipped unit, udev rules, sysusers and tmpfiles
entries (``--path config``: example configs, alert rules, dashboard; ``--path docs``), for
the install steps of docs/operations.md.
"""

from __future__ import annotations

import argparse
import sys

from tablectl.controller.config import GAMES
from tablectl.controller.resources import NotShipped, example_config, shared


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("game", nargs="?", choices=GAMES, help="the table's game")
    parser.add_argument(
        "--path",
        nargs="?",
        const="",
        default=None,
        metavar="FOLDER",
        help="print where the shipped files are: config, systemd, docs (default: share/ itself)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.path is not None:
            print(shared(args.path))
            return 0
        if args.game is None:
            print(f"tablectl example-config: name a game: {', '.join(GAMES)}", file=sys.stderr)
            return 2
        sys.stdout.write(example_config(args.game))
    except NotShipped as missing:
        print(f"tablectl example-config: {missing}", file=sys.stderr)
        return 1
    return 0
