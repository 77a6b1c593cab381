"""Small builders for engine tests: tables, events, and whole rounds."""

from __future__ import annotations

import random
from typing import Any

from tablectl.controller.engine.cards import STANDARD_DECK
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.rules import citation
from tablectl.controller.engine.table import TableSpec


def table(game: str, seed: int = 0, **options: Any) -> Engine:
    return Engine(
        TableSpec.from_dict({"game": game, "options": options}),
        random_source=random.Random(seed).randrange,
    )


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def feed(engine: Engine, *events: dict[str, Any], start: int = 2) -> list[dict[str, Any]]:
    """Events at lines start, start+1, ...; all decisions as dicts."""
    out: list[dict[str, Any]] = []
    for offset, event in enumerate(events):
        out += [d.to_dict() for d in engine.handle(event, start + offset)]
    return out


def cards(n: int, skip: int = 0) -> list[str]:
    return list(STANDARD_DECK[skip : skip + n])


def draws(*names: str, **fields: Any) -> list[dict[str, Any]]:
    return [ev("card_drawn", card=c, **fields) for c in names]


def assert_decision(
    decisions: list[dict[str, Any]], decision: str, rule_id: str, engine: Engine, **extras: Any
) -> dict[str, Any]:
    """The decision is there, with its rule ID and the catalogue's citation for this table."""
    for d in decisions:
        if d["decision"] == decision and d["rule_id"] == rule_id:
            assert d["rule"] == citation(rule_id, engine.game, engine.method)
            for key, value in extras.items():
                assert d[key] == value, (key, d)
            assert d["reason"]
            return d
    raise AssertionError(f"no {decision}/{rule_id} in {decisions}")


def names(decisions: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["decision"], d["rule_id"]) for d in decisions]
