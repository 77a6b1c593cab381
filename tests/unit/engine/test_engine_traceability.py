"""docs/rules.md stays true: every rule has its row, its catalogue entry, its tests, and
its `# ID:` comment at the place that enforces it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tablectl.controller.engine.rules import CATALOGUE

ROOT = Path(__file__).resolve().parents[3]
RULE_IDS = [
    *(f"C{i}" for i in range(1, 12)),
    *(f"S{i}" for i in range(1, 5)),
    "A1",
    *(f"M{i}" for i in range(1, 8)),
    *(f"H{i}" for i in range(1, 8)),
    *(f"G{i}" for i in range(1, 10)),
    *(f"D{i}" for i in range(1, 5)),
    "R1",
    "X1",
    "X2",
    *(f"L{i}" for i in range(1, 4)),
]
# the traceability table (the catalogue above it has rows by ID too)
DOC = (ROOT / "docs" / "rules.md").read_text().split("\n## Traceability\n", 1)[1]
TESTS = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
CODE = "\n".join(
    p.read_text()
    for p in [
        *(ROOT / "controller" / "engine" / n for n in ("core.py", "machine.py", "table.py")),
        # the engine's parts (core.py composes them) and its rule families
        *(
            ROOT / "controller" / "engine" / n
            for n in (
                *("table_state.py", "hooks.py", "gates.py", "round_life.py", "dealing.py"),
                *("stub_count.py", "shuffles.py", "devices.py", "snapshot.py"),
                *("deck.py", "rack.py", "reader.py", "integrity.py"),
            )
        ),
        ROOT / "controller" / "engine" / "cards.py",
        *sorted((ROOT / "controller" / "engine" / "games").glob("*.py")),
    ]
)


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_rule_is_traced(rule_id):
    assert rule_id in CATALOGUE
    row = re.search(rf"^\| {rule_id} \|(.*)$", DOC, re.MULTILINE)
    assert row, f"docs/rules.md has no row for {rule_id}"
    named = re.findall(rf"def (test_{rule_id}_\w+)", TESTS)
    assert named, f"no test named test_{rule_id}_..."
    for test in named:
        assert test in row.group(1), f"{test} missing from the {rule_id} row"
    assert re.search(rf"#.*\b{rule_id}\b|{rule_id}:", CODE), f"no '{rule_id}' mark in the code"
