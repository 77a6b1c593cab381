"""The sans-I/O link layer with a fake clock and a hostile channel."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.drivers.protocol.link import Link, LinkFailure, LinkSettings
from tablectl.drivers.protocol.messages import Msg

SETTINGS = LinkSettings(ack_timeout=0.1, max_retransmissions=3)


def pump(a: Link, b: Link) -> tuple[list, list]:
    """Carry bytes both ways until quiet; returns frames delivered to a and to b."""
    to_a, to_b = [], []
    for _ in range(50):
        out_a, out_b = a.take_output(), b.take_output()
        if not out_a and not out_b:
            break
        to_b += b.receive(out_a, 0.0)
        to_a += a.receive(out_b, 0.0)
    return to_a, to_b


def test_frames_are_delivered_in_order_and_acknowledged():
    host, dev = Link(SETTINGS), Link(SETTINGS)
    for i in range(5):
        dev.send(Msg.CARD_DRAWN, bytes((i,)), 0.0)
    got, _ = pump(host, dev)
    assert [f.payload for f in got] == [bytes((i,)) for i in range(5)]
    assert dev.idle
    assert dev.retransmissions == 0


def test_lost_frame_is_retransmitted_after_the_ack_timeout():
    host, dev = Link(SETTINGS), Link(SETTINGS)
    dev.send(Msg.CUT_CARD_REACHED, b"", 0.0)
    dev.take_output()  # lost on the wire
    assert dev.next_deadline() == pytest.approx(0.1)
    dev.poll(0.05)
    assert dev.take_output() == b""
    dev.poll(0.1)
    got = host.receive(dev.take_output(), 0.1)
    assert [f.type for f in got] == [Msg.CUT_CARD_REACHED]
    assert dev.retransmissions == 1


def test_retransmission_is_bounded_then_the_link_fails():
    dev = Link(SETTINGS)
    dev.send(Msg.PING, b"", 0.0)
    now = 0.0
    with pytest.raises(LinkFailure, match="unacknowledged after 4 transmissions"):
        for _ in range(10):
            now += 0.1
            dev.poll(now)
    assert dev.retransmissions == 3
    assert dev.failed


def test_bad_crc_gets_a_nak_and_an_immediate_retransmission():
    host, dev = Link(SETTINGS), Link(SETTINGS)
    dev.send(Msg.CARD_DRAWN, b"As\x00", 0.0)
    wire = bytearray(dev.take_output())
    wire[-1] ^= 0x01
    assert host.receive(bytes(wire), 0.0) == []
    assert host.errors["crc"] == 1
    dev.receive(host.take_output(), 0.0)  # the NAK
    assert dev.retransmissions == 1
    got = host.receive(dev.take_output(), 0.0)
    assert [f.payload for f in got] == [b"As\x00"]


def test_duplicate_after_a_lost_ack_is_acknowledged_but_not_delivered():
    host, dev = Link(SETTINGS), Link(SETTINGS)
    dev.send(Msg.CARD_DRAWN, b"Kd\x00", 0.0)
    wire = dev.take_output()
    assert len(host.receive(wire, 0.0)) == 1
    host.take_output()  # the ACK is lost
    dev.poll(0.2)
    assert host.receive(dev.take_output(), 0.2) == []
    assert host.errors["duplicate"] == 1
    dev.receive(host.take_output(), 0.2)
    assert dev.idle


def test_hello_opens_a_new_session_even_with_a_repeated_sequence_number():
    host, dev = Link(SETTINGS), Link(SETTINGS)
    host.send(Msg.HELLO, b"\x01\x01", 0.0)
    pump(host, dev)
    host.reset()  # the host restarts: its next HELLO has seq 0 again
    host.send(Msg.HELLO, b"\x01\x01", 0.0)
    _, got = pump(host, dev)
    assert [f.type for f in got] == [Msg.HELLO]


@given(
    st.lists(st.binary(min_size=0, max_size=12), min_size=1, max_size=12),
    st.lists(st.sampled_from(["ok", "drop", "flip", "dup"]), min_size=1, max_size=40),
)
@settings(max_examples=120, deadline=None)
def test_hostile_channel_delivers_exactly_once_in_order_or_fails_loudly(payloads, faults):
    """Whatever the channel does, the receiver never sees a message twice or out of order."""
    sender, receiver = Link(SETTINGS), Link(SETTINGS)
    for p in payloads:
        sender.send(Msg.STACK_DISPENSED, p, 0.0)
    fault_iter = iter(faults)
    delivered: list[bytes] = []
    now = 0.0
    failed = False
    for _ in range(400):
        now += 0.05
        try:
            sender.poll(now)
        except LinkFailure:
            failed = True
            break
        for direction in ("fwd", "back"):
            src, dst = (sender, receiver) if direction == "fwd" else (receiver, sender)
            chunk = src.take_output()
            if not chunk:
                continue
            fault = next(fault_iter, "ok")
            if fault == "drop":
                continue
            if fault == "flip":
                chunk = chunk[:-1] + bytes((chunk[-1] ^ 0x20,))
            if fault == "dup":
                chunk = chunk + chunk
            got = dst.receive(chunk, now)
            if dst is receiver:
                delivered += [f.payload for f in got]
        if sender.idle and not sender.take_output() and len(delivered) == len(payloads):
            break
    assert delivered == payloads[: len(delivered)]
    if not failed:
        assert delivered == payloads
