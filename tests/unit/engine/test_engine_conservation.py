"""Issue 22: every card accounted for; no event ends a round in play without saying so.

Each case of the issue, as the hurried dealer or the restarted daemon played it, on every
game it concerns; the law itself (controller/engine/conservation.py) is checked after every event.
The decision table these cases come from is docs/rules.md, "L".
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import assert_decision, cards, draws, ev, names, table

from tablectl.controller.engine.conservation import ConservationError, RoundWatch, check
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.rules import citation

T21, HILO, HUH, AP = "three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"


def play(engine: Engine, watch: RoundWatch, *events: dict[str, Any]) -> list[dict[str, Any]]:
    """Feed events; the law after each one."""
    out: list[dict[str, Any]] = []
    for at, event in enumerate(events, start=2):
        decisions = engine.handle(event, at)
        watch.after(event, decisions)
        out += [d.to_dict() for d in decisions]
    return out


def opened(game: str, **options: Any) -> tuple[Engine, RoundWatch, list[dict[str, Any]]]:
    """A table whose round 1 is being dealt: its first card (3C21: after the G2 burn, Qd)."""
    e = table(game, **options)
    w = RoundWatch(e)
    if game == T21:
        prefix = [ev("shoe_loaded"), *draws("Qd"), ev("bets_closed", positions=[1, 2])]
    else:
        prefix = [ev("bets_closed", positions=[1, 2])]
        if game == AP:
            prefix.append(ev("starting_position", number=1))
    if options.get("dealing") == "automated_shoe":
        first = [ev("stack_dispensed", cards=["8d", "2c", "3c", "4c", "5c"])]  # a whole stack
    else:
        first = draws("8d")
    out = play(e, w, *prefix, *first)
    return e, w, out


def where(engine: Engine, card: str) -> list[str]:
    """The places holding ``card`` (one-deck games: exactly one)."""
    return [place for place, held in engine.ledger().places.items() if held[card]]


GAMES = [T21, HILO, HUH, AP]


@pytest.mark.parametrize("game", GAMES)
def test_L1_a_second_bets_closed_mid_deal_is_refused_and_the_round_goes_on(game):
    e, w, _ = opened(game)
    before = (e.state, e.round_number, where(e, "8d"), e.snapshot())
    out = play(e, w, ev("bets_closed", positions=[1, 2]))
    assert names(out) == [("rejected", "L1")]
    d = assert_decision(out, "rejected", "L1", e)
    assert "round 1 is in play" in d["error"]
    assert (e.state, e.round_number, where(e, "8d"), e.snapshot()) == before
    assert where(e, "8d") != ["discard"] and where(e, "8d") != ["shoe"]  # still in its hand
    # the next card is the round's own, not "D3 for a new round"
    assert "deal_blocked" not in {d["decision"] for d in play(e, w, *draws("9d"))}


def test_L1_three_card_21_the_issues_exact_stream():
    e = table(T21, decks=6)
    w = RoundWatch(e)
    out = play(e, w, ev("shoe_loaded"), *draws("Qd"), ev("bets_closed", positions=[1, 2]))
    out += play(e, w, *draws("8d"), ev("bets_closed", positions=[1, 2]))
    assert names(out) == [("burn_card", "G2"), ("rejected", "L1")]
    assert out[-1]["rule"] == citation("L1", T21, "manual_shoe") == "13:69F-2C.5(f)"
    assert e.ledger().holds("1", "8d") == 1  # dealt to position 1, and still there


@pytest.mark.parametrize("game", GAMES)
def test_L1_a_round_whose_deal_was_blocked_is_not_replaced_either(game):
    e = table(game)
    w = RoundWatch(e)
    if game == T21:
        play(e, w, ev("cut_card_reached"))  # G3: the next deal is blocked
    else:
        play(e, w, ev("reshuffle_requested"))
    pre = [ev("bets_closed", positions=[1])]
    if game == AP:
        pre.append(ev("starting_position", number=1))
    out = play(e, w, *pre, *draws("8d"))
    assert "deal_blocked" in {d["decision"] for d in out}
    assert names(play(e, w, ev("bets_closed", positions=[2]))) == [("rejected", "L1")]
    assert e.round_number == 1


@pytest.mark.parametrize("game", GAMES)
def test_L2_hands_collected_mid_deal_voids_the_round(game):
    e, w, _ = opened(game)
    out = play(e, w, ev("hands_collected"))
    assert_decision(out, "void_round", "L2", e)
    assert e.state == "idle" and e.round is None
    assert w.outcomes == {1: "voided"}
    assert e.ledger().holds("discard", "8d") == 1  # collected with the void round's cards
    assert e.ledger().in_play() == 0


@pytest.mark.parametrize("game", GAMES)
def test_L2_a_blocked_round_collected_is_void_not_completed(game):
    e = table(game)
    w = RoundWatch(e)
    play(e, w, ev("cut_card_reached") if game == T21 else ev("reshuffle_requested"))
    pre = [ev("bets_closed", positions=[1])]
    if game == AP:
        pre.append(ev("starting_position", number=1))
    play(e, w, *pre, *draws("8d"))
    out = play(e, w, ev("hands_collected"))
    assert names(out) == [("void_round", "L2")]
    assert "blocked" in out[0]["reason"]


def test_L2_a_full_deal_collected_without_deal_completed_is_completed():
    e = table(HILO)
    w = RoundWatch(e)
    play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(10)))
    assert play(e, w, ev("hands_collected")) == []
    assert w.outcomes == {1: "completed"}


@pytest.mark.parametrize(
    ("game", "options"),
    [
        (HILO, {}),
        (HILO, {"dealing": "hand"}),
        (HILO, {"dealing": "automated_shoe"}),
        (HUH, {}),
        (HUH, {"dealing": "hand"}),
        (HUH, {"dealing": "automated_shoe"}),
        (AP, {}),
    ],
)
@pytest.mark.parametrize("event", ["shuffle_started", "shuffle_completed"])
def test_L3_a_shuffle_mid_deal_of_a_single_deck_game_is_refused(game, options, event):
    e, w, _ = opened(game, **options)
    before = e.snapshot()
    size = 53 if game == AP else 52
    fields = {"count": size} if event == "shuffle_completed" else {}
    out = play(e, w, ev(event, **fields))
    assert names(out) == [("rejected", "L3")]
    assert out[0]["rule"] == citation("L3", game, e.method)
    assert e.snapshot() == before
    assert "shoe" not in where(e, "8d")


def test_L3_the_other_deck_still_shuffles_while_a_round_is_dealt():
    e = table(HILO, dual_deck=True)
    w = RoundWatch(e)
    play(e, w, ev("shoe_loaded", deck="A"), ev("bets_closed", positions=[1]), *draws("8d"))
    assert play(e, w, ev("shuffle_started", deck="B"), ev("shuffle_completed", deck="B")) == []
    assert names(play(e, w, ev("shuffle_completed", deck="A", count=52))) == [("rejected", "L3")]


def test_L3_a_wrong_count_mid_round_is_still_C7():
    e, w, _ = opened(HILO)
    out = play(e, w, ev("shuffle_completed", count=51))
    assert names(out) == [("void_round", "C7"), ("remove_deck", "C7")]


def test_G8_a_house_reshuffle_cites_2C4h1_not_the_cut_card():
    e = table(T21)
    w = RoundWatch(e)
    out = play(e, w, ev("reshuffle_requested"))
    d = assert_decision(out, "reshuffle", "G8", e)
    assert d["rule"] == "13:69F-2C.4(h)1"
    out = play(e, w, ev("bets_closed", positions=[1]), *draws("8d"))
    blocked = assert_decision(out, "deal_blocked", "G8", e)
    assert "cut card" not in blocked["reason"] and "house" in blocked["reason"]
    # the cut card itself is still G3
    cut = table(T21)
    assert_decision(play(cut, RoundWatch(cut), ev("cut_card_reached")), "reshuffle", "G3", cut)


@pytest.mark.parametrize("game", GAMES)
def test_L1_after_a_restart_mid_round_the_next_bets_closed_does_not_end_it(game):
    e, w, _ = opened(game)
    resumed = type(e).restore(e.spec, e.snapshot())
    w = RoundWatch(resumed)
    out = play(resumed, w, ev("controller_restarted"))
    if game == T21:
        assert names(out) == [("continue_play", "X1")]
        assert names(play(resumed, w, ev("bets_closed", positions=[1]))) == [("rejected", "L1")]
    else:
        assert ("void_round", "X1") in names(out)
        play(resumed, w, ev("bets_closed", positions=[1]))  # the void round collected
        assert w.outcomes == {1: "voided"}
    assert resumed.round_number == (1 if game == T21 else 2)


def test_the_law_is_a_check_that_can_fail():
    e, _, _ = opened(HILO)
    check(e)
    e.round = None  # a round dropped with its card on the layout
    e._model.state = "idle"
    with pytest.raises(ConservationError, match="on the layout"):
        check(e)
    e2, w2, _ = opened(HUH)
    e2.ledger().move_all("community", "discard")
    e2.round = None
    e2._model.state = "idle"
    with pytest.raises(ConservationError, match=r"round 1 ended .* with no outcome"):
        w2.after(ev("rack_level", cards=1), [])


@pytest.mark.parametrize(
    ("game", "method"),
    [(T21, "manual_shoe"), (HILO, "manual_shoe"), (HILO, "automated_shoe"), (HUH, "manual_shoe")],
)
def test_L2_deal_completed_with_no_card_read_is_refused(game, method):
    """A card-reading shoe that read nothing: the round would be played with empty hands
    and then collected as completed; refused, nothing changes."""
    e = table(game, dealing=method)
    w = RoundWatch(e)
    play(e, w, ev("bets_closed", positions=[1]))
    before = e.snapshot()
    assert names(play(e, w, ev("deal_completed"))) == [("rejected", "L2")]
    assert e.snapshot() == before
    assert names(play(e, w, ev("hands_collected"))) == [("void_round", "L2")]
    assert w.outcomes == {1: "voided"}


def test_L2_hand_dealing_unread_deal_completed_is_the_deal():
    e = table(HILO, dealing="hand")
    w = RoundWatch(e)
    assert play(e, w, ev("bets_closed", positions=[1]), ev("deal_completed")) == []
    assert e.state == "play"
    assert play(e, w, ev("hands_collected")) == []
    assert w.outcomes == {1: "completed"}


@pytest.mark.parametrize("then", [ev("hands_collected"), ev("stub_counted", count=37)])
def test_L_a_void_rounds_deck_stays_the_rounds_until_it_is_collected(then):
    """Found by the stateful test: two decks, a round void (X1 after a restart), the other
    deck loaded before the collection: the collection (or a stub count's removal) took the
    shoe's deck and left the void round's cards on the layout with no round. The other deck
    now waits for the collection; the void round's cards go to the rack from its own deck."""
    e = table(HUH, dual_deck=True)
    w = RoundWatch(e)
    play(e, w, ev("shoe_loaded", deck="A"), ev("bets_closed", positions=[1]), *draws(*cards(5)))
    assert ("void_round", "X1") in names(play(e, w, ev("controller_restarted")))
    assert names(play(e, w, ev("shoe_loaded", deck="B"))) == [("rejected", "E0")]
    play(e, w, then)  # RoundWatch: no card left on the layout without its round
    play(e, w, ev("hands_collected"), ev("shoe_loaded", deck="B"))
    assert e.current == "B" and e.ledger("A").in_play() == 0
