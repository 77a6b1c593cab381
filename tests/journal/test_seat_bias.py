"""Q3, a biased seat (docs/shuffle-integrity.md): `tablectl journal seat-bias` over a gaming
day's segment, on journals written the way the table service writes them: an honest day is
no finding, a day whose position 1 gets low cards is flagged, and the round still in play is
never read (H7)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.engine.cards import STANDARD_DECK
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.controller.record.journal import Journal
from tablectl.controller.record.seat_bias import ended_player_cards

#: minutes under load: make test-long
pytestmark = pytest.mark.long

TABLE = {"type": "table", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}}
PLAYERS = [1, 2, 3, 4, 5, 6, 7]
LOW = [c for c in STANDARD_DECK if c[0] in "23456"]


def write_day(path: Path, rounds: int, *, biased: bool, open_round: bool = False) -> None:
    """A HILO day: seven players, five cards each and the dealer's, a shuffle between rounds;
    with `biased`, position 1's cards are low ones far more often than a shuffle gives."""
    rng = random.Random(7)
    engine = Engine(TableSpec.from_dict(TABLE))
    with Journal(path) as journal:
        journal.append("table", TABLE)

        def feed(event: dict) -> None:
            seq = journal.append("event", event, round_number=engine.round_number)
            for decision in engine.handle(event, seq):
                journal.append("decision", decision.to_dict(), round_number=engine.round_number)

        feed({"type": "deck_received"})
        for number in range(rounds + (1 if open_round else 0)):
            feed({"type": "shuffle_completed", "count": 52})
            deck = rng.sample(STANDARD_DECK, 52)
            order = [*PLAYERS, "dealer"] * 5  # 40.7(d): round the table five times
            if biased:
                ones = [c for c in deck if c in LOW][:5] if rng.random() < 0.6 else deck[:5]
                rest = [c for c in deck if c not in ones]
                deck = [ones[i // 8] if t == 1 else rest.pop() for i, t in enumerate(order)]
            feed({"type": "bets_closed", "positions": PLAYERS})
            for card in deck[: len(order)]:
                feed({"type": "card_drawn", "card": card})
            if number < rounds:
                feed({"type": "deal_completed"})
                feed({"type": "stub_counted", "count": 52 - len(order)})  # S1, every round
                feed({"type": "hands_collected"})
        journal.flush()


def seat_bias(path: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "seat-bias", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_Q3_an_honest_day_is_no_finding(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    write_day(path, 300, biased=False)
    code, report = seat_bias(path)
    assert code == 0 and report["test"] is not None and not report["test"]["flagged"]
    assert report["cards"] == 300 * 35 and report["by_position"]["1"] == 1500


def test_Q3_a_seat_dealt_low_cards_is_flagged(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    write_day(path, 300, biased=True)
    code, report = seat_bias(path)
    assert code == 1 and report["test"]["flagged"] and report["test"]["p_value"] < 1e-4
    # figures only: no card in what it prints (H7 holds for ended rounds too: a report is read
    # by more people than the journal)
    assert not [c for c in STANDARD_DECK if f'"{c}"' in json.dumps(report)]


def test_Q3_too_few_rounds_are_not_tested_and_the_round_in_play_is_never_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite"
    write_day(path, 2, biased=False, open_round=True)
    assert len(list(ended_player_cards(path))) == 2 * 35  # the third round is still in play
    code, report = seat_bias(path)
    assert code == 0 and report["test"] is None
