"""Shuffle integrity (Q1, Q2; 2C.4(a), 40.4(a), 39.4(a): "randomly intermixed"): one of the
Engine's rule families.

It tells the statistics of controller/engine/shuffle_integrity.py (``ShuffleWatch``) when a
shuffled deck goes into play and which cards an ended round dealt, and turns their findings
into decisions. Only an ended round's cards go in (never the round in play: H7); a finding
names rounds and a statistic, never a card, and blocks nothing: surveillance is told.
"""

from __future__ import annotations

from typing import Any

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.family import Table
from tablectl.controller.engine.shuffle_integrity import ShuffleWatch


class ShuffleIntegrity:
    """The table's shuffle watch, or none (off, or a shoe never shuffled whole)."""

    __slots__ = ("ended", "table", "watch")

    def __init__(self, table: Table, watch: ShuffleWatch | None) -> None:
        self.table = table
        self.watch = watch  # the engine's ``shuffle_watch`` (a floor check may swap it)
        #: when a list: each round that ends appends its dealt cards (face-down ones included:
        #: journal-grade), watch or no watch. The table service sets it around each live event
        #: to hand its floor summaries the round ends (floor/summary.TableSummaries); never
        #: snapshotted.
        self.ended: list[list[dict[str, Any]]] | None = None

    def round_ended(self, deck: str, round_number: int, cards: list[str]) -> list[Decision]:
        """Q1, Q2: the ended round's cards, in the order they left the shoe, to the watch."""
        watch = self.watch
        if watch is None:
            return []
        table = self.table
        decisions: list[Decision] = []
        for finding in watch.round_ended(deck, round_number, cards):
            decisions.append(
                table._d("shuffle_suspect", finding.rule_id, finding.reason, **finding.extras())
            )
            decisions.append(table._notify(finding.rule_id, finding.reason))
        return decisions

    def new_order(self, deck: str, whole: bool) -> None:
        """Q1, Q2: a shuffled deck goes into play. Only a whole deck's shuffle is compared
        with the deal before it (G5's reshuffled rack is a part: its pairs tell nothing)."""
        watch = self.watch
        if watch is not None:
            if whole:
                watch.shuffled(deck)
            else:
                watch.partial_shuffle(deck)
