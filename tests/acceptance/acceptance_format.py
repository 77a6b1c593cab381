"""Read an acceptance scenario file and compare a replay's decisions with it.

See tests/acceptance/README.md for the comment-line syntax (#>, #~, #?, #!).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIO_DIR = Path(__file__).parent / "scenarios"
COMPARED_EXTRAS = ("position", "deck")


@dataclass
class ScenarioFile:
    path: Path
    table: dict[str, Any]
    events: dict[int, dict[str, Any]]  # line number -> event
    expected: list[dict[str, Any]]
    optional: list[dict[str, Any]]
    open_points: list[str]
    exit_status: int | None = None
    exit_line: int | None = None  # `#! exit 2 at line 7`: the message must name line 7
    hidden: list[tuple[str, int]] = field(default_factory=list)  # (card, before line)


def parse_scenario(path: Path) -> ScenarioFile:
    """Parse one file; raise ValueError naming the line for anything malformed."""
    lines = path.read_text().splitlines()
    if not lines:
        raise ValueError(f"{path}: empty file")
    table = json.loads(lines[0])
    if table.get("type") != "table":
        raise ValueError(f"{path}:1: the first line must be the table")
    sc = ScenarioFile(path, table, {}, [], [], [])
    for number, raw in enumerate(lines[1:], start=2):
        text = raw.strip()
        where = f"{path.name}:{number}"
        if not text:
            continue
        if text.startswith("#>") or text.startswith("#~"):
            record = json.loads(text[2:])
            for key in ("at", "decision", "rule_id"):
                if key not in record:
                    raise ValueError(f"{where}: expectation lacks {key!r}")
            (sc.expected if text.startswith("#>") else sc.optional).append(record)
        elif text.startswith("#?"):
            sc.open_points.append(text[2:].strip())
        elif text.startswith("#!"):
            words = text[2:].split()
            if words[:1] == ["exit"] and len(words) == 2:
                sc.exit_status = int(words[1])
            elif words[:1] == ["exit"] and len(words) == 5 and words[2:4] == ["at", "line"]:
                sc.exit_status, sc.exit_line = int(words[1]), int(words[4])
            elif words[:1] == ["hidden"] and len(words) == 4 and words[2] == "before":
                sc.hidden.append((words[1], int(words[3])))
            else:
                raise ValueError(f"{where}: unknown directive {text!r}")
        elif text.startswith("#"):
            continue
        else:
            event = json.loads(text)
            if not isinstance(event, dict) or "type" not in event:
                raise ValueError(f"{where}: an event needs a 'type'")
            sc.events[number] = event
    return sc


def _one_of(wanted: Any, actual: Any) -> bool:
    if isinstance(wanted, list):
        return actual in wanted
    return bool(wanted == actual)


def matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    if not _one_of(expected["at"], actual.get("at")):
        return False
    if expected["decision"] != actual.get("decision"):
        return False
    if expected["rule_id"] != "*" and not _one_of(expected["rule_id"], actual.get("rule_id")):
        return False
    return all(
        str(expected[key]) == str(actual.get(key)) for key in COMPARED_EXTRAS if key in expected
    )


def compare(sc: ScenarioFile, actual: list[dict[str, Any]]) -> list[str]:
    """Problems found, empty when the decisions are exactly the expected ones.

    Required decisions must all appear, in order; optional ones may appear where
    they are declared; nothing else may appear.
    """
    problems: list[str] = []
    pending = 0
    used_optional: set[int] = set()
    for decision in actual:
        if pending < len(sc.expected) and matches(sc.expected[pending], decision):
            pending += 1
            continue
        optional = next(
            (
                i
                for i, record in enumerate(sc.optional)
                if i not in used_optional and matches(record, decision)
            ),
            None,
        )
        if optional is not None:
            used_optional.add(optional)
            continue
        waiting = sc.expected[pending] if pending < len(sc.expected) else None
        problems.append(
            f"unexpected {brief(decision)}"
            + (f" while waiting for {json.dumps(waiting)}" if waiting else "")
        )
    for record in sc.expected[pending:]:
        problems.append(f"missing {json.dumps(record)}")
    return problems


def hidden_card_leaks(sc: ScenarioFile, actual: list[dict[str, Any]]) -> list[str]:
    """H7: a face-down card named in a decision caused before its reveal."""
    leaks = []
    for card, before in sc.hidden:
        spellings = {card, "10" + card[1]} if card[0] == "T" else {card}
        pattern = re.compile(
            "|".join(rf"(?<![A-Za-z0-9]){re.escape(s)}(?![A-Za-z0-9])" for s in spellings)
        )
        for decision in actual:
            at = decision.get("at")
            if isinstance(at, int) and at < before and pattern.search(json.dumps(decision)):
                leaks.append(f"face-down {card} named before line {before}: {brief(decision)}")
    return leaks


def brief(decision: dict[str, Any]) -> str:
    keys = ("at", "decision", "rule_id", *COMPARED_EXTRAS)
    shown = {k: decision[k] for k in keys if k in decision}
    reason = decision.get("reason")
    return json.dumps(shown) + (f"  ({reason})" if reason else "")


def scenario_paths() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.jsonl"))
