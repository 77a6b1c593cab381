"""Logging: structlog JSON lines for journald, a readable console on a terminal.

Under systemd (`JOURNAL_STREAM` names our stderr) each line is `<N>{json}`: journald reads the
syslog priority prefix and stamps the time itself, so no timestamp is written. Elsewhere, a TTY
gets structlog's console renderer and a pipe gets timestamped JSON lines.

Face-down cards must never reach a logger (docs/rules.md H7); callers never pass them. As a guard
in addition, `strip_cards` runs on every line: it removes fields whose name says they hold
cards and masks any value shaped like a card, and names what it removed in `redacted`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
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
) -> LogMode:
    """Configure structlog process-wide; returns the mode chosen ("auto" resolved)."""
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
    if chosen == "journald":
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
        logger_factory=structlog.PrintLoggerFactory(file=output),
        cache_logger_on_first_use=False,
    )
    return chosen


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger bound to a component name (e.g. "journal", "operator")."""
    return structlog.get_logger().bind(logger=name, **context)


__all__ = [
    "CARD_FIELDS",
    "configure_logging",
    "get_logger",
    "journald_is_reader",
    "mask_card_text",
    "public_view",
    "strip_cards",
]
