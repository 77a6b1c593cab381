"""The second lab's audit (tests/acceptance/AUDIT.md): one test per finding, named by rule."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import assert_decision, cards, draws, ev, feed, names, table

from tablectl.controller.commands.replay import ScenarioError, replay
from tablectl.controller.engine.rules import CATALOGUE, METHODS, citation
from tablectl.controller.engine.table import TableSpec, TableSpecError

T21, HILO, HUH, AP = GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")


# ---- F1: R1 counts the G2 burn card once ---------------------------------------------------


@pytest.mark.parametrize(("tolerance", "rise", "notified"), [(0, 5, False), (0, 4, True)])
def test_R1_a_reading_after_the_burn_card_does_not_count_it_again(tolerance, rise, notified):
    e = table(T21, rack_tolerance=tolerance)
    feed(e, ev("shoe_loaded"), *draws("2s"))  # G2: burned straight into the rack (2C.6(c))
    feed(e, ev("rack_level", cards=1), ev("bets_closed", positions=[1]))
    feed(e, *draws("2c", "Kh", "3c", "9d", "4c"), ev("hands_collected"))
    out = feed(e, ev("rack_level", cards=1 + rise))
    assert (("notify_supervisor", "R1") in names(out)) is notified


def test_R1_a_reading_before_the_burn_card_expects_it_in_the_rise():
    e = table(T21, rack_tolerance=0)
    feed(e, ev("rack_level", cards=0), ev("shoe_loaded"), *draws("2s"))
    feed(e, ev("bets_closed", positions=[1]), *draws("2c", "Kh", "3c", "9d", "4c"))
    feed(e, ev("hands_collected"))
    assert feed(e, ev("rack_level", cards=6)) == []
    e2 = table(T21, rack_tolerance=0)
    feed(e2, ev("rack_level", cards=0), ev("shoe_loaded"), *draws("2s"))
    feed(e2, ev("bets_closed", positions=[1]), *draws("2c", "Kh", "3c", "9d", "4c"))
    feed(e2, ev("hands_collected"))
    assert_decision(feed(e2, ev("rack_level", cards=5)), "notify_supervisor", "R1", e2)


# ---- F2: a C5-voided round's cards go to the shuffler, not the rack (no D2) ---------------


def test_D2_not_raised_for_a_void_round_whose_cards_went_to_the_shuffler():
    e = table(HILO, dealing="automated_shoe", dual_deck=True)
    feed(e, ev("shoe_loaded", deck="A"), ev("bets_closed", positions=[1]))
    feed(e, ev("stack_dispensed", cards=cards(5)))
    out = feed(e, ev("shoe_fault", fault="jam"))
    assert names(out) == [("void_round", "C5"), ("reshuffle", "C5")]
    feed(e, ev("shuffle_started", deck="A"), ev("shuffle_completed", deck="A", count=52))
    feed(e, ev("shoe_loaded", deck="B"), ev("bets_closed", positions=[1]))
    out = feed(e, *(ev("stack_dispensed", cards=cards(5, 5 * i)) for i in range(2)))
    assert out == []
    assert e.round is not None and e.round.deck == "B"  # the deck the operator loaded
    assert feed(e, ev("hands_collected")) == []


def test_C5_void_round_then_hands_collected_still_puts_its_cards_in_the_rack():
    e = table(HILO, dealing="automated_shoe", dual_deck=True)
    feed(e, ev("shoe_loaded", deck="A"), ev("bets_closed", positions=[1]))
    feed(e, ev("stack_dispensed", cards=cards(5)), ev("shoe_fault", fault="jam"))
    feed(e, ev("hands_collected"))
    assert e.rack_deck == "A"  # collected into the rack: D2 still watches it


# ---- F3: Three Card 21's next batch in the shuffler (2C.4(i)2) ----------------------------


def _t21_round_in_play() -> object:
    e = table(T21)
    feed(e, ev("shuffle_completed", count=312), ev("shoe_loaded"), *draws("2s"))
    feed(e, ev("shuffle_started"), ev("bets_closed", positions=[1]), *draws("2c", "Kh"))
    return e


def test_C7_three_card_21_batch_miscounted_mid_round_removes_only_the_batch():
    e = _t21_round_in_play()
    out = feed(e, ev("shuffle_completed", count=311))
    assert names(out) == [("remove_deck", "C7")]
    assert feed(e, *draws("3c", "9d", "4c"), ev("deal_completed")) == []
    assert feed(e, ev("bonus_settled"), ev("dealer_turn"), ev("hands_collected")) == []
    # C10: the removed batch may not be dealt once it would go into the shoe
    out = feed(e, ev("shoe_loaded"), ev("bets_closed", positions=[1]), *draws("5c"))
    assert_decision(out, "deal_blocked", "C10", e)
    feed(e, ev("hands_collected"), ev("deck_received"), ev("shuffle_completed", count=312))
    out = feed(e, ev("shoe_loaded"), *draws("6c"), ev("bets_closed", positions=[1]))
    assert names(out) == [("burn_card", "G2")]


def test_C4_three_card_21_batch_jam_mid_round_leaves_the_shoe_in_play_dealable():
    e = _t21_round_in_play()
    out = feed(e, ev("shuffler_fault", fault="jam"))
    assert names(out) == [("reshuffle", "C4")]
    feed(e, *draws("3c", "9d", "4c"), ev("deal_completed"), ev("bonus_settled"))
    feed(e, ev("dealer_turn"), ev("hands_collected"))
    # the next round from the same, shuffled shoe is dealt
    assert feed(e, ev("bets_closed", positions=[1]), *draws("5c", "Qh", "6c")) == []
    feed(e, ev("hands_collected"))
    # the jammed batch, once loaded, is blocked until it completes a shuffle
    out = feed(e, ev("shoe_loaded"), ev("bets_closed", positions=[1]), *draws("7c"))
    assert_decision(out, "deal_blocked", "C4", e)


def test_G5_mid_round_shuffle_after_the_shoe_ran_out_is_still_the_shoes():
    e = _t21_round_in_play()
    feed(e, ev("shoe_fault", fault="empty"))
    feed(e, ev("shuffle_started"))
    assert feed(e, ev("shuffle_completed", count=312)) == []
    assert e.next_batch != "ready"
    assert names(feed(e, *draws("Ad"))) == [("burn_card", "G5")]


# ---- F4: replay stops at a line that is no valid event -------------------------------------

TABLE = '{"type": "table", "game": "five_card_hilo", "options": {}}'


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"type": "card_drawn", "card": "1x"}', "card"),
        ('{"type": "warp_drive_engaged"}', "type"),
        ('{"type": "bets_closed"}', "positions"),
        ('{"type": "bets_closed", "positions": [1, 1]}', "positions"),
        ('{"type": "stack_dispensed", "cards": "As"}', "cards"),
        ('{"type": "stub_counted", "count": -1}', "count"),
        ('{"type": "shuffle_completed", "deck": "C"}', "deck"),
        ('{"type": "starting_position", "dice": "nine"}', "dice"),
    ],
)
def test_E0_replay_stops_at_an_invalid_event_naming_line_and_field(line, field):
    with pytest.raises(ScenarioError, match=rf"^line 3: .*\b{field}\b"):
        list(replay([TABLE, '{"type": "deck_received"}', line, '{"type": "deck_received"}']))


def test_E0_engine_handle_still_answers_rejected_for_an_invalid_event():
    e = table(HILO)
    out = feed(e, ev("card_drawn", card="1x"))
    assert names(out) == [("rejected", "E0")]
    assert "card" in out[0]["error"]


def test_E0_a_rule_level_refusal_is_a_decision_not_an_error_of_the_file():
    out = list(replay([TABLE, '{"type": "bets_closed", "positions": [1, 2, 3, 4, 5, 6, 7, 8]}']))
    assert [(d["decision"], d["rule_id"]) for d in out] == [("rejected", "C11")]


def test_A1_dice_out_of_range_is_a_rule_refusal_not_a_file_error():
    lines = [
        '{"type": "table", "game": "asia_poker", "options": {}}',
        '{"type": "bets_closed", "positions": [1]}',
        '{"type": "starting_position", "dice": 19}',
        '{"type": "starting_position", "number": 0}',
    ]
    out = list(replay(lines))
    assert [(d["decision"], d["rule_id"], d["at"]) for d in out] == [
        ("rejected", "A1", 3),
        ("rejected", "A1", 4),
    ]


def test_E0_cli_replay_exits_2_with_the_line_on_stderr(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text(TABLE + '\n# a comment\n{"type": "card_drawn", "card": "Xs"}\n')
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "replay", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "line 3:" in done.stderr and "bad card" in done.stderr
    assert "Xs" not in done.stderr  # a misspelled card is still a card (H7): never echoed


# ---- F5: deal_blocked only for deals ----------------------------------------------------------


def test_G3_after_a_blocked_deal_only_the_cards_are_deal_blocked():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(5)), ev("cut_card_reached"))
    feed(e, ev("dealer_turn"), ev("hands_collected"), ev("bets_closed", positions=[1]))
    out = feed(e, *draws("5c", "Qh", "6c", "8d", "7c"))
    assert names(out) == [("deal_blocked", "G3")] * 5
    steps = (ev("deal_completed"), ev("bonus_settled"), ev("insurance_closed"), ev("dealer_turn"))
    assert feed(e, *steps) == []
    # issue 22 (L2): the blocked round reached no hand; collected, it ends void
    assert names(feed(e, ev("hands_collected"))) == [("void_round", "L2")]


def test_D3_hand_deal_completed_is_the_deal_and_is_blocked_once():
    e = table(HILO, dealing="hand")
    feed(e, ev("bets_closed", positions=[1]), ev("deal_completed"), ev("hands_collected"))
    out = feed(e, ev("bets_closed", positions=[1]), ev("deal_completed"))
    assert names(out) == [("deal_blocked", "D3")]
    assert feed(e, ev("deal_completed")) == []


# ---- F6: each game's decisions cite that game's own sections ----------------------------------

# The sections of each game's own texts (regs/README.md); 13:69E-1.17/1.18 are common.
OWN = {
    T21: ("2C.", "1.10D"),
    HILO: ("40.", "1.13Z"),
    HUH: ("39.", "1.13Z"),
    AP: ("31.",),
}
ALL_GAMES_RULES = ["C1", "C2", "C3", "C4", "C6", "C7", "C8", "C9", "C10", "C11", "R1", "X1", "X2"]
GAME_RULES = {
    T21: [*ALL_GAMES_RULES, "M6", *(f"H{i}" for i in range(1, 8)), *(f"G{i}" for i in range(1, 8))],
    HILO: [*ALL_GAMES_RULES, "C5", "S1", "S2", "S3", "M1", "M2", "M3", "D1", "D2", "D3", "D4"],
    HUH: [*ALL_GAMES_RULES, "C5", "S1", "S2", "S3", "M4", "M5", "D1", "D2", "D3", "D4"],
    AP: [*ALL_GAMES_RULES, "C5", "S4", "A1", "D3"],
}


@pytest.mark.parametrize("game", GAMES)
def test_C1_citations_name_only_the_game_in_plays_sections(game):
    others = [p for g, own in OWN.items() if g != game for p in own if p not in OWN[game]]
    for rule_id in GAME_RULES[game]:
        assert rule_id in CATALOGUE
        for method in METHODS:
            text = citation(rule_id, game, method)
            sections = re.findall(r"\b\d+[A-Z]?\.\d+[A-Z]?", text)
            for section in sections:
                assert not any(section.startswith(p.rstrip(".")) and p for p in others), (
                    rule_id,
                    game,
                    text,
                )


def test_C2_asia_poker_face_up_cards_cite_31_14():
    e = table(AP)
    feed(e, ev("bets_closed", positions=[1]), ev("starting_position", number=1))
    out = feed(e, ev("card_drawn", card="As", face_up=True), *draws("2s"))
    out += feed(e, ev("card_drawn", card="3s", face_up=True))
    assert {d["rule"] for d in out} == {"13:69F-31.14 (interpretation; text not in regs/)"}
    assert names(out) == [("discard_card", "C1"), ("void_round", "C2"), ("reshuffle", "C2")]


# ---- F7: the decks option on one-deck games ---------------------------------------------------


@pytest.mark.parametrize("game", [HILO, HUH, AP])
def test_G1_decks_on_a_one_deck_game_accepts_one_and_refuses_the_rest(game):
    assert TableSpec.from_dict({"game": game, "options": {"decks": 1}}).options.dual_deck is False
    for value in (6, 2, 0, True, "1"):
        with pytest.raises(TableSpecError, match=r"^option decks: .*one deck"):
            TableSpec.from_dict({"game": game, "options": {"decks": value}})


def test_E0_an_empty_scenario_file_names_line_1():
    with pytest.raises(ScenarioError, match=r"^line 1: the file is empty"):
        list(replay([]))
    with pytest.raises(ScenarioError, match=r"^line 2: the file has no table line"):
        list(replay(["# only a comment", ""]))


def test_R1_no_expectation_after_the_rack_went_back_into_the_shoe_g5():
    e = table(T21, rack_tolerance=0)
    feed(e, ev("rack_level", cards=40), ev("bets_closed", positions=[1]), *draws(*cards(3)))
    feed(e, ev("shoe_fault", fault="empty"), *draws("Ad"), *draws(*cards(2, 3)))
    feed(e, ev("hands_collected"))
    assert feed(e, ev("rack_level", cards=5)) == []  # G5 emptied the rack: no baseline left
