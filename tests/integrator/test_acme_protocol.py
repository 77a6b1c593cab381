"""The example vendor protocol (examples/vendor-shoe): frames, LRC, cards, resynchronisation."""

from __future__ import annotations

import pytest
from acme_shoe import protocol as p

from tablectl.controller.engine.cards import STANDARD_DECK


def test_a_frame_is_stx_text_etx_and_the_xor_of_text_and_etx():
    frame = p.frame("C,S01,B")
    assert frame[0] == p.STX and frame[-2] == p.ETX
    assert frame[-1] == p.lrc(b"C,S01,B\x03")
    assert p.Deframer().feed(frame) == [("frame", "C,S01,B")]


def test_split_frames_bad_lrc_and_garbage_are_told_apart():
    deframer = p.Deframer()
    good = p.frame("X")
    corrupt = bytearray(p.frame("D,1"))
    corrupt[-1] ^= 0xFF
    stream = b"noise" + good[:2] + good[2:] + bytes(corrupt) + bytes((p.ACK, p.NAK))
    items = []
    for byte in stream:  # one byte at a time, as a slow UART delivers them
        items += deframer.feed(bytes((byte,)))
    assert items == [("frame", "X"), ("bad", ""), ("ack", ""), ("nak", "")]
    assert deframer.garbage == 5 and deframer.bad_lrc == 1


def test_a_frame_cut_short_by_the_next_one_is_dropped():
    deframer = p.Deframer()
    whole = p.frame("N,A")
    assert deframer.feed(whole[:3] + whole) == [("frame", "N,A")]
    assert deframer.garbage == 3


@pytest.mark.parametrize("card", [*STANDARD_DECK, "JK"])
def test_every_card_round_trips(card):
    assert p.card_from_wire(p.card_to_wire(card)) == card


@pytest.mark.parametrize("text", ["S00", "S14", "X01", "S1", "H012"])
def test_a_malformed_card_is_refused_without_echoing_it(text):
    with pytest.raises(p.ProtocolError) as caught:
        p.card_from_wire(text)
    assert text not in str(caught.value)
