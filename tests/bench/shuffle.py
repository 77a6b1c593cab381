"""Shuffle integrity measured (docs/shuffle-integrity.md): false alarms and detection.

For each game, a model of its table (the cards a round deals, the rounds a shoe lasts) plays
rounds through the detectors (controller/engine/shuffle_integrity.py) with the shuffler of
simulators/shuffles.py:

- honest shuffles for at least a million rounds in all: the false alarms of each detector,
  and the calibration of Q2's p-values (the share of shoes at or below 1e-2, 1e-3, 1e-4 must
  be at or below those levels: the Poisson tail is honest where it can be measured);
- each fault mode switched on after a few honest shoes: how many rounds until a finding
  (a replay is counted from the first round dealt from the replayed order).

    python -m tests.bench.shuffle [--rounds N] [--trials N] [--png PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.engine.cards import deck_with_joker, multi_deck_shoe, standard_deck
from tablectl.controller.engine.shuffle_integrity import (
    FALSE_ALARMS_PER_TABLE_YEAR,
    LOOK_ALPHA,
    ROUNDS_PER_TABLE_YEAR,
    TABLE_MEMORY,
    TABLE_RUN,
    ShuffleWatch,
    poisson_tail,
    replay_false_alarms_per_year,
)
from tablectl.simulators import shuffles


@dataclass(frozen=True)
class TableModel:
    """A busy table of the game: four players; the cards a round takes from the shoe."""

    game: str
    copies: dict[str, int]
    cards_per_round: int
    rounds_per_shoe: int


MODELS = [
    # 3C21: six decks, ~4 cards a hand for four players and the dealer, cut at ~3/4
    TableModel("three_card_21", multi_deck_shoe(6).copies, 17, 13),
    # HILO: five cards to four players and the dealer; shuffled after every round (D3)
    TableModel("five_card_hilo", standard_deck().copies, 25, 1),
    # HUH: five community cards, two to four players and the dealer
    TableModel("heads_up_holdem", standard_deck().copies, 15, 1),
    # AP: seven cards to all seven positions of 53
    TableModel("asia_poker", deck_with_joker().copies, 49, 1),
]
GOAL_ROUNDS = {"replay": 1, "none": 3, "one_riffle": 1000, "strip_cut": 1000}


class Table:
    """A table of the model dealing through a shuffler, its watch told of every round."""

    def __init__(self, model: TableModel, rng: random.Random) -> None:
        self.model = model
        self.rng = rng
        self.watch = ShuffleWatch(model.copies)
        self.shuffle: shuffles.Shuffle = shuffles.uniform
        cards = [card for card, n in model.copies.items() for _ in range(n)]
        self.order = shuffles.uniform(cards, rng)
        self.position = 0
        self.dealt: list[str] = []
        self.round = 0
        self.in_shoe = 0
        self.shoe_p_values: list[float] = []

    def play_round(self) -> list[Any]:
        self.round += 1
        take = self.model.cards_per_round
        cards = self.order[self.position : self.position + take]
        self.position += take
        self.dealt += cards
        findings = self.watch.round_ended("A", self.round, cards)
        self.in_shoe += 1
        if self.in_shoe == self.model.rounds_per_shoe:
            self.reshuffle()
        return findings

    def reshuffle(self) -> None:
        deck = self.watch.decks["A"]
        if deck.previous_pairs:
            mean = max(0, len(deck.order) - 1) * deck.chance
            self.shoe_p_values.append(poisson_tail(deck.matches, mean))
        into_shuffler = [*self.dealt, *self.order[self.position :]]
        self.order = self.shuffle(into_shuffler, self.rng)
        self.position, self.dealt, self.in_shoe = 0, [], 0
        self.watch.shuffled("A")


def honest(model: TableModel, rounds: int, seed: int) -> dict[str, Any]:
    table = Table(model, random.Random(seed))
    alarms: Counter[str] = Counter()
    started = time.perf_counter()
    for _ in range(rounds):
        for finding in table.play_round():
            alarms[finding.detector] += 1
    seconds = time.perf_counter() - started
    p_values = table.shoe_p_values
    calibration = {
        str(level): sum(p <= level for p in p_values) / len(p_values) for level in (1e-2, 1e-3)
    }
    calibration["1e-4"] = sum(p <= 1e-4 for p in p_values) / len(p_values)
    per_round = model.cards_per_round - TABLE_RUN + 1
    remembered = min(TABLE_MEMORY, per_round * model.rounds_per_shoe * 64)
    return {
        "game": model.game,
        "rounds": rounds,
        "shoes": len(p_values),
        "false_alarms": dict(alarms),
        "per_table_year_measured": sum(alarms.values()) / rounds * ROUNDS_PER_TABLE_YEAR,
        "per_table_year_upper_95": 3 / rounds * ROUNDS_PER_TABLE_YEAR if not alarms else None,
        "q2_calibration": calibration,
        "q2_bound_per_table_year": 2 * LOOK_ALPHA * ROUNDS_PER_TABLE_YEAR,
        "q1_bound_per_table_year": replay_false_alarms_per_year(
            model.copies, TABLE_RUN, per_round, remembered
        ),
        "us_per_round": seconds / rounds * 1e6,
        "q2_p_values_sample": p_values[:5000],
    }


def detection(model: TableModel, mode: str, trials: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    rounds_to_find: list[int] = []
    statistics_seen: list[float] = []
    for _ in range(trials):
        table = Table(model, random.Random(rng.getrandbits(64)))
        for _ in range(model.rounds_per_shoe * rng.randint(2, 6) - 1):
            table.play_round()  # honest shoes first (their findings would be false alarms)
        table.shuffle = shuffles.by_name(mode)
        table.play_round()  # the last honest round: the shuffle after it is the faulty one
        start = table.round
        if mode == "replay":
            # the stacked order is played once (its first play is no replay), then replayed
            for _ in range(model.rounds_per_shoe):
                table.play_round()
            start = table.round
        found = None
        while found is None and table.round - start < 5000:
            findings = table.play_round()
            if findings:
                found = table.round - start
                statistics_seen.append(findings[0].statistic)
        rounds_to_find.append(found if found is not None else 10**9)
    ordered = sorted(rounds_to_find)
    return {
        "game": model.game,
        "mode": mode,
        "trials": trials,
        "median_rounds": statistics.median(ordered),
        "p95_rounds": ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)],
        "max_rounds": ordered[-1],
        "goal_rounds": GOAL_ROUNDS[mode],
        "within_goal": sum(r <= GOAL_ROUNDS[mode] for r in ordered) / len(ordered),
    }


def measure(rounds_total: int = 1_200_000, trials: int = 100, png: Path | None = None) -> dict:
    per_game = rounds_total // len(MODELS)
    with ProcessPoolExecutor(max_workers=2) as pool:
        honest_runs = list(pool.map(honest, MODELS, [per_game] * len(MODELS), range(len(MODELS))))
        jobs = [(m, mode) for m in MODELS for mode in GOAL_ROUNDS]
        found = list(
            pool.map(
                detection,
                [m for m, _ in jobs],
                [mode for _, mode in jobs],
                [trials] * len(jobs),
                range(100, 100 + len(jobs)),
            )
        )
    total_alarms = sum(sum(h["false_alarms"].values()) for h in honest_runs)
    rounds_run = sum(h["rounds"] for h in honest_runs)
    results = {
        "shuffle_honest_rounds": rounds_run,
        "shuffle_false_alarms": total_alarms,
        # a bound by construction (a union bound over every look), and what was measured
        "shuffle_false_alarms_bound_per_table_year": FALSE_ALARMS_PER_TABLE_YEAR,
        "shuffle_false_alarms_measured_upper_95_per_table_year": (
            3 / rounds_run * ROUNDS_PER_TABLE_YEAR if not total_alarms else None
        ),
        "shuffle_detection_within_goal": min(f["within_goal"] for f in found),
    }
    for f in found:
        results[f"shuffle_rounds_{f['game']}_{f['mode']}_p95"] = f["p95_rounds"]
    details = {"honest": honest_runs, "detection": found}
    if png is not None:
        details["plot"] = plot(honest_runs, png)
    return {"results": results, "details": details}


def plot(honest_runs: list[dict[str, Any]], path: Path) -> str | None:
    """Q2's p-values under honest shuffles: uniform on [0, 1] (a straight line) when the
    statistic is calibrated; a fault's p-values sit at 1e-10 and below."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(7, 4))
    for run in honest_runs:
        values = sorted(run["q2_p_values_sample"])
        if values:
            axes.plot(
                values,
                [(i + 1) / len(values) for i in range(len(values))],
                label=f"{run['game']} (honest)",
            )
    axes.plot([0, 1], [0, 1], "k:", label="calibrated")
    axes.set_xlabel("Q2 p-value of a shoe")
    axes.set_ylabel("share of shoes at or below")
    axes.set_title("Q2 under honest shuffles: p-values (a shoe fires at 1.4e-8)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1_200_000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args(argv)
    figures = measure(args.rounds, args.trials, args.png)
    details = figures["details"]
    for run in details["honest"]:
        run = {k: v for k, v in run.items() if k != "q2_p_values_sample"}
        print(json.dumps(run))
    for f in details["detection"]:
        print(json.dumps(f))
    print(json.dumps(figures["results"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
