"""`tablectl replay FILE`: run a scenario through the engine, decisions as JSON lines.

The file is JSON Lines (docs/events.md): the first line describes the table, every later line
is one event; blank lines and lines starting with ``#`` are ignored. Each decision's ``at``
is the 1-based line number of the event that caused it. A malformed line, or a table the
rules refuse, stops the replay with exit status 2 and a message naming the line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.events import EventError, parse_json_object, validate
from tablectl.controller.engine.table import TableSpec, TableSpecError


class ScenarioError(ValueError):
    """A line of a scenario file that is not an event at all; names the line."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line


def read_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for every non-blank, non-comment line."""
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            # the same guards as the operator socket's: no NaN, no deep nesting, no surrogate
            obj = parse_json_object(text)
        except EventError as error:
            raise ScenarioError(number, str(error)) from None
        if not isinstance(obj.get("type"), str):
            raise ScenarioError(number, 'the object has no "type" string')
        yield number, obj


class _LineCounter:
    """Passes lines through, counting them (to name the last line of a file with no table)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.lines = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.lines += 1
            yield line


def replay(lines: Iterable[str], random_source: Any = None) -> Iterator[dict[str, Any]]:
    """Decisions (as dicts) of a scenario; raises ScenarioError for a bad line or table."""
    engine: Engine | None = None
    counter = _LineCounter(lines)
    for number, obj in read_lines(counter):
        if engine is None:
            if obj["type"] != "table":
                raise ScenarioError(
                    number, f"the first line must be the table, not {obj['type']!r}"
                )
            try:
                spec = TableSpec.from_dict(obj)
            except TableSpecError as error:
                raise ScenarioError(number, f"table refused: {error}") from None
            source = random_source or random.Random(0).randrange
            engine = Engine(spec, random_source=source)
            continue
        if obj["type"] == "table":
            raise ScenarioError(number, "a second table line; one scenario describes one table")
        try:
            # docs/events.md: a line that is no valid event is an error of the file (exit 2);
            # only an event the rules refuse is a `rejected` decision. The same validate()
            # guards Engine.handle, which answers `rejected` to the daemon's callers.
            validate(obj)
        except EventError as error:
            raise ScenarioError(number, str(error)) from None
        for decision in engine.handle(obj, number):
            yield decision.to_dict()
    if engine is None:
        if not counter.lines:
            raise ScenarioError(1, "the file is empty; the first line must be the table")
        raise ScenarioError(
            counter.lines, "the file has no table line, only blank and comment lines"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a scenario file (JSON Lines, docs/events.md); - for stdin")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed for a computer-drawn starting position (ap_start=computer, A1)",
    )


def run(args: argparse.Namespace) -> int:
    out: TextIO = sys.stdout
    try:
        if args.file == "-":
            handle: TextIO = sys.stdin
        else:
            handle = open(args.file, encoding="utf-8")  # noqa: SIM115
    except OSError as error:
        print(f"tablectl replay: {args.file}: {error.strerror}", file=sys.stderr)
        return 2
    try:
        source = random.Random(args.seed).randrange
        for decision in replay(handle, source):
            out.write(json.dumps(decision) + "\n")
    except ScenarioError as error:
        out.flush()
        print(f"tablectl replay: {args.file}: {error}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as error:
        print(f"tablectl replay: {args.file}: not UTF-8 text: {error.reason}", file=sys.stderr)
        return 2
    finally:
        if handle is not sys.stdin:
            handle.close()
    return 0
