"""Logging: structured fields for journald, a readable console on a terminal, JSON lines elsewhere.

Under systemd (`JOURNAL_STREAM` names our stderr) each line goes to journald over its native
protocol (systemd.journal-fields(7), the datagram socket /run/systemd/journal/socket): every
field of the line is a journal field (EVENT, DEVICE, RULE_ID, TABLE, ...: `journalctl -u
tablectl@T DEVICE=shoe` finds them), MESSAGE is a readable sentence, PRIORITY the level, and
journald stamps the time. Should the socket refuse a line, it goes to stderr as `<N>{json}` (the
priority prefix journald reads from a stream). Elsewhere, a TTY gets structlog's console
renderer and a pipe gets timestamped JSON lines.

Face-down cards must never reach a logger (docs/rules.md H7); callers never pass them. As a guard
in addition, `strip_cards` runs on every line: it removes fields whose name says they hold
cards and masks any value shaped like a card, and names what it removed in `redacted`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from tablectl.controller.engine.cards import CARD_WORD_MASK, mask_card_words

LogMode = Literal["auto", "journald", "console", "json"]

# syslog(3) priorities, which journald reads from a `<N>` line prefix.
SYSLOG_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2, "exception": 3}
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

# Field names that hold cards by their nature (docs/events.md: card, cards; dealt cards).
CARD_FIELDS = frozenset(
    {"card", "cards", "hole_card", "dealt_cards", "hand", "hands", "deck_order", "order", "stack"}
)
CARD_VALUE = re.compile(r"^(?:10|[2-9TJQKA])[cdhs]$|^JK$")
REDACTED = "[redacted]"
# Card-shaped substrings of free text (an exception's message, a traceback, a device's text):
# any spelling in quotes ('AH', "10h", 'jk'), and the canonical spelling standing alone (Ah,
# Td, JK). Unquoted upper-case pairs (AC, AD) are left: too often words. See mask_card_text.
CARD_TEXT = re.compile(
    r"""(?P<q>['"])(?:10|[2-9TJQKAtjqka])[cdhsCDHS](?P=q)"""
    r"""|(?P<qj>['"])[Jj][Kk](?P=qj)"""
    r"|(?<![\w.])(?:10|[2-9TJQKA])[cdhs](?!\w)"
    r"|(?<![\w.])JK(?!\w)"
)
CARD_MASK = CARD_WORD_MASK


def mask_card_text(text: str) -> str:
    """`text` with every card-shaped substring replaced by [card] (the second guard of H7)."""
    return CARD_TEXT.sub(CARD_MASK, text)


# A device's own words (docs/events.md `fault`, `detail`): every card-shaped word in them is
# masked whatever its case (cards.mask_card_words), not only the canonical spelling.
DEVICE_TEXT_FIELDS = frozenset({"fault", "detail"})


def _mask(value: Any, path: str, removed: list[str]) -> Any:
    if isinstance(value, str):
        if CARD_VALUE.match(value.strip()):
            removed.append(path)
            return REDACTED
        if path.rpartition(".")[2] in DEVICE_TEXT_FIELDS:
            masked = mask_card_words(value)  # any case: it covers mask_card_text's shapes
        else:
            masked = mask_card_text(value)
        if masked != value:
            removed.append(path)
        return masked
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            sub_path = f"{path}.{key}"
            if str(key) in CARD_FIELDS:
                removed.append(sub_path)
                continue
            result[key] = _mask(item, sub_path, removed)
        return result
    if isinstance(value, list | tuple | set | frozenset):
        return [_mask(item, f"{path}[]", removed) for item in value]
    return value


def strip_cards(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: drop card fields and mask card-shaped values, at any depth."""
    removed: list[str] = []
    for key in list(event_dict):
        if key in CARD_FIELDS:
            del event_dict[key]
            removed.append(key)
        else:
            event_dict[key] = _mask(event_dict[key], key, removed)
    if removed:
        event_dict["redacted"] = sorted(set(removed))
    return event_dict


def public_view(value: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a mapping with card fields and card-shaped values removed (for status output)."""
    removed: list[str] = []
    result = _mask(value, "", removed)
    assert isinstance(result, dict)
    return result


def journald_is_reader(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """True when `stream` is the journal stream systemd gave us (JOURNAL_STREAM=dev:inode)."""
    value = environ.get("JOURNAL_STREAM", "")
    if not value:
        return False
    try:
        device_text, inode_text = value.split(":", 1)
        stat = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (stat.st_dev, stat.st_ino) == (int(device_text), int(inode_text))


class JournaldRenderer:
    """Renders `<priority>{json}`; the time comes from journald."""

    def __init__(self) -> None:
        self._json = structlog.processors.JSONRenderer(sort_keys=False)

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        priority = SYSLOG_PRIORITY.get(str(event_dict.get("level", method_name)), 6)
        rendered = self._json(logger, method_name, event_dict)
        text = rendered.decode() if isinstance(rendered, bytes) else rendered
        return f"<{priority}>{text}"


#: journald's socket for the native protocol (sd_journal_send(3) writes here).
JOURNAL_SOCKET = "/run/systemd/journal/socket"
#: What journald files the lines under (`journalctl -t tablectl`).
SYSLOG_IDENTIFIER = "tablectl"
#: Fields of every line that are not the line's own (the level is PRIORITY; the event
#: name is in MESSAGE and EVENT).
_NOT_FIELDS = frozenset({"level"})


def journal_field_name(key: str) -> str:
    """A journal field name for a log key: upper case, A-Z 0-9 _ only, never a leading
    underscore (those are journald's trusted fields) or digit, at most 64 characters."""
    name = re.sub(r"[^A-Z0-9_]", "_", key.upper()).lstrip("_")
    if not name or name[0].isdigit():
        name = "F_" + name
    return name[:64]


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, default=str, sort_keys=True)


def readable_message(event_dict: Mapping[str, Any]) -> str:
    """The line as a sentence: `connect failed: device shoe, error [Errno 2] ..., attempt 3`."""
    event = str(event_dict.get("event", "")).replace("_", " ")
    details = [
        f"{key.replace('_', ' ')} {_field_text(value)}"
        for key, value in event_dict.items()
        if key not in ("event", "level", "logger", "table", "exception")
    ]
    text = f"{event}: {', '.join(details)}" if details else event
    if "exception" in event_dict:
        text += "\n" + str(event_dict["exception"])
    return text


def journal_datagram(event_dict: Mapping[str, Any], priority: int) -> bytes:
    """One native-protocol datagram: `NAME=value` lines, or NAME, a little-endian 64-bit
    length and the bytes for a value holding a newline (systemd's journal-native protocol)."""
    fields: list[tuple[str, str]] = [
        ("MESSAGE", readable_message(event_dict)),
        ("PRIORITY", str(priority)),
        ("SYSLOG_IDENTIFIER", SYSLOG_IDENTIFIER),
    ]
    for key, value in event_dict.items():
        if key not in _NOT_FIELDS:
            fields.append((journal_field_name(str(key)), _field_text(value)))
    out = bytearray()
    for name, value in fields:
        data = value.encode("utf-8", "replace")
        if b"\n" in data:
            out += name.encode() + b"\n" + len(data).to_bytes(8, "little") + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return bytes(out)


class JournalLogger:
    """structlog's logger for journald: sends each line to the journal socket, and to the
    stream as `<N>{json}` should the socket refuse it (absent, full, a line too large)."""

    def __init__(self, address: str, stream: TextIO) -> None:
        self.address = address
        self.stream = stream
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def msg(self, event_dict: Mapping[str, Any], priority: int) -> None:
        try:
            self._socket.sendto(journal_datagram(event_dict, priority), self.address)
        except OSError:
            line = json.dumps(dict(event_dict), default=str)
            print(f"<{priority}>{line}", file=self.stream, flush=True)

    debug = info = warning = warn = error = critical = exception = fatal = failure = err = msg
    log = msg


class JournalRenderer:
    """The last processor under journald: the line's fields and priority for JournalLogger."""

    def __call__(
        self, logger: WrappedLogger, method_name: str, event_dict: EventDict
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        priority = SYSLOG_PRIORITY.get(str(event_dict.get("level", method_name)), 6)
        return (event_dict, priority), {}


def journal_socket_usable(path: str) -> bool:
    """journald listens on `path` (a datagram socket that accepts an empty message)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


class RepeatedFailure:
    """A failure that repeats (a device absent, retried every few seconds) is logged the first
    time, then at growing intervals with how many times it happened since, as peer daemons
    (chrony, gpsd) do: 1, 2, 4 ... minutes up to an hour, not a line per retry. A different
    failure (another error text) or a success starts it over."""

    def __init__(self, first: float = 60.0, factor: float = 2.0, longest: float = 3600.0) -> None:
        self.first, self.factor, self.longest = first, factor, longest
        self._what: str | None = None
        self._next_at = 0.0
        self._interval = first
        self._since = 0

    def record(self, what: str, now: float | None = None) -> int | None:
        """None: do not log this one. Else log it, with this count of occurrences since the
        last line (1 the first time)."""
        now = time.monotonic() if now is None else now
        if what != self._what:
            self._what, self._interval, self._since = what, self.first, 0
            self._next_at = now
        self._since += 1
        if now < self._next_at:
            return None
        count, self._since = self._since, 0
        self._next_at = now + self._interval
        self._interval = min(self.longest, self._interval * self.factor)
        return count

    def reset(self) -> None:
        self._what = None


def resolve_mode(mode: LogMode, stream: TextIO, environ: Mapping[str, str] = os.environ) -> LogMode:
    if mode != "auto":
        return mode
    if journald_is_reader(stream, environ):
        return "journald"
    return "console" if stream.isatty() else "json"


def configure_logging(
    level: str = "info",
    *,
    mode: LogMode = "auto",
    stream: TextIO | None = None,
    environ: Mapping[str, str] = os.environ,
    journal_socket: str = JOURNAL_SOCKET,
) -> LogMode:
    """Configure structlog process-wide; returns the mode chosen ("auto" resolved).

    "journald": the native protocol to `journal_socket` when journald listens there, else
    `<N>{json}` lines on the stream."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    output = stream if stream is not None else sys.stderr
    chosen = resolve_mode(mode, output, environ)
    # Tracebacks are rendered to text before strip_cards, so an exception's message that
    # quotes a card is masked like any other free text.
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.format_exc_info,
        strip_cards,
    ]
    logger_factory: Any = structlog.PrintLoggerFactory(file=output)
    if chosen == "journald" and journal_socket_usable(journal_socket):
        journal = JournalLogger(journal_socket, output)
        processors += [JournalRenderer()]
        logger_factory = lambda *args: journal  # noqa: E731  (one sender for every logger)
    elif chosen == "journald":
        processors += [JournaldRenderer()]
    elif chosen == "console":
        processors += [
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(colors=False),
        ]
    else:
        processors += [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=logger_factory,
        cache_logger_on_first_use=False,
    )
    return chosen


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger bound to a component name (e.g. "journal", "operator")."""
    return structlog.get_logger().bind(logger=name, **context)


__all__ = [
    "CARD_FIELDS",
    "RepeatedFailure",
    "configure_logging",
    "get_logger",
    "journald_is_reader",
    "mask_card_text",
    "public_view",
    "strip_cards",
]
