"""`tablectl status` and `tablectl watch` say a deck's state in the same words (issue 34: watch
said deck A was "shuffled, ready to deal" where status rightly said "not yet seen")."""

from __future__ import annotations

import pytest

from tablectl.controller.service.status_words import DECK_STATES, deck_words, describe


@pytest.mark.parametrize("state", sorted(DECK_STATES))
def test_status_and_watch_say_each_deck_state_alike(state: str) -> None:
    deck = {
        "state": state,
        "rounds_since_stub_count": 2,
        "stub_count_every": 5,
        "cards_in_shoe": 40,
    }
    line = next(ln for ln in describe({"decks": {"A": deck}}) if ln.startswith("  A: "))
    column = deck_words(deck, short=True)  # the watch's deck row, after the deck's name
    assert line.startswith(f"  A: {column[0]}")
    if state == "not_seen":
        assert column == ["not yet seen"]
        assert "cards in the shoe" not in line and "stub count" not in line
    else:
        assert column == [DECK_STATES[state], "2 of 5", "40"]
        cadence = "2 of 5 rounds since its stub count"
        assert line == f"  A: {DECK_STATES[state]}; {cadence}; 40 cards in the shoe"
