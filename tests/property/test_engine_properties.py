"""Property tests of the engine: legal rounds stay clean; the ledger always conserves;
the same stream always gives the same decisions."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream
from tests.property.strategies import RANDOM_EVENT

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TABLES = [
    ("three_card_21", {}),
    ("three_card_21", {"decks": 8, "reader": "revealing", "dealer_hits_soft_17": True}),
    ("three_card_21", {"bart_carter": True, "reader": "none"}),
    ("asia_poker", {}),
    ("asia_poker", {"ap_start": "computer"}),
    *[
        (game, {"dealing": method, "dual_deck": dual, "shuffler": shuffler})
        for game in ("five_card_hilo", "heads_up_holdem")
        for method in ("manual_shoe", "hand", "automated_shoe")
        for dual in (False, True)
        for shuffler in ("counting", "batch")
    ],
]
BAD = {
    "void_round",
    "void_hand",
    "procedure_violation",
    "remove_deck",
    "deal_blocked",
    "rejected",
    "hands_dead",
    "reader_disabled",
    "notify_supervisor",
    "stub_count_required",
    "discard_card",
}


def engine_for(game: str, options: dict[str, Any], seed: int = 0) -> Engine:
    spec = TableSpec.from_dict({"game": game, "options": options})
    return Engine(spec, random_source=random.Random(seed).randrange)


def check_ledgers(engine: Engine) -> None:
    for deck in engine.decks.values():
        deck.ledger.check()


@pytest.mark.parametrize(("game", "options"), TABLES, ids=lambda v: str(v))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 8))
def test_legal_rounds_give_no_void_violation_or_removal(game, options, seed, rounds):
    engine = engine_for(game, options, seed)
    events = legal_stream(engine.spec, random.Random(seed), rounds)
    for at, event in enumerate(events, start=2):
        bad = [d.to_dict() for d in engine.handle(event, at) if d.decision in BAD]
        assert not bad, (event, bad)
    assert engine.round_number == rounds
    assert engine.state == "idle"
    check_ledgers(engine)


GAME_OPTIONS = st.sampled_from(TABLES)


@SETTINGS
@given(table=GAME_OPTIONS, events=st.lists(RANDOM_EVENT, max_size=80))
def test_random_card_streams_never_break_ledger_conservation(table, events):
    engine = engine_for(*table)
    for at, event in enumerate(events, start=2):
        state_before = engine.state
        decisions = engine.handle(event, at)
        if decisions and decisions[0].decision == "rejected":
            assert engine.state == state_before  # a refused event changes nothing
        check_ledgers(engine)


@SETTINGS
@given(table=GAME_OPTIONS, events=st.lists(RANDOM_EVENT, max_size=60))
def test_replaying_a_stream_twice_gives_identical_decisions(table, events):
    first, second = engine_for(*table), engine_for(*table)
    one = [d.to_dict() for at, e in enumerate(events, 2) for d in first.handle(e, at)]
    two = [d.to_dict() for at, e in enumerate(events, 2) for d in second.handle(e, at)]
    assert one == two
    assert first.status() == second.status()


def test_legal_bart_carter_rounds_reshuffle_on_the_rack_and_stay_clean():
    engine = engine_for("three_card_21", {"bart_carter": True, "reader": "none"})
    events = legal_stream(engine.spec, random.Random(5), 30)
    decisions = [d for at, e in enumerate(events, 2) for d in engine.handle(e, at)]
    assert {(d.decision, d.rule_id) for d in decisions} == {("reshuffle", "G4")}
    check_ledgers(engine)
