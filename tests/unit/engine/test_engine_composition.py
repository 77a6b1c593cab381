"""The Engine is a composition of parts that it routes events to (issue 35, step 3).

A part's method is no hook: a game defining one would be silently ignored (the part calls its
own), so the class is refused; a game's own ``_on_EVENT`` still takes the event from the part.
"""

from __future__ import annotations

import random

import pytest

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.dealing import Dealing
from tablectl.controller.engine.round_life import RoundLife
from tablectl.controller.engine.table import TableSpec


def _engine(game: str) -> Engine:
    spec = TableSpec.from_dict({"game": game, "options": {}})
    return Engine(spec, random_source=random.Random(0).randrange)


def test_each_part_is_an_object_the_engine_holds_not_a_base_class():
    engine = _engine("five_card_hilo")
    assert isinstance(engine.round_life, RoundLife)
    assert isinstance(engine.dealing, Dealing)
    assert not isinstance(engine, (RoundLife, Dealing))
    # the events are routed to the part whose rules they concern
    assert engine._handlers["card_drawn"] == engine.dealing._on_card_drawn
    assert engine._handlers["bets_closed"] == engine.round_life._on_bets_closed


def test_a_game_that_defines_a_parts_method_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"Shadow\._deal_one: not a hook a game overrides"):

        class Shadow(Engine):  # no name: never registered
            def _deal_one(self, card: str) -> list:
                return []


def test_a_games_own_handler_takes_the_event_from_the_part():
    # Three Card 21 has no stub count: its own _on_stub_counted refuses the event
    engine = _engine("three_card_21")
    assert engine._handlers["stub_counted"] == engine._on_stub_counted
    decisions = engine.handle({"type": "stub_counted", "count": 40}, 1)
    assert [d.decision for d in decisions] == ["rejected"]
    assert "no stub count" in decisions[0].reason
