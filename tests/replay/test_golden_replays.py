"""Golden replays: each scenario's decisions must equal its .expected.jsonl, line for line.

After a deliberate change: `python -m tests.replay.regen`, then review `git diff`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "scenarios"
SCENARIOS = sorted(p for p in HERE.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


def expected_of(scenario: Path) -> Path:
    return scenario.with_name(scenario.name[: -len(".jsonl")] + ".expected.jsonl")


def test_there_are_golden_scenarios_for_every_game():
    text = " ".join(p.read_text() for p in SCENARIOS)
    for game in ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"):
        assert f'"game": "{game}"' in text


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_replay_matches_golden_expectations(scenario):
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "replay", str(scenario)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    want = [json.loads(line) for line in expected_of(scenario).read_text().splitlines()]
    assert got == want
    assert got, "a golden scenario that decides nothing proves nothing"
