"""One test (at least) per rule ID of RULES.md, named with it: decision, rule_id, citation."""

from __future__ import annotations

import pytest
from engine_helpers import assert_decision, cards, draws, ev, feed, names, table

from tablectl.controller.engine.table import TableSpec, TableSpecError

HILO, HUH, T21, AP = "five_card_hilo", "heads_up_holdem", "three_card_21", "asia_poker"


def hilo_round(engine, positions=(1, 2), skip=0):
    """Events of a complete manual-shoe HILO deal: 5 cards to each player and the dealer."""
    n = (len(positions) + 1) * 5
    return [ev("bets_closed", positions=list(positions)), *draws(*cards(n, skip))]


# ---------------------------------------------------------------- C: every game


def test_C1_first_face_up_card_is_discarded_and_next_card_takes_its_place():
    e = table(HILO)
    out = feed(e, ev("bets_closed", positions=[1]), ev("card_drawn", card="As", face_up=True))
    assert_decision(out, "discard_card", "C1", e, card="As")
    feed(e, *draws("Kd"))
    assert e.dealt_cards()[-1] == {"card": "Kd", "to": 1, "face_up": False}
    assert e.ledger().holds("discard", "As") == 1


def test_C2_second_face_up_card_voids_round_and_reshuffles():
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), ev("card_drawn", card="As", face_up=True))
    out = feed(e, ev("card_drawn", card="Kd", face_up=True))
    assert_decision(out, "void_round", "C2", e)
    assert_decision(out, "reshuffle", "C2", e)
    assert e.state == "void"


def test_C2_in_three_card_21_cites_2C14a():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), ev("card_drawn", card="As", face_up=True))
    out = feed(e, ev("card_drawn", card="Ks", face_up=True))
    d = assert_decision(out, "void_round", "C2", e)
    assert d["rule"] == "13:69F-2C.14(a)"


def test_C3_card_drawn_in_error_without_exposure_is_not_a_misdeal():
    e = table(HILO)
    events = hilo_round(e, positions=(1,))
    out = feed(e, *events)
    # a card drawn in error, face down, is simply the next card: nothing is decided
    assert out == []
    assert [c["to"] for c in e.dealt_cards()[:2]] == [1, "dealer"]
    assert feed(e, ev("deal_completed")) == []
    assert e.state == "play"


def test_C3_not_taken_for_misdeal_in_heads_up_holdem():
    e = table(HUH, dealing="manual_shoe")
    out = feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)), ev("deal_completed"))
    assert not [d for d in out if d["decision"] in ("void_round", "void_hand")]


def test_C4_shuffler_jam_requires_reshuffle_and_blocks_that_batch():
    e = table(HILO)
    feed(e, ev("hands_collected"), ev("shuffle_started"))
    out = feed(e, ev("shuffler_fault", fault="jam"))
    assert_decision(out, "reshuffle", "C4", e)
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "C4", e)
    feed(e, ev("shuffle_completed", count=52))
    assert feed(e, *draws("Kd")) == []


def test_C5_automated_dealing_shoe_jam_voids_round_and_reshuffles():
    e = table(HILO, dealing="automated_shoe")
    feed(e, ev("bets_closed", positions=[1]), ev("stack_dispensed", cards=cards(5)))
    out = feed(e, ev("shoe_fault", fault="jam"))
    assert_decision(out, "void_round", "C5", e)
    assert_decision(out, "reshuffle", "C5", e)
    assert out[0]["rule"] == "13:69F-40.12(f)"


def test_C6_manual_shuffle_with_shuffler_still_at_table_blocks_deal():
    e = table(HUH)
    feed(e, ev("shuffle_completed", method="manual"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "C6", e)


def test_C6_allowed_after_device_removed():
    e = table(HUH)
    feed(e, ev("device_removed", device="shuffler"), ev("shuffle_completed", method="manual"))
    assert feed(e, ev("bets_closed", positions=[1]), *draws("As")) == []


def test_C6_three_card_21_also_needs_shuffler_empty_confirmed():
    e = table(T21)
    feed(e, ev("device_removed", device="shuffler"), ev("shuffle_completed", method="manual"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "C6", e)
    e = table(T21)
    feed(
        e,
        ev("device_removed", device="shuffler"),
        ev("shuffler_empty_confirmed", by="sup-1"),
        ev("shuffle_completed", method="manual"),
    )
    assert feed(e, ev("bets_closed", positions=[1]), *draws("As")) == []


def test_C6_card_drawn_by_hand_while_ads_installed_is_blocked():
    e = table(HILO, dealing="automated_shoe")
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "C6", e)


@pytest.mark.parametrize(("game", "count"), [(HILO, 51), (HUH, 53), (T21, 311), (AP, 52)])
def test_C7_counting_shuffler_wrong_count_removes_deck(game, count):
    e = table(game)
    out = feed(e, ev("shuffle_completed", count=count))
    assert_decision(out, "remove_deck", "C7", e, deck="A")
    assert e.state == "deck_removed"


def test_C8_joker_in_52_card_game_voids_removes_and_notifies():
    e = table(HILO)
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As", "JK"))
    assert_decision(out, "void_round", "C8", e)
    assert_decision(out, "remove_deck", "C8", e)
    assert_decision(out, "notify_supervisor", "C8", e)


def test_C8_card_seen_twice_since_shuffle():
    e = table(HUH)
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As", "Kd", "As"))
    assert ("remove_deck", "C8") in names(out)


def test_C8_three_card_21_seventh_copy_in_a_six_deck_shoe():
    """Six copies of a card are the composition of a six-deck shoe; the seventh is extra."""
    e = table(T21, decks=6)
    six = feed(e, ev("bets_closed", positions=[1, 2, 3, 4, 5, 6]), *draws(*["As"] * 6))
    assert six == []
    out = feed(e, *draws("As"), start=9)
    assert_decision(out, "void_round", "C8", e)
    assert_decision(out, "remove_deck", "C8", e)
    assert_decision(out, "notify_supervisor", "C8", e)


def test_C8_card_of_the_other_deck_by_back_colour():
    e = table(HILO, dual_deck=True)
    out = feed(e, ev("bets_closed", positions=[1]), ev("card_drawn", card="As", deck="B"))
    assert_decision(out, "remove_deck", "C8", e)


def test_C8_asia_poker_joker_is_in_the_deck():
    e = table(AP)
    feed(e, ev("bets_closed", positions=[1]), ev("starting_position", number=2))
    assert feed(e, *draws("JK")) == []


@pytest.mark.parametrize("game", [HILO, HUH, AP])
def test_C9_card_before_bets_closed_is_a_violation(game):
    e = table(game)
    out = feed(e, *draws("As"))
    assert_decision(out, "procedure_violation", "C9", e)
    assert_decision(out, "notify_supervisor", "C9", e)


def test_C9_stack_before_bets_closed_cites_the_ads_procedure():
    e = table(HILO, dealing="automated_shoe")
    out = feed(e, ev("stack_dispensed", cards=cards(5)))
    d = assert_decision(out, "procedure_violation", "C9", e)
    assert d["rule"] == "13:69F-40.9(b)2"


def test_C9_three_card_21_burn_after_shoe_loaded_is_expected():
    e = table(T21)
    out = feed(e, ev("shoe_loaded"), *draws("As"))
    assert names(out) == [("burn_card", "G2")]


def test_C10_after_remove_deck_every_deal_is_blocked_until_received_and_shuffled():
    e = table(HILO)
    feed(e, ev("shuffle_completed", count=50))
    out = feed(e, *draws("As"))
    assert_decision(out, "deal_blocked", "C10", e)
    # issue 32: "no more bets" with nothing in the shoe is answered (C10), no round opens
    out = feed(e, ev("bets_closed", positions=[1]))
    assert_decision(out, "rejected", "C10", e)
    assert e.round is None
    out = feed(e, *draws("Kd"))
    assert_decision(out, "deal_blocked", "C10", e)
    feed(e, ev("deck_received"))
    assert e.state == "idle"
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "C10", e)
    feed(e, ev("shuffle_completed", count=52))
    assert feed(e, *draws("Kd")) == []


@pytest.mark.parametrize(("game", "limit"), [(T21, 6), (HILO, 7), (HUH, 6), (AP, 6)])
def test_C11_configuration_with_too_many_positions_is_refused(game, limit):
    with pytest.raises(TableSpecError, match=rf"positions: {limit + 1} .*1 to {limit}.*C11"):
        TableSpec.from_dict({"game": game, "options": {"positions": limit + 1}})


def test_C11_bets_closed_with_too_many_positions_is_rejected_and_nothing_changes():
    e = table(HUH)
    out = feed(e, ev("bets_closed", positions=[1, 2, 3, 4, 5, 6, 7]))
    d = assert_decision(out, "rejected", "C11", e)
    assert "positions" in d["error"]
    assert e.state == "idle" and e.round_number == 0


# ---------------------------------------------------------------- S: stub counts


def play_hilo_rounds(e, rounds, method="manual_shoe", count=52):
    out = []
    for _ in range(rounds):
        out += feed(e, ev("shuffle_completed", count=count))
        out += feed(e, ev("bets_closed", positions=[1]))
        if method == "automated_shoe":
            out += feed(e, ev("stack_dispensed", cards=cards(5)))
            out += feed(e, ev("stack_dispensed", cards=cards(5, 5)))
        else:
            out += feed(e, *draws(*cards(10)))
        out += feed(e, ev("deal_completed"), ev("hands_collected"))
    return out


def test_S1_fifth_round_requires_stub_count_and_sixth_is_blocked():
    e = table(HILO, shuffler="batch")
    out = play_hilo_rounds(e, 4)
    assert "stub_count_required" not in [d["decision"] for d in out]
    out = play_hilo_rounds(e, 1)
    assert_decision(out, "stub_count_required", "S1", e)
    out = feed(e, ev("shuffle_completed"), ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "S1", e)


def test_S1_a_correct_stub_count_resets_the_cadence():
    e = table(HILO, shuffler="batch")
    play_hilo_rounds(e, 4)
    feed(e, ev("shuffle_completed"), ev("bets_closed", positions=[1]), *draws(*cards(10)))
    assert feed(e, ev("deal_completed"), ev("stub_counted", count=42)) == []
    feed(e, ev("hands_collected"))
    assert feed(e, ev("shuffle_completed"), ev("bets_closed", positions=[1]), *draws("As")) == []


def test_S1_is_counted_per_deck_with_two_decks():
    e = table(HUH, dual_deck=True, shuffler="batch", dealing="hand")
    out = []
    for i in range(10):
        deck, other = "AB"[i % 2], "BA"[i % 2]
        out += feed(e, ev("shoe_loaded", deck=deck), ev("bets_closed", positions=[1]))
        out += feed(e, *draws(*cards(4)), ev("deal_completed"))
        out += feed(e, ev("shuffle_completed", deck=other), ev("hands_collected"))
    assert [d["decision"] for d in out] == ["stub_count_required"] * 2
    required = [d for d in out if d["decision"] == "stub_count_required"]
    assert [d["deck"] for d in required] == ["A", "B"]
    assert all(d["rule"] == "13:69F-39.8(e)" for d in required)


def test_S2_HILO_counting_shuffler_exempts_only_with_automated_shoe():
    ads = table(HILO, dealing="automated_shoe", shuffler="counting")
    assert "stub_count_required" not in [
        d["decision"] for d in play_hilo_rounds(ads, 6, "automated_shoe")
    ]
    manual = table(HILO, dealing="manual_shoe", shuffler="counting")
    out = play_hilo_rounds(manual, 5)
    d = assert_decision(out, "stub_count_required", "S1", manual)
    assert d["rule"] == "13:69F-40.7(f)"


@pytest.mark.parametrize("method", ["manual_shoe", "hand", "automated_shoe"])
def test_S2_HUH_counting_shuffler_exempts_with_every_method(method):
    e = table(HUH, dealing=method, shuffler="counting")
    out = []
    for _ in range(7):
        out += feed(e, ev("shuffle_completed", count=52), ev("bets_closed", positions=[1]))
        if method == "automated_shoe":
            out += feed(
                e,
                ev("stack_dispensed", cards=cards(5)),
                ev("stack_dispensed", cards=cards(2, 5)),
                ev("stack_dispensed", cards=cards(2, 7)),
            )
        else:
            out += feed(e, *draws(*cards(9)))
        out += feed(e, ev("deal_completed"), ev("hands_collected"))
    assert out == []


def test_S2_counting_shuffler_is_cited_per_dealing_method():
    from tablectl.controller.engine.rules import citation

    assert citation("S2", HILO, "automated_shoe") == "13:69F-40.9(f)"
    assert citation("S2", HUH, "hand") == "13:69F-39.8(f)"


def test_S3_stub_count_short_with_misdealt_hand_voids_round():
    e = table(HILO)
    feed(e, *hilo_round(e, positions=(1,)), ev("deal_completed"))
    # one card left the deck unseen into hand 1: 41 in the stub, the hands hold 6 + 5
    out = feed(e, ev("stub_counted", count=41, hand_counts={"1": 6, "dealer": 5}))
    assert_decision(out, "void_round", "S3", e)
    assert "remove_deck" not in [d["decision"] for d in out]


def test_S3_stub_count_not_adding_up_removes_the_deck():
    e = table(HILO)
    feed(e, *hilo_round(e, positions=(1,)), ev("deal_completed"))
    out = feed(e, ev("stub_counted", count=41, hand_counts={"1": 5, "dealer": 5}))
    assert_decision(out, "void_round", "S3", e)
    assert_decision(out, "remove_deck", "S3", e)


def ap_deal(e, start=2, skip=0):
    deck = [*cards(52), "JK"]
    return feed(
        e,
        ev("bets_closed", positions=[1, 2]),
        ev("starting_position", number=start),
        *draws(*deck[skip : skip + 49]),
        ev("deal_completed"),
    )


def test_S4_four_cards_left_is_the_normal_case():
    e = table(AP)
    ap_deal(e)
    assert feed(e, ev("stub_counted", count=4)) == []


def test_S4_not_four_and_a_hand_misdealt_voids_round():
    e = table(AP)
    ap_deal(e)
    counts = {str(p): 7 for p in range(1, 7)} | {"dealer": 7, "3": 8}
    out = feed(e, ev("stub_counted", count=3, hand_counts=counts))
    assert_decision(out, "void_round", "S4", e)
    assert "remove_deck" not in [d["decision"] for d in out]


def test_S4_not_four_and_no_misdeal_voids_and_removes_deck():
    e = table(AP)
    ap_deal(e)
    counts = {str(p): 7 for p in range(1, 7)} | {"dealer": 7}
    out = feed(e, ev("stub_counted", count=5, hand_counts=counts))
    assert_decision(out, "void_round", "S4", e)
    assert_decision(out, "remove_deck", "S4", e)


# ---------------------------------------------------------------- A1


@pytest.mark.parametrize(
    ("dice", "expected"), [(8, "dealer"), (14, 1), (9, 6), (3, 5), (18, 4), (7, 1)]
)
def test_A1_dice_total_counted_counterclockwise_with_dealer_as_one(dice, expected):
    e = table(AP)
    out = feed(e, ev("bets_closed", positions=[1]), ev("starting_position", dice=dice))
    # 31.11(b): the start is a decision for the dealer's dice too, not only the computer's
    assert_decision(out, "starting_position", "A1", e, position=expected)
    assert len(out) == 1
    assert feed(e, *draws("As")) == []
    assert e.dealt_cards()[0]["to"] == expected


def test_A1_deal_goes_clockwise_to_all_seven_positions_wagered_or_not():
    e = table(AP)
    feed(e, ev("bets_closed", positions=[3]), ev("starting_position", number=1))
    feed(e, *draws(*cards(8)))
    assert [c["to"] for c in e.dealt_cards()] == ["dealer", 1, 2, 3, 4, 5, 6, "dealer"]


def test_A1_numbering_from_the_dealers_right_is_configurable():
    e = table(AP, ap_numbering="from_dealer_right")
    feed(e, ev("bets_closed", positions=[1]), ev("starting_position", dice=14), *draws("As"))
    assert e.dealt_cards()[0]["to"] == 6


def test_A1_computer_drawn_start_uses_the_injected_source():
    e = table(AP, ap_start="computer", seed=3)
    out = feed(e, ev("bets_closed", positions=[1]))
    d = assert_decision(out, "starting_position", "A1", e)
    assert d["rule"] == "13:69F-31.11(b), (c)"
    assert e.state == "dealing"
    feed(e, *draws("As"))
    assert e.dealt_cards()[0]["to"] == d["position"]
    again = feed(table(AP, ap_start="computer", seed=3), ev("bets_closed", positions=[1]))
    assert again[0]["position"] == d["position"]


@pytest.mark.parametrize(
    ("key", "value"), [("dice", 2), ("dice", 19), ("number", 0), ("number", 8)]
)
def test_A1_the_charts_condition_refuses_a_start_out_of_range(key, value):
    """31.11(b): the chart's `A1_start_in_range` on `choose_start` is the one range check."""
    e = table(AP)
    feed(e, ev("bets_closed", positions=[1]))
    out = feed(e, ev("starting_position", **{key: value}))
    d = assert_decision(out, "rejected", "A1", e)
    assert f"{key}: must be" in d["error"]
    assert e.state == "starting_position" and e.round is not None and e.round.order == []
    # the round still waits for a start in range
    assert_decision(feed(e, ev("starting_position", dice=14)), "starting_position", "A1", e)


def test_A1_card_before_starting_position_is_a_violation():
    e = table(AP)
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "procedure_violation", "A1", e)


# ---------------------------------------------------------------- M: misdeals


def test_M1_HILO_player_with_wrong_count_voids_only_that_hand():
    e = table(HILO, dealing="automated_shoe")
    out = feed(
        e,
        ev("bets_closed", positions=[1, 2]),
        ev("stack_dispensed", cards=cards(5)),
        ev("stack_dispensed", cards=cards(6, 5)),
    )
    assert_decision(out, "void_hand", "M1", e, position=2)
    assert "void_round" not in [d["decision"] for d in out]


def test_M1_from_misdeal_reported_with_manual_shoe():
    e = table(HILO)
    feed(e, *hilo_round(e, positions=(1, 2)))
    out = feed(e, ev("misdeal_reported", position=1, cards=4))
    assert_decision(out, "void_hand", "M1", e, position=1)


def test_M1_from_deal_completed_short_deal():
    """40.12(d): two short; whose hands is the dealer's report, not the deal order's guess."""
    e = table(HILO)
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(13)))
    out = feed(e, ev("deal_completed"))
    assert names(out) == [("misdeal_check_required", "M1")]
    out = feed(e, ev("misdeal_reported", position=2, cards=4))
    assert_decision(out, "void_hand", "M1", e, position=2)
    out = feed(e, ev("misdeal_reported", position="dealer", cards=4))
    assert_decision(out, "deal_dealer_card", "M2", e)


def test_M2_HILO_dealer_with_four_cards_gets_a_fifth_no_void():
    e = table(HILO, dealing="automated_shoe")
    out = feed(
        e,
        ev("bets_closed", positions=[1]),
        ev("stack_dispensed", cards=cards(5)),
        ev("stack_dispensed", cards=cards(4, 5)),
    )
    assert_decision(out, "deal_dealer_card", "M2", e)
    assert feed(e, ev("stack_dispensed", cards=["Kc"]), ev("deal_completed")) == []
    assert e.state == "play"


def test_M3_HILO_other_dealer_misdeal_voids_round_and_reshuffles():
    e = table(HILO)
    feed(e, *hilo_round(e, positions=(1,)))
    out = feed(e, ev("misdeal_reported", position="dealer", cards=6))
    assert_decision(out, "void_round", "M3", e)
    assert_decision(out, "reshuffle", "M3", e)


def test_M4_HUH_any_wrong_count_voids_the_round_not_just_the_hand():
    e = table(HUH, dealing="automated_shoe")
    out = feed(
        e,
        ev("bets_closed", positions=[1, 2]),
        ev("stack_dispensed", cards=cards(5)),
        ev("stack_dispensed", cards=cards(3, 5)),
    )
    assert_decision(out, "void_round", "M4", e)
    assert_decision(out, "reshuffle", "M4", e)
    assert "void_hand" not in [d["decision"] for d in out]


def test_M4_HUH_community_stack_not_five():
    e = table(HUH, dealing="automated_shoe")
    out = feed(e, ev("bets_closed", positions=[1]), ev("stack_dispensed", cards=cards(4)))
    assert_decision(out, "void_round", "M4", e)


def test_M5_HUH_dealer_card_exposed_voids_round():
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)))
    out = feed(e, ev("dealer_card_exposed"))
    assert_decision(out, "void_round", "M5", e)
    assert_decision(out, "reshuffle", "M5", e)


def test_M6_3C21_player_with_no_initial_cards_is_dead():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(8)))
    out = feed(e, ev("misdeal_reported", position=2, cards=0))
    assert_decision(out, "void_hand", "M6", e, position=2)


def test_M6_3C21_one_or_two_cards_is_no_void():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1, 2]), *draws(*cards(7)))
    out = feed(e, ev("deal_completed"))
    assert out == []  # no void: the missing card comes after the others
    feed(e, *draws("Kc"))
    assert e.dealt_cards()[-1]["to"] == 2


# ---------------------------------------------------------------- H: hole-card reader


def t21_to_reader(up="Kd", hole="7c", inspected=True, settle=True, reader="concealed", **opts):
    e = table(T21, reader=reader, **opts)
    events = []
    if inspected:
        events.append(ev("reader_inspected", by="floor-1", time="2026-11-21T07:00:00"))
    events += [ev("bets_closed", positions=[1]), *draws("2c", up, "3c", hole, "4c")]
    events.append(ev("deal_completed"))
    if settle:
        events.append(ev("bonus_settled"))
        if up[0] == "A":
            events.append(ev("insurance_closed"))
    assert feed(e, *events) == []
    return e


def test_H1_reader_used_before_daily_inspection_is_disabled_and_result_ignored():
    e = t21_to_reader(inspected=False)
    out = feed(e, ev("reader_inserted", time="2026-11-21T10:00:00"))
    assert_decision(out, "reader_disabled", "H1", e)
    assert_decision(out, "notify_supervisor", "H1", e)
    assert feed(e, ev("reader_result", blackjack=True)) == []  # ignored


def test_H1_inspection_of_yesterdays_gaming_day_does_not_count():
    e = t21_to_reader()  # inspected 2026-11-21 07:00
    out = feed(e, ev("reader_inserted", time="2026-11-22T07:30:00"))
    assert_decision(out, "reader_disabled", "H1", e)
    # before the gaming day starts (06:00) it is still the previous gaming day
    e = t21_to_reader()
    assert feed(e, ev("reader_inserted", time="2026-11-22T05:59:00")) == []


def test_H2_insert_with_low_up_card_and_revealing_reader_kills_hands():
    e = t21_to_reader(up="7d", reader="revealing")
    out = feed(e, ev("reader_inserted"))
    assert_decision(out, "notify_supervisor", "H2", e)
    assert_decision(out, "hands_dead", "H2", e)


def test_H2_insert_with_low_up_card_and_concealed_reader_continues():
    e = t21_to_reader(up="7d", reader="concealed")
    out = feed(e, ev("reader_inserted"))
    assert_decision(out, "notify_supervisor", "H2", e)
    assert_decision(out, "continue_play", "H2", e)


def test_H3_ace_up_and_insert_before_insurance_closed():
    e = t21_to_reader(up="Ad", settle=False)
    feed(e, ev("bonus_settled"))
    out = feed(e, ev("reader_inserted"))
    assert_decision(out, "procedure_violation", "H3", e)
    assert_decision(out, "notify_supervisor", "H3", e)


def test_H4_reader_used_before_bonus_settled():
    e = t21_to_reader(settle=False)
    out = feed(e, ev("reader_inserted"))
    assert_decision(out, "procedure_violation", "H4", e)
    assert_decision(out, "notify_supervisor", "H4", e)


def test_H5_reader_fault_disables_it_until_reinspected():
    e = t21_to_reader()
    out = feed(e, ev("reader_fault", fault="no answer"))
    assert_decision(out, "reader_disabled", "H5", e)
    out = feed(e, ev("reader_inserted"))
    assert_decision(out, "reader_disabled", "H5", e)
    feed(e, ev("reader_inspected", by="floor-2", time="2026-11-21T11:00:00"))
    assert feed(e, ev("reader_inserted", time="2026-11-21T11:01:00")) == []


def test_H5_reader_that_stops_answering():
    e = t21_to_reader()
    out = feed(e, ev("device_lost", device="hole_card_reader"))
    assert_decision(out, "reader_disabled", "H5", e)


def test_H6_reader_contradicting_the_shoe_is_a_malfunction():
    e = t21_to_reader(up="Kd", hole="Ac")
    feed(e, ev("reader_inserted"))
    out = feed(e, ev("reader_result", blackjack=False))
    assert_decision(out, "reader_disabled", "H6", e)
    assert_decision(out, "notify_supervisor", "H6", e)
    assert "Ac" not in str(out)  # H7: the hole card is not in the decision


def test_H6_agreeing_reader_is_silent():
    e = t21_to_reader(up="Kd", hole="Ac")
    assert feed(e, ev("reader_inserted"), ev("reader_result", blackjack=True)) == []


def test_H7_status_never_shows_a_face_down_card():
    e = t21_to_reader(up="Kd", hole="Qh")
    status = repr(e.status())
    for card in ("Qh", "Kd", "2c", "3c", "4c"):
        assert card not in status
    hole = next(c for c in e.dealt_cards() if c["card"] == "Qh")
    assert hole["face_up"] is False
    feed(e, ev("dealer_turn"))
    assert next(c for c in e.dealt_cards() if c["card"] == "Qh")["face_up"] is True


def test_H7_decisions_in_face_down_games_carry_no_card():
    e = table(HILO)
    out = feed(e, *hilo_round(e, positions=(1, 2)), ev("misdeal_reported", position=1, cards=4))
    text = repr(out)
    for card in cards(15):
        assert f"'{card}'" not in text


# ---------------------------------------------------------------- G: the 3C21 shoe


@pytest.mark.parametrize("decks", [5, 9])
def test_G1_decks_outside_six_to_eight_refused(decks):
    with pytest.raises(TableSpecError, match=r"decks: .*6, 7 or 8.*G1"):
        TableSpec.from_dict({"game": T21, "options": {"decks": decks}})


def test_G2_burn_after_shoe_loaded_and_after_dealer_changed():
    e = table(T21)
    out = feed(e, ev("shoe_loaded"), *draws("As"))
    assert_decision(out, "burn_card", "G2", e)
    assert feed(e, ev("bets_closed", positions=[1]), *draws("Kd")) == []
    out = feed(e, ev("dealer_changed"), *draws("Qd"))
    assert_decision(out, "burn_card", "G2", e)
    assert e.ledger().holds("discard", "Qd") == 1  # 2C.6(c): straight to the rack


def test_G2_not_with_bart_carter():
    e = table(T21, bart_carter=True)
    out = feed(e, ev("shoe_loaded"), ev("bets_closed", positions=[1]), *draws("As"))
    assert out == []


def test_G3_cut_card_completes_round_then_reshuffle():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    out = feed(e, ev("cut_card_reached"))
    assert_decision(out, "reshuffle", "G3", e)
    assert feed(e, *draws(*cards(2, 3))) == []  # the round in play completes
    out = feed(e, ev("hands_collected"), ev("bets_closed", positions=[1]), *draws("Kc"))
    assert_decision(out, "deal_blocked", "G3", e)
    feed(e, ev("shuffle_completed", count=312))
    assert feed(e, *draws("Kc")) == []


def test_G4_bart_carter_reshuffle_when_rack_exceeds_a_deck():
    e = table(T21, bart_carter=True)
    assert feed(e, ev("rack_level", cards=52)) == []
    out = feed(e, ev("rack_level", cards=53))
    assert_decision(out, "reshuffle", "G4", e)


def test_G5_shoe_running_out_mid_round_reshuffles_the_rack_and_burns():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    out = feed(e, ev("shoe_fault", fault="empty"))
    assert_decision(out, "reshuffle", "G5", e)
    assert "void_round" not in [d["decision"] for d in out]
    out = feed(e, *draws("9s"))
    assert_decision(out, "burn_card", "G5", e)


def test_G5_the_shoe_running_out_told_twice_is_one_reshuffle():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(3)))
    assert_decision(feed(e, ev("shoe_fault", fault="empty")), "reshuffle", "G5", e)
    assert feed(e, ev("shoe_fault", fault="empty")) == []  # before the burn: the same run-out
    assert_decision(feed(e, *draws("9s")), "burn_card", "G5", e)


def test_G6_dealer_drawing_on_standing_total_burns_the_card():
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws("2c", "Kd", "3c", "7c", "4c"))
    feed(e, ev("deal_completed"), ev("bonus_settled"), ev("dealer_turn"))
    out = feed(e, *draws("5h"))  # hard 17
    assert_decision(out, "burn_card", "G6", e)


@pytest.mark.parametrize(("hits_soft_17", "burned"), [(False, True), (True, False)])
def test_G6_soft_17_depends_on_the_table_option(hits_soft_17, burned):
    e = table(T21, dealer_hits_soft_17=hits_soft_17)
    feed(e, ev("bets_closed", positions=[1]), *draws("2c", "Ad", "3c", "6c", "4c"))
    feed(e, ev("deal_completed"), ev("bonus_settled"), ev("insurance_closed"), ev("dealer_turn"))
    out = feed(e, *draws("5h"))
    assert (("burn_card", "G6") in names(out)) is burned


def test_G7_rack_level_above_the_shoe_notifies_supervisor():
    e = table(T21, decks=6)
    out = feed(e, ev("rack_level", cards=313))
    assert_decision(out, "notify_supervisor", "G7", e)


# ---------------------------------------------------------------- D: two decks


def test_D1_deal_from_the_deck_of_the_previous_round_is_blocked():
    e = table(HILO, dual_deck=True)
    feed(e, ev("shoe_loaded", deck="A"), *hilo_round(e, positions=(1,)), ev("hands_collected"))
    feed(e, ev("shuffle_completed", deck="A", count=52), ev("shoe_loaded", deck="A"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "D1", e)


def test_D1_deal_from_a_deck_whose_shuffle_has_not_completed():
    e = table(HUH, dual_deck=True)
    feed(e, ev("shoe_loaded", deck="A"), ev("bets_closed", positions=[1]), *draws(*cards(9)))
    feed(e, ev("shuffle_started", deck="B"), ev("hands_collected"), ev("shoe_loaded", deck="B"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "D1", e)


def test_D2_other_decks_cards_in_the_rack_before_it_was_emptied():
    e = table(HUH, dual_deck=True)
    feed(e, ev("rack_level", cards=0), ev("shoe_loaded", deck="A"))
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)), ev("hands_collected"))
    feed(e, ev("rack_level", cards=52), ev("shoe_loaded", deck="B"))
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)))
    out = feed(e, ev("hands_collected"))
    assert_decision(out, "procedure_violation", "D2", e)
    assert_decision(out, "notify_supervisor", "D2", e)


def test_D3_single_deck_not_shuffled_since_its_last_round():
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)), ev("hands_collected"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "D3", e)


def test_D4_hand_dealing_without_a_shuffler_is_refused():
    with pytest.raises(TableSpecError, match=r"shuffler.*D4.*40.8\(b\)1"):
        TableSpec.from_dict({"game": HILO, "options": {"dealing": "hand", "shuffler": "none"}})


def test_D4_hand_dealing_blocked_while_the_shuffler_is_faulted():
    e = table(HUH, dealing="hand")
    feed(e, ev("shuffler_fault", fault="stopped"))
    out = feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert_decision(out, "deal_blocked", "D4", e)


# ---------------------------------------------------------------- R1, X1


def test_R1_rack_did_not_rise_by_the_cards_dealt():
    e = table(T21)
    feed(e, ev("rack_level", cards=0), ev("bets_closed", positions=[1, 2]))
    feed(e, *draws(*cards(8)), ev("hands_collected"))
    out = feed(e, ev("rack_level", cards=3))
    assert_decision(out, "notify_supervisor", "R1", e)


def test_R1_rack_within_tolerance_is_fine():
    e = table(T21, rack_tolerance=2)
    feed(e, ev("rack_level", cards=10), ev("bets_closed", positions=[1, 2]))
    feed(e, *draws(*cards(8)), ev("hands_collected"))
    assert feed(e, ev("rack_level", cards=16)) == []


def test_X1_restart_mid_round_voids_face_down_games_and_resumes_3C21():
    e = table(HILO)
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    out = feed(e, ev("controller_restarted"))
    assert_decision(out, "void_round", "X1", e)
    e = table(T21)
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    out = feed(e, ev("controller_restarted"))
    assert_decision(out, "continue_play", "X1", e)
    assert feed(table(HUH), ev("controller_restarted")) == []


# ---------------------------------------------------------------- X2

UNREAD = {"type": "shoe_fault", "fault": "undecodable_frame", "detail": "bad_payload"}


def test_X2_undecodable_shoe_frame_in_a_round_voids_it_and_reshuffles():
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    out = feed(e, dict(UNREAD))
    assert_decision(out, "void_round", "X2", e)
    d = assert_decision(out, "reshuffle", "X2", e)
    assert d["rule"] == "13:69F-39.12(f) by analogy (interpretation)"
    assert e.state == "void"
    # more garbled frames in the void round decide nothing more; a card is blocked
    assert feed(e, dict(UNREAD)) == []
    assert_decision(feed(e, *draws("Kd")), "deal_blocked", "X2", e)
    # the next round deals only after the reshuffle
    feed(e, ev("hands_collected"))
    assert_decision(
        feed(e, ev("bets_closed", positions=[1]), *draws("Qh")), "deal_blocked", "X2", e
    )
    feed(e, ev("hands_collected"), ev("shuffle_completed"), ev("shoe_loaded"))
    assert feed(e, ev("bets_closed", positions=[1]), *draws("Qh")) == []


def test_X2_undecodable_shoe_frame_between_rounds_asks_for_a_reshuffle():
    e = table(T21)
    out = feed(e, dict(UNREAD))
    assert [(d["decision"], d["rule_id"]) for d in out] == [("reshuffle", "X2")]
    assert out[0]["rule"] == "13:69F-2C.14(h) by analogy (interpretation)"
    assert_decision(
        feed(e, ev("bets_closed", positions=[1]), *draws("As")), "deal_blocked", "X2", e
    )


def test_X2_not_for_an_automated_shoe_nor_another_fault_word():
    e = table(HILO, dealing="automated_shoe")
    feed(e, ev("bets_closed", positions=[1]), ev("stack_dispensed", cards=cards(5)))
    out = feed(e, dict(UNREAD))
    assert_decision(out, "void_round", "C5", e)  # an ADS's failure is C5's
    e = table(HUH)
    feed(e, ev("bets_closed", positions=[1]), *draws("As"))
    assert feed(e, ev("shoe_fault", fault="sensor")) == []  # a manual shoe's own word: noted
    assert e.state == "dealing"


# ---------------------------------------------------------------- fine points found by the
# acceptance scenarios (tests/acceptance), decided from the regulation text


def test_M1_M2_right_stub_count_with_misdealt_hands_is_40_12d_not_S3():
    """40.7(f)1: 42 + 10 = 52, the deck is whole; 40.12(d) then rules the hands."""
    e = table(HILO, shuffler="batch")
    feed(e, *hilo_round(e, positions=(1,)), ev("deal_completed"))
    out = feed(e, ev("stub_counted", count=42, hand_counts={"1": 6, "dealer": 4}))
    assert_decision(out, "void_hand", "M1", e, position=1)
    assert_decision(out, "deal_dealer_card", "M2", e)
    assert "S3" not in [d["rule_id"] for d in out]


def test_M4_right_stub_count_with_misdealt_hands_is_39_12c_not_S3():
    e = table(HUH, shuffler="batch")
    feed(e, ev("bets_closed", positions=[1]), *draws(*cards(9)), ev("deal_completed"))
    out = feed(e, ev("stub_counted", count=43, hand_counts={"1": 1, "dealer": 3}))
    assert_decision(out, "void_round", "M4", e)
    assert_decision(out, "reshuffle", "M4", e)


def test_S4_five_left_and_a_short_hand_voids_without_removal():
    e = table(AP)
    deck = [*cards(52), "JK"]
    feed(e, ev("bets_closed", positions=[4]), ev("starting_position", number=1))
    feed(e, *draws(*deck[:48]))
    out = feed(e, ev("stub_counted", count=5, hand_counts={"4": 6}))
    assert_decision(out, "void_round", "S4", e)
    assert "remove_deck" not in [d["decision"] for d in out]


def test_C4_the_burn_card_of_an_unshuffled_batch_is_blocked_too():
    e = table(T21)
    feed(e, ev("shuffle_started"), ev("shuffler_fault", fault="jam"), ev("shoe_loaded"))
    out = feed(e, *draws("5h"))
    assert_decision(out, "deal_blocked", "C4", e)


def test_C6_shoe_reloaded_after_unchecked_shuffler_removal_is_blocked_3C21():
    e = table(T21)
    feed(e, ev("device_removed", device="shuffler"), ev("shoe_loaded"))
    out = feed(e, *draws("4h"))
    assert_decision(out, "deal_blocked", "C6", e)


def test_H7_a_duplicate_face_down_card_is_not_named_in_the_C8_decisions():
    e = table(HILO)
    out = feed(e, ev("bets_closed", positions=[1]), *draws("7h", "7h"))
    assert ("remove_deck", "C8") in names(out)
    assert "7h" not in repr(out)


def test_A1_computer_drawn_start_needs_an_injected_source():
    from tablectl.controller.engine.core import Engine

    spec = TableSpec.from_dict({"game": AP, "options": {"ap_start": "computer"}})
    with pytest.raises(ValueError, match="random_source"):
        Engine(spec)


@pytest.mark.parametrize(
    "event",
    [
        {"device": "reader"},
        {"device": "table-7-peek", "kind": "hole_card_reader"},
    ],
)
def test_H5_reader_known_by_its_configured_name_or_kind(event):
    e = t21_to_reader()
    out = feed(e, {"type": "device_lost", **event})
    assert_decision(out, "reader_disabled", "H5", e)
    assert feed(table(T21), ev("device_lost", device="table-7-lamp")) == []


def test_S1_hand_dealt_HUH_without_a_reader_counts_the_board_in_the_stub():
    """39.8(d): the stub is counted after the community cards: 52 - 4 - 5 = 43."""
    e = table(HUH, dealing="hand", shuffler="batch")
    feed(e, ev("bets_closed", positions=[1]), ev("deal_completed"))
    assert feed(e, ev("stub_counted", count=43)) == []
    assert e.status()["decks"]["A"]["rounds_since_stub_count"] == 0


def test_S1_per_table_counting_is_a_named_interpretation():
    e = table(HUH, dual_deck=True, shuffler="batch", interpretations={"stub_count_per_deck": False})
    out = []
    for i in range(5):
        deck, other = "AB"[i % 2], "BA"[i % 2]
        out += feed(e, ev("shoe_loaded", deck=deck), ev("bets_closed", positions=[1]))
        out += feed(e, *draws(*cards(9)), ev("deal_completed"))
        # 40.2(b)3: the other deck is shuffled while this one is played (and leaves the rack)
        out += feed(e, ev("shuffle_completed", deck=other), ev("hands_collected"))
    assert [d["decision"] for d in out] == ["stub_count_required"]


def test_C7_3C21_wrong_count_of_the_next_batch_mid_round_removes_only_that_batch():
    """2C.4(i)2: the ASD shuffles the next batch while the shoe deals (audit F3)."""
    e = table(T21)
    feed(e, ev("shuffle_started"), ev("bets_closed", positions=[1]), *draws("2c", "Kh"))
    out = feed(e, ev("shuffle_completed", count=311))
    assert names(out) == [("remove_deck", "C7")]
    assert feed(e, *draws("3c", "9d", "4c"), ev("deal_completed"), ev("dealer_turn")) == []
    feed(e, ev("hands_collected"))
    assert e.state != "deck_removed"  # the shoe in play was counted right: it deals on
    assert feed(e, ev("bets_closed", positions=[1]), *draws("5c")) == []
    feed(e, ev("hands_collected"), ev("shoe_loaded"))  # the removed batch would go in
    out = feed(e, ev("bets_closed", positions=[1]), *draws("6c"))
    assert_decision(out, "deal_blocked", "C10", e)


def test_C4_3C21_jam_of_the_next_batch_mid_round_spares_the_shoe_in_play():
    e = table(T21)
    feed(e, ev("shuffle_started"), ev("bets_closed", positions=[1]), *draws("2c", "Kh"))
    out = feed(e, ev("shuffler_fault", fault="jam"))
    assert_decision(out, "reshuffle", "C4", e)
    feed(e, *draws("3c", "9d", "4c"), ev("deal_completed"), ev("dealer_turn"))
    feed(e, ev("hands_collected"))
    assert feed(e, ev("bets_closed", positions=[1]), *draws("5c")) == []  # same shoe
    feed(e, ev("hands_collected"), ev("shoe_loaded"))  # the jammed batch goes in
    out = feed(e, *draws("6c"))
    assert_decision(out, "deal_blocked", "C4", e)
