"""Every interpretation switch changes a ruling when a table overrides it."""

from __future__ import annotations

from engine_helpers import cards, draws, ev, feed, names, table


def flipped(game, name, value, **options):
    return table(game, interpretations={name: value}, **options)


def test_count_mismatch_removes_deck_everywhere():
    assert names(feed(table("three_card_21"), ev("shuffle_completed", count=311))) == [
        ("remove_deck", "C7")
    ]
    e = flipped("three_card_21", "count_mismatch_removes_deck_everywhere", False)
    assert feed(e, ev("shuffle_completed", count=311)) == []


def test_three_card_21_early_card_is_violation():
    e = flipped("three_card_21", "three_card_21_early_card_is_violation", False)
    assert feed(e, *draws("As")) == []


def test_asia_poker_shuffles_every_round():
    deck = [*cards(52), "JK"]

    def two_rounds(e):
        out = feed(e, ev("bets_closed", positions=[1]), ev("starting_position", number=1))
        out += feed(e, *draws(*deck[:49]), ev("deal_completed"), ev("hands_collected"))
        out += feed(e, ev("bets_closed", positions=[1]), ev("starting_position", number=1))
        return out + feed(e, *draws(deck[49]))

    assert ("deal_blocked", "D3") in names(two_rounds(table("asia_poker")))
    relaxed = flipped("asia_poker", "asia_poker_shuffles_every_round", False)
    assert {d for d, _ in names(two_rounds(relaxed))} == {"starting_position"}  # A1 only


def test_opening_decks_preshuffled():
    e = flipped("five_card_hilo", "opening_decks_preshuffled", False)
    assert names(feed(e, ev("bets_closed", positions=[1]), *draws("As"))) == [
        ("deal_blocked", "C10")
    ]


def test_restart_resumes_three_card_21():
    e = flipped("three_card_21", "restart_resumes_three_card_21", False)
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert ("void_round", "X1") in names(feed(e, ev("controller_restarted")))


def test_reader_contradiction_is_malfunction():
    e = flipped("three_card_21", "reader_contradiction_is_malfunction", False)
    feed(e, ev("reader_inspected", by="f"), ev("bets_closed", positions=[1]))
    feed(e, *draws("2c", "Kd", "3c", "Ac", "4c"), ev("deal_completed"), ev("bonus_settled"))
    assert feed(e, ev("reader_inserted"), ev("reader_result", blackjack=False)) == []


def test_reconcile_discard_rack():
    e = flipped("three_card_21", "reconcile_discard_rack", False)
    feed(e, ev("rack_level", cards=0), ev("bets_closed", positions=[1, 2]))
    feed(e, *draws(*cards(8)), ev("hands_collected"))
    assert feed(e, ev("rack_level", cards=0)) == []


def test_hilo_counting_exemption_needs_ads():
    e = flipped("five_card_hilo", "hilo_counting_exemption_needs_ads", False)
    out = []
    for _ in range(6):
        out += feed(e, ev("shuffle_completed", count=52), ev("bets_closed", positions=[1]))
        out += feed(e, *draws(*cards(10)), ev("hands_collected"))
    assert out == []


def test_bart_carter_rack_threshold():
    e = flipped("three_card_21", "bart_carter_rack_threshold", 60, bart_carter=True)
    assert feed(e, ev("rack_level", cards=57)) == []
    assert names(feed(e, ev("rack_level", cards=61))) == [("reshuffle", "G4")]


def test_stub_count_interval():
    e = flipped("heads_up_holdem", "stub_count_interval", 3, shuffler="batch")
    out = []
    for _ in range(3):
        out += feed(e, ev("shuffle_completed"), ev("bets_closed", positions=[1]))
        out += feed(e, *draws(*cards(9)), ev("hands_collected"))
    assert names(out) == [("stub_count_required", "S1")]
