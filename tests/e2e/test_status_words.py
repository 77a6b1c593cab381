"""`tablectl status` in plain words against `tablectl run` on simulators: a device pulled out
says since when and why, in the words form and in the machine form (--json)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest

from tablectl.controller.service.status_words import describe, fault_words
from tests.e2e.conftest import ROOT, Table, tablectl


def status_run(table: Table, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tablectl("status", "--socket", str(table.socket_path), *extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def status_cli(table: Table, *extra: str) -> str:
    """The status's output; it must have been read (exit 0 healthy or 1 degraded)."""
    result = status_run(table, *extra)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout


@pytest.mark.slow
def test_the_exit_status_says_healthy_degraded_or_unreachable_and_nothing_unseen_is_stated(
    make_table: Callable[..., Table],
) -> None:
    """0 healthy, 1 degraded, 2 stopped (monitoring plugins), the same with --json; a deck no
    device or dealer has reported on is "not yet seen", never "52 cards in the shoe"."""
    table = make_table("heads_up_holdem")
    stopped = status_run(table)
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr  # not started yet
    assert stopped.stdout == ""
    table.start()
    fresh = status_run(table)
    assert fresh.returncode == 0, fresh.stdout
    assert "  A: not yet seen (no shuffle, shoe or card reported since the journal began)" in (
        fresh.stdout
    )
    assert "cards in the shoe" not in fresh.stdout and "ready to deal" not in fresh.stdout
    assert fresh.stdout.rstrip().endswith("health: OK")
    machine = json.loads(status_cli(table, "--json"))
    assert machine["decks_seen"] is False and machine["decks"]["A"]["cards_in_shoe"] is None
    assert status_run(table, "--json").returncode == 0

    table.sim("shuffle")
    table.until(lambda s: s["decks"]["A"]["state"] == "shuffled", what="the deck shuffled")
    seen = status_run(table)
    assert seen.returncode == 0 and "52 cards in the shoe" in seen.stdout, seen.stdout

    table.sim("unplug", "shoe")
    table.until(lambda s: s["devices"]["shoe"] == "down", what="the shoe down")
    degraded = status_run(table)
    assert degraded.returncode == 1, degraded.stdout
    assert degraded.stdout.rstrip().splitlines()[-1].startswith("health: DEGRADED: shoe down")
    assert status_run(table, "--json").returncode == 1
    table.sim("replug", "shoe")
    table.until(lambda s: s["devices"]["shoe"] == "up", timeout=15, what="the shoe back")
    assert status_run(table).returncode == 0

    assert table.stop() == 0
    after = status_run(table)
    assert after.returncode == 2 and "tablectl status:" in after.stderr
    assert status_run(table, "--json").returncode == 2


@pytest.mark.slow
def test_a_device_down_says_since_when_and_why(make_table: Callable[..., Table]) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    words = status_cli(table)
    assert "table e2e: heads up holdem, round 0, between rounds" in words
    assert "  shuffler: up" in words and "  shoe: up" in words
    assert "A: not yet seen" in words  # no shuffle, shoe or card reported yet
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
    from tablectl.controller.engine.core import Engine
    from tablectl.controller.engine.table import TableSpec

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
