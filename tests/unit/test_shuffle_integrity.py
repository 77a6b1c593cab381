"""Q1-Q3 (docs/shuffle-integrity.md) on hand-made orders: a replay, a deal identical to the
previous one, honest shuffles that must stay silent, and no card in any finding."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from tablectl.controller.engine.cards import multi_deck_shoe, standard_deck
from tablectl.controller.engine.shuffle_integrity import (
    LOOK_ALPHA,
    TABLE_RUN,
    ShuffleWatch,
    chi_square_survival,
    pair_match_mean,
    poisson_tail,
    poisson_threshold,
    run_chance,
    seat_bias,
)
from tablectl.simulators import shuffles

DECK = standard_deck().copies
CARDS = sorted(DECK)


def deal(watch: ShuffleWatch, order: list[str], rounds: range, per_round: int) -> list:
    found = []
    for i, number in enumerate(rounds):
        found += watch.round_ended("A", number, order[i * per_round : (i + 1) * per_round])
    return found


def test_Q2_a_deal_identical_to_the_previous_one_is_found_in_its_first_round() -> None:
    watch = ShuffleWatch(DECK)
    order = random.Random(1).sample(CARDS, 52)
    assert deal(watch, order, range(1, 2), 15) == []
    watch.shuffled("A")
    found = watch.round_ended("A", 2, order[:15])  # nothing moved: the same 15 cards again
    kinds = {f.detector for f in found}
    assert "inadequate_shuffle" in kinds and "replayed_order" in kinds
    q2 = next(f for f in found if f.detector == "inadequate_shuffle")
    assert q2.rule_id == "Q2" and q2.statistic == 14 and q2.p_value <= LOOK_ALPHA
    assert q2.rounds == (2, 2)


def test_Q1_a_known_order_replayed_shoes_later_is_found() -> None:
    watch = ShuffleWatch(DECK)
    rng = random.Random(2)
    stacked = rng.sample(CARDS, 52)
    watch.round_ended("A", 1, stacked[:12])  # the stacked order's first play
    for number in range(2, 30):  # honest shoes in between
        watch.shuffled("A")
        assert watch.round_ended("A", number, rng.sample(CARDS, 12)) == []
    watch.shuffled("A")
    found = watch.round_ended("A", 30, stacked[:TABLE_RUN])  # one run of it, replayed
    assert [f.rule_id for f in found] == ["Q1"]
    assert found[0].rounds == (1, 30)


def test_Q1_is_not_fooled_by_a_run_within_the_same_shoe() -> None:
    watch = ShuffleWatch(DECK)
    order = random.Random(3).sample(CARDS, 52)
    assert watch.round_ended("A", 1, order[:20]) == []
    assert watch.round_ended("A", 2, order[20:40]) == []  # the same shoe, later rounds


@pytest.mark.parametrize("copies", [DECK, multi_deck_shoe(6).copies], ids=["1 deck", "6 decks"])
def test_honest_shuffles_stay_silent(copies: dict[str, int]) -> None:
    rng = random.Random(4)
    cards = [c for c, n in copies.items() for _ in range(n)]
    watch = ShuffleWatch(copies)
    per_shoe = 1 if len(cards) == 52 else 8
    order = shuffles.uniform(cards, rng)
    found, number, dealt = [], 0, []
    for _shoe in range(300):
        for r in range(per_shoe):
            number += 1
            cards_now = order[r * 20 : (r + 1) * 20]
            dealt += cards_now
            found += watch.round_ended("A", number, cards_now)
        order = shuffles.uniform([*dealt, *order[per_shoe * 20 :]], rng)
        dealt = []
        watch.shuffled("A")
    assert found == []


def test_each_fault_mode_is_found_and_no_finding_names_a_card() -> None:
    for mode in ("none", "one_riffle", "strip_cut", "replay"):
        rng = random.Random(5)
        watch = ShuffleWatch(DECK)
        shuffle = shuffles.by_name(mode)
        order = shuffles.uniform(CARDS, rng)
        found = []
        for number in range(1, 40):
            found += watch.round_ended("A", number, order[:15])
            order = shuffle([*order[:15], *order[15:]], rng)
            watch.shuffled("A")
        assert found, mode
        for finding in found:
            text = finding.reason + json.dumps(finding.extras())
            assert not any(card in text.split() for card in CARDS), text


def test_the_watch_restores_from_its_snapshot_and_decides_the_same() -> None:
    rng = random.Random(6)
    first = ShuffleWatch(DECK)
    orders = [rng.sample(CARDS, 52) for _ in range(5)]
    for number, order in enumerate(orders, 1):
        first.round_ended("A", number, order[:15])
        first.shuffled("A")
    first.round_ended("A", 6, orders[0][:5])
    snap = json.loads(json.dumps(first.snapshot()))
    second = ShuffleWatch(DECK)
    second.restore(snap)
    assert second.snapshot() == first.snapshot()
    replay = orders[0][5:15]  # with the first 5, a replay of round 1's start
    assert first.round_ended("A", 7, replay) == second.round_ended("A", 7, replay)


def test_the_snapshot_is_bounded() -> None:
    rng = random.Random(7)
    watch = ShuffleWatch(DECK)
    for number in range(1, 2000):
        watch.round_ended("A", number, rng.sample(CARDS, 20))
        watch.shuffled("A")
    assert len(watch.remembered) <= 1024
    assert len(json.dumps(watch.snapshot())) < 20_000


def test_the_statistics_against_known_values() -> None:
    assert poisson_tail(0, 3.0) == 1.0
    assert poisson_tail(1, 1.0) == pytest.approx(1 - 0.36787944117144233)
    assert poisson_tail(10, 1.0) == pytest.approx(1.1142547833872071e-07, rel=1e-9)
    assert poisson_threshold(1.0, 1e-7) == 11
    # chi-square: df 1 at 3.841 is 0.05; df 10 at 23.209 is 0.01; df 100 at 135.807 is 0.01
    assert chi_square_survival(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-6)
    assert chi_square_survival(23.209251158954356, 10) == pytest.approx(0.01, rel=1e-6)
    assert chi_square_survival(135.80672317102676, 100) == pytest.approx(0.01, rel=1e-6)
    # one deck, every pair of a full previous deal: (dealt - 1) / 52
    pairs = list(itertools.pairwise(CARDS))
    assert pair_match_mean(DECK, pairs, 52) == pytest.approx(51 * 51 / (52 * 51))
    assert run_chance(DECK, 2) == pytest.approx(1 / (52 * 51))


def test_Q3_seat_bias_uniform_and_biased() -> None:
    rng = random.Random(8)
    honest = [(p, rng.choice(CARDS)) for p in range(1, 7) for _ in range(2000)]
    result = seat_bias(DECK, honest)
    assert result is not None and not result["flagged"] and result["dof"] == 6 * 12
    low = [c for c in CARDS if c[0] in "23456"]
    biased = [(p, rng.choice(low if p == 3 and rng.random() < 0.2 else CARDS)) for p, _ in honest]
    flagged = seat_bias(DECK, biased)
    assert flagged is not None and flagged["flagged"] and flagged["p_value"] < 1e-4
    assert seat_bias(DECK, honest[:10]) is None  # too few cards to test
