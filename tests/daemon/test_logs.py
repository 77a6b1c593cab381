"""Logs: journald fields over its native protocol (or lines with a priority prefix and no time);
console on a TTY; JSON lines on a pipe; no card leaks; a repeated failure logged sparingly."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import socket
import struct

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
        # journald's socket absent (or refusing): the stream, with the priority prefix
        mode = logs.configure_logging(
            "debug",
            stream=stream,
            environ=journald_env(stream),
            journal_socket=str(tmp_path / "no-journald"),
        )
        assert mode == "journald"
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


def parse_native(datagram: bytes) -> dict[str, str]:
    """journald's side of the native protocol: NAME=value lines, or NAME, a 64-bit length and
    the value's bytes (systemd's src/journal/journald-native.c reads it so)."""
    fields: dict[str, str] = {}
    rest = datagram
    while rest:
        line_end = rest.index(b"\n")
        line = rest[:line_end]
        if b"=" in line:
            name, _, value = line.partition(b"=")
            rest = rest[line_end + 1 :]
        else:
            name = line
            (size,) = struct.unpack("<Q", rest[line_end + 1 : line_end + 9])
            value = rest[line_end + 9 : line_end + 9 + size]
            assert rest[line_end + 9 + size : line_end + 10 + size] == b"\n"
            rest = rest[line_end + 10 + size :]
        assert re.fullmatch(rb"[A-Z0-9][A-Z0-9_]{0,63}", name), name
        fields[name.decode()] = value.decode()
    return fields


@pytest.fixture
def journald(tmp_path):
    """A socket where journald's would be: what the daemon sends there, datagram by datagram."""
    path = tmp_path / "journal.socket"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(10)
    yield path, server
    server.close()


def test_under_systemd_every_field_is_a_journal_field_and_the_message_a_sentence(
    tmp_path, journald
):
    path, server = journald
    with (tmp_path / "stderr").open("w") as stream:
        mode = logs.configure_logging(
            "debug", stream=stream, environ=journald_env(stream), journal_socket=str(path)
        )
        assert mode == "journald"
        structlog.contextvars.bind_contextvars(table="hilo01")
        try:
            log = logs.get_logger("driver").bind(device="shoe", kind="shoe")
            log.warning("connect_failed", error="[Errno 2] no such port\nretrying", attempt=3)
            logs.get_logger("service").info(
                "decision", decision="remove_deck", rule_id="C7", positions=[1, 2], card="Ah"
            )
        finally:
            structlog.contextvars.unbind_contextvars("table")
    assert (tmp_path / "stderr").read_text() == ""  # nothing on the stream: all in the journal
    first = parse_native(server.recv(65536))
    assert first["MESSAGE"] == (
        "connect failed: device shoe, kind shoe, error [Errno 2] no such port\nretrying, attempt 3"
    )
    assert first["PRIORITY"] == "4" and first["SYSLOG_IDENTIFIER"] == "tablectl"
    assert first["EVENT"] == "connect_failed" and first["DEVICE"] == "shoe"
    assert first["TABLE"] == "hilo01" and first["LOGGER"] == "driver"
    assert first["ERROR"] == "[Errno 2] no such port\nretrying" and first["ATTEMPT"] == "3"
    assert "LEVEL" not in first and "TIMESTAMP" not in first  # journald stamps the time
    second = parse_native(server.recv(65536))
    assert second["EVENT"] == "decision" and second["RULE_ID"] == "C7"
    assert second["DECISION"] == "remove_deck" and second["POSITIONS"] == "[1, 2]"
    assert second["PRIORITY"] == "6"
    assert "CARD" not in second and "Ah" not in str(second)  # H7: stripped before the journal
    assert second["REDACTED"] == '["card"]'


def test_journal_field_names_are_journals():
    assert logs.journal_field_name("rule_id") == "RULE_ID"
    assert logs.journal_field_name("_private") == "PRIVATE"  # never a trusted field
    assert logs.journal_field_name("2nd") == "F_2ND"
    assert logs.journal_field_name("a.b-c") == "A_B_C"


def test_a_repeated_failure_is_logged_once_then_at_growing_intervals_with_a_count():
    repeated = logs.RepeatedFailure(first=60, factor=2, longest=3600)
    # an absent device retried every 10 s for a day
    logged = {}
    for second in range(0, 86400, 10):
        count = repeated.record("no such port", now=second)
        if count is not None:
            logged[second] = count
    assert list(logged)[:5] == [0, 60, 180, 420, 900]  # then 1, 2, 4, 8 minutes ... an hour
    assert list(logged.values())[:4] == [1, 6, 12, 24]  # each says how many since the last
    last = max(logged)
    since_last = len(range(last + 10, 86400, 10))  # for the next line to count
    assert sum(logged.values()) + since_last == 8640  # every failure counted, once
    assert len(logged) < 30  # not 8,640 lines
    # another error is news: logged at once; so is the same error after a success
    assert repeated.record("permission denied", now=86400) == 1
    assert repeated.record("permission denied", now=86401) is None
    repeated.reset()
    assert repeated.record("permission denied", now=86402) == 1


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


def test_an_absent_device_is_logged_once_not_at_every_retry(tmp_path):
    """A real driver on a serial port that is not there, retrying as fast as its backoff lets
    it: the metric counts every failed attempt, the log says it once (the first minute's
    retries are counted into the next line), where it said it at every retry before."""
    import asyncio
    import time

    from prometheus_client import REGISTRY

    from tablectl.drivers.base import DriverSettings
    from tablectl.drivers.reference import ReferenceDiscardRack
    from tablectl.drivers.transport.serial import SerialTransport

    stream = io.StringIO()
    logs.configure_logging("info", mode="json", stream=stream)
    name = f"rack-absent-{os.getpid()}"
    fast = DriverSettings(backoff_initial=0.001, backoff_factor=1.0, backoff_max=0.001)
    driver = ReferenceDiscardRack(
        SerialTransport(str(tmp_path / "ttyUSB-absent")), name=name, settings=fast
    )

    def failures() -> float:
        labels = {"device": name, "error": "connect_failed"}
        return REGISTRY.get_sample_value("tablectl_driver_errors_total", labels) or 0.0

    async def retry_for_a_while() -> None:
        await driver.start(asyncio.get_running_loop(), lambda event: None)
        deadline = time.monotonic() + 30
        while failures() < 20:
            assert time.monotonic() < deadline, f"{failures()} attempts in 30 s"
            await asyncio.sleep(0.01)
        await driver.stop()

    asyncio.run(retry_for_a_while())
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    failed = [line for line in lines if line["event"] == "connect_failed"]
    assert failures() >= 20
    assert len(failed) == 1, failed
    assert failed[0]["device"] == name and failed[0]["repeated"] == 1
    assert "ttyUSB-absent" in failed[0]["error"]
