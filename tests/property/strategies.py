"""Random event streams for the engine's property tests: legal, illegal and malformed alike."""

from __future__ import annotations

from hypothesis import strategies as st

from tablectl.controller.engine.cards import STANDARD_DECK

# Every card, and spellings the parser must canonicalise (upper-case suits, 10 for T).
CARD = st.sampled_from([*STANDARD_DECK, "JK", "AS", "KH", "TD", "5C", "10h"])
RANDOM_EVENT = st.one_of(
    st.builds(lambda c, f: {"type": "card_drawn", "card": c, "face_up": f}, CARD, st.booleans()),
    st.builds(lambda cs: {"type": "stack_dispensed", "cards": cs}, st.lists(CARD, max_size=6)),
    st.builds(
        lambda ps: {"type": "bets_closed", "positions": ps},
        st.lists(st.integers(1, 8), min_size=1, max_size=8, unique=True),
    ),
    st.builds(
        lambda n: {"type": "shuffle_completed", "count": n}, st.sampled_from([52, 53, 312, 51])
    ),
    st.builds(lambda n: {"type": "stub_counted", "count": n}, st.integers(0, 60)),
    st.builds(lambda n: {"type": "rack_level", "cards": n}, st.integers(0, 400)),
    st.builds(
        lambda p, n: {"type": "misdeal_reported", "position": p, "cards": n},
        st.sampled_from([1, 2, "dealer"]),
        st.integers(0, 8),
    ),
    st.sampled_from(
        [
            {"type": t}
            for t in (
                "deal_completed",
                "hands_collected",
                "shoe_loaded",
                "dealer_changed",
                "cut_card_reached",
                "bonus_settled",
                "insurance_closed",
                "dealer_turn",
                "dealer_card_exposed",
                "reader_inserted",
                "deck_received",
                "shuffle_started",
                "shuffle_completed",
                "reshuffle_requested",
                "controller_restarted",
                "supervisor_ack",
                "no_such_event",
            )
        ]
        + [
            {"type": "shuffler_fault", "fault": "jam"},
            {"type": "shoe_fault", "fault": "jam"},
            {"type": "shoe_fault", "fault": "empty"},
            {"type": "starting_position", "dice": 8},
            {"type": "starting_position", "dice": 9},
            {"type": "reader_result", "blackjack": True},
            {"type": "device_lost", "device": "shoe"},
            {"type": "device_connected", "device": "shoe"},
            {"type": "device_removed", "device": "shuffler"},
            {"type": "reader_inspected", "by": "x"},
            {"type": "reader_inspected", "by": "x", "time": "2026-03-01T10:00:00"},
            {"type": "card_drawn"},
        ]
    ),
)
