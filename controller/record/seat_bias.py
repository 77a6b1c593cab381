"""Q3, a biased seat (docs/shuffle-integrity.md): the players' cards of a gaming day's ended
rounds, by position, from the journal; the statistic is shuffle_integrity.seat_bias.

A segment of the journal is one gaming day. It is replayed through the engine from its
table row (or its first checkpoint), as `journal show` rebuilds a round, and each round's
cards are taken once that round is over — collected, or followed by the next round — never
while it is in play (H7): the round a live segment ends in is left out.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.controller.engine.shuffle_integrity import seat_bias
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    JournalError,
    ReplayedDraws,
    engine_from_checkpoint,
    engine_from_table_row,
    read_rows,
)


def ended_player_cards(path: str | Path) -> Iterator[tuple[int, str]]:
    """(position, card) for every card a player position received in an ended round."""
    rows = read_rows(path)
    draws = ReplayedDraws(())
    engine: Any = None
    table: dict[str, Any] | None = None
    held: list[dict[str, Any]] = []  # the round in play's cards (yielded once it is over)
    held_round = 0
    pending = None
    for row in itertools.chain(rows, [None]):
        if row is not None and row.kind == "table":
            table = row.body
            engine = engine_from_table_row(table, draws)
            continue
        if row is not None and row.kind == "checkpoint" and engine is not None and not held:
            if table is not None and engine.round_number == 0:
                engine = engine_from_checkpoint(table, row.body["engine"], draws)
            continue
        if row is not None and row.kind == "note" and row.body.get("type") == RANDOM_DRAW:
            draws.extend([row.body])
            continue
        if row is not None and row.kind != "event":
            continue
        if pending is not None and engine is not None:
            engine.handle(pending.body, pending.seq)
            cards = engine.dealt_cards()
            if engine.round_number != held_round or not cards:
                # the round held is over (the next began, or its cards were collected)
                yield from _players(held)
                held = []
            held_round = engine.round_number
            if cards:
                held = cards
        pending = row
    if engine is None:
        raise JournalError(f"{path}: no table row: the journal does not say which game it holds")


def _players(cards: list[dict[str, Any]]) -> Iterator[tuple[int, str]]:
    for entry in cards:
        if isinstance(entry.get("to"), int):
            yield entry["to"], entry["card"]


def day_report(path: str | Path) -> dict[str, Any]:
    """Q3 for the gaming day a segment holds: the chi-square, or why it could not be tested."""
    table = next((r.body for r in read_rows(path) if r.kind == "table"), None)
    if table is None:
        raise JournalError(f"{path}: no table row: the journal does not say which game it holds")
    engine = engine_from_table_row(table, ReplayedDraws(()))
    dealt = list(ended_player_cards(path))
    result = seat_bias(engine.composition.copies, dealt)
    counts: dict[int, int] = {}
    for position, _card in dealt:
        counts[position] = counts.get(position, 0) + 1
    return {
        "path": str(path),
        "game": table.get("game"),
        "cards": len(dealt),
        "by_position": dict(sorted(counts.items())),
        "test": result,
    }
