"""`tablectl run` as a process, its hardware simulators on ptys in a rig process (conftest.py).

USB is covered in-process (test_daemon_inprocess.py): the simulated pyusb bus must live in the
daemon's own process, and no test-only switch to load it exists in `tablectl run`.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tablectl.controller.engine.cards import hand_total
from tests.e2e.conftest import ROOT, Table, tablectl

BAD = {"rejected", "void_round", "void_hand", "remove_deck", "deal_blocked", "procedure_violation"}


def names(decisions: list[dict[str, Any]]) -> set[str]:
    return {str(d["decision"]) for d in decisions}


def clean(decisions: list[dict[str, Any]]) -> None:
    assert not names(decisions) & BAD, decisions


def shuffle_into_shoe(table: Table) -> None:
    assert table.sim("shuffle") == "ready"
    table.until(lambda s: s["decks"]["A"]["state"] == "shuffled", what="deck shuffled")
    table.sim("to_shoe")


def draw(table: Table, count: int) -> list[str]:
    cards = [table.sim("call", "shoe", method="draw") for _ in range(count)]
    assert None not in cards, cards
    return cards


def in_shoe(table: Table, count: int) -> None:
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == count, what=f"{count} in the shoe")


def play_hilo(table: Table) -> None:
    shuffle_into_shoe(table)
    clean(table.op("bets_closed", positions=[1, 3]))
    for _ in range(3):
        assert table.sim("call", "shoe", method="dispense") is not None
    in_shoe(table, 37)
    for kind, fields in (("deal_completed", {}), ("stub_counted", {"count": 37})):
        clean(table.op(kind, **fields))
    clean(table.op("hands_collected"))


def play_huh(table: Table) -> None:
    shuffle_into_shoe(table)
    clean(table.op("bets_closed", positions=[2]))
    draw(table, 5 + 2 * 2)  # the board, then two cards to the player and to the dealer
    in_shoe(table, 43)
    for kind, fields in (("deal_completed", {}), ("stub_counted", {"count": 43})):
        clean(table.op(kind, **fields))
    clean(table.op("hands_collected"))


def play_asia_poker(table: Table) -> None:
    shuffle_into_shoe(table)
    clean(table.op("bets_closed", positions=[1, 4]))
    clean(table.op("starting_position", dice=11))
    draw(table, 49)
    in_shoe(table, 4)
    for kind, fields in (("deal_completed", {}), ("stub_counted", {"count": 4})):
        clean(table.op(kind, **fields))
    clean(table.op("hands_collected"))


def play_three_card_21(table: Table) -> None:
    clean(table.op("reader_inspected"))  # by: the socket's caller (root)
    shuffle_into_shoe(table)
    size = 6 * 52
    draw(table, 1)  # G2: the burn card
    in_shoe(table, size - 1)
    clean(table.op("bets_closed", positions=[1]))
    deal = draw(table, 5)  # player, dealer up, player, dealer hole, player
    up, hole = deal[1], deal[3]
    in_shoe(table, size - 6)
    clean(table.op("deal_completed"))
    clean(table.op("bonus_settled"))
    if up[0] == "A":
        clean(table.op("insurance_closed"))
    if up[0] in "AKQJT":
        table.sim("call", "reader", method="insert", args=[up, hole])
        table.until(lambda s: s["state"] != "reading", what="the reader's answer")
    clean(table.op("dealer_turn"))
    dealer = [up, hole]
    drawn = 6
    while hand_total(dealer)[0] < 17:
        dealer += draw(table, 1)
        drawn += 1
    in_shoe(table, size - drawn)
    clean(table.op("hands_collected"))
    table.sim("call", "rack", method="add", args=[drawn])


PLAY = {
    "five_card_hilo": play_hilo,
    "heads_up_holdem": play_huh,
    "asia_poker": play_asia_poker,
    "three_card_21": play_three_card_21,
}


@pytest.mark.parametrize("game", sorted(PLAY))
def test_every_game_plays_a_round_through_the_daemon(make_table: Any, game: str) -> None:
    table = make_table(game)
    table.start()
    assert table.status()["devices"] == {name: "up" for name in table.devices}
    PLAY[game](table)
    table.until(lambda s: s["round"] == 1 and s["state"] in ("idle", "betting", "between_rounds"))
    decisions = table.decisions()
    assert not names(decisions) & BAD, decisions
    assert table.metric("tablectl_rounds_total", game=game, outcome="completed") == 1
    for name in table.devices:
        assert table.metric("tablectl_device_up", device=name) == 1
    # every card the shoe sent is in the journal, in order
    drawn = [e for e in table.events() if e["type"] in ("card_drawn", "stack_dispensed")]
    assert drawn and all(e["device"] == "shoe" for e in drawn)
    # H7: no card the shoe sent face down reaches the daemon's log
    log = table.log()
    assert '"event": "ready"' in log
    for event in drawn:
        for card in event.get("cards", [event.get("card")]):
            if not event.get("face_up"):
                assert f'"{card}"' not in log, card
    assert table.stop() == 0
    assert any("STOPPING=1" in n for n in table.notices) or table.wait_notice(
        lambda n: "STOPPING=1" in n, 2
    )
    check = subprocess.run(
        tablectl("journal", "verify", str(table.journal)), cwd=ROOT, capture_output=True
    )
    assert check.returncode == 0, check.stderr
