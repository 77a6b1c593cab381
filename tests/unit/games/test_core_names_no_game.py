"""The core never names a game: each game's rules live in its own module in
controller/engine/games/, found by name through the registry (issue #10)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tablectl.controller.engine.registry import game_names

ROOT = Path(__file__).resolve().parents[3]
CORE = ["engine/core.py", "engine/machine.py", "engine/ledger.py", "engine/decisions.py"]
CORE += ["engine/table.py", "engine/registry.py", "commands/diagram.py", "commands/replay.py"]
# the catalogue's core, the configuration, the daemon and the commands that find games
CORE += ["engine/rules.py", "common/config.py", "service/daemon.py"]
CORE += ["commands/example_config.py", "commands/check_config.py"]
# every spelling of the four games the code or its comments have used
GAME_WORDS = re.compile(
    r"three_card_21|five_card_hilo|heads_up_holdem|asia_poker|3C21|\bHILO\b|\bHUH\b|"
    r"Hi-?Lo|Hold'?em|Asia Poker|Three Card|\bAP\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize("module", CORE)
def test_a_core_module_names_no_game(module):
    text = (ROOT / "controller" / module).read_text()
    found = [
        f"{module}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if GAME_WORDS.search(line)
    ]
    assert not found, "\n".join(found)


def test_each_bundled_game_is_one_module_found_by_name():
    games = ROOT / "controller" / "engine" / "games"
    assert game_names()[:4] == ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
    for name in game_names()[:4]:
        assert (games / f"{name}.py").is_file()
