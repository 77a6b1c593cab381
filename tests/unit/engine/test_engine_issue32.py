"""Issue 32: the last wrong decisions of the held-out set (seven classes) and the eight open
questions, each in every game where it applies. docs/rules.md ("Corrected in issue #32",
"Interpretations") gives the citation of each decision; the conservation law
(controller/engine/conservation.py) is checked after every event.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import assert_decision, cards, draws, ev, names, table

from tablectl.controller.engine.conservation import RoundWatch
from tablectl.controller.engine.core import Engine

T21, HILO, HUH, AP = "three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"
DECK_SIZE = {T21: 312, HILO: 52, HUH: 52, AP: 53}


def play(engine: Engine, watch: RoundWatch, *events: dict[str, Any]) -> list[dict[str, Any]]:
    """Feed events; the law after each one (RoundWatch raises on a round gone unruled)."""
    out: list[dict[str, Any]] = []
    for event in events:
        decisions = engine.handle(event, 2)
        watch.after(event, decisions)
        out += [d.to_dict() for d in decisions]
    return out


def watched(game: str, **options: Any) -> tuple[Engine, RoundWatch]:
    e = table(game, **options)
    return e, RoundWatch(e)


def deal(game: str, method: str = "manual_shoe", skip: int = 0) -> list[dict[str, Any]]:
    """One whole initial deal to position 1 (and the dealer), read as the method reads it."""
    if game == AP:
        return [ev("starting_position", number=1), *draws(*cards(49, skip))]
    if method == "automated_shoe":
        sizes = [5, 5] if game == HILO else [5, 2, 2]
        out, at = [], skip
        for n in sizes:
            out.append(ev("stack_dispensed", cards=cards(n, at)))
            at += n
        return out
    if game == T21:
        return draws(*cards(5, skip))
    n = {HILO: 10, HUH: 4 if method == "hand" else 9}[game]
    return draws(*cards(n, skip))


# ---------------------------------------------------------------- 1. "no more bets", no deck


REMOVALS = {
    # each game's ways of removing the deck between rounds or in a round (then collected)
    HILO: ["deck_count", "stub_count"],
    HUH: ["deck_count", "stub_count"],
    AP: ["deck_count", "stub_count"],
    T21: ["deck_count"],
}


def removed(game: str, how: str, method: str = "manual_shoe") -> tuple[Engine, RoundWatch]:
    e, w = watched(game, dealing=method) if game in (HILO, HUH) else watched(game)
    if how == "deck_count":
        out = play(e, w, ev("shuffle_completed", count=DECK_SIZE[game] - 1))
    else:
        # a stub count that does not add up and no misdeal: void + remove (S3, S4)
        out = play(e, w, ev("bets_closed", positions=[1]), *deal(game, method))
        out += play(e, w, ev("deal_completed"), ev("stub_counted", count=1))
        out += play(e, w, ev("hands_collected"))
    assert ("remove_deck", "C7" if how == "deck_count" else e.stub_rule) in names(out)
    assert e.state == "deck_removed"
    return e, w


CLASS1 = [
    (game, how, method)
    for game in (HILO, HUH, AP, T21)
    for how in REMOVALS[game]
    for method in (
        ["manual_shoe", "automated_shoe"] + (["hand"] if game == HUH else [])
        if game in (HILO, HUH)
        else ["manual_shoe"]
    )
]


@pytest.mark.parametrize(("game", "how", "method"), CLASS1)
def test_C10_bets_closed_while_the_deck_is_removed_is_answered(game, how, method):
    """40.7(a)-(b), 40.9(b), 39.7(a)-(b), 31.8(a): the cards go in the shoe, then "no more
    bets"; with the deck removed the announcement is refused (C10), not swallowed (3C21:
    interpretation I1)."""
    e, w = removed(game, how, method)
    out = play(e, w, ev("bets_closed", positions=[1]))
    assert names(out) == [("rejected", "C10")]
    assert_decision(out, "rejected", "C10", e)
    assert e.round is None and e.state == "deck_removed"
    # knock-on: once new cards arrive and are shuffled, the dealer's next "no more bets"
    # opens the round and its cards are dealt, not met with C9
    play(e, w, ev("deck_received"), ev("shuffle_completed", count=DECK_SIZE[game]))
    out = play(e, w, ev("bets_closed", positions=[1]), *deal(game, method, skip=0))
    assert "C9" not in {d["rule_id"] for d in out}
    assert "deal_blocked" not in {d["decision"] for d in out}


# ---------------------------------------------------------------- 2. a check left unanswered

CHECKS = {
    "short count": (9, None),
    "long count": (11, None),
    "short count with a right stub total": (9, 43),
}


def checked(method: str, kind: str) -> tuple[Engine, RoundWatch]:
    read, _ = CHECKS[kind]
    e, w = watched(HILO, dealing=method)
    out = play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(read)), ev("deal_completed"))
    assert names(out) == [("misdeal_check_required", "M1")]
    return e, w


@pytest.mark.parametrize("method", ["manual_shoe", "hand"])
@pytest.mark.parametrize("kind", list(CHECKS))
def test_M7_HILO_a_check_never_answered_does_not_end_the_round_completed(method, kind):
    """40.12(d), 40.7(f)2: a remedy before the round ends; unanswered, the collection voids
    every hand and orders the reshuffle (M7)."""
    e, w = checked(method, kind)
    _, stub = CHECKS[kind]
    if stub is not None:
        assert play(e, w, ev("stub_counted", count=stub)) == []  # adds up: answers nothing
    out = play(e, w, ev("hands_collected"))
    assert names(out) == [("void_round", "M7"), ("reshuffle", "M7")]
    assert_decision(out, "void_round", "M7", e)
    assert w.outcomes[1] == "voided"


@pytest.mark.parametrize("method", ["manual_shoe", "hand"])
def test_M7_HILO_an_answered_check_completes_the_round(method):
    e, w = checked(method, "short count")
    out = play(e, w, ev("misdeal_reported", position=1, cards=4), ev("hands_collected"))
    assert names(out) == [("void_hand", "M1")]
    assert w.outcomes[1] == "completed"


def test_M7_HILO_the_dealers_fifth_card_ordered_and_never_dealt():
    e, w = checked("manual_shoe", "short count")
    out = play(e, w, ev("misdeal_reported", position="dealer", cards=4), ev("hands_collected"))
    assert names(out) == [("deal_dealer_card", "M2"), ("void_round", "M7"), ("reshuffle", "M7")]


# ---------------------------------------------------------------- 3. a void and a receipt


def void_round_of_deck_a(game: str, e: Engine, w: RoundWatch) -> None:
    play(e, w, ev("rack_level", cards=0), ev("shoe_loaded", deck="A"))
    out = play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    out += play(e, w, *draws(*cards(2, 40), face_up=True))  # C1 then C2
    assert ("void_round", "C2") in names(out)


@pytest.mark.parametrize("game", [HILO, HUH])
@pytest.mark.parametrize("receipt", ["unnamed", "named", "none"])
def test_D2_a_deck_received_during_a_void_keeps_its_cards_in_the_racks_record(game, receipt):
    """39.2(b)5, 40.2(b)5: the void round's cards still go to the discard rack; the other
    deck's round collected into the same rack is D2, receipt or not."""
    e, w = watched(game, dual_deck=True)
    void_round_of_deck_a(game, e, w)
    if receipt != "none":
        fields = {"deck": "A"} if receipt == "named" else {}
        assert play(e, w, ev("deck_received", **fields)) == []
    play(e, w, ev("hands_collected"), ev("shoe_loaded", deck="B"))
    out = play(e, w, ev("bets_closed", positions=[1]), *deal(game), ev("hands_collected"))
    assert_decision(out, "procedure_violation", "D2", e)
    assert_decision(out, "notify_supervisor", "D2", e)


@pytest.mark.parametrize("game", [HILO, HUH])
def test_a_deck_received_while_its_round_is_suspended_is_refused_and_the_rack_keeps_its_deck(
    game: str,
) -> None:
    """Found by the stateful test (make test-long): the shoe lost mid-round suspends the round;
    new cards of that deck then replaced its ledger, the collection moved none of its cards to
    the rack and D2 lost sight of them. A suspended round resumes with its cards: its deck is
    in play, and a receipt of it is refused (E0) until it resumes or is voided."""
    e, w = watched(game, dual_deck=True)
    play(e, w, ev("rack_level", cards=0), ev("shoe_loaded", deck="A"))
    play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    play(e, w, ev("device_lost", device="shoe"))
    assert e.state == "suspended"
    out = play(e, w, ev("deck_received", deck="A"))
    assert names(out) == [("rejected", "E0")]
    play(e, w, ev("hands_collected"))  # RoundWatch: the rack's record names deck A
    assert e.rack_deck == "A"


def test_R1_one_deck_HILO_receipt_during_a_void_still_expects_the_void_cards_in_the_rack():
    """Interpretation I2: the old deck's cards on the layout reach the rack at collection."""
    e, w = watched(HILO)
    play(e, w, ev("rack_level", cards=0), ev("bets_closed", positions=[1]), *draws(*cards(4)))
    play(e, w, *draws(*cards(2, 40), face_up=True))
    assert e.state == "void"
    assert play(e, w, ev("deck_received")) == []
    play(e, w, ev("hands_collected"))
    out = play(e, w, ev("rack_level", cards=0))
    assert_decision(out, "notify_supervisor", "R1", e)  # 4 dealt + 1 discarded expected


def test_I2_a_receipt_may_be_made_to_wait_for_the_void_rounds_collection():
    e, w = watched(HILO, interpretations={"deck_receipt_waits_for_void_collection": True})
    play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(4)))
    play(e, w, *draws(*cards(2, 40), face_up=True))
    out = play(e, w, ev("deck_received"))
    assert names(out) == [("rejected", "E0")]
    play(e, w, ev("hands_collected"))
    assert play(e, w, ev("deck_received")) == []


# ---------------------------------------------------------------- 4, 5. the G5 reshuffle


def ran_out(**options: Any) -> tuple[Engine, RoundWatch]:
    """3C21: round 1 collected (its cards in the rack), round 2's shoe runs out mid-deal."""
    e, w = watched(T21, **options)
    play(e, w, ev("bets_closed", positions=[1]), *draws("2c", "Kd", "3c", "7c", "4c"))
    play(e, w, ev("deal_completed"), ev("bonus_settled"), ev("dealer_turn"), ev("hands_collected"))
    out = play(e, w, ev("bets_closed", positions=[1]), *draws("5c", "6c"))
    out += play(e, w, ev("shoe_fault", fault="empty"))
    assert ("reshuffle", "G5") in names(out)
    return e, w


@pytest.mark.parametrize("bart_carter", [False, True])
@pytest.mark.parametrize("reloaded", ["shoe_loaded", "dealer_changed"])
def test_G5_the_reshuffled_rack_loaded_mid_round_burns_under_G5(bart_carter, reloaded):
    """2C.14(f): the burn after the rack's reshuffle is G5's, not a new shoe's (2C.6(c))."""
    e, w = ran_out(bart_carter=bart_carter)
    play(e, w, ev("shuffle_started"), ev("shuffle_completed"), ev(reloaded))
    out = play(e, w, *draws("9s"))
    assert names(out) == [("burn_card", "G5")]
    assert_decision(out, "burn_card", "G5", e)
    assert names(play(e, w, *draws("8s"))) == []  # then the round's own card


@pytest.mark.parametrize("jam_after", ["run-out", "shuffle_started"])
def test_C4_a_jammed_rack_reshuffle_blocks_the_next_card_and_keeps_the_burn(jam_after):
    """2C.14(i) after 2C.14(f): no card from the unshuffled rack; the first card after the
    reshuffle that completes is the G5 burn, the next goes to the hand."""
    e, w = ran_out()
    if jam_after == "shuffle_started":
        play(e, w, ev("shuffle_started"))
    out = play(e, w, ev("shuffler_fault", fault="jam"))
    assert names(out) == [("reshuffle", "C4")]
    hands_before = e.ledger().count("1") + e.ledger().count("dealer")
    out = play(e, w, *draws("9s"))
    assert names(out) == [("deal_blocked", "C4")]
    assert_decision(out, "deal_blocked", "C4", e)
    assert e.ledger().count("1") + e.ledger().count("dealer") == hands_before
    play(e, w, ev("shuffle_started"), ev("shuffle_completed"), ev("shoe_loaded"))
    assert names(play(e, w, *draws("9s"))) == [("burn_card", "G5")]
    assert names(play(e, w, *draws("8s"))) == []
    assert e.ledger().count("1") + e.ledger().count("dealer") == hands_before + 1


# ---------------------------------------------------------------- 6, 7. one of two decks


@pytest.mark.parametrize("game", [HILO, HUH])
@pytest.mark.parametrize("method", ["manual_shoe", "hand", "automated_shoe"])
def test_C10_removing_one_of_two_decks_leaves_the_other_to_deal(game, method):
    """39.2(b), 40.2(b): a removal is per deck. A's stub count removes A; B, shuffled and
    due, is dealt and collected; the round after (A's turn) waits for new cards."""
    e, w = watched(game, dual_deck=True, dealing=method)
    out = play(e, w, ev("bets_closed", positions=[1]), *deal(game, method))
    out += play(e, w, ev("deal_completed"), ev("stub_counted", count=1))
    assert_decision(out, "remove_deck", "S3", e, deck="A")
    assert e.state == "idle"
    out = play(e, w, ev("hands_collected"), ev("bets_closed", positions=[1]))
    assert e.round is not None and e.round.deck == "B"
    out += play(e, w, *deal(game, method, skip=10), ev("deal_completed"), ev("hands_collected"))
    assert names(out) == []
    assert w.outcomes[2] == "completed"
    out = play(e, w, ev("bets_closed", positions=[1]))
    assert names(out) == [("rejected", "C10")]  # A's turn: A is removed
    play(e, w, ev("deck_received", deck="A"), ev("shuffle_completed", deck="A", count=52))
    out = play(e, w, ev("bets_closed", positions=[1]), *deal(game, method))
    assert "deal_blocked" not in {d["decision"] for d in out}


@pytest.mark.parametrize("game", [HILO, HUH, AP, T21])
def test_C10_cards_blocked_after_a_refused_bets_closed_are_not_collected_in_silence(game):
    """A round whose every card was blocked: its collection is answered too."""
    e, w = removed(game, "deck_count")
    out = play(e, w, ev("bets_closed", positions=[1]), *draws("2c", "3c"), ev("deal_completed"))
    assert names(out) == [("rejected", "C10"), *[("deal_blocked", "C10")] * 2, ("rejected", "E0")]
    out = play(e, w, ev("hands_collected"))
    assert names(out) == [("rejected", "C10")]


# ---------------------------------------------------------------- the open questions


@pytest.mark.parametrize("counts", [True, False])
@pytest.mark.parametrize("game", [HILO, HUH])
def test_I3_a_void_round_is_its_decks_turn_in_the_alternation(game, counts):
    e, w = watched(
        game, dual_deck=True, interpretations={"void_round_counts_in_alternation": counts}
    )
    play(e, w, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    play(e, w, *draws(*cards(2, 40), face_up=True), ev("hands_collected"))
    play(e, w, ev("bets_closed", positions=[1]))
    assert e.round is not None and e.round.deck == ("B" if counts else "A")


def reader_faulted(**options: Any) -> Engine:
    e = table(T21, **options)
    day = "2026-11-21T"
    feed_ok = [
        ev("reader_inspected", by="floor-1", time=day + "07:00:00"),
        ev("bets_closed", positions=[1]),
        *draws("2c", "Kd", "3c", "7c", "4c"),
        ev("deal_completed"),
        ev("bonus_settled"),
    ]
    for event in feed_ok:
        assert e.handle(event, 2) == []
    out = [d.to_dict() for d in e.handle(ev("reader_fault", fault="stuck", time=day + "09:00"), 3)]
    assert_decision(out, "reader_disabled", "H5", e)
    return e


@pytest.mark.parametrize(
    ("interp", "when", "restored"),
    [
        (False, "2026-11-21T11:00:00", False),
        (False, "2026-11-22T07:00:00", True),
        (True, "2026-11-21T11:00:00", True),
    ],
)
def test_I4_a_second_inspection_the_same_day_does_not_return_a_faulted_reader(
    interp, when, restored
):
    """2C.14(l) with H5: out for the rest of the gaming day; no repair is recorded."""
    e = reader_faulted(interpretations={"reader_reinspection_same_day_restores": interp})
    e.handle(ev("reader_inspected", by="floor-2", time=when), 4)
    out = [d.to_dict() for d in e.handle(ev("reader_inserted", time=when), 5)]
    if restored:
        assert out == []
    else:
        assert_decision(out, "reader_disabled", "H5", e)


@pytest.mark.parametrize("interp", [True, False])
@pytest.mark.parametrize("where", ["in a round", "between rounds"])
def test_I5_a_reader_answer_with_nothing_inserted(interp, where):
    e = table(T21, interpretations={"reader_answer_without_insertion_is_malfunction": interp})
    events = [ev("reader_inspected", by="floor-1")]
    if where == "in a round":
        events += [ev("bets_closed", positions=[1]), *draws("2c", "Kd", "3c", "7c", "4c")]
    for event in events:
        e.handle(event, 2)
    out = [d.to_dict() for d in e.handle(ev("reader_result", blackjack=False), 3)]
    if interp:
        assert names(out) == [("reader_disabled", "H6"), ("notify_supervisor", "H6")]
        assert_decision(out, "reader_disabled", "H6", e)
    else:
        assert out == []


@pytest.mark.parametrize("voids", [False, True])
def test_G9_I6_a_manual_3C21_shoe_jam_with_partial_hands(voids):
    e, w = watched(T21, interpretations={"three_card_21_manual_shoe_jam_voids_round": voids})
    play(e, w, ev("bets_closed", positions=[1, 2]), *draws("2c", "3c", "Kd"))
    out = play(e, w, ev("shoe_fault", fault="jam"))
    if voids:
        assert names(out) == [("void_round", "C5"), ("reshuffle", "C5")]
    else:
        assert names(out) == [("notify_supervisor", "G9")]
        assert_decision(out, "notify_supervisor", "G9", e)
        assert names(play(e, w, *draws("4c", "5c", "7c", "6c", "8c"))) == []
        assert names(play(e, w, ev("deal_completed"))) == []


@pytest.mark.parametrize("again", [False, True])
def test_I7_asia_poker_start_determined_again_before_any_card(again):
    e, w = watched(AP, interpretations={"asia_poker_start_redetermined_before_first_card": again})
    play(e, w, ev("bets_closed", positions=[1]), ev("starting_position", number=1))
    out = play(e, w, ev("starting_position", number=2))
    if again:
        assert_decision(out, "starting_position", "A1", e)
        assert e.round is not None and e.round.start_position != "dealer"
    else:
        assert names(out) == [("rejected", "A1")]
        assert e.round is not None and e.round.start_position == "dealer"
    play(e, w, *draws("2c"))
    assert names(play(e, w, ev("starting_position", number=3))) == [("rejected", "A1")]


@pytest.mark.parametrize("resumes", [True, False])
def test_I8_a_restart_with_an_ace_up_and_insurance_open(resumes):
    e, w = watched(T21, interpretations={"restart_with_insurance_open_resumes": resumes})
    play(e, w, ev("bets_closed", positions=[1]), *draws("2c", "Ah", "3c", "7c", "4c"))
    play(e, w, ev("deal_completed"), ev("bonus_settled"))
    assert e.state == "insurance"
    restored = Engine.restore(e.spec, e.snapshot())
    out = [d.to_dict() for d in restored.handle(ev("controller_restarted"), 9)]
    if resumes:
        assert names(out) == [("continue_play", "X1")]
        assert restored.state == "insurance"  # H3 still gates the reader until it closes
        out = [d.to_dict() for d in restored.handle(ev("reader_inserted"), 10)]
        assert ("procedure_violation", "H3") in names(out)
    else:
        assert names(out) == [("void_round", "X1"), ("reshuffle", "X1")]
