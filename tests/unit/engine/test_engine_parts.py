"""Cards, compositions, the ledger, table validation and interpretations."""

from __future__ import annotations

import pytest

from tablectl.controller.engine.cards import (
    CardError,
    deck_with_joker,
    hand_total,
    multi_deck_shoe,
    parse_card,
    standard_deck,
)
from tablectl.controller.engine.ledger import Ledger, LedgerError
from tablectl.controller.engine.rules import CATALOGUE
from tablectl.controller.engine.table import TableSpec, TableSpecError


@pytest.mark.parametrize(
    ("text", "card"), [("As", "As"), ("10h", "Th"), ("td", "Td"), ("JK", "JK"), ("jk", "JK")]
)
def test_cards_are_spelled_as_events_md_says(text, card):
    assert parse_card(text) == card


@pytest.mark.parametrize("bad", ["1x", "A", "Asx", "11h", "Zs", "", 7, None])
def test_bad_cards_are_refused_naming_the_value(bad):
    with pytest.raises(CardError, match=r"bad card|must be a string"):
        parse_card(bad)


def test_compositions():
    assert standard_deck().size == 52
    assert deck_with_joker().size == 53 and deck_with_joker().holds("JK") == 1
    assert multi_deck_shoe(8).size == 416 and multi_deck_shoe(8).holds("As") == 8
    for bad in (5, 9, "6", True):
        with pytest.raises(CardError, match="6 to 8 decks"):
            multi_deck_shoe(bad)


def test_hand_totals_count_one_ace_as_eleven_when_it_fits():
    assert hand_total(["Ad", "6c"]) == (17, True)
    assert hand_total(["Ad", "6c", "Kh"]) == (17, False)
    assert hand_total(["Ad", "Ac", "9h"]) == (21, True)


def test_ledger_moves_conserve_and_refuse_what_is_not_there():
    ledger = Ledger(standard_deck())
    ledger.move("As", "shoe", "1")
    ledger.check()
    assert ledger.count("shoe") == 51 and ledger.holds("1", "As") == 1
    with pytest.raises(
        LedgerError, match="the card moved from shoe to 2 is not in shoe"
    ) as refused:
        ledger.move("As", "shoe", "2")
    assert "As" not in str(refused.value)  # H7: the message never names a card
    assert ledger.gather("shoe") == 1
    ledger.check()
    ledger.places["shoe"]["Kd"] += 1  # a card from nowhere
    with pytest.raises(LedgerError, match="conservation broken"):
        ledger.check()


def test_table_defaults_follow_events_md():
    spec = TableSpec.from_dict({"game": "five_card_hilo"})
    o = spec.options
    assert (o.positions, o.dealing, o.shuffler, o.dual_deck, o.rack_tolerance) == (
        7,
        "manual_shoe",
        "counting",
        False,
        2,
    )
    t21 = TableSpec.from_dict({"game": "three_card_21"}).options
    assert (t21.decks, t21.bart_carter, t21.dealer_hits_soft_17, t21.reader) == (
        6,
        False,
        False,
        "concealed",
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"game": "blackjack"}, "game: 'blackjack' is not one of"),
        ({"game": "asia_poker", "options": {"dealing": "hand"}}, "dealing: 'hand'.*manual_shoe"),
        ({"game": "five_card_hilo", "options": {"shuffler": "robot"}}, "shuffler: 'robot'"),
        (
            {"game": "five_card_hilo", "options": {"decks": 7}},
            "option decks: five_card_hilo is dealt from one deck",
        ),
        ({"game": "three_card_21", "options": {"dual_deck": True}}, "dual_deck: applies only"),
        ({"game": "heads_up_holdem", "options": {"dual_deck": True, "shuffler": "none"}}, "D1"),
        ({"game": "heads_up_holdem", "options": {"colour": "red"}}, "colour: unknown"),
        ({"game": "heads_up_holdem", "options": {"positions": 0}}, "positions: 0"),
        ({"game": "three_card_21", "options": {"gaming_day_start": "25:00"}}, "HH:MM"),
        ({"game": "three_card_21", "options": {"interpretations": {"nope": 1}}}, "nope"),
        (
            {"game": "three_card_21", "options": {"interpretations": {"stub_count_interval": "5"}}},
            "must be int",
        ),
    ],
)
def test_bad_tables_are_refused_naming_the_option(table, message):
    with pytest.raises(TableSpecError, match=message):
        TableSpec.from_dict(table)


def test_defaults_of_game_only_options_are_accepted_anywhere():
    TableSpec.from_dict({"game": "three_card_21", "options": {"dual_deck": False}})


def test_interpretations_are_overridable_per_table():
    from engine_helpers import cards, draws, ev, feed

    from tablectl.controller.engine.core import Engine

    spec = TableSpec.from_dict(
        {
            "game": "five_card_hilo",
            "options": {"shuffler": "batch", "interpretations": {"stub_count_interval": 2}},
        }
    )
    e = Engine(spec)
    out = []
    for _ in range(2):
        out += feed(e, ev("shuffle_completed"), ev("bets_closed", positions=[1]))
        out += feed(e, *draws(*cards(10)), ev("hands_collected"))
    assert [d["decision"] for d in out] == ["stub_count_required"]


def test_every_rule_of_rules_md_is_in_the_catalogue():
    ids = (
        [f"C{i}" for i in range(1, 12)]
        + [f"S{i}" for i in range(1, 5)]
        + ["A1"]
        + [f"M{i}" for i in range(1, 7)]
        + [f"H{i}" for i in range(1, 8)]
        + [f"G{i}" for i in range(1, 8)]
        + [f"D{i}" for i in range(1, 5)]
        + ["R1"]
    )
    assert set(ids) <= set(CATALOGUE)


def test_manual_shoe_lost_mid_round_suspends_the_round_until_it_reconnects():
    from engine_helpers import draws, ev, feed, table

    e = table("five_card_hilo")
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert feed(e, ev("device_lost", device="shoe")) == []
    assert e.state == "suspended"
    out = feed(e, *draws("Kd"))
    assert out[0]["decision"] == "rejected" and "suspended" in out[0]["error"]
    feed(e, ev("device_connected", device="shoe"))
    assert e.state == "dealing"
    assert feed(e, *draws("Kd")) == []
    assert [c["to"] for c in e.dealt_cards()] == [1, "dealer"]


def test_a_rejected_event_changes_nothing():
    from engine_helpers import ev, feed, table

    e = table("heads_up_holdem")
    before = (e.state, e.round_number, e.status())
    out = feed(e, ev("bets_closed", positions=[9]), {"type": "card_drawn", "card": "Xx"})
    assert [d["decision"] for d in out] == ["rejected", "rejected"]
    assert "positions" in out[0]["error"] and "card" in out[1]["error"]
    assert (e.state, e.round_number, e.status()) == before


@pytest.mark.parametrize(
    "event",
    [
        {"type": "stack_dispensed", "cards": "As Kd Qh"},
        ["card_drawn", "As"],
    ],
)
def test_a_malformed_event_is_refused_without_echoing_its_cards(event):
    """H7: the refusal (journaled, sent to the operator) says what was wrong, not the cards."""
    from tablectl.controller.engine.events import EventError, validate

    with pytest.raises(EventError, match=r"must be (a non-empty list of cards|an object)") as info:
        validate(event)
    assert "As" not in str(info.value) and "Kd" not in str(info.value)
