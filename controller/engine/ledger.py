"""The card ledger: every card of a deck is in exactly one place at every moment.

Places are strings: ``shoe`` (the shuffler, the shoe or the dealer's undealt stack),
a position number (``"1"`` ...), ``player`` (a hit whose position no device reports),
``dealer``, ``community``, ``burned``, ``discard`` (the discard rack) and ``removed``.
Cards never appear twice or vanish: a move from a place that does not hold the card is
refused, which is how a foreign or duplicated card is found (C8).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from tablectl.controller.engine.cards import Composition

SHOE = "shoe"
DISCARD = "discard"
BURNED = "burned"
REMOVED = "removed"
DEALER = "dealer"
COMMUNITY = "community"


class LedgerError(ValueError):
    """A move the ledger cannot make, or a broken conservation law."""


class Ledger:
    """Where each card of one deck (or one multi-deck shoe) is."""

    __slots__ = ("composition", "places")

    def __init__(self, composition: Composition) -> None:
        self.composition = composition
        self.places: dict[str, Counter[str]] = {SHOE: composition.as_counter()}

    def count(self, place: str) -> int:
        held = self.places.get(place)
        return 0 if held is None else held.total()

    def holds(self, place: str, card: str) -> int:
        held = self.places.get(place)
        return 0 if held is None else held[card]

    def move(self, card: str, source: str, target: str) -> None:
        """Move one copy of ``card``; refuses when ``source`` does not hold it."""
        held = self.places.get(source)
        if held is None or held[card] <= 0:
            # No card in the message: it may be face down, and an exception's text can reach
            # a log line through a traceback (docs/rules.md H7). The journal holds the card.
            raise LedgerError(f"the card moved from {source} to {target} is not in {source}")
        held[card] -= 1
        if held[card] == 0:
            del held[card]
        into = self.places.get(target)
        if into is None:
            into = self.places[target] = Counter()
        into[card] += 1

    def move_all(self, source: str, target: str) -> int:
        """Move every card of ``source`` to ``target``; returns how many moved."""
        held = self.places.pop(source, None)
        if not held:
            return 0
        self.places.setdefault(target, Counter()).update(held)
        return held.total()

    def gather(self, target: str, keep: tuple[str, ...] = (REMOVED,)) -> int:
        """Move every card not in ``keep`` to ``target`` (a reshuffle, a collection)."""
        moved = 0
        for place in [p for p in self.places if p != target and p not in keep]:
            moved += self.move_all(place, target)
        return moved

    def in_play(self, excluded: tuple[str, ...] = (SHOE, DISCARD, REMOVED)) -> int:
        """Cards out of the shoe and not yet in the rack: those on the layout."""
        return sum(c.total() for p, c in self.places.items() if p not in excluded)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """Where each card is, as plain data in a canonical order (Engine.snapshot)."""
        return {
            place: {card: held[card] for card in sorted(held)}
            for place in sorted(self.places)
            if (held := self.places[place])
        }

    @classmethod
    def from_dict(cls, composition: Composition, places: Mapping[str, Mapping[str, int]]) -> Ledger:
        """The ledger ``as_dict`` described; refused unless every card is in one place."""
        ledger = cls(composition)
        ledger.places = {}
        for place, held in places.items():
            if not isinstance(held, Mapping) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in held.values()
            ):
                raise LedgerError(f"place {place!r}: card counts must be positive whole numbers")
            ledger.places[str(place)] = Counter({str(card): n for card, n in held.items()})
        ledger.check()
        return ledger

    def check(self) -> None:
        """Raise LedgerError unless every card is in exactly one place (conservation)."""
        total: Counter[str] = Counter()
        for place, held in self.places.items():
            if any(n < 0 for n in held.values()):
                raise LedgerError(f"negative count in {place}")
            total.update(held)
        if total != self.composition.as_counter():
            missing = self.composition.as_counter() - total
            extra = total - self.composition.as_counter()
            raise LedgerError(
                f"conservation broken: {sum(missing.values())} card(s) missing, "
                f"{sum(extra.values())} extra (not named: they may be face down, H7)"
            )
