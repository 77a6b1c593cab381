"""How a shuffle can go wrong, for the simulated shuffler and the shuffle-integrity bench.

Each function takes the cards as they went into the shuffler (the discard rack in the order
dealt, then the shoe's stub: simulators/table.py) and returns the order that comes out.
``uniform`` is an honest shuffle; the others are the faults Q1 and Q2 look for
(docs/shuffle-integrity.md): nothing shuffled, one riffle (Gilbert-Shannon-Reeds: a binomial
cut, then cards dropped from each half in proportion to its size), a strip cut alone, and a
stacked deck (an order seen earlier, replayed).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

Shuffle = Callable[[Sequence[str], random.Random], list[str]]


def uniform(cards: Sequence[str], rng: random.Random) -> list[str]:
    out = list(cards)
    rng.shuffle(out)
    return out


def no_shuffle(cards: Sequence[str], rng: random.Random) -> list[str]:
    """The cycle ran but nothing moved (a tampered or broken shuffler, a false shuffle)."""
    return list(cards)


def one_riffle(cards: Sequence[str], rng: random.Random) -> list[str]:
    """One Gilbert-Shannon-Reeds riffle: far from random (Bayer and Diaconis: seven needed)."""
    cut = sum(rng.random() < 0.5 for _ in cards)
    left, right = list(cards[:cut]), list(cards[cut:])
    out: list[str] = []
    i = j = 0
    while i < len(left) or j < len(right):
        rest_left, rest_right = len(left) - i, len(right) - j
        if rng.random() < rest_left / (rest_left + rest_right):
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


def strip_cut(cards: Sequence[str], rng: random.Random) -> list[str]:
    """A cut alone: the order kept but for where it starts."""
    at = rng.randrange(1, len(cards)) if len(cards) > 1 else 0
    return [*cards[at:], *cards[:at]]


class Replay:
    """A stacked deck: the first order it shuffled honestly, replayed every time after."""

    def __init__(self) -> None:
        self.saved: list[str] | None = None

    def __call__(self, cards: Sequence[str], rng: random.Random) -> list[str]:
        if self.saved is None or sorted(self.saved) != sorted(cards):
            self.saved = uniform(cards, rng)
        return list(self.saved)


def by_name(name: str) -> Shuffle:
    """The shuffle of a fault mode's name (`tablectl sim shuffler --shuffle-fault NAME`)."""
    modes: dict[str, Callable[[], Shuffle]] = {
        "uniform": lambda: uniform,
        "none": lambda: no_shuffle,
        "one_riffle": lambda: one_riffle,
        "strip_cut": lambda: strip_cut,
        "replay": Replay,
    }
    if name not in modes:
        raise ValueError(f"shuffle mode {name!r}: one of {', '.join(modes)}")
    return modes[name]()


MODES = ("uniform", "none", "one_riffle", "strip_cut", "replay")
