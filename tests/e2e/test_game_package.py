"""A game installed as a package of its own runs under a real `tablectl run`.

The example game High Card (examples/high-card-game, installed into the venv by `make venv`)
is found through the `tablectl.games` entry points: its configuration is checked with its
own options, `tablectl run --config FILE` plays it with a simulated shuffler and shoe on
ptys, and its decisions carry its own rule (K1) and its own citations, in the journal and in
`status`, as a bundled game's do (docs/games.md). Nothing of it is in controller/.
"""

from __future__ import annotations

import subprocess
from importlib.metadata import entry_points
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, Table, tablectl

HOUSE = "High Card house rules (example game)"


@pytest.fixture(autouse=True)
def _installed() -> None:
    found = [ep.value for ep in entry_points(group="tablectl.games") if ep.name == "high_card"]
    assert found == ["high_card:HighCard"], "the example game is not installed: run `make venv`"


def shuffle_into_shoe(table: Table) -> None:
    assert table.sim("shuffle") == "ready"
    table.until(lambda s: s["decks"]["A"]["state"] == "shuffled", what="deck shuffled")
    table.sim("to_shoe")


def draw(table: Table, count: int) -> list[str]:
    cards = [table.sim("call", "shoe", method="draw") for _ in range(count)]
    assert None not in cards, cards
    return cards


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tablectl(*args), cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_an_installed_game_plays_under_tablectl_run(make_table: Any) -> None:
    table = make_table("high_card")
    checked = cli("check-config", str(table.config_path))
    assert checked.returncode == 0, checked.stderr
    assert "game high_card" in checked.stdout

    table.start()
    status = table.status()
    assert status["game"] == "high_card"
    assert status["devices"] == {"shuffler": "up", "shoe": "up"}

    # C11 with the game's own citation: the table has five positions
    refused = table.op("bets_closed", positions=[1, 7])
    assert [(d["decision"], d["rule_id"], d["rule"]) for d in refused] == [
        ("rejected", "C11", f"{HOUSE} 2")
    ]

    # a clean round: one card to positions 1 and 3, one to the dealer
    shuffle_into_shoe(table)
    assert table.op("bets_closed", positions=[1, 3]) == []
    draw(table, 3)
    table.until(
        lambda s: s["cards_dealt"] == {"position 1": 1, "position 3": 1, "dealer": 1},
        what="the deal",
    )
    assert table.op("deal_completed") == []
    assert table.op("hands_collected") == []

    # a short deal: K1, the game's own rule, with the game's own citation
    table.sim("call", "shuffler", method="load")  # the collected deck back in the shuffler
    shuffle_into_shoe(table)
    assert table.op("bets_closed", positions=[2, 4]) == []
    draw(table, 2)
    table.until(
        lambda s: s["cards_dealt"] == {"position 2": 1, "position 4": 1}, what="two cards dealt"
    )
    void = table.op("deal_completed")
    assert ("void_round", "K1", f"{HOUSE} 4(b)") in [
        (d["decision"], d["rule_id"], d["rule"]) for d in void
    ]
    status = table.status()
    assert status["game"] == "high_card"
    assert (status["state"], status["round"]) == ("void", 2)
    assert table.op("hands_collected") == []

    journal = table.decisions()
    assert ("C11", f"{HOUSE} 2") in [(d["rule_id"], d["rule"]) for d in journal]
    assert ("K1", f"{HOUSE} 4(b)") in [(d["rule_id"], d["rule"]) for d in journal]
    header = [row.body for row in table.rows() if row.kind == "table"]
    assert header and header[0]["game"] == "high_card"
    assert table.metric("tablectl_rounds_total", game="high_card", outcome="completed") == 1
    assert table.stop() == 0

    verified = cli("journal", "verify", str(table.journal))
    assert verified.returncode == 0, verified.stderr
    exported = cli("journal", "export", str(table.journal), "--format", "jsonl")
    assert exported.returncode == 0, exported.stderr
    assert "K1" in exported.stdout
