"""A toy game defined here, in the tests only, plays through the whole engine: the table
spec accepts it, Engine(spec) builds it, its rules decide, its chart is drawn, its state
snapshots. Nothing outside this file was edited for it (issue #10: one module per game,
its rules of the deal a family's subclass, a core that knows no game)."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import DealRules
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.machine import MachineDefinition, chart
from tablectl.controller.engine.registry import game_names
from tablectl.controller.engine.table import GameProfile, TableSpec, TableSpecError


class HighCard(Engine):
    """One card to each wagered position and one to the dealer; highest wins. A wrong
    count voids every hand (the default misdeal hook); no stub count."""

    name = "toy_high_card"
    profile = GameProfile("toy_high_card", "High Card (toy)", 4, 1, 1, 0, ("manual_shoe",), False)
    game_options: ClassVar[tuple[str, ...]] = ()
    round_states = ("dealing", "showdown")

    @classmethod
    def chart(cls) -> MachineDefinition:
        return chart(cls.name, cls.round_states, [("complete_deal", ("dealing",), "showdown", ())])

    class Deal(DealRules["HighCard"]):
        """The toy's deal: one card each, then the dealer's."""

        def plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            rnd.order = [*players, DEALER]
            rnd.expected = {**dict.fromkeys(players, 1), DEALER: 1}
            rnd.planned_cards = len(rnd.order)

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            return self.game._void_round(self.game.misdeal_rule, counted)


def feed(engine, *events):
    return [d.to_dict() for at, e in enumerate(events, start=2) for d in engine.handle(e, at)]


def spec(**options):
    return TableSpec.from_dict({"game": "toy_high_card", "options": options})


def test_the_toy_game_is_found_by_name():
    assert "toy_high_card" in game_names()
    assert type(Engine(spec())) is HighCard


def test_a_clean_toy_round_decides_nothing_and_ends_idle():
    engine = Engine(spec())
    out = feed(
        engine,
        {"type": "bets_closed", "positions": [1, 2]},
        *({"type": "card_drawn", "card": c} for c in ("AS", "KD", "2C")),
        {"type": "deal_completed"},
        {"type": "hands_collected"},
    )
    assert out == []
    assert engine.state == "idle"
    assert [c["to"] for c in engine.dealt_cards()] == []  # collected
    assert engine.ledger().count("discard") == 3


def test_the_core_rules_hold_for_the_toy_game_too():
    engine = Engine(spec())
    out = feed(engine, {"type": "bets_closed", "positions": [1, 5]})  # C11: 4 positions
    assert [(d["decision"], d["rule_id"]) for d in out] == [("rejected", "C11")]
    out = feed(
        engine,
        {"type": "bets_closed", "positions": [1]},
        {"type": "card_drawn", "card": "AS", "face_up": True},
        {"type": "card_drawn", "card": "KS", "face_up": True},
    )
    assert [(d["decision"], d["rule_id"]) for d in out] == [
        ("discard_card", "C1"),
        ("void_round", "C2"),
        ("reshuffle", "C2"),
    ]


def test_a_short_toy_deal_uses_the_toy_games_hook():
    engine = Engine(spec())
    feed(engine, {"type": "bets_closed", "positions": [1, 2]}, {"type": "card_drawn", "card": "AS"})
    out = feed(engine, {"type": "deal_completed"})
    assert (out[0]["decision"], out[0]["rule_id"]) == ("void_round", "M4")


def test_the_toy_options_are_checked_like_any_game():
    with pytest.raises(TableSpecError, match="option bart_carter: applies only to three_card_21"):
        spec(bart_carter=True)
    with pytest.raises(TableSpecError, match="positions: 5 is not allowed"):
        spec(positions=5)


def test_the_toy_chart_is_drawn_by_tablectl_diagram(capsys):
    assert cli.main(["diagram", "--game", "toy_high_card"]) == 0
    out = capsys.readouterr().out
    assert "dealing --> showdown: complete_deal" in out
    assert "start_deal [C10_deck_not_removed" in out


def test_the_toy_game_snapshots_and_restores():
    engine = Engine(spec())
    feed(engine, {"type": "bets_closed", "positions": [3]}, {"type": "card_drawn", "card": "AS"})
    snap = json.loads(json.dumps(engine.snapshot()))
    restored = Engine.restore(spec(), snap)
    assert type(restored) is HighCard
    assert restored.snapshot() == engine.snapshot()
