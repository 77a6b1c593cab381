"""The regulator's-lab acceptance scenarios, replayed through `tablectl replay`.

Each file in scenarios/ lists the decisions the regulation texts demand; the
replay's decisions must be exactly those (see README.md for the syntax).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tablectl.controller.commands.replay")

from acceptance_format import (
    brief,
    compare,
    hidden_card_leaks,
    parse_scenario,
    scenario_paths,
)

from tablectl.controller.commands.cli import main


def replay(path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """Run `tablectl replay PATH` in-process: (exit status, decisions, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["replay", str(path)])
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
    decisions = []
    for number, line in enumerate(out.getvalue().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            decisions.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise AssertionError(f"stdout line {number} is not JSON: {line!r}") from error
    return status, decisions, err.getvalue()


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    sc = parse_scenario(path)
    status, decisions, stderr = replay(path)
    if sc.exit_status is not None:
        assert status == sc.exit_status, (
            f"{path.name}: exit status {status}, expected {sc.exit_status}\n{stderr}"
        )
        if sc.exit_line is not None:
            assert f"line {sc.exit_line}:" in stderr, f"{path.name}: {stderr}"
    else:
        assert status != 2, f"{path.name}: replay refused the file (exit 2):\n{stderr}"
    for decision in decisions:
        for key in ("decision", "rule", "rule_id", "at", "reason"):
            assert key in decision, f"{path.name}: decision without {key!r}: {decision}"
    problems = compare(sc, decisions) + hidden_card_leaks(sc, decisions)
    if problems:
        expected = "\n".join(f"  {json.dumps(e)}" for e in sc.expected) or "  (none)"
        got = "\n".join(f"  {brief(d)}" for d in decisions) or "  (none)"
        notes = "\n".join(f"  #? {t}" for t in sc.open_points)
        pytest.fail(
            f"{path.name}:\n"
            + "\n".join(f"- {p}" for p in problems)
            + f"\nexpected:\n{expected}\nreplay gave:\n{got}"
            + (f"\nopen points:\n{notes}" if notes else ""),
            pytrace=False,
        )
