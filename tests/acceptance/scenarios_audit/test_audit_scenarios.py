"""The second lab's audit scenarios (scenarios_audit/*.jsonl), replayed through `tablectl replay`.

Same syntax and comparison as ../test_acceptance.py (see ../README.md), plus the `card`
field when an expectation names one (EVENTS.md: output always spells ten `T`). The files
in failing/ are what the engine gets wrong today (AUDIT.md); they are not run.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

pytest.importorskip("tablectl.controller.commands.replay")

from acceptance_format import brief, compare, hidden_card_leaks, parse_scenario  # noqa: E402
from make_audit_scenarios import FAILING, write_all  # noqa: E402

from tablectl.controller.commands.cli import main  # noqa: E402

PATHS = sorted(HERE.glob("*.jsonl"))


def replay(path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """Run `tablectl replay PATH` in-process: (exit status, decisions, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["replay", str(path)])
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
    decisions = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    return status, decisions, err.getvalue()


def card_mismatches(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[str]:
    """An expectation naming a card: the matching decision must carry exactly that card."""
    problems = []
    for record in expected:
        if "card" not in record:
            continue
        same = [d for d in actual if d.get("decision") == record["decision"]]
        if not any(d.get("card") == record["card"] for d in same):
            problems.append(f"no {record['decision']} with card {record['card']!r}: {same}")
    return problems


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_audit_scenario(path: Path) -> None:
    sc = parse_scenario(path)
    status, decisions, stderr = replay(path)
    if sc.exit_status is not None:
        assert status == sc.exit_status, f"{path.name}: exit {status}\n{stderr}"
        assert stderr.strip(), f"{path.name}: refused without a message"
        if sc.exit_line is not None:
            assert f"line {sc.exit_line}:" in stderr, f"{path.name}: {stderr}"
    else:
        assert status == 0, f"{path.name}: exit {status}:\n{stderr}"
    for decision in decisions:
        for key in ("decision", "rule", "rule_id", "at", "reason"):
            assert key in decision, f"{path.name}: decision without {key!r}: {decision}"
    problems = (
        compare(sc, decisions)
        + hidden_card_leaks(sc, decisions)
        + card_mismatches(sc.expected, decisions)
    )
    if problems:
        got = "\n".join(f"  {brief(d)}" for d in decisions) or "  (none)"
        pytest.fail(
            f"{path.name}:\n- " + "\n- ".join(problems) + f"\nreplay gave:\n{got}", pytrace=False
        )


def test_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    write_all(tmp_path)
    for folder, generated in ((HERE, tmp_path), (HERE / "failing", tmp_path / "failing")):
        want = {p.name: p.read_text() for p in generated.glob("*.jsonl")}
        have = {p.name: p.read_text() for p in folder.glob("*.jsonl")}
        assert want.keys() == have.keys(), f"run make_audit_scenarios.py ({folder.name})"
        assert [n for n in want if want[n] != have[n]] == [], "run make_audit_scenarios.py"


def test_failing_list_matches_the_failing_folder() -> None:
    assert {p.stem for p in (HERE / "failing").glob("*.jsonl")} == FAILING
