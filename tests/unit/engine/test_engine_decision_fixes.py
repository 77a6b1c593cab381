"""The wrong decisions of issue #10 (tracker 13), each tested against the paragraph that
rules it, and the over- and under-deal paths reviewed with them (cards that left the deck
but were counted nowhere)."""

from __future__ import annotations

from engine_helpers import assert_decision, cards, draws, ev, feed, names, table

HILO, HUH, AP = "five_card_hilo", "heads_up_holdem", "asia_poker"
AP_DECK = [*cards(52), "JK"]


def huh_read_deal(e, players=1):
    """A manual-shoe HUH deal a card-reading shoe followed: board 5, then two each."""
    n = 5 + 2 * (players + 1)
    return feed(
        e,
        ev("bets_closed", positions=list(range(1, players + 1))),
        *draws(*cards(n)),
        ev("deal_completed"),
    )


# ------------------------------------------- 39.7(f)2 / 39.8(e): the board is in the 52


def test_S3_HUH_stub_47_hands_3_and_2_and_the_board_make_57_so_the_deck_is_removed():
    """39.7(f)2: "misdealt ... but 52 cards remain": 47 + 3 + 2 + 5 = 57, not 52."""
    e = table(HUH, shuffler="batch")
    assert huh_read_deal(e) == []
    out = feed(e, ev("stub_counted", count=47, hand_counts={"1": 3, "dealer": 2}))
    assert_decision(out, "void_round", "S3", e)
    assert_decision(out, "remove_deck", "S3", e)


def test_S3_HUH_stub_42_hands_3_and_2_and_the_board_make_52_so_only_the_hands_are_void():
    """39.7(f)2: 42 + 3 + 2 + 5 = 52: misdealt, the deck whole: all hands void, deck kept."""
    e = table(HUH, shuffler="batch")
    huh_read_deal(e)
    out = feed(e, ev("stub_counted", count=42, hand_counts={"1": 3, "dealer": 2}))
    assert_decision(out, "void_round", "S3", e)
    assert "remove_deck" not in [d["decision"] for d in out]


def test_S3_HUH_dealt_from_the_hand_unread_counts_the_board_too():
    """39.8(e) (count per 39.7(f)): no card reader; the board is still five of the 52."""
    for count, removed in ((42, False), (47, True)):
        e = table(HUH, dealing="hand", shuffler="batch")
        feed(e, ev("bets_closed", positions=[1]), ev("deal_completed"))
        out = feed(e, ev("stub_counted", count=count, hand_counts={"1": 3, "dealer": 2}))
        assert_decision(out, "void_round", "S3", e)
        assert ("remove_deck" in [d["decision"] for d in out]) is removed, count


# ------------------------------------------- 31.8(d)2: more than 49 cards dealt


def test_S4_AP_fifty_cards_read_three_left_is_a_misdeal_not_a_missing_card():
    """31.8(d)2: the 50th card lies on some position (it holds eight): void, deck kept."""
    e = table(AP)
    out = feed(e, ev("bets_closed", positions=[1, 2]), ev("starting_position", number=1))
    out += feed(e, *draws(*AP_DECK[:50]), ev("deal_completed"))
    out += feed(e, ev("stub_counted", count=3))
    assert_decision(out, "void_round", "S4", e)
    assert "remove_deck" not in [d["decision"] for d in out]
    assert "reshuffle" not in [d["decision"] for d in out]


def test_S4_AP_fifty_cards_read_found_at_the_stub_count_without_deal_completed():
    """31.8(d)2 at the count itself: no deal_completed, the over-dealt card still counts."""
    e = table(AP)
    feed(e, ev("bets_closed", positions=[3]), ev("starting_position", dice=9))
    feed(e, *draws(*AP_DECK[:50]))
    out = feed(e, ev("stub_counted", count=3))
    assert names(out) == [("void_round", "S4")]


def test_S4_AP_forty_nine_read_three_left_and_no_misdeal_still_removes_the_deck():
    """31.8(d)2: every position seven and three left: a card is missing: removed."""
    e = table(AP)
    feed(e, ev("bets_closed", positions=[3]), ev("starting_position", dice=12))
    feed(e, *draws(*AP_DECK[:49]), ev("deal_completed"))
    out = feed(e, ev("stub_counted", count=3))
    assert_decision(out, "remove_deck", "S4", e)


# ------------------------------------------- 40.12(d): never a card ordered on a guess


def test_M2_HILO_read_one_short_asks_for_a_check_and_orders_no_card():
    """40.12(d): a count one short cannot say whose hand is short: the dealer checks."""
    e = table(HILO)
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(14)))
    out = feed(e, ev("deal_completed"))
    assert names(out) == [("misdeal_check_required", "M1")]
    assert out[0]["rule"] == "13:69F-40.12(d)"


def test_M1_HILO_skipped_position_reported_after_the_check_gives_the_dealer_no_sixth_card():
    """40.12(d): a player holds four: that hand is void; the dealer's five stand."""
    e = table(HILO)
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(14)), ev("deal_completed"))
    out = feed(e, ev("misdeal_reported", position=1, cards=4))
    assert names(out) == [("void_hand", "M1")]
    feed(e, *draws(cards(1, skip=14)[0]))
    assert e.dealt_cards()[-1]["to"] != "dealer"  # no card was ordered to the dealer


def test_M2_HILO_dealer_reported_four_after_the_check_gets_the_fifth():
    """40.12(d): "If the dealer is dealt four cards ... deal an additional card"."""
    e = table(HILO, dealing="hand")
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(14)), ev("deal_completed"))
    out = feed(e, ev("misdeal_reported", position="dealer", cards=4))
    assert_decision(out, "deal_dealer_card", "M2", e)
    feed(e, *draws(cards(1, skip=14)[0]))
    assert e.dealt_cards()[-1]["to"] == "dealer"


def test_M2_HILO_automated_shoe_stack_of_four_is_certain_and_decided_at_once():
    """40.9(c), 40.12(d): the ADS's stack sizes say whose hand it is: no check needed."""
    e = table(HILO, dealing="automated_shoe")
    feed(e, ev("bets_closed", positions=[1]), ev("stack_dispensed", cards=cards(5)))
    out = feed(e, ev("stack_dispensed", cards=cards(4, skip=5)))
    assert names(out) == [("deal_dealer_card", "M2")]


def test_M1_HILO_read_one_over_asks_for_a_check_too():
    """40.12(d): a card beyond the deal order lies on some hand; which one decides."""
    e = table(HILO)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(11)))
    assert names(feed(e, ev("deal_completed"))) == [("misdeal_check_required", "M1")]


def test_M4_HUH_read_one_over_voids_all_whoever_holds_it():
    """39.12(c): any hand with a wrong count voids every hand; no need to know whose."""
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(10)))
    out = feed(e, ev("deal_completed"))
    assert_decision(out, "void_round", "M4", e)
    assert_decision(out, "reshuffle", "M4", e)


# ------------------------------------------- 31.11(b): the start is always recorded


def test_A1_dealer_entered_number_is_a_starting_position_decision():
    """31.11(b): the journal shows where each deal began, whatever chose the start."""
    e = table(AP)
    out = feed(e, ev("bets_closed", positions=[1]), ev("starting_position", number=3))
    assert_decision(out, "starting_position", "A1", e, position=5)
