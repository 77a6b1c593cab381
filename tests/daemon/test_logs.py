"""Logs: journald lines with a priority prefix and no time; console on a TTY; no card leaks."""

from __future__ import annotations

import io
import json
import os
import pty
import re

import pytest
import structlog

from tablectl.controller.common import logs


@pytest.fixture(autouse=True)
def reset_structlog():
    yield
    structlog.reset_defaults()


def journald_env(stream) -> dict[str, str]:
    stat = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"}


def lines_of(path) -> list[str]:
    return path.read_text().splitlines()


def test_journald_lines_have_priority_prefix_and_no_timestamp(tmp_path):
    path = tmp_path / "stderr"
    with path.open("w") as stream:
        assert logs.configure_logging("debug", stream=stream, environ=journald_env(stream)) == (
            "journald"
        )
        log = logs.get_logger("journal")
        log.info("journal_opened", rows=12)
        log.warning("device_slow", device="shoe")
        log.error("device_lost", device="shuffler")
        log.debug("frame", size=16)
    lines = lines_of(path)
    assert [line[:3] for line in lines] == ["<6>", "<4>", "<3>", "<7>"]
    first = json.loads(lines[0][3:])
    assert first == {"rows": 12, "event": "journal_opened", "level": "info", "logger": "journal"}
    assert all("timestamp" not in json.loads(line[3:]) for line in lines)


def test_journal_stream_for_another_file_is_not_journald(tmp_path):
    path = tmp_path / "stderr"
    with path.open("w") as stream, (tmp_path / "other").open("w") as other:
        mode = logs.configure_logging("info", stream=stream, environ=journald_env(other))
        assert mode == "json"
        logs.get_logger("x").info("hello")
    (line,) = lines_of(path)
    assert not line.startswith("<")
    assert "timestamp" in json.loads(line)


def test_a_terminal_gets_the_console_renderer():
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as stream:
        assert logs.configure_logging("info", stream=stream, environ={}) == "console"
        logs.get_logger("operator").info("operator_connected", uid=1000)
    output = os.read(leader, 4096).decode()
    os.close(leader)
    assert "operator_connected" in output and "uid=1000" in output
    assert not output.lstrip().startswith("{")


def test_level_filters_lower_levels():
    stream = io.StringIO()
    logs.configure_logging("warning", mode="json", stream=stream)
    log = logs.get_logger("x")
    log.info("quiet")
    log.warning("loud")
    assert "quiet" not in stream.getvalue() and "loud" in stream.getvalue()


def test_unknown_level_refused():
    with pytest.raises(ValueError, match="'loud' is not one of debug"):
        logs.configure_logging("loud", stream=io.StringIO())


CARD = re.compile(r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[cdhs](?![A-Za-z0-9])|JK")


def test_card_fields_and_card_values_never_reach_the_output():
    stream = io.StringIO()
    logs.configure_logging("debug", mode="json", stream=stream)
    log = logs.get_logger("engine")
    log.info("event", card="Qh", face_up=False, device="shoe")
    log.info("event", event_data={"type": "stack_dispensed", "cards": ["As", "Kd"]})
    log.info("decision", extra=["7c", "Td"], note="Ah")
    log.info("hole", hole_card="9s", dealt_cards=[{"card": "2c", "to": 1}])
    output = stream.getvalue()
    assert not CARD.search(output), output
    records = [json.loads(line) for line in output.splitlines()]
    assert records[0]["redacted"] == ["card"] and records[0]["device"] == "shoe"
    assert records[1]["event_data"] == {"type": "stack_dispensed"}
    assert records[2]["extra"] == ["[redacted]", "[redacted]"]
    assert set(records[3]["redacted"]) == {"hole_card", "dealt_cards"}


def test_public_view_strips_cards_at_any_depth():
    status = {"state": "dealing", "decks": {"A": {"rounds": 3}}, "up": "Kd", "hands": {"1": ["As"]}}
    assert logs.public_view(status) == {
        "state": "dealing",
        "decks": {"A": {"rounds": 3}},
        "up": "[redacted]",
    }
