"""A small sampled soak in `make test`: every table, faults at a high rate, every invariant.

`make soak` runs the full 1,000,000 rounds (tests/soak/soak.py); this proves the same checks
on a few hundred rounds per table in seconds, and that the checks themselves can fail.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream
from tests.soak.faults import FAULTS, FAULTS_BY_NAME, TABLES, inject, split_rounds, table_label
from tests.soak.soak import (
    PlannedRound,
    Summary,
    check_round,
    soak_engine,
    soak_service,
)


@pytest.mark.parametrize(("game", "options"), TABLES, ids=[table_label(*t) for t in TABLES])
def test_engine_soak_sample_keeps_every_invariant(game, options):
    summary = soak_engine(game, options, rounds=150, fault_rate=0.25, seed=11)
    assert summary.failures == []
    assert summary.rounds == 150
    assert sum(summary.injected.values()) > 10
    assert summary.caught == summary.injected
    assert summary.settled + summary.undealt + sum(summary.voids.values()) == summary.rounds


def test_every_fault_kind_is_injected_somewhere_in_the_sample():
    injected: Counter[str] = Counter()
    for game, options in TABLES:
        injected += soak_engine(game, options, rounds=150, fault_rate=0.25, seed=11).injected
    assert set(injected) == {fault.name for fault in FAULTS}


def test_service_soak_sample_journal_verifies_and_metrics_match(tmp_path):
    games, checks = soak_service(rounds=220, fault_rate=0.2, seed=5, directory=tmp_path)
    assert [line for s in games.values() for line in s.failures] == []
    assert checks["journals"] == checks["journals_verified"] > len(TABLES)
    assert checks["metric_mismatches"] == 0
    assert checks["metric_series_compared"] > 5
    assert sum(s.rounds for s in games.values()) == 220 // len(TABLES) * len(TABLES)


def _played(spec: TableSpec, planned: PlannedRound) -> tuple[Engine, list[list[dict]]]:
    engine = Engine(spec, random_source=random.Random(0).randrange)
    decisions = [
        [d.to_dict() for d in engine.handle(e, i)] for i, e in enumerate(planned.events, start=1)
    ]
    return engine, decisions


def test_the_checks_fail_on_a_round_decided_twice_or_a_fault_not_caught():
    spec = TableSpec.from_dict({"game": "five_card_hilo", "options": {}})
    events = split_rounds(legal_stream(spec, random.Random(3), 1))[0]
    engine, decisions = _played(spec, PlannedRound(events))
    clean = Summary()
    check_round(engine, PlannedRound(events), decisions, clean, "clean")
    assert clean.failures == [] and clean.settled == 1

    doubled = [list(d) for d in decisions]
    void = {"decision": "void_round", "rule_id": "C2", "at": 1}
    doubled[-1] = [void, dict(void)]
    twice = Summary()
    check_round(engine, PlannedRound(events), doubled, twice, "twice")
    assert any("twice" in line for line in twice.failures)
    assert any("void_round decisions in one round" in line for line in twice.failures)

    fault = FAULTS_BY_NAME["face_up_card"]
    injection = inject(spec, fault, "dealing", events, Counter(), random.Random(1))
    assert injection is not None
    planned = PlannedRound(injection.events, fault, "dealing", injection.fault_at, (("x", "C9"),))
    engine, decisions = _played(spec, planned)
    missed = Summary()
    check_round(engine, planned, decisions, missed, "missed")
    assert missed.injected["face_up_card"] == 1 and missed.caught["face_up_card"] == 0
    assert any("did not produce [('x', 'C9')]" in line for line in missed.failures)


def test_the_ledger_check_fails_when_a_card_vanishes():
    spec = TableSpec.from_dict({"game": "heads_up_holdem", "options": {}})
    events = split_rounds(legal_stream(spec, random.Random(4), 1))[0]
    engine, decisions = _played(spec, PlannedRound(events))
    shoe = engine.ledger("A").places["shoe"]
    shoe[next(iter(shoe))] -= 1  # a card leaves the ledger without a move
    broken = Summary()
    check_round(engine, PlannedRound(events), decisions, broken, "vanished")
    assert any("conservation broken" in line for line in broken.failures)
