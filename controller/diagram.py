"""`tablectl diagram --game GAME`: the game's state chart, from the machine definition.

Prints mermaid text; with ``--svg FILE`` also renders graphviz SVG when ``dot`` exists.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from tablectl.controller.machine import definition, graphviz, mermaid
from tablectl.controller.rules import GAMES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", required=True, choices=GAMES)
    parser.add_argument("--format", choices=("mermaid", "dot"), default="mermaid")
    parser.add_argument("--svg", metavar="FILE", help="also write an SVG (needs graphviz's dot)")


def render_svg(dot_text: str) -> bytes | None:
    """SVG bytes from graphviz's ``dot``, or None when graphviz is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    done = subprocess.run([dot, "-Tsvg"], input=dot_text.encode(), capture_output=True, check=True)
    return done.stdout


def run(args: argparse.Namespace) -> int:
    defn = definition(args.game)
    text = mermaid(defn) if args.format == "mermaid" else graphviz(defn)
    sys.stdout.write(text)
    if args.svg:
        svg = render_svg(graphviz(defn))
        if svg is None:
            print("tablectl diagram: graphviz 'dot' not found; no SVG written", file=sys.stderr)
            return 1
        with open(args.svg, "wb") as out:
            out.write(svg)
    return 0
