"""`tablectl demo --rounds 3` for every game, as a process: exit 0, a journal that verifies,
legal rounds that draw no void, violation or removal, and summary lines without a card."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_helpers import (
    CARD_TOKEN,
    SUMMARY,
    decisions,
    events,
    journal_rows,
    run_demo,
    summary_lines,
    verify_journal,
)

from tablectl.simulators.autodealer import ILLEGAL_IN_A_LEGAL_ROUND

GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")


@pytest.mark.slow
@pytest.mark.parametrize("game", GAMES)
def test_three_legal_rounds_of_each_game(game: str, tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--game", game, "--rounds", "3", "--seed", "11")
    assert result.returncode == 0, result.stderr
    lines = summary_lines(result.stdout)
    assert len(lines) == 3, result.stdout
    for number, line in enumerate(lines, start=1):
        match = SUMMARY.match(line)
        assert match, line
        assert int(match.group(1)) == number and match.group(2) == game
        assert match.group(3) == "completed"
        assert "p50" in line and "max" in line  # the round's event latency
        assert not CARD_TOKEN.search(line), f"a card in a summary line: {line}"

    journal = tmp_path / "journal.sqlite"
    verified = verify_journal(journal)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    rows = journal_rows(journal)
    ruled = decisions(rows)
    illegal = [d for d in ruled if d.get("decision") in ILLEGAL_IN_A_LEGAL_ROUND]
    assert illegal == [], illegal
    assert len(events(rows, "hands_collected")) == 3
    assert len(events(rows, "bets_closed")) == 3
    # the cards came from the simulated shoe through its driver, never from the dealer's terminal
    drawn = events(rows, "card_drawn") + events(rows, "stack_dispensed")
    assert drawn and all(e.get("device") == "shoe" and e.get("kind") == "shoe" for e in drawn)
    # every device handshook through its production driver (ptys and the pyusb shoe)
    connected = {e["device"] for e in events(rows, "device_connected")}
    expected = {"shuffler", "shoe", "rack"} | ({"reader"} if game == "three_card_21" else set())
    assert connected == expected
    if game == "three_card_21":
        # H1: the reader is inspected at the gaming day's start, before it is first used
        kinds = [e["type"] for e in events(rows)]
        assert "reader_inspected" in kinds
        if "reader_inserted" in kinds:
            assert kinds.index("reader_inspected") < kinds.index("reader_inserted")


@pytest.mark.slow
def test_stub_counted_when_the_engine_asks(tmp_path: Path) -> None:
    """S1: a one-deck HILO manual shoe is counted on the fifth round; only then."""
    result = run_demo(tmp_path, "--game", "five_card_hilo", "--rounds", "6", "--seed", "2")
    assert result.returncode == 0, result.stderr
    rows = journal_rows(tmp_path / "journal.sqlite")
    asked = [d for d in decisions(rows) if d.get("decision") == "stub_count_required"]
    counted = events(rows, "stub_counted")
    assert len(asked) == 1 and len(counted) == 1
    assert [d for d in decisions(rows) if d.get("decision") in ILLEGAL_IN_A_LEGAL_ROUND] == []
    lines = summary_lines(result.stdout)
    assert "S1:stub_count_required" in lines[4]


@pytest.mark.slow
def test_two_decks_alternate_one_shuffled_while_the_other_is_dealt(tmp_path: Path) -> None:
    """40.2(b): decks A and B alternate every round; S1 counts each deck's own rounds."""
    result = run_demo(
        tmp_path, "--game", "five_card_hilo", "--dual-deck", "--rounds", "10", "--seed", "4"
    )
    assert result.returncode == 0, result.stderr
    rows = journal_rows(tmp_path / "journal.sqlite")
    assert [e.get("deck") for e in events(rows, "shoe_loaded")] == ["A", "B"] * 5
    assert [d for d in decisions(rows) if d.get("decision") in ILLEGAL_IN_A_LEGAL_ROUND] == []
    # each deck's fifth round (rounds 9 and 10) asks for its stub count, and it is counted
    asked = [d.get("deck") for d in decisions(rows) if d.get("decision") == "stub_count_required"]
    assert sorted(asked) == ["A", "B"]
    assert len(events(rows, "stub_counted")) == 2
    assert verify_journal(tmp_path / "journal.sqlite").returncode == 0


def test_options_a_game_does_not_have_are_refused(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--game", "asia_poker", "--dual-deck", timeout=30)
    assert result.returncode == 2 and "--dual-deck" in result.stderr
    result = run_demo(tmp_path, "--game", "three_card_21", "--dealing", "automated_shoe")
    assert result.returncode == 2 and "--dealing" in result.stderr


@pytest.mark.slow
def test_a_second_run_in_the_same_state_dir_continues_the_journal(tmp_path: Path) -> None:
    """The daemon replays the journal on start: round numbers go on, the chain stays intact."""
    first = run_demo(tmp_path, "--game", "asia_poker", "--rounds", "2", "--seed", "5")
    second = run_demo(tmp_path, "--game", "asia_poker", "--rounds", "2", "--seed", "6")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    numbers = [int(SUMMARY.match(line).group(1)) for line in summary_lines(second.stdout)]  # type: ignore[union-attr]
    assert numbers == [3, 4]
    rows = journal_rows(tmp_path / "journal.sqlite")
    assert len(events(rows, "hands_collected")) == 4
    assert [d for d in decisions(rows) if d.get("decision") in ILLEGAL_IN_A_LEGAL_ROUND] == []
    assert verify_journal(tmp_path / "journal.sqlite").returncode == 0
    other_game = run_demo(tmp_path, "--game", "five_card_hilo", "--rounds", "1", timeout=30)
    assert other_game.returncode == 2  # the journal was written for another table: refused
    assert "was written for" in other_game.stderr and "--state-dir" in other_game.stderr
