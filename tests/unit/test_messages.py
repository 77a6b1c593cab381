"""Payload layouts: round trips and errors that name the message and the field."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.drivers.protocol import messages as m
from tablectl.simulators.cards import ONE_DECK

cards = st.sampled_from([*ONE_DECK, "JK"])


def test_identity_round_trip():
    ident = m.Identity("shoe", "X-1", "SN 42", "2.0.1", m.firmware_hash(b"image"))
    assert m.unpack_identity(m.pack_identity(1, ident)) == (1, ident)


@given(st.lists(cards, max_size=20))
@settings(max_examples=50, deadline=None)
def test_stack_round_trip(stack):
    assert m.unpack_stack(m.pack_stack(stack)) == stack


@given(cards, st.booleans())
@settings(max_examples=50, deadline=None)
def test_card_drawn_round_trip(card, face_up):
    assert m.unpack_card_drawn(m.pack_card_drawn(card, face_up)) == (card, face_up)


@given(st.binary(max_size=80))
@settings(max_examples=200, deadline=None)
def test_any_payload_parses_or_raises_payload_error(payload):
    parsers = [
        m.unpack_identity,
        m.unpack_stack,
        m.unpack_card_drawn,
        m.unpack_result,
        m.unpack_rack_level,
        m.unpack_shuffle_completed,
        m.unpack_hello,
        m.unpack_progress,
        m.unpack_self_test,
    ]
    for parse in parsers:
        with contextlib.suppress(m.PayloadError):
            parse(payload)


def test_errors_name_message_and_field():
    with pytest.raises(
        m.PayloadError, match="STACK_DISPENSED: payload of 3 bytes too short for card 2"
    ):
        m.unpack_stack(b"\x02As")
    with pytest.raises(m.PayloadError, match=r"CARD_DRAWN: bad card \(not shown"):
        m.unpack_card_drawn(b"1s\x00")
    with pytest.raises(m.PayloadError, match="RACK_LEVEL: um_per_card calibration is 0"):
        m.unpack_rack_level(m.pack_rack_level(3, 900, 0))
    with pytest.raises(m.PayloadError, match="1 unexpected trailing bytes"):
        m.unpack_hello(b"\x01\x01\x01")


def test_fault_words_follow_events_md():
    assert m.fault_name(m.Fault.JAM, "") == "jam"
    assert m.fault_name(m.Fault.OTHER, "empty") == "empty"
    assert m.fault_name(77, "") == "other"
