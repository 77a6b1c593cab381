"""G8 (13:69F-2C.4(h)1): a reshuffle the house requests in Three Card 21 is its own rule.

"The casino licensee may determine after each round of play that the cards should be
reshuffled": the reshuffle and the deal it blocks cite 2C.4(h)1, not the cut card's G3
(2C.4(h)), and never say that the cut card came out (issue #22).
"""

from __future__ import annotations

from engine_helpers import assert_decision, cards, draws, ev, feed, table

T21 = "three_card_21"


def test_G8_a_reshuffle_the_house_requests_cites_2C4h1_not_the_cut_card():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(5)), ev("deal_completed"))
    out = feed(e, ev("reshuffle_requested"))
    requested = assert_decision(out, "reshuffle", "G8", e)
    assert requested["rule"] == "13:69F-2C.4(h)1"
    assert "cut card" not in requested["reason"]
    feed(e, ev("bonus_settled"), ev("dealer_turn"), ev("hands_collected"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("Kc"))
    blocked = assert_decision(out, "deal_blocked", "G8", e)
    assert blocked["rule"] == "13:69F-2C.4(h)1"
    assert "cut card" not in blocked["reason"]
    feed(e, ev("shuffle_completed", count=312))
    assert feed(e, *draws("Kc")) == []  # reshuffled: the deal goes on


def test_the_cut_card_is_still_G3():
    e = table(T21)
    out = feed(e, ev("cut_card_reached"))
    cut = assert_decision(out, "reshuffle", "G3", e)
    assert cut["rule"] == "13:69F-2C.4(h)"
