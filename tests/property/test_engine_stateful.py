"""The conservation law under random play (issue 22): a hypothesis state machine per game
plays legal rounds, random legal and illegal events, and restarts (the engine rebuilt from
its snapshot, then `controller_restarted`, X1), and after every step checks the law
(controller/engine/conservation.py: every card in one named place, no round ended without an
outcome) and the chart (the state is the chart's; the step follows its edges; a refused
event changed nothing).

`make test` runs a few examples per game; `make test-long` at least 2,000 per game.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from tablectl.controller.engine.conservation import RoundWatch, check
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.machine import MachineDefinition
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream
from tests.property.strategies import RANDOM_EVENT

OPTIONS: dict[str, list[dict[str, Any]]] = {
    "three_card_21": [{}, {"bart_carter": True, "reader": "none"}, {"shuffler": "none"}],
    "five_card_hilo": [
        {"dealing": method, "dual_deck": dual}
        for method in ("manual_shoe", "hand", "automated_shoe")
        for dual in (False, True)
    ],
    "heads_up_holdem": [
        {"dealing": method, "dual_deck": dual}
        for method in ("manual_shoe", "hand", "automated_shoe")
        for dual in (False, True)
    ],
    "asia_poker": [{}, {"ap_start": "computer"}],
}
# Events aimed at the law: those that open, end or replace a round, at any moment.
ROUND_EVENTS = st.sampled_from(
    [
        {"type": "bets_closed", "positions": [1, 2]},
        {"type": "hands_collected"},
        {"type": "deal_completed"},
        {"type": "shuffle_started"},
        {"type": "shuffle_completed", "count": 52},
        {"type": "shuffle_completed", "count": 53},
        {"type": "shuffle_completed", "count": 312},
        {"type": "shuffle_started", "deck": "B"},
        {"type": "shuffle_completed", "deck": "A"},
        {"type": "shoe_loaded", "deck": "B"},
        {"type": "deck_received"},
        {"type": "reshuffle_requested"},
        {"type": "device_lost", "device": "shoe"},
        {"type": "device_connected", "device": "shoe"},
        {"type": "starting_position", "number": 3},
        # issue 32: one of two decks removed (a deck count, a stub count), new cards during a
        # void, the shoe running out and its rack's reshuffle jamming, a check left open
        {"type": "shuffle_completed", "deck": "A", "count": 51},
        {"type": "shuffle_completed", "deck": "B", "count": 51},
        {"type": "stub_counted", "count": 1},
        {"type": "deck_received", "deck": "A"},
        {"type": "deck_received", "deck": "B"},
        {"type": "shoe_fault", "fault": "empty"},
        {"type": "shuffler_fault", "fault": "jam"},
        {"type": "misdeal_reported", "position": "dealer", "cards": 4},
        {"type": "card_drawn", "card": "2c", "face_up": True},
    ]
)


def edges(defn: MachineDefinition) -> set[tuple[str, str]]:
    """The chart's steps (and staying put); a suspended round returns where it was."""
    steps = {(s, s) for s in defn.states}
    for _trigger, sources, dest, _conditions in defn.transitions:
        for source in sources:
            steps.add((source, source if dest == "=" else dest))
    steps |= {("suspended", s) for s in defn.round_states}
    return steps


class TableMachine(RuleBasedStateMachine):
    """One table of ``game``; each step an event, the law and the chart checked after it."""

    game = ""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None

    @initialize(seed=st.integers(0, 2**32 - 1), choice=st.integers(0, 100))
    def open_the_table(self, seed: int, choice: int) -> None:
        options = OPTIONS[self.game][choice % len(OPTIONS[self.game])]
        spec = TableSpec.from_dict({"game": self.game, "options": options})
        self.rng = random.Random(seed)
        self.engine = Engine(spec, random_source=self.rng.randrange)
        self.watch = RoundWatch(self.engine)
        self.steps = edges(self.engine.chart())
        self.legal = iter(legal_stream(spec, random.Random(seed), 6))
        self.at = 1

    def _play(self, event: dict[str, Any]) -> None:
        engine = self.engine
        assert engine is not None
        self.at += 1
        before, snapshot = engine.state, engine.snapshot()
        decisions = engine.handle(event, self.at)
        self.watch.after(event, decisions)  # the law: raises ConservationError
        if any(d.decision == "rejected" for d in decisions):
            assert engine.snapshot() == snapshot, (event, decisions)  # nothing changed
        # one event may take up to three steps (void, then collect; collect, close_bets,
        # then Asia Poker's start drawn by the controller)
        states = engine.chart().states
        assert any(
            (before, one) in self.steps
            and (one, two) in self.steps
            and (two, engine.state) in self.steps
            for one in states
            for two in states
        ), (before, event, engine.state)

    @rule()
    def a_legal_event(self) -> None:
        event = next(self.legal, None)
        if event is None:
            assert self.engine is not None
            self.legal = iter(legal_stream(self.engine.spec, self.rng, 3))
            event = next(self.legal)
        self._play(event)

    @rule(event=RANDOM_EVENT)
    def a_random_event(self, event: dict[str, Any]) -> None:
        self._play(event)

    @rule(event=ROUND_EVENTS)
    def an_event_that_opens_or_ends_a_round(self, event: dict[str, Any]) -> None:
        self._play(event)

    @rule(short=st.integers(1, 2))
    def a_round_dealt_short(self, short: int) -> None:
        """Issue 32: a round read one or two cards short of its deal (HILO asks the dealer to
        check, M1; the others void), from the cards the shoe still holds."""
        engine = self.engine
        assert engine is not None
        if engine.round is not None or engine.state not in ("idle", "shuffling"):
            return
        self._play({"type": "bets_closed", "positions": [1]})
        if engine.round is None:
            return
        if engine.game == "asia_poker" and engine.state == "starting_position":
            self._play({"type": "starting_position", "number": 1})
        planned = engine.round.planned_cards if engine.round is not None else 0
        held = sorted(engine.ledger(engine.current).places["shoe"].elements())
        for card in held[: max(planned - short, 0)]:
            self._play({"type": "card_drawn", "card": card})
        self._play({"type": "deal_completed"})

    @rule()
    def a_restart(self) -> None:
        """X1: the engine rebuilt from its snapshot is the journal's engine, round and all."""
        engine = self.engine
        assert engine is not None
        snapshot = engine.snapshot()
        restored = type(engine).restore(engine.spec, snapshot, random_source=self.rng.randrange)
        assert restored.snapshot() == snapshot
        open_round = restored.round.number if restored.round is not None else None
        self.engine = restored
        self.watch = RoundWatch(restored)
        assert self.watch.open == open_round
        self._play({"type": "controller_restarted"})

    @invariant()
    def the_law_holds(self) -> None:
        if self.engine is not None:
            check(self.engine)


def machine_for(game: str) -> type[TableMachine]:
    return type(f"{game.title().replace('_', '')}Table", (TableMachine,), {"game": game})


QUICK = settings(
    max_examples=12,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LONG = settings(
    max_examples=2000,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

GAMES = list(OPTIONS)


@pytest.mark.parametrize("game", GAMES)
def test_the_law_holds_under_random_play(game: str) -> None:
    run_state_machine_as_test(machine_for(game), settings=QUICK)


@pytest.mark.long
@pytest.mark.parametrize("game", GAMES)
def test_the_law_holds_under_random_play_2000_examples(game: str) -> None:
    run_state_machine_as_test(machine_for(game), settings=LONG)
