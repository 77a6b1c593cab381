"""What the demo prints for a person to follow: one line per step, and a summary from the journal.

Each event the daemon handled becomes one line: when, who (a device or the dealer's
terminal), what happened in plain words, how many cards each hand now holds, and each
decision with its rule ID and reason. Only whitelisted fields of an event are shown (positions,
counts, a deck letter ...): a card is never printed, face down or not (docs/rules.md H7).

The closing summary is counted from the journal's rows of this run, so what the demo says
is what the record holds.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tablectl.controller.engine.cards import mask_card_words
from tablectl.controller.record.journal import JournalRow, read_rows
from tablectl.controller.service.status_words import cards_dealt_line

#: events in plain words; an event not named here is shown by its name, underscores as spaces
EVENT_WORDS: dict[str, str] = {
    "card_drawn": "a card leaves the shoe",
    "stack_dispensed": "the shoe dispenses a hand",
    "shuffle_started": "the shuffler starts",
    "shuffle_completed": "the shuffler has shuffled the deck",
    "shuffler_fault": "the shuffler reports a fault",
    "shoe_loaded": "the deck goes into the shoe",
    "shoe_fault": "the shoe reports a fault",
    "cut_card_reached": "the cut card comes out",
    "reader_result": "the hole-card reader answers",
    "reader_fault": "the hole-card reader reports a fault",
    "rack_fault": "the discard-rack sensor reports a fault",
    "reader_inserted": "the hole card goes into the reader",
    "rack_level": "the discard rack reports its level",
    "device_lost": "a device stops answering",
    "device_connected": "a device answers its handshake",
    "deck_received": "a new deck arrives at the table",
    "reader_inspected": "the floorperson inspects the hole-card reader",
    "bets_closed": "no more bets",
    "starting_position": "the starting position is chosen",
    "deal_completed": "the dealer finishes the deal",
    "stub_counted": "the dealer counts the stub",
    "dealer_changed": "a new dealer takes the table",
    "bonus_settled": "the bonus wagers are settled",
    "insurance_closed": "insurance closes",
    "dealer_turn": "the dealer's turn",
    "dealer_card_exposed": "the dealer exposes a card",
    "misdeal_reported": "a misdeal is reported",
    "hands_collected": "the hands are collected",
    "reshuffle_requested": "a reshuffle is requested",
    "device_removed": "a device is taken off the table",
    "shuffler_empty_confirmed": "the shuffler is confirmed empty",
    "supervisor_ack": "a supervisor acknowledges",
    "controller_restarted": "the controller has restarted",
}

#: fields that never carry a card, shown after the event's words
SHOWN_FIELDS = ("positions", "count", "dice", "number", "deck", "by", "fault", "level", "face_up")


def _fields(event: Mapping[str, Any]) -> str:
    parts = []
    for name in SHOWN_FIELDS:
        if name not in event:
            continue
        value = event[name]
        if name == "face_up":
            if value:
                parts.append("face up")
            continue
        if isinstance(value, list):
            value = ", ".join(str(item) for item in value)
        if name == "fault":  # a device's own word: it may name a card (H7)
            value = mask_card_words(str(value))
        parts.append(f"{name.replace('_', ' ')} {value}")
    return f" ({'; '.join(parts)})" if parts else ""


def decision_words(decision: Mapping[str, Any]) -> str:
    """`discard_card [C1]: the first card found face up ...`: name, rule ID, reason."""
    text = f"{decision.get('decision')} [{decision.get('rule_id')}]"
    reason = decision.get("reason")
    return f"{text}: {reason}" if reason else text


@dataclass
class StepPrinter:
    """A TableService observer printing one line per handled event (`tablectl demo`)."""

    out: TextIO
    cards_dealt: Callable[[], Mapping[str, int]]
    clock: Callable[[], datetime.datetime] = datetime.datetime.now
    _last_dealt: str = field(default="", init=False)

    def __call__(
        self, event: Mapping[str, Any], decisions: list[dict[str, Any]], seconds: float, source: str
    ) -> None:
        kind = str(event.get("type"))
        who = "dealer" if source == "operator" else str(event.get("device") or source)
        words = EVENT_WORDS.get(kind, kind.replace("_", " "))
        line = f"  {self.clock():%H:%M:%S}  {who:<10} {words}{_fields(event)}"
        dealt = cards_dealt_line(self.cards_dealt())
        if kind in ("card_drawn", "stack_dispensed") or dealt != self._last_dealt:
            line += f"  | dealt: {dealt}"
            self._last_dealt = dealt
        if decisions:
            line += "  -> " + "; ".join(decision_words(d) for d in decisions)
        print(line, file=self.out, flush=True)


@dataclass
class RunSummary:
    """What one run of the demo put in the journal, counted from its rows."""

    events: int = 0
    #: every row of the run, and those that are neither events nor decisions, by kind
    rows: int = 0
    other_rows: Counter[str] = field(default_factory=Counter)
    rounds_completed: int = 0
    rounds_voided: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        rounds = self.rounds_completed + self.rounds_voided
        decided = ", ".join(f"{key} x{n}" for key, n in sorted(self.decisions.items())) or "none"
        faults = ", ".join(f"{key} x{n}" for key, n in sorted(self.faults.items())) or "none"
        return [
            f"summary (counted from the journal): {self.events} events, {rounds} rounds ended "
            f"({self.rounds_completed} completed, {self.rounds_voided} voided)",
            f"  decisions by rule: {decided}",
            f"  device faults: {faults}",
        ]

    def counts_explained(self, since_ready: int) -> str:
        """Why the closing lines count events three ways (since ready, handled, journaled)."""
        before = self.events - since_ready
        decided = sum(self.decisions.values())
        others = ", ".join(f"{kind} {n}" for kind, n in sorted(self.other_rows.items()))
        return (
            f"  the counts: {since_ready} events since ready + {before} as the table started "
            f"(before ready) = {self.events} events, each handled by the daemon and journaled; "
            f"the journal's {self.rows} rows of this run are those events, their {decided} "
            f"decision{'s' if decided != 1 else ''}"
            + (f" and rows of other kinds ({others})" if others else "")
        )


def summarise(rows: Iterable[JournalRow], after_seq: int = 0) -> RunSummary:
    """Count the rows after `after_seq` (the journal's last row before this run started).

    A round ended with each `hands_collected` the engine accepted (no `rejected` decision);
    it was voided when a `void_round` was decided since the previous one.
    """
    summary = RunSummary()
    voided = False
    event: Mapping[str, Any] | None = None
    decided: list[str] = []

    def close() -> None:
        nonlocal voided
        if event is None:
            return
        voided = voided or "void_round" in decided
        if event.get("type") == "hands_collected" and "rejected" not in decided:
            if voided:
                summary.rounds_voided += 1
            else:
                summary.rounds_completed += 1
            voided = False

    for row in rows:
        if row.seq <= after_seq:
            continue
        summary.rows += 1
        if row.kind not in ("event", "decision"):
            summary.other_rows[row.kind] += 1
        if row.kind == "event":
            close()
            event, decided = row.body, []
            summary.events += 1
            kind = str(row.body.get("type"))
            if kind.endswith("_fault"):
                device = row.body.get("device") or kind.split("_")[0]
                fault = mask_card_words(str(row.body.get("fault")))  # the device's word (H7)
                summary.faults[f"{device}:{fault}"] += 1
        elif row.kind == "decision":
            name = str(row.body.get("decision"))
            decided.append(name)
            summary.decisions[f"{row.body.get('rule_id')}:{name}"] += 1
    close()
    return summary


def last_seq(path: Path) -> int:
    """The journal's last row number (0 when there is no journal yet)."""
    if not path.exists():
        return 0
    seq = 0
    for row in read_rows(path):
        seq = row.seq
    return seq
