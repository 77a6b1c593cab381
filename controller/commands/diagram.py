"""`tablectl diagram --game GAME`: the game's state chart, drawn by transitions' own
diagram support from the machine the engine runs, the rule IDs gating each step on its
edges.

Prints mermaid text; with ``--svg FILE`` also writes an SVG (transitions' graphviz
engine: needs the ``graphviz`` package, the ``diagrams`` extra, and graphviz's ``dot``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tablectl.controller.engine.machine import DrawingToolMissing, definition, mermaid, svg
from tablectl.controller.engine.registry import (
    ENTRY_POINT_GROUP,
    GameLoadError,
    GameNotFound,
    bundled_game_names,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--game",
        required=True,
        metavar="GAME",
        help=f"{', '.join(bundled_game_names())}, or a game installed through the "
        f"{ENTRY_POINT_GROUP} entry points",
    )
    parser.add_argument("--svg", metavar="FILE", help="also write an SVG (needs graphviz)")


def run(args: argparse.Namespace) -> int:
    try:
        defn = definition(args.game)
    except GameNotFound as error:  # a GameLoadError too: the game is named, and why
        print(f"tablectl diagram: {error}", file=sys.stderr)
        return 1 if isinstance(error, GameLoadError) else 2
    sys.stdout.write(mermaid(defn))
    if args.svg:
        try:
            drawn = svg(defn)
        except DrawingToolMissing as error:
            print(f"tablectl diagram: no SVG written: {error}", file=sys.stderr)
            return 1
        # the whole drawing or nothing: never an empty or half-written FILE
        target = Path(args.svg)
        partial = target.with_name(f".{target.name}.partial")
        try:
            partial.write_bytes(drawn)
            partial.replace(target)
        except OSError as error:
            partial.unlink(missing_ok=True)
            print(f"tablectl diagram: {args.svg}: {error.strerror}", file=sys.stderr)
            return 1
    return 0
