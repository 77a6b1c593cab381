"""Every event in every state (issue 22): the engine's answer in each cell equals the golden
file a reviewer reads, and the conservation law held after every event of every cell.

After a deliberate change of a ruling: `make matrix-regen`, then review `git diff`.
"""

from __future__ import annotations

import pytest

from tests.engine_matrix.matrix import GAMES, golden_path, render, states_of


@pytest.mark.parametrize("game", GAMES)
def test_every_event_in_every_state_matches_the_golden_file(game):
    # render() replays each cell from a fresh table and raises on a broken law, or on a
    # refused event that changed the engine
    got = render(game)
    want = golden_path(game).read_text(encoding="utf-8")
    assert got == want, f"{golden_path(game)} is stale: make matrix-regen, then review git diff"


@pytest.mark.parametrize("game", GAMES)
def test_the_matrix_covers_every_state_of_the_chart(game):
    text = golden_path(game).read_text(encoding="utf-8")
    for label in states_of(game):
        assert f"— {label}\n" in text


def test_the_matrix_names_the_issues_cases():
    """The cases of issue 22, as the golden files now rule them."""
    hilo = golden_path("five_card_hilo").read_text(encoding="utf-8")
    dealing = hilo.split("## manual_shoe — dealing\n", 1)[1].split("\n## ", 1)[0]
    assert "| bets_closed | refused | rejected L1 | dealing r1 |" in dealing
    assert "| hands_collected | irregularity | void_round L2 | idle |" in dealing
    assert "| shuffle_completed | refused | rejected L3 | dealing r1 |" in dealing
    t21 = golden_path("three_card_21").read_text(encoding="utf-8")
    assert "| reshuffle_requested | acted | reshuffle G8 |" in t21
    assert "reshuffle_requested | acted | reshuffle G3" not in t21
