"""Regenerate the golden replay expectations after a deliberate change of the engine.

    python -m tests.replay.regen        (or: make replay-regen)

Writes tests/replay/scenarios/NAME.expected.jsonl next to each NAME.jsonl; review the
diff (git diff tests/replay) before committing it: every changed line is a changed ruling.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tablectl.controller.commands.replay import replay

HERE = Path(__file__).resolve().parent / "scenarios"


def scenarios() -> list[Path]:
    return sorted(p for p in HERE.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


def expected_path(scenario: Path) -> Path:
    return scenario.with_name(scenario.name[: -len(".jsonl")] + ".expected.jsonl")


def render(scenario: Path) -> str:
    lines = scenario.read_text(encoding="utf-8").splitlines()
    return "".join(json.dumps(d) + "\n" for d in replay(lines))


def main() -> int:
    for scenario in scenarios():
        expected_path(scenario).write_text(render(scenario), encoding="utf-8")
        print(f"wrote {expected_path(scenario).relative_to(Path.cwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
