"""Q1, Q2 in a real daemon: `tablectl demo` with a simulated shuffler that completes every
cycle but does not shuffle (or replays a stacked deck) — the daemon journals the finding,
notifies the supervisor, counts it, and deals on; an honest shuffler stays silent."""

from __future__ import annotations

import pytest

from tests.demo.demo_helpers import CARD_TOKEN, decisions, journal_rows, run_demo

GAMES = [("five_card_hilo", "none", 3), ("heads_up_holdem", "replay", 4)]


@pytest.mark.parametrize(("game", "mode", "rounds"), GAMES, ids=[g for g, _, _ in GAMES])
def test_a_faulty_shuffler_is_found_within_rounds_and_dealing_goes_on(
    tmp_path, game: str, mode: str, rounds: int
) -> None:
    done = run_demo(tmp_path, "--game", game, "--rounds", str(rounds), "--shuffle-fault", mode)
    assert done.returncode == 0, done.stderr
    rows = journal_rows(tmp_path / "journal.sqlite")
    found = [d for d in decisions(rows) if d["decision"] == "shuffle_suspect"]
    assert found, f"{mode}: no shuffle_suspect in {rounds} rounds"
    assert {d["rule_id"] for d in found} <= {"Q1", "Q2"}
    notified = [
        d
        for d in decisions(rows)
        if d["decision"] == "notify_supervisor" and d["rule_id"][0] == "Q"
    ]
    assert len(notified) == len(found)
    for d in found:  # rounds and a statistic, never a card (H7)
        assert not CARD_TOKEN.search(d["reason"]), d["reason"]
        assert d["rounds"] and d["p_value"] < 1e-6
    assert sum(1 for r in rows if r.kind == "event" and r.body["type"] == "hands_collected") == (
        rounds
    )  # every round was dealt to its end: the finding blocks nothing


def test_an_honest_shuffler_is_not_suspected(tmp_path) -> None:
    done = run_demo(tmp_path, "--game", "five_card_hilo", "--rounds", "6")
    assert done.returncode == 0, done.stderr
    rows = journal_rows(tmp_path / "journal.sqlite")
    assert not [d for d in decisions(rows) if d["decision"] == "shuffle_suspect"]
    table = next(r.body for r in rows if r.kind == "table")
    assert table["options"]["interpretations"]["shuffle_integrity"] is True
