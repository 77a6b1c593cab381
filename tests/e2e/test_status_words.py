"""`tablectl status` in plain words against `tablectl run` on simulators: a device pulled out
says since when and why, in the words form and in the machine form (--json)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest

from tablectl.controller.status_words import describe, fault_words
from tests.e2e.conftest import ROOT, Table, tablectl


def status_cli(table: Table, *extra: str) -> str:
    result = subprocess.run(
        tablectl("status", "--socket", str(table.socket_path), *extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout


@pytest.mark.slow
def test_a_device_down_says_since_when_and_why(make_table: Callable[..., Table]) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    words = status_cli(table)
    assert "table e2e: heads up holdem, round 0, between rounds" in words
    assert "  shuffler: up" in words and "  shoe: up" in words
    assert "0 of 5 rounds since its stub count" in words
    assert "supervisor notifications pending: none" in words
    assert "deck_in_play" not in status_cli(table, "--json")  # one word for it: current_deck

    table.sim("unplug", "shoe")
    table.until(lambda s: s["devices"]["shoe"] == "down", what="the shoe down")
    machine = json.loads(status_cli(table, "--json"))
    down = machine["devices_down"]["shoe"]
    assert down["since"] and down["reason"], down
    words = status_cli(table)
    line = next(line for line in words.splitlines() if line.startswith("  shoe: "))
    assert re.fullmatch(r"  shoe: DOWN since \d\d:\d\d:\d\d: \S.*", line), line
    assert down["reason"] in line


def test_words_never_leave_a_fault_or_a_reason_blank() -> None:
    assert fault_words("") == "a fault without a description from the device"
    lines = describe(
        {
            "table": "t1",
            "game": "five_card_hilo",
            "round": 3,
            "state": "play",
            "decks": {"A": {"state": "reshuffle_due (C5)", "rounds_since_stub_count": 6}},
            "devices": {"shoe": "down"},
            "devices_down": {"shoe": {"since": None, "reason": ""}},
            "device_faults": {"shuffler": ""},
            "pending_supervisor_notifications": ["C9"],
        }
    )
    text = "\n".join(lines)
    assert "round 3, hands in play" in text
    assert "A: reshuffle due (rule C5); 6 rounds since its stub count: OVERDUE" in text
    assert "shoe: DOWN: no reason reported" in text
    assert "shuffler: a fault without a description from the device" in text
    assert "C9: " in text and "supervisor notifications pending (1)" in text


def test_the_stub_cadence_is_the_tables_own_interval() -> None:
    """S1's interval as the table sets it (interpretations.stub_count_interval), not always 5."""
    from tablectl.controller.engine import Engine
    from tablectl.controller.table import TableSpec

    spec = TableSpec.from_dict(
        {"game": "five_card_hilo", "options": {"interpretations": {"stub_count_interval": 4}}}
    )
    deck = Engine(spec).status()["decks"]["A"]
    assert deck["stub_count_every"] == 4
    text = "\n".join(
        describe({"table": "t1", "decks": {"A": {**deck, "rounds_since_stub_count": 4}}})
    )
    assert "4 of 4 rounds since its stub count: count it now (S1)" in text
    text = "\n".join(
        describe({"table": "t1", "decks": {"A": {**deck, "rounds_since_stub_count": 5}}})
    )
    assert "5 rounds since its stub count: OVERDUE (S1: every 4)" in text
