"""The engine's state is a value: snapshot after any event, restore, continue: the same
decisions and status as the run that was never interrupted.

Run over every golden replay, every acceptance scenario and the hypothesis streams (legal
rounds and random events). The drawn numbers (Asia Poker's computer start) stay injected:
the restored engine gets a random source in the state the uninterrupted one had.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablectl.controller.commands.replay import ScenarioError, read_lines
from tablectl.controller.engine.core import SNAPSHOT_VERSION, Engine, SnapshotError
from tablectl.controller.engine.events import EventError, validate
from tablectl.controller.engine.table import TableSpec, TableSpecError
from tablectl.simulators.roundgen import legal_stream
from tests.property.strategies import RANDOM_EVENT

TESTS = Path(__file__).resolve().parents[1]
REPLAYS = sorted(
    p for p in (TESTS / "replay" / "scenarios").glob("*.jsonl") if ".expected." not in p.name
)
ACCEPTANCE = sorted((TESTS / "acceptance").glob("scenarios*/*.jsonl"))
SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def scenario(path: Path) -> tuple[TableSpec, list[tuple[int, dict[str, Any]]]] | None:
    """The table and the events `tablectl replay` would run (up to a line it refuses)."""
    spec: TableSpec | None = None
    events: list[tuple[int, dict[str, Any]]] = []
    try:
        for number, obj in read_lines(path.read_text(encoding="utf-8").splitlines()):
            if spec is None:
                spec = TableSpec.from_dict(obj)
                continue
            validate(obj)
            events.append((number, obj))
    except (ScenarioError, TableSpecError, EventError):
        pass
    return None if spec is None else (spec, events)


def outcome(engine: Engine, event: dict[str, Any], at: int) -> dict[str, Any]:
    return {
        "decisions": [d.to_dict() for d in engine.handle(event, at)],
        "status": engine.status(),
        "dealt": engine.dealt_cards(),
    }


# Every cut is continued for HORIZON events (then the two engines' snapshots must be equal),
# every FULL_EVERY-th cut to the end of the stream: cuts x events stays linear in long streams.
HORIZON = 12
FULL_EVERY = 40


def assert_round_trips(spec: TableSpec, events: list[tuple[int, dict[str, Any]]]) -> None:
    """Cut after every event (and before the first): restore, continue, compare."""
    rng = random.Random(0)
    engine = Engine(spec, random_source=rng.randrange)
    cuts = [(json.dumps(engine.snapshot()), rng.getstate())]
    uninterrupted = []
    for at, event in events:
        uninterrupted.append(outcome(engine, event, at))
        cuts.append((json.dumps(engine.snapshot()), rng.getstate()))
    for k, (text, rng_state) in enumerate(cuts):
        snap = json.loads(text)
        assert snap["version"] == SNAPSHOT_VERSION
        resumed_rng = random.Random()
        resumed_rng.setstate(rng_state)
        resumed = Engine.restore(spec, snap, random_source=resumed_rng.randrange)
        assert json.dumps(resumed.snapshot()) == text, f"cut after event {k}: not a fixed point"
        end = len(events) if k % FULL_EVERY == 0 else min(len(events), k + HORIZON)
        for step in range(k, end):
            at, event = events[step]
            got = outcome(resumed, event, at)
            assert got == uninterrupted[step], f"cut after event {k}, line {at}: {event}"
        assert json.dumps(resumed.snapshot()) == cuts[end][0], f"cut after event {k}"


@pytest.mark.parametrize("path", REPLAYS, ids=lambda p: p.stem)
def test_golden_replays_survive_a_snapshot_after_any_event(path: Path) -> None:
    loaded = scenario(path)
    assert loaded is not None and loaded[1]
    assert_round_trips(*loaded)


# Scenarios whose table line the rules refuse have no engine to snapshot: left out here
# (test_acceptance.py checks their refusal), so that no test is skipped.
WITH_AN_ENGINE = [path for path in ACCEPTANCE if scenario(path) is not None]


def test_most_acceptance_scenarios_have_an_engine_to_snapshot() -> None:
    assert len(WITH_AN_ENGINE) > 0.9 * len(ACCEPTANCE)


@pytest.mark.parametrize("path", WITH_AN_ENGINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_acceptance_scenarios_survive_a_snapshot_after_any_event(path: Path) -> None:
    loaded = scenario(path)
    assert loaded is not None
    assert_round_trips(*loaded)


TABLES = [
    ("three_card_21", {}),
    ("three_card_21", {"bart_carter": True, "reader": "revealing"}),
    ("asia_poker", {"ap_start": "computer"}),
    ("five_card_hilo", {"dealing": "automated_shoe", "dual_deck": True}),
    ("five_card_hilo", {"dealing": "hand"}),
    ("heads_up_holdem", {"dealing": "manual_shoe", "dual_deck": True}),
    ("heads_up_holdem", {"dealing": "automated_shoe"}),
]


@pytest.mark.parametrize(("game", "options"), TABLES, ids=str)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 2))
def test_legal_streams_survive_a_snapshot_after_any_event(game, options, seed, rounds):
    spec = TableSpec.from_dict({"game": game, "options": options})
    events = legal_stream(spec, random.Random(seed), rounds)
    assert_round_trips(spec, list(enumerate(events, start=2)))


@SETTINGS
@given(table=st.sampled_from(TABLES), events=st.lists(RANDOM_EVENT, max_size=30))
def test_random_streams_survive_a_snapshot_after_any_event(table, events):
    spec = TableSpec.from_dict({"game": table[0], "options": table[1]})
    assert_round_trips(spec, list(enumerate(events, start=2)))


def test_a_snapshot_is_plain_json_in_a_fixed_order():
    spec = TableSpec.from_dict({"game": "five_card_hilo", "options": {"dual_deck": True}})
    one, two = Engine(spec), Engine(spec)
    events = legal_stream(spec, random.Random(3), 2)
    for at, event in enumerate(events, start=2):
        one.handle(event, at)
        two.handle(event, at)
    assert json.dumps(one.snapshot()) == json.dumps(two.snapshot())
    assert list(one.snapshot())[:3] == ["version", "game", "state"]


def test_a_snapshot_of_another_game_version_or_a_broken_ledger_is_refused():
    hilo = TableSpec.from_dict({"game": "five_card_hilo"})
    huh = TableSpec.from_dict({"game": "heads_up_holdem"})
    snap = Engine(hilo).snapshot()
    with pytest.raises(SnapshotError, match="game"):
        Engine.restore(huh, snap)
    with pytest.raises(SnapshotError, match="version"):
        Engine.restore(hilo, {**snap, "version": SNAPSHOT_VERSION + 1})
    with pytest.raises(SnapshotError, match="round_number: missing"):
        Engine.restore(hilo, {k: v for k, v in snap.items() if k != "round_number"})
    with pytest.raises(SnapshotError, match=r"decks\.A\.ledger"):
        broken = json.loads(json.dumps(snap))
        broken["decks"]["A"]["ledger"]["shoe"]["AS"] = 2  # a 53rd card
        Engine.restore(hilo, broken)


def test_the_drawn_numbers_stay_injected_after_a_restore():
    spec = TableSpec.from_dict({"game": "asia_poker", "options": {"ap_start": "computer"}})
    snap = Engine(spec, random_source=lambda n: 0).snapshot()
    with pytest.raises(ValueError, match="random_source"):
        Engine.restore(spec, snap)
    engine = Engine.restore(spec, snap, random_source=lambda n: 3)
    (start,) = [d for d in engine.handle({"type": "bets_closed", "positions": [1]}, 2)]
    assert start.decision == "starting_position" and start.reason.startswith("number 4")
