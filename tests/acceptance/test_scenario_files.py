"""Checks on the acceptance scenario files themselves (these run without the engine).

They keep the files exact: EVENTS.md names and fields only, every expectation
pointing at an event line, every rule ID of RULES.md covered, and the files
identical to what make_scenarios.py writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from acceptance_format import parse_scenario, scenario_paths
from make_scenarios import write_all

RULE_IDS = (
    [f"C{n}" for n in range(1, 12)]
    + [f"S{n}" for n in range(1, 5)]
    + ["A1"]
    + [f"M{n}" for n in range(1, 7)]
    + [f"H{n}" for n in range(1, 8)]
    + [f"G{n}" for n in range(1, 8)]
    + [f"D{n}" for n in range(1, 5)]
    + ["R1"]
)
GAMES = {"three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"}
OPTIONS = {
    "positions": None,
    "dealing": {"manual_shoe", "hand", "automated_shoe"},
    "shuffler": {"none", "batch", "counting"},
    "dual_deck": {True, False},
    "decks": None,
    "bart_carter": {True, False},
    "dealer_hits_soft_17": {True, False},
    "reader": {"none", "concealed", "revealing"},
    "rack_tolerance": None,
}
# EVENTS.md "Events in": event -> (required fields, optional fields)
EVENTS: dict[str, tuple[set[str], set[str]]] = {
    "shuffle_started": (set(), {"deck"}),
    "shuffle_completed": (set(), {"deck", "count"}),
    "shuffler_fault": ({"fault"}, set()),
    "shoe_loaded": (set(), {"deck"}),
    "card_drawn": ({"card"}, {"face_up"}),
    "stack_dispensed": ({"cards"}, set()),
    "cut_card_reached": (set(), set()),
    "shoe_fault": ({"fault"}, set()),
    "reader_inserted": (set(), set()),
    "reader_result": ({"blackjack"}, set()),
    "reader_fault": ({"fault"}, set()),
    "rack_level": ({"cards"}, set()),
    "device_lost": ({"device"}, set()),
    "device_connected": ({"device"}, set()),
    "deck_received": (set(), {"deck"}),
    "reader_inspected": ({"by"}, set()),
    "bets_closed": ({"positions"}, set()),
    "starting_position": (set(), {"dice", "number"}),
    "deal_completed": (set(), set()),
    "stub_counted": ({"count"}, {"hand_counts"}),
    "dealer_changed": (set(), set()),
    "bonus_settled": (set(), set()),
    "insurance_closed": (set(), set()),
    "dealer_turn": (set(), set()),
    "dealer_card_exposed": (set(), set()),
    "misdeal_reported": ({"position", "cards"}, set()),
    "hands_collected": (set(), set()),
    "reshuffle_requested": (set(), set()),
    "device_removed": ({"device"}, set()),
    "shuffler_empty_confirmed": ({"by"}, set()),
    "supervisor_ack": ({"by"}, set()),
}
DECISIONS = {
    "discard_card", "burn_card", "void_round", "void_hand", "reshuffle", "remove_deck",
    "deal_dealer_card", "hands_dead", "continue_play", "stub_count_required",
    "deal_blocked", "reader_disabled", "procedure_violation", "notify_supervisor", "rejected",
    # tablectl's added decisions (docs/events.md): A1's recorded start (31.11(b)) and the
    # dealer's check when a card count cannot say whose hand is wrong (40.12(d))
    "starting_position", "misdeal_check_required",
}  # fmt: skip
CARD = re.compile(r"^(?:[A2-9TJQK]|10)[cdhs]$|^JK$")
PATHS = scenario_paths()


def test_every_rule_id_has_a_scenario() -> None:
    prefixes = {p.stem.split("_", 1)[0] for p in PATHS}
    assert set(RULE_IDS) <= prefixes, f"no scenario for {sorted(set(RULE_IDS) - prefixes)}"


def test_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    write_all(tmp_path)
    generated = {p.name: p.read_text() for p in tmp_path.glob("*.jsonl")}
    stored = {p.name: p.read_text() for p in PATHS}
    assert generated.keys() == stored.keys()
    stale = [name for name in generated if generated[name] != stored[name]]
    assert not stale, f"run tests/acceptance/make_scenarios.py: stale {stale}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_scenario_file_is_exact(path: Path) -> None:
    sc = parse_scenario(path)
    assert sc.table["game"] in GAMES
    for option, value in sc.table.get("options", {}).items():
        assert option in OPTIONS, f"{path.name}: unknown option {option}"
        allowed = OPTIONS[option]
        assert allowed is None or value in allowed, f"{path.name}: {option}={value!r}"
    for line, event in sc.events.items():
        where = f"{path.name}:{line}"
        assert event["type"] in EVENTS, f"{where}: unknown event {event['type']}"
        required, optional = EVENTS[event["type"]]
        fields = set(event) - {"type"}
        assert required <= fields, f"{where}: missing {required - fields}"
        assert fields <= required | optional, f"{where}: unknown {fields - required - optional}"
        cards = list(event["cards"]) if event["type"] == "stack_dispensed" else []
        cards += [event["card"]] if "card" in event else []
        assert all(CARD.match(c) for c in cards), f"{where}: bad card in {cards}"
    last = 0
    for record in sc.expected + sc.optional:
        assert record["decision"] in DECISIONS, f"{path.name}: {record['decision']}"
        ats = record["at"] if isinstance(record["at"], list) else [record["at"]]
        assert all(at in sc.events for at in ats), f"{path.name}: {record} is not an event"
        rule_ids = record["rule_id"] if isinstance(record["rule_id"], list) else [record["rule_id"]]
        assert all(r in RULE_IDS or r == "*" for r in rule_ids), f"{path.name}: {record}"
        assert (record["rule_id"] == "*") == (record["decision"] == "rejected")
    for record in sc.expected:
        first = record["at"][0] if isinstance(record["at"], list) else record["at"]
        assert first >= last, f"{path.name}: expectations out of order at {record}"
        last = first
    for _card, before in sc.hidden:
        assert before - 1 in sc.events or before in sc.events


@pytest.mark.parametrize("path", [p for p in PATHS if p.stem.startswith("CLEAN_")])
def test_clean_rounds_expect_no_decision(path: Path) -> None:
    # A1 (31.11(b)): recording where an Asia Poker deal began is the only decision of a
    # clean round; it orders nothing.
    expected = parse_scenario(path).expected
    assert [r for r in expected if r["decision"] != "starting_position"] == []
