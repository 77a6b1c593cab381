"""The fault matrix, engine level: every device fault x every round phase x every table.

Generated from the fault catalogue (tests/soak/faults.py), whose required decisions are checked
here against the rule table of docs/rules.md (the project's copy of RULES.md): a fault's rule
must list each decision the matrix requires of it. A cell whose fault cannot happen at that
phase (a face-up card while the shuffler runs) is listed as such, not tested. Each cell plays
legal rounds through the engine, puts the fault into the last one, and asserts the decision and
every soak invariant. All cells run in `make test` (they are milliseconds each); the device
level is tests/faults/test_device_fault_matrix.py.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream
from tests.soak.faults import FAULTS, PHASES, TABLES, dealt_cards, inject, split_rounds, table_label
from tests.soak.soak import PlannedRound, Summary, check_round

RULES_MD = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def rule_decisions() -> dict[str, set[str]]:
    """Rule ID -> the decision names its row in docs/rules.md lists."""
    rows: dict[str, set[str]] = {}
    for line in RULES_MD.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and re.fullmatch(r"[A-Z][0-9]{1,2}", cells[1]):
            rows[cells[1]] = set(re.findall(r"`([a-z_]+)`", cells[4]))
    return rows


def cells() -> list[tuple[str, dict[str, object], str, str]]:
    found = []
    for game, options in TABLES:
        spec = TableSpec.from_dict({"game": game, "options": options})
        for fault in FAULTS:
            if fault.applies(spec):
                found += [(game, options, fault.name, phase) for phase in fault.phases]
    return found


CELLS = cells()


def test_every_required_decision_is_the_rules_own():
    rules = rule_decisions()
    for fault in FAULTS:
        assert fault.rule_id in rules, f"{fault.name}: rule {fault.rule_id} not in docs/rules.md"
    checked = 0
    for game, options, name, phase in CELLS:
        found = _find_injection(
            TableSpec.from_dict({"game": game, "options": options}), name, phase
        )
        if found is None:
            continue
        for decision, rule_id in found[0].expected:
            assert decision in rules[rule_id], (
                f"{name} at {phase}: docs/rules.md {rule_id} does not list `{decision}`"
            )
            checked += 1
    assert checked > 200


def test_the_matrix_covers_every_fault_and_phase():
    assert {name for _, _, name, _ in CELLS} == {f.name for f in FAULTS}
    assert {phase for _, _, _, phase in CELLS} == set(PHASES)
    assert len(CELLS) > 200


def _find_injection(spec: TableSpec, name: str, phase: str, seeds: int = 40):
    """A legal session of three rounds with the fault in one of them (the last, else the
    first: a 3C21 shoe is shuffled only in the round that opens it)."""
    fault = next(f for f in FAULTS if f.name == name)
    for seed in range(seeds):
        rng = random.Random(seed)
        rounds = split_rounds(legal_stream(spec, rng, 3))
        for target in (len(rounds) - 1, 0):
            spent: Counter[str] = Counter()
            for round_ in rounds[: target + 1]:
                if any(e["type"] == "shoe_loaded" for e in round_) or spec.game != "three_card_21":
                    spent = Counter()
                if round_ is not rounds[target]:
                    spent += dealt_cards(round_)
            injection = inject(spec, fault, phase, rounds[target], spent, rng)
            if injection is not None:
                return injection, rounds[:target], fault
    return None


@pytest.mark.parametrize(
    ("game", "options", "fault", "phase"),
    CELLS,
    ids=[f"{table_label(g, o)}-{f}-{p}" for g, o, f, p in CELLS],
)
def test_fault_at_phase_yields_its_rule_decision(game, options, fault, phase):
    spec = TableSpec.from_dict({"game": game, "options": options})
    found = _find_injection(spec, fault, phase)
    if found is None:
        pytest.skip(f"{fault} at {phase}: no such moment in 40 legal {game} sessions")
    injection, before, kind = found
    engine = Engine(spec, random_source=random.Random(0).randrange)
    summary = Summary()
    at = 0
    for events in before:
        decisions = []
        for event in events:
            at += 1
            decisions.append([d.to_dict() for d in engine.handle(event, at)])
        check_round(engine, PlannedRound(events), decisions, summary, "before")
    planned = PlannedRound(injection.events, kind, phase, injection.fault_at, injection.expected)
    decisions = []
    for event in planned.events:
        at += 1
        decisions.append([d.to_dict() for d in engine.handle(event, at)])
    check_round(engine, planned, decisions, summary, f"{fault} at {phase}")
    assert summary.failures == []
    assert summary.caught[fault] == 1
