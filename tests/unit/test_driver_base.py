"""The driver base's pure parts: backoff, the allow-list, log redaction."""

from __future__ import annotations

import pytest

from tablectl.drivers.base import AllowList, DriverSettings, loggable
from tablectl.drivers.protocol.messages import Identity

IDENT = Identity("shoe", "M", "SN-1", "1.0", "ab" * 32)


def test_backoff_doubles_from_initial_and_is_capped():
    s = DriverSettings(backoff_initial=0.1, backoff_factor=2.0, backoff_max=1.0)
    assert [s.backoff(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_allow_list_checks_serial_then_firmware():
    assert AllowList().refusal(IDENT) is None
    assert AllowList.of(serials=["SN-1"], firmware_sha256=["AB" * 32]).refusal(IDENT) is None
    assert "serial 'SN-1'" in AllowList.of(serials=["SN-2"]).refusal(IDENT)
    assert "firmware hash" in AllowList.of(firmware_sha256=["cd" * 32]).refusal(IDENT)


def test_loggable_drops_cards_and_keeps_stack_size():
    event = {"type": "stack_dispensed", "cards": ["As", "Kd"], "device": "shoe"}
    assert loggable(event) == {"type": "stack_dispensed", "device": "shoe", "card_count": 2}
    drawn = {"type": "card_drawn", "card": "Qh", "face_up": False}
    assert loggable(drawn) == {"type": "card_drawn", "face_up": False}
