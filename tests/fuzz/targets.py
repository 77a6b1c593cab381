"""Fuzz targets shared by hypothesis (`make test`, short) and atheris (`make fuzz`, long).

Each target takes arbitrary bytes and raises AssertionError when the code under test breaks
its contract: it crashed (an exception other than its documented refusal), it produced
something invalid, or it refused without a clear message (one that says what and where).

- ``protocol``: the reference protocol's framing (decode, resynchronisation, the link layer's
  ACK/NAK/duplicate logic) and every message payload parser.
- ``scenario``: the simulators' scenario files (simulators/scenario.py) and EVENTS.md scenario
  files through `tablectl replay` (controller/commands/replay.py, the engine's event validation).
- ``config``: the table configuration loader (controller/common/config.py), from the file's bytes.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from tablectl.controller.commands.replay import ScenarioError as ReplayError
from tablectl.controller.commands.replay import replay
from tablectl.controller.common.config import ConfigError, load_config
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import MAGIC, decode_verbose, encode
from tablectl.drivers.protocol.link import Link
from tablectl.simulators.scenario import KIND_STEPS, Scenario, ScenarioError

# Every payload parser of the reference protocol, called the way the drivers call them.
PAYLOAD_PARSERS: dict[str, Callable[[bytes], object]] = {
    "HELLO": m.unpack_hello,
    "IDENTITY": m.unpack_identity,
    "RESULT": m.unpack_result,
    "FAULT": lambda p: m.unpack_fault(p, "FAULT"),
    "DECK": lambda p: m.unpack_deck(p, "SHUFFLE_STARTED"),
    "SHUFFLE_COMPLETED": m.unpack_shuffle_completed,
    "PROGRESS": m.unpack_progress,
    "SHUFFLER_STATUS": m.unpack_shuffler_status,
    "CARD_DRAWN": m.unpack_card_drawn,
    "STACK": m.unpack_stack,
    "BOOL": lambda p: m.unpack_bool(p, "READER_RESULT"),
    "SELF_TEST": m.unpack_self_test,
    "RACK_LEVEL": m.unpack_rack_level,
}


def fuzz_protocol(data: bytes) -> None:
    """Bytes off the wire: never a crash, never a frame with a bad CRC, clear payload errors."""
    # the decoder alone, as a driver drains its buffer
    buffer = bytearray(data)
    while buffer:
        result = decode_verbose(buffer)
        assert 0 <= result.consumed <= len(buffer), "consumed more than the buffer"
        if result.consumed == 0:
            assert result.frame is None and result.error is None
            break
        if result.frame is not None:
            # a frame is exactly the bytes it came from: its CRC matched
            assert encode(result.frame) == bytes(buffer[: result.consumed]), "frame != its bytes"
        else:
            assert result.error is not None, "bytes dropped without a reason"
        del buffer[: result.consumed]
    # the link layer: ACKs, NAKs, duplicates; split at an arbitrary point
    link = Link()
    cut = data[0] % (len(data) + 1) if data else 0
    frames = link.receive(data[:cut], 0.0) + link.receive(data[cut:], 0.001)
    for frame in frames:
        assert frame.type not in (m.Msg.ACK, m.Msg.NAK), "a control frame was delivered"
    link.take_output()
    # every payload parser on the bytes after the first magic (or all of them)
    start = data.find(MAGIC)
    payload = data[start + 2 :] if start >= 0 else data
    for name, parse in PAYLOAD_PARSERS.items():
        try:
            parse(payload)
        except m.PayloadError as error:
            text = str(error)
            assert text and text[0].isalpha(), f"{name}: an unclear refusal: {text!r}"


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def fuzz_scenario(data: bytes) -> None:
    """A scenario file (either kind): parsed, or refused naming the file and the line."""
    text = _decoded(data)
    kind = sorted(KIND_STEPS)[data[0] % len(KIND_STEPS)] if data else "shoe"
    try:
        scenario = Scenario.parse(text, kind, "fuzz.jsonl")
    except ScenarioError as error:
        message = str(error)
        assert message.startswith("fuzz.jsonl:"), f"the refusal names no file: {message!r}"
    else:
        assert all(step.at >= 0 for step in scenario.steps)
    try:
        for decision in replay(io.StringIO(text)):
            assert {"decision", "rule", "rule_id", "at", "reason"} <= decision.keys()
            if decision["decision"] == "rejected":
                assert decision.get("error"), "a rejection without an error"
    except ReplayError as error:
        message = str(error)
        assert message.startswith("line "), f"the refusal names no line: {message!r}"


def fuzz_events(data: bytes) -> None:
    """A table line, then arbitrary JSON values as events: only decisions, never a crash."""
    lines = [json.dumps({"type": "table", "game": _GAMES[data[0] % 4] if data else _GAMES[0]})]
    # the seeds' own table lines would stop the replay at once ("a second table line")
    lines += [line for line in _decoded(data).splitlines() if '"table"' not in line]
    fuzz_scenario("\n".join(lines).encode())


_GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
_CONFIG_DIR = Path(tempfile.gettempdir()) / f"tablectl-fuzz-{os.getpid()}"


def fuzz_config(data: bytes) -> None:
    """A table's TOML file: a configuration, or ConfigError naming the file and the key."""
    _CONFIG_DIR.mkdir(exist_ok=True)
    path = _CONFIG_DIR / "table.toml"
    path.write_bytes(data)
    try:
        config = load_config(path)
    except ConfigError as error:
        assert error.problems, "a ConfigError with no problem"
        for problem in error.problems:
            assert problem.startswith(f"{path}: "), f"the refusal names no file: {problem!r}"
            assert len(problem) > len(str(path)) + 4, f"an empty refusal: {problem!r}"
    else:
        assert config.game in _GAMES


TARGETS: dict[str, Callable[[bytes], None]] = {
    "protocol": fuzz_protocol,
    "scenario": fuzz_scenario,
    "events": fuzz_events,
    "config": fuzz_config,
}
