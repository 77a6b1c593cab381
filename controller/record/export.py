"""`tablectl journal export`: the journal's rounds, decisions and device faults as records.

For a spreadsheet (CSV) or a script (JSON lines). Built on the journal's reading API
(`read_rows`, and the engine rebuilt from the table row, or from the checkpoint a later gaming
day's segment opens with, and the journaled random draws, as
`round_cards` does) in one pass, so a long journal is exported in linear time.

Cards (H7): a round's cards appear only once the round is over (collected, or followed by a
later round), and only for a caller who may read the journal file itself (it is the
service's, mode 0600); `--no-cards` leaves them out for anyone. The round in progress never
shows a card, face down or not.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablectl.controller.engine.cards import mask_card_words
from tablectl.controller.engine.gaming_day import gaming_day_of, parse_start
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    EngineLike,
    JournalError,
    ReplayedDraws,
    engine_from_checkpoint,
    engine_from_table_row,
    hands_in_deal_order,
    read_rows,
)

#: the columns of the CSV form, in order (the JSON lines carry the same keys)
COLUMNS = (
    "record",
    "gaming_day",
    "round",
    "time",
    "outcome",
    "positions",
    "decision",
    "rule_id",
    "rule",
    "reason",
    "device",
    "fault",
    "cards",
)


def gaming_day(stamp: object, start: datetime.time) -> str:
    """The gaming day (YYYY-MM-DD) of an event's local time; "" when it has no time."""
    try:
        moment = datetime.datetime.fromisoformat(str(stamp))
    except ValueError:
        return ""
    return gaming_day_of(moment, start).isoformat()


@dataclass
class _Round:
    number: int
    started: str
    positions: list[int] = field(default_factory=list)
    ended: str = ""
    voided: bool = False
    cards: list[dict[str, Any]] = field(default_factory=list)
    # the journal went on to a later round that this replay's engine did not open (a journal
    # written before issue 22): the engine's cards are not this round's
    diverged: bool = False
    left: str = ""  # when a later round began with this one neither collected nor void


#: the round record's outcome: what the journal recorded for it (docs/journal.md)
COMPLETED, VOIDED, NO_OUTCOME, IN_PROGRESS = "completed", "voided", "no outcome", "in progress"
#: decisions that end a round void (docs/rules.md: void_round; H2's hands_dead)
VOID_DECISIONS = frozenset({"void_round", "hands_dead"})


def _cards_text(cards: list[dict[str, Any]]) -> str:
    """`position 1: As Kd 7c; dealer: Th 2s` in the order each hand was dealt."""
    return "; ".join(
        f"{name}: {' '.join(str(card['card']) for card in hand)}"
        for name, hand in hands_in_deal_order(cards)
    )


def export_records(
    path: str | Path, *, day: str | None = None, cards: bool = True
) -> Iterator[dict[str, Any]]:
    """Records in journal order: each decision and device fault as it happened, and each
    round once it is over (or, still open, at the end without cards)."""
    rest = list(read_rows(path))
    # A journal opens with its table row; a later gaming day's segment with its segment row,
    # the table row and the checkpoint the engine goes on from (Journal.roll_over).
    table = checkpoint = None
    for row in rest:
        if row.kind == "event":
            break
        if row.kind == "table":
            table = row
        elif row.kind == "checkpoint":
            checkpoint = row
    if table is None:
        raise JournalError(f"{path}: no table row: the journal does not say which game it holds")
    start = parse_start(str(table.body.get("options", {}).get("gaming_day_start", "06:00")))
    draws = ReplayedDraws(
        [r.body for r in rest if r.kind == "note" and r.body.get("type") == RANDOM_DRAW]
    )
    engine: EngineLike = (
        engine_from_checkpoint(table.body, checkpoint.body["engine"], draws)
        if checkpoint is not None
        else engine_from_table_row(table.body, draws)
    )

    def record(kind: str, **values: Any) -> dict[str, Any]:
        return {column: values.get(column, "") for column in COLUMNS} | {"record": kind}

    def wanted(stamp: str) -> bool:
        return day is None or gaming_day(stamp, start) == day

    def finished(played: _Round) -> dict[str, Any]:
        # completed only when a collection of it was taken; void when a void was decided;
        # a round replaced with neither is never reported completed (issue 22)
        if played.voided:
            outcome = VOIDED
        elif played.ended:
            outcome = COMPLETED
        else:
            outcome = NO_OUTCOME
        return record(
            "round",
            gaming_day=gaming_day(played.started, start),
            round=played.number,
            time=played.ended or played.left,
            outcome=outcome,
            positions=" ".join(str(p) for p in played.positions),
            cards=_cards_text(played.cards) if cards and not played.diverged else "",
        )

    current: _Round | None = None
    reported = False  # the current round's record is out
    event: dict[str, Any] = {}
    for row in rest:
        if row.kind == "event":
            if current is not None and current.ended and not reported:
                reported = True  # its collection was accepted (no rejection followed)
                if wanted(current.started):
                    yield finished(current)
            event = row.body
            stamp = str(event.get("time", ""))
            if (
                current is not None
                and row.round is not None
                and row.round > current.number
                and not reported
            ):
                # the journal's own round moved on (its rows carry the round in play) while
                # this replay's engine did not: a journal written before issue 22, whose
                # engine let an event replace a round. That round ended with no outcome.
                current.left = stamp
                if wanted(current.started):
                    yield finished(current)
                current, reported = _Round(row.round, stamp, diverged=True), False
            before = engine.round_number
            engine.handle(row.body, row.seq)
            if engine.round_number > before:
                if current is not None and not reported and wanted(current.started):
                    current.left = stamp
                    yield finished(current)  # a later round began: its outcome, or none
                current, reported = _Round(engine.round_number, stamp), False
            if current is not None and not reported and event.get("type") == "hands_collected":
                current.ended = stamp  # undone if a rejection of it follows
            if current is not None and current.number == engine.round_number:
                if event.get("type") == "bets_closed" and isinstance(event.get("positions"), list):
                    current.positions = list(event["positions"])
                dealt = engine.dealt_cards()
                if dealt:  # the engine forgets them at the collection: keep the last view
                    current.cards = dealt
            kind = str(event.get("type"))
            if kind.endswith("_fault") and wanted(str(event.get("time", ""))):
                yield record(
                    "device_fault",
                    gaming_day=gaming_day(event.get("time"), start),
                    round=engine.round_number,
                    time=event.get("time", ""),
                    device=event.get("device") or kind.split("_")[0],
                    fault=mask_card_words(str(event.get("fault", ""))),  # the device's (H7)
                )
        elif row.kind == "decision":
            decision = row.body
            name = decision.get("decision")
            if current is not None and not reported:
                if name in VOID_DECISIONS:
                    current.voided = True
                if name == "rejected" and event.get("type") == "hands_collected":
                    current.ended = ""  # the collection was refused: the round goes on
            stamp = str(event.get("time", ""))
            if wanted(stamp):
                yield record(
                    "decision",
                    gaming_day=gaming_day(stamp, start),
                    round=engine.round_number,
                    time=stamp,
                    decision=name,
                    rule_id=decision.get("rule_id", ""),
                    rule=decision.get("rule", ""),
                    reason=decision.get("reason", ""),
                )
    if current is not None and not reported and wanted(current.started):
        if current.ended or current.voided:
            yield finished(current)
        else:
            yield finished(current) | {"outcome": IN_PROGRESS, "cards": ""}
