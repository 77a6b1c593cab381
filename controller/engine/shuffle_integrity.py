"""Shuffle integrity (docs/rules.md Q1-Q3): does the order a table deals look shuffled?

The texts require the cards to be shuffled "so that the cards are randomly intermixed"
(13:69F-2C.4(a), 40.4(a), 39.4(a)). A card-reading shoe or an automated dealing shoe reads
every card in the order it leaves the shoe, so the table can test that order against what a
uniform shuffle gives. Three detectors, each a pure function of *ended* rounds (the engine
feeds a round's cards only once the round is over, so nothing here ever holds a face-down
card of the round in play, H7), none of which blocks a deal: they tell surveillance.

- **Q1, a replayed order**: a run of :data:`TABLE_RUN` consecutive cards dealt after one
  shuffle that also came out, in the same order, after an earlier shuffle of this table (a
  pre-arranged deck, a known order carried out of the shuffle room, a shuffler replaying an
  old cycle). The table remembers a bounded number of runs (:data:`TABLE_MEMORY`); the floor
  keeps the long memory across tables with runs of :data:`FLOOR_RUN` (floor/shuffle.py).
- **Q2, an inadequate shuffle**: how many adjacent pairs of the previous shoe's deal are
  still adjacent, in the same order, in this shoe's deal. After a uniform shuffle that count
  is close to Poisson with a mean computed from the two deals (:func:`pair_match_mean`); no
  shuffle, one riffle or a cut alone keep far more. Tested per shoe and over a window of the
  last :data:`WINDOW_SHOES` shoes, each look at the rate :data:`LOOK_ALPHA`.
- **Q3, a biased seat**: over a gaming day, which ranks land on which position against the
  deck's composition, a chi-square with its p-value (:func:`seat_bias`), for the floor report.

False alarms are budgeted, not hoped for: every look of Q1 and Q2 runs at a rate such that
all of them together give at most :data:`FALSE_ALARMS_PER_TABLE_YEAR` false alarms a table a
year at :data:`ROUNDS_PER_TABLE_YEAR` rounds (1,000 a day); docs/shuffle-integrity.md shows
the arithmetic and tests/bench/shuffle.py measures it.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A busy table: 1,000 rounds a gaming day, every day of the year.
ROUNDS_PER_TABLE_YEAR = 365_000
#: The false-alarm budget of Q1 and Q2 together, per table and year.
FALSE_ALARMS_PER_TABLE_YEAR = 0.01
#: Looks a round makes: Q2 on the shoe, Q2 on the window (Q1 has its own bound below).
LOOKS_PER_ROUND = 2
#: The false-alarm rate of one look (a union bound over every look of a year).
LOOK_ALPHA = FALSE_ALARMS_PER_TABLE_YEAR / (ROUNDS_PER_TABLE_YEAR * LOOKS_PER_ROUND)

#: Q1 on the table: a run this long, seen in a remembered earlier shoe.
TABLE_RUN = 7
#: Q1 on the table: how many runs of earlier shoes it remembers (a bounded, flat snapshot).
TABLE_MEMORY = 1024
#: Q1 across a floor: runs this long, remembered for a year across every table.
FLOOR_RUN = 12
#: A casino for the floor's bound: 400 tables, a year of rounds each.
FLOOR_TABLES = 400
#: Q2's window: the last shoes whose pair counts are pooled (one riffle within a day).
WINDOW_SHOES = 64
#: Q3: a day's table is flagged below this p-value (365 looks a year: 0.04 false alarms).
SEAT_BIAS_ALPHA = 1e-4

_FINGERPRINT_BYTES = 6  # 48 bits: a chance collision is ~1e-9 a table-year (docs)


@dataclass(frozen=True)
class Finding:
    """What a detector found: its rule, the rounds, the statistic; never a card."""

    rule_id: str
    detector: str
    rounds: tuple[int, ...]
    statistic: float
    expected: float
    threshold: float
    p_value: float
    reason: str

    def extras(self) -> dict[str, Any]:
        """The fields a decision carries (docs/events.md, `shuffle_suspect`)."""
        return {
            "detector": self.detector,
            "rounds": list(self.rounds),
            "statistic": round(self.statistic, 6),
            "expected": round(self.expected, 6),
            "threshold": round(self.threshold, 6),
            "p_value": float(f"{self.p_value:.3g}"),
        }


# ------------------------------------------------------------------ the statistics


def poisson_tail(count: int, mean: float) -> float:
    """P(X >= count) for X ~ Poisson(mean), summed upward (no 1 - cdf cancellation)."""
    if count <= 0:
        return 1.0
    if mean <= 0:
        return 0.0
    term = math.exp(-mean + count * math.log(mean) - math.lgamma(count + 1))
    total, i = 0.0, count
    while term > 1e-300 and (term > total * 1e-17 or i < count + 2 * mean):
        total += term
        i += 1
        term *= mean / i
    return min(total, 1.0)


def poisson_threshold(mean: float, alpha: float) -> int:
    """The smallest count whose Poisson tail is at most ``alpha``: a look fires at or above."""
    count = max(1, math.ceil(mean))
    while poisson_tail(count, mean) > alpha:
        count += 1
    return count


def chi_square_survival(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularized upper gamma Q(dof/2, x/2).

    Written out (series below a+1, Lentz's continued fraction above, as in every numerical
    library) rather than taken from SciPy: one function is not worth ~100 MB on a table PC.
    """
    if statistic <= 0:
        return 1.0
    a, x = dof / 2.0, statistic / 2.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_prefix) * h)


def adjacent_pairs(order: Sequence[str]) -> Counter[tuple[str, str]]:
    """Each ordered pair of cards next to each other in ``order``, with how often."""
    return Counter(itertools.pairwise(order))


def pair_match_chance(
    copies: Mapping[str, int], previous_pairs: Iterable[tuple[str, str]]
) -> float:
    """The chance that one adjacent position of a uniformly shuffled shoe holds a pair of
    ``previous_pairs``: the sum of n_x n_y / (N (N - 1)) over them (see pair_match_mean)."""
    size = sum(copies.values())
    if size < 2:
        return 0.0
    chance = 0
    for x, y in set(previous_pairs):
        nx, ny = copies.get(x, 0), copies.get(y, 0)
        chance += nx * (ny - 1 if x == y else ny)
    return chance / (size * (size - 1))


def pair_match_mean(
    copies: Mapping[str, int], previous_pairs: Iterable[tuple[str, str]], dealt: int
) -> float:
    """The mean count of Q2's statistic after a uniform shuffle.

    Q2 counts the adjacent pairs (x, y) of this shoe's first ``dealt`` cards that were also
    adjacent, in that order, in the previous shoe's deal. In a uniformly shuffled shoe of N
    cards holding n_x copies of x, a given adjacent position holds (x, y) with probability
    n_x n_y / (N (N - 1)) (n_x (n_x - 1) / ... when x = y); there are dealt - 1 positions.
    """
    return max(0, dealt - 1) * pair_match_chance(copies, previous_pairs)


def pair_matches(previous_pairs: Mapping[tuple[str, str], int], order: Sequence[str]) -> int:
    """Q2's statistic: adjacent pairs of ``order`` that were adjacent in the previous deal."""
    return sum(1 for pair in itertools.pairwise(order) if pair in previous_pairs)


def run_chance(copies: Mapping[str, int], run: int) -> float:
    """An upper bound on the chance that a uniformly shuffled run of ``run`` cards equals a
    given sequence: the product of the most copies of a card over the cards left."""
    size = sum(copies.values())
    most = max(copies.values())
    chance = 1.0
    for i in range(run):
        chance *= min(1.0, most / max(1, size - i))
    return chance


def replay_false_alarms_per_year(
    copies: Mapping[str, int], run: int, runs_per_round: float, remembered: float
) -> float:
    """Expected chance Q1 matches in a year: new runs x runs remembered x chance of each."""
    return ROUNDS_PER_TABLE_YEAR * runs_per_round * remembered * run_chance(copies, run)


def fingerprint(cards: Sequence[str]) -> str:
    """A run's fingerprint: 48 bits of BLAKE2b over its cards (the snapshot keeps these)."""
    return hashlib.blake2b("".join(cards).encode(), digest_size=_FINGERPRINT_BYTES).hexdigest()


def seat_bias(copies: Mapping[str, int], dealt: Iterable[tuple[int, str]]) -> dict[str, Any] | None:
    """Q3: do ranks land on positions as the composition says? None with too few cards.

    ``dealt`` is (position, card) for the players' cards of a gaming day's ended rounds.
    Expected count of rank r at position p: the cards p received x r's share of the deck.
    Chi-square over every (position, rank) cell, dof = positions x (ranks - 1); cells are
    only tested once each expects at least 5 cards (the usual validity rule).
    """
    size = sum(copies.values())
    share: Counter[str] = Counter()
    for card, n in copies.items():
        share[_rank(card)] += n
    counts: dict[int, Counter[str]] = {}
    for position, card in dealt:
        counts.setdefault(position, Counter())[_rank(card)] += 1
    if not counts:
        return None
    statistic = 0.0
    smallest = math.inf
    for _, held in sorted(counts.items()):  # one order whatever the cards' (a float sum)
        total = held.total()
        for rank, n in share.items():
            expected = total * n / size
            smallest = min(smallest, expected)
            statistic += (held[rank] - expected) ** 2 / expected
    if smallest < 5:
        return None
    dof = len(counts) * (len(share) - 1)
    p_value = chi_square_survival(statistic, dof)
    return {
        "statistic": round(statistic, 3),
        "dof": dof,
        "p_value": p_value,
        "positions": len(counts),
        "cards": sum(h.total() for h in counts.values()),
        "flagged": p_value < SEAT_BIAS_ALPHA,
    }


def _rank(card: str) -> str:
    return card if card == "JK" else card[0]


# ------------------------------------------------------------------ the table's watch


@dataclass
class _DeckWatch:
    """One deck's shoes: the shoe in play (ended rounds only) and the one before it."""

    order: list[str] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)  # the rounds of this shoe, in order
    checked_runs: int = 0  # runs of `order` already looked up (Q1)
    previous_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    chance: float = 0.0  # pair_match_chance of previous_pairs, computed once a shoe
    matches: int = 0  # Q2's statistic over `order`, kept as rounds end
    previous_rounds: list[int] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)  # the detectors that fired on this shoe


class ShuffleWatch:
    """Q1 and Q2 over the shoes of one table; pure, its state a snapshot value.

    The engine calls :meth:`round_ended` with a round's cards in the order they left the
    shoe, once the round is over, and :meth:`shuffled` when a shuffled deck goes into play.
    """

    def __init__(
        self,
        copies: Mapping[str, int],
        *,
        run: int = TABLE_RUN,
        memory: int = TABLE_MEMORY,
        alpha: float = LOOK_ALPHA,
    ) -> None:
        self.copies = dict(copies)
        self.run = run
        self.memory = memory
        self.alpha = alpha
        self.decks: dict[str, _DeckWatch] = {}
        # Q1: remembered runs of earlier shoes, oldest first: (fingerprint, first round)
        self.remembered: deque[tuple[str, int]] = deque()
        self._remembered_rounds: dict[str, int] = {}
        # Q2's window: (statistic, mean) of the last shoes, and their rounds
        self.window: deque[tuple[int, float, int]] = deque(maxlen=WINDOW_SHOES)

    def _deck(self, name: str) -> _DeckWatch:
        return self.decks.setdefault(name, _DeckWatch())

    def shuffled(self, deck: str) -> None:
        """A shuffled deck went into play: the shoe that was dealt becomes the previous one."""
        watch = self._deck(deck)
        if not watch.order:
            return
        pairs = adjacent_pairs(watch.order)
        if watch.previous_pairs:
            # rounded as kept, so a restored window sums to the same figure
            mean = round(max(0, len(watch.order) - 1) * watch.chance, 9)
            self.window.append((watch.matches, mean, watch.rounds[-1] if watch.rounds else 0))
        self._remember(watch)
        self.decks[deck] = _DeckWatch(
            previous_pairs=pairs,
            chance=pair_match_chance(self.copies, pairs),
            previous_rounds=list(watch.rounds),
        )

    def partial_shuffle(self, deck: str) -> None:
        """Part of the cards was shuffled (a reshuffled discard rack): a new shoe begins, with
        nothing to compare its pairs against (Q2 assumes the whole deck was shuffled)."""
        watch = self._deck(deck)
        self._remember(watch)
        self.decks[deck] = _DeckWatch()

    def _remember(self, watch: _DeckWatch) -> None:
        first = watch.rounds[0] if watch.rounds else 0
        for start in range(len(watch.order) - self.run + 1):
            mark = fingerprint(watch.order[start : start + self.run])
            if mark not in self._remembered_rounds:
                self.remembered.append((mark, first))
                self._remembered_rounds[mark] = first
        while len(self.remembered) > self.memory:
            mark, _ = self.remembered.popleft()
            self._remembered_rounds.pop(mark, None)

    def round_ended(self, deck: str, round_number: int, cards: Sequence[str]) -> list[Finding]:
        """A round is over; its cards, in the order they left the shoe. Findings, if any."""
        if not cards:
            return []
        watch = self._deck(deck)
        if watch.previous_pairs:
            joined = watch.order[-1:] + list(cards)
            watch.matches += pair_matches(watch.previous_pairs, joined)
        watch.order.extend(cards)
        if not watch.rounds or watch.rounds[-1] != round_number:
            watch.rounds.append(round_number)
        findings: list[Finding] = []
        replay = self._replayed(watch, round_number)
        if replay is not None:
            findings.append(replay)
        findings += self._inadequate(watch, round_number)
        return findings

    def _replayed(self, watch: _DeckWatch, round_number: int) -> Finding | None:
        start = max(0, watch.checked_runs)
        last = len(watch.order) - self.run
        hit: int | None = None
        for i in range(start, last + 1):
            earlier = self._remembered_rounds.get(fingerprint(watch.order[i : i + self.run]))
            if earlier is not None and hit is None:
                hit = earlier
        watch.checked_runs = max(watch.checked_runs, last + 1)
        if hit is None or "Q1" in watch.fired:
            return None
        watch.fired.add("Q1")
        chance = run_chance(self.copies, self.run)
        return Finding(
            "Q1",
            "replayed_order",
            (hit, round_number),
            float(self.run),
            0.0,
            float(self.run),
            chance * len(self.remembered),
            f"a run of {self.run} cards dealt by round {round_number} came out in the same "
            f"order after an earlier shuffle (the shoe from round {hit}); by chance: at most "
            f"{chance * len(self.remembered):.1e}",
        )

    def _inadequate(self, watch: _DeckWatch, round_number: int) -> list[Finding]:
        if not watch.previous_pairs:
            return []
        matches = watch.matches
        mean = max(0, len(watch.order) - 1) * watch.chance
        findings = []
        first_round = watch.rounds[0] if watch.rounds else round_number
        if "Q2" not in watch.fired and poisson_tail(matches, mean) <= self.alpha:
            watch.fired.add("Q2")
            findings.append(
                self._q2(
                    "inadequate_shuffle", (first_round, round_number), matches, mean, "this shoe"
                )
            )
        if "Q2w" not in watch.fired and self.window:
            total = matches + sum(m for m, _, _ in self.window)
            pooled = mean + sum(e for _, e, _ in self.window)
            if poisson_tail(total, pooled) <= self.alpha:
                watch.fired.add("Q2w")
                first = self.window[0][2]
                self.window.clear()
                findings.append(
                    self._q2(
                        "inadequate_shuffle_window",
                        (first, round_number),
                        total,
                        pooled,
                        "the last shoes together",
                    )
                )
        return findings

    def _q2(
        self,
        detector: str,
        rounds: tuple[int, int],
        matches: int,
        mean: float,
        what: str,
    ) -> Finding:
        p_value = poisson_tail(matches, mean)
        threshold = poisson_threshold(mean, self.alpha)
        return Finding(
            "Q2",
            detector,
            rounds,
            float(matches),
            mean,
            float(threshold),
            p_value,
            f"{what} (rounds {rounds[0]}-{rounds[1]}) kept {matches} adjacent pairs of the "
            f"previous deal; a uniform shuffle keeps {mean:.2f} on average and "
            f"{threshold} or more with probability {p_value:.1e}",
        )

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> dict[str, Any]:
        """The watch as plain data: bounded by TABLE_MEMORY runs and two shoes a deck."""
        return {
            "decks": {
                name: {
                    "order": list(w.order),
                    "rounds": list(w.rounds),
                    "checked_runs": w.checked_runs,
                    "previous_pairs": [[x, y, n] for (x, y), n in sorted(w.previous_pairs.items())],
                    "previous_rounds": list(w.previous_rounds),
                    "fired": sorted(w.fired),
                }
                for name, w in sorted(self.decks.items())
            },
            "remembered": "".join(mark for mark, _ in self.remembered),
            "remembered_rounds": _run_lengths(first for _, first in self.remembered),
            "window": [list(entry) for entry in self.window],
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Load :meth:`snapshot`'s value (the engine checks the snapshot's shape)."""
        self.decks = {
            name: _DeckWatch(
                order=list(w["order"]),
                rounds=list(w["rounds"]),
                checked_runs=int(w["checked_runs"]),
                previous_pairs=(
                    pairs := Counter({(x, y): int(n) for x, y, n in w["previous_pairs"]})
                ),
                chance=pair_match_chance(self.copies, pairs),
                matches=pair_matches(pairs, w["order"]) if pairs else 0,
                previous_rounds=list(w["previous_rounds"]),
                fired=set(w["fired"]),
            )
            for name, w in data.get("decks", {}).items()
        }
        text = data.get("remembered", "")
        width = 2 * _FINGERPRINT_BYTES
        marks = [text[i : i + width] for i in range(0, len(text), width)]
        firsts = [first for first, n in data.get("remembered_rounds", []) for _ in range(n)]
        self.remembered = deque(zip(marks, firsts, strict=True))
        self._remembered_rounds = dict(self.remembered)
        self.window = deque(
            ((int(m), float(e), int(r)) for m, e, r in data.get("window", [])),
            maxlen=WINDOW_SHOES,
        )


def _run_lengths(values: Iterable[int]) -> list[list[int]]:
    """[[value, times], ...]: the remembered runs of one shoe share its first round."""
    out: list[list[int]] = []
    for value in values:
        if out and out[-1][0] == value:
            out[-1][1] += 1
        else:
            out.append([value, 1])
    return out
