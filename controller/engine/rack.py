"""The discard rack (13:69E-1.10D(e); 40.2(b)5, 39.2(b)5): one of the Engine's rule families.

The rack's sensor level, the deck whose cards lie in it (D2: one deck at a time) and the rise
a collection should show at the next reading (R1). Pure: the engine routes the rack's events
here and asks it at a collection, a shuffle and "no more bets"; decisions are made through the
engine (its citations), and a game's own rules on the level (G4, G7) are its ``RackRules``
(hooks.py), ``engine.rack_rules``.
"""

from __future__ import annotations

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.family import Table


class DiscardRack:
    """What the engine knows of the discard rack; the snapshot carries each field by the
    engine's name for it (``rack_level`` ... ``rack_seen``)."""

    __slots__ = ("baseline", "deck", "direct", "engine", "expected_min", "level", "seen")

    def __init__(self, engine: Table) -> None:
        self.engine = engine
        self.level: int | None = None
        self.baseline: int | None = None
        self.direct = 0  # R1: burn cards put straight into the rack since the baseline
        self.expected_min: int | None = None
        self.deck: str | None = None
        self.seen = False

    def reading(self, level: int) -> list[Decision]:
        """The sensor reads ``level`` cards (``rack_level``; ``rack_cleared`` is 0)."""
        engine = self.engine
        decisions: list[Decision] = []
        engine.device_faults.pop("discard_rack", None)  # the sensor counts again
        self.seen = True
        self.level = level
        if level <= engine.options.rack_tolerance:
            self.deck = None
        decisions += engine.rack_rules.level(level)
        if self.expected_min is not None:
            expected = self.expected_min
            self.expected_min = None
            if level < expected:
                # R1: the rack did not rise by the cards that left the shoe this round.
                decisions.append(
                    engine._notify(
                        "R1",
                        f"the discard rack reads {level} cards, "
                        f"at least {expected} expected: cards unaccounted",
                    )
                )
        if not engine._in_round():
            self.baseline = level
            self.direct = 0
        return decisions

    def deck_check(self, deck_name: str) -> list[Decision]:
        """D2: cards of only one deck in the discard rack at a time."""
        # D2: the rack holds the last collected deck until a shuffle or the sensor empties it.
        engine = self.engine
        decisions: list[Decision] = []
        if engine.options.dual_deck and self.deck not in (None, deck_name):
            decisions += [
                engine._d(
                    "procedure_violation",
                    "D2",
                    f"deck {deck_name}'s cards went to the "
                    f"discard rack before deck {self.deck}'s were cleared",
                ),
                engine._notify("D2", "cards of both decks in the discard rack"),
            ]
        self.deck = deck_name
        return decisions

    def collected(self, deck_name: str, moved: int) -> list[Decision]:
        """A round's ``moved`` cards of ``deck_name`` went to the rack: D2, and R1's rise."""
        decisions = self.deck_check(deck_name) if moved else []
        engine = self.engine
        if self.baseline is not None and engine.interp.reconcile_discard_rack:
            # R1: the rise since the baseline reading: the layout collected now plus the
            # burn cards that went straight into the rack after that reading (2C.6(c));
            # one the reading already held is not counted again.
            rise = moved + self.direct
            self.expected_min = self.baseline + rise - engine.options.rack_tolerance
        return decisions

    def shuffled(self, deck_name: str) -> None:
        """A deck went to the shuffler: the rack no longer holds it, nor expects a rise."""
        if self.deck == deck_name:
            self.deck = None
        self.expected_min = None

    def round_opened(self) -> None:
        """ "No more bets": the last reading is the round's baseline (R1)."""
        if self.level is not None:
            self.baseline = self.level
