"""The event language's one schema: strict checks, limits, JSON guards, and its documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.controller.engine.events import (
    EVENT_TYPES,
    MAX_LINE,
    OPERATOR_EVENTS,
    EventError,
    markdown_tables,
    parse_json_object,
    replace_generated,
    role_table,
    validate,
)

REPO = Path(__file__).resolve().parents[2]


def refused(event: dict[str, Any], **options: Any) -> str:
    with pytest.raises(EventError) as error:
        validate(event, **options)
    return str(error.value)


def test_an_unknown_field_is_named_with_the_nearest_known_one():
    message = refused({"type": "card_drawn", "card": "As", "faceup": True})
    assert message.startswith("faceup: unknown field of card_drawn; did you mean 'face_up'?")
    assert refused({"type": "dealer_changed", "zzz": 1}) == (
        "zzz: unknown field of dealer_changed (its fields: id, caller, time)"
    )
    # a terminal is not told of the fields only the table sets
    assert refused({"type": "dealer_changed", "zzz": 1}, client=True).endswith("(its fields: id)")


def test_an_unknown_event_suggests_the_nearest():
    assert refused({"type": "bets_close"}) == (
        "type: unknown event type 'bets_close'; did you mean 'bets_closed'?"
    )
    assert refused({"type": "xyzzy"}) == "type: unknown event type 'xyzzy'"
    assert refused({}) == "type: missing"


def test_a_wrong_type_names_the_field_and_what_it_must_be():
    assert refused({"type": "stub_counted", "count": "47"}) == (
        "count: must be a whole number 0-100000, got '47'"
    )
    assert refused({"type": "card_drawn", "card": "As", "face_up": "yes"}) == (
        "face_up: must be true or false, got 'yes'"
    )
    assert refused({"type": "bets_closed", "positions": [1, 1]}).startswith(
        "positions: a position is named twice"
    )
    assert refused({"type": "shoe_loaded", "deck": "C"}) == "deck: must be 'A' or 'B', got 'C'"


def test_every_field_has_a_limit():
    huge = "x" * 60_000
    for event in (
        {"type": "supervisor_ack", "by": huge},
        {"type": "shuffler_fault", "fault": huge},
        {"type": "device_removed", "device": huge},
        {"type": "dealer_changed", "id": huge},
        {"type": "stub_counted", "count": 10**9},
        {"type": "bets_closed", "positions": list(range(1, 200))},
        {"type": "stack_dispensed", "cards": ["As"] * 300},
        {"type": "stub_counted", "count": 5, "hand_counts": {str(i): 1 for i in range(200)}},
    ):
        message = refused(event)
        assert len(message) < 300, message  # and the value is not echoed whole
    assert refused({"type": "supervisor_ack", "by": "a b"}).startswith("by: must be a user name")
    assert refused({"type": "supervisor_ack", "by": "\ud800"}).startswith("by: must be")


def test_a_device_fault_is_never_refused_for_its_wording():
    """A jam must reach the rules whatever the firmware says about it (<= 255 characters)."""
    event = {"type": "shoe_fault", "fault": "Klemme \x1b[31m ← stau", "detail": "\t?"}
    assert validate(event)["fault"] == event["fault"]
    assert validate({"type": "device_connected", "device": "shoe", "model": ""})["model"] == ""


def test_a_terminal_may_send_neither_time_nor_caller_and_may_leave_by_out():
    assert refused({"type": "dealer_changed", "time": "2026-01-01T00:00:00"}, client=True) == (
        "time: set by the table, not by a terminal"
    )
    caller = {"uid": 0, "user": "root", "role": "dealer", "granted_by": "root"}
    assert refused({"type": "dealer_changed", "caller": caller}, client=True) == (
        "caller: set by the table, not by a terminal"
    )
    assert validate({"type": "supervisor_ack"}, client=True) == {"type": "supervisor_ack"}
    assert refused({"type": "supervisor_ack"}) == "by: missing (a supervisor_ack event needs it)"
    assert validate({"type": "dealer_changed", "caller": caller})["caller"] == caller
    assert refused({"type": "card_drawn", "card": "As"}, client=True).startswith(
        "type: 'card_drawn' is a device event"
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[" * 20_000 + "]" * 20_000, "nested deeper than 4 levels"),
        ('{"a": [[[[[1]]]]]}', "nested deeper than 4 levels"),
        ('{"type": "x", "n": NaN}', "NaN is not a number JSON allows"),
        ('{"type": "x", "n": -Infinity}', "-Infinity is not a number JSON allows"),
        ('{"type": "x", "s": "\\udc00"}', "lone UTF-16 surrogate"),
        ('{"type": "x", "\\ud800": 1}', "lone UTF-16 surrogate"),
        ('{"n": 1' + "0" * 5000 + "}", "not valid JSON"),
        (b'{"type": "\xff"}', "not UTF-8 at byte 10"),
        ("x" * (MAX_LINE + 1), "line longer than 65536 bytes"),
        ("[1, 2]", "an event must be a JSON object, got list of length 2"),
        ("{not json", "not valid JSON: Expecting property name"),
    ],
)
def test_malformed_json_is_an_error_with_a_message(line, problem):
    with pytest.raises(EventError, match=re.escape(problem)):
        parse_json_object(line)


def test_the_schema_keeps_every_name_of_the_workspace_language():
    """The names and fields of the event language version 1 (kept; additions are free)."""
    version_1 = {
        "shuffle_started": {"deck"}, "shuffle_completed": {"deck", "count"},
        "shuffler_fault": {"fault"}, "shoe_loaded": {"deck"}, "card_drawn": {"card", "face_up"},
        "stack_dispensed": {"cards"}, "cut_card_reached": set(), "shoe_fault": {"fault"},
        "reader_inserted": set(), "reader_result": {"blackjack"}, "reader_fault": {"fault"},
        "rack_level": {"cards"}, "device_lost": {"device"}, "device_connected": {"device"},
        "deck_received": {"deck"}, "reader_inspected": {"by"}, "bets_closed": {"positions"},
        "starting_position": {"dice", "number"}, "deal_completed": set(),
        "stub_counted": {"count", "hand_counts"}, "dealer_changed": set(),
        "bonus_settled": set(), "insurance_closed": set(), "dealer_turn": set(),
        "dealer_card_exposed": set(), "misdeal_reported": {"position", "cards"},
        "hands_collected": set(), "reshuffle_requested": set(), "device_removed": {"device"},
        "shuffler_empty_confirmed": {"by"}, "supervisor_ack": {"by"},
    }  # fmt: skip
    for name, fields in version_1.items():
        assert fields <= {f.name for f in EVENT_TYPES[name].fields}, name
    assert {"supervisor_ack", "bets_closed", "device_removed"} <= OPERATOR_EVENTS
    assert all(EVENT_TYPES[name].role for name in OPERATOR_EVENTS)


def test_the_supervisors_events_are_those_the_texts_give_a_supervisor():
    supervisor = {n for n in OPERATOR_EVENTS if EVENT_TYPES[n].role == "supervisor"}
    assert supervisor == {
        "supervisor_ack",  # 2C.14(k): notification to a casino supervisor
        "reader_inspected",  # 1.10D(f): the floor-person inspects the reader
        "shuffler_empty_confirmed",  # 2C.14(j): a supervisor inspects the ASD
        "device_removed",  # 2C.14(j); 40.12(g), 39.12(g)
        "deck_received",  # 40.3(b), 39.3(b): verified by the floorperson
        "clock_step_acknowledged",  # the record's time: accepted by a supervisor (the daemon's)
        "floor_divergence_acknowledged",  # dealing on without the floor's copy (the daemon's)
    }


@pytest.mark.parametrize(
    ("document", "what", "body"),
    [("docs/events.md", "events", markdown_tables), ("docs/operations.md", "roles", role_table)],
)
def test_the_documents_tables_are_the_schemas(document, what, body):
    """Regenerate with `python -m tablectl.controller.engine.events events|roles` (see the
    markers)."""
    text = (REPO / document).read_text()
    assert replace_generated(text, what, body()) == text, f"{document} is stale"


def test_the_event_language_is_pointed_to_in_the_repository():
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        assert "shared/EVENTS.md" not in path.read_text(), path


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=10), inner, max_size=4)
            ),
            max_leaves=30,
        ).map(lambda v: json.dumps({"type": "stub_counted", "v": v})),
    )
)
def test_any_line_is_an_event_or_an_event_error(line):
    """Whatever a socket or a file holds, the answer is an object or EventError: no other
    exception can reach a reply (RecursionError, UnicodeEncodeError, ValueError ...)."""
    try:
        event = parse_json_object(line)
    except EventError:
        return
    try:
        validate(event)
        validate(event, client=True)
    except EventError:
        pass
