"""The engine's whole output, event by event, into a directory: a byte-identity check for
refactorings of the engine (issue 35, step 3).

    .venv/bin/python -m tests.tools.engine_trace OUT_DIR

For every golden replay (tests/replay/scenarios), acceptance scenario
(tests/acceptance/scenarios) and audit scenario (tests/acceptance/scenarios_audit): the
replay's output (decisions as `tablectl replay` prints them, or its error) and, after every
event the engine handles, the decisions, the status and the snapshot. For every game of the
engine matrix: the golden text it renders and the same per-event trace of every cell. Run it
on main and on the change, then ``diff -r`` the two directories: any difference is a changed
ruling, status or snapshot. Nothing here is compared by ``make test`` (the golden tests are);
it is the refactoring's evidence.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tablectl.controller.commands.replay import ScenarioError, replay
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.decisions import Decision

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIRS = {
    "replay": ROOT / "tests" / "replay" / "scenarios",
    "acceptance": ROOT / "tests" / "acceptance" / "scenarios",
    "audit": ROOT / "tests" / "acceptance" / "scenarios_audit",
}


def _text(value: Any) -> str:
    # key order kept: a reordered status or snapshot is a changed byte
    return json.dumps(value, default=str)


class Tracer:
    """Wraps ``Engine.handle`` so that every call, by any caller, appends its event, its
    decisions, and the engine's status and snapshot after it to ``lines``."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._original: Callable[..., list[Decision]] | None = None

    def __enter__(self) -> Tracer:
        original = Engine.handle
        self._original = original
        lines = self.lines

        def handle(engine: Engine, event: Mapping[str, Any], at: int) -> list[Decision]:
            decisions = original(engine, event, at)
            lines.append(f"event {at} {_text(dict(event))}")
            lines.extend(f"  decision {_text(d.to_dict())}" for d in decisions)
            lines.append(f"  status {_text(engine.status())}")
            lines.append(f"  snapshot {_text(engine.snapshot())}")
            return decisions

        Engine.handle = handle  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._original is not None
        Engine.handle = self._original  # type: ignore[method-assign]

    def take(self) -> list[str]:
        taken = list(self.lines)
        self.lines.clear()
        return taken


def _scenario(path: Path, tracer: Tracer) -> str:
    out: list[str] = []
    with path.open(encoding="utf-8") as handle:
        try:
            for decision in replay(handle):
                out.append("out " + _text(decision))
        except ScenarioError as error:
            out.append(f"error {error}")
    return "\n".join(out + tracer.take()) + "\n"


def _matrix(out_dir: Path, tracer: Tracer) -> int:
    from tests.engine_matrix.matrix import GAMES, render

    written = 0
    for game in GAMES:
        (out_dir / f"{game}.md").write_text(render(game), encoding="utf-8")
        (out_dir / f"{game}.trace").write_text("\n".join(tracer.take()) + "\n", encoding="utf-8")
        written += 2
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.tools.engine_trace OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    written = 0
    with Tracer() as tracer:
        for kind, directory in SCENARIO_DIRS.items():
            target = out / kind
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(directory.glob("*.jsonl")):
                if path.name.endswith(".expected.jsonl"):
                    continue
                (target / f"{path.stem}.trace").write_text(
                    _scenario(path, tracer), encoding="utf-8"
                )
                written += 1
        matrix = out / "matrix"
        matrix.mkdir(parents=True, exist_ok=True)
        written += _matrix(matrix, tracer)
    print(f"wrote {written} files under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
