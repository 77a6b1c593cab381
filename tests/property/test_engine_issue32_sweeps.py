"""Issue 32's classes as sweeps: each irregularity put at every point of a round, the law
(controller/engine/conservation.py, RoundWatch) checked after every event. RoundWatch fails
a round completed with the dealer's misdeal check unanswered (M7), a card taken from a rack
whose reshuffle jammed (G5, C4), a round's collected cards missing from the rack's record
(D2), and a "no more bets" neither refused nor followed by a round (C10).
"""

from __future__ import annotations

from typing import Any

import pytest

from tablectl.controller.engine.conservation import RoundWatch
from tablectl.controller.engine.core import Engine
from tests.engine_matrix.matrix import Table, _events, _reach
from tests.unit.engine.engine_helpers import cards, draws, ev, table

Event = dict[str, Any]


def fed(engine: Engine, watch: RoundWatch, events: list[Event]) -> list[tuple[Event, Any]]:
    """Each event with its decisions as (decision, rule_id) pairs; the law after each."""
    out = []
    for event in events:
        decisions = engine.handle(event, 2)
        watch.after(event, decisions)
        out.append((event, [(d.decision, d.rule_id) for d in decisions]))
    return out


# ---------------------------------------------------------------- a check left unanswered

LABEL = "play (misdeal check unanswered)"
KINDS = [kind for kind, _ in _events(_reach(Table("five_card_hilo", "manual_shoe"), LABEL)[2])]


@pytest.mark.parametrize("method", ["manual_shoe", "hand"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_check_left_unanswered_at_every_later_event(method, kind):
    """HILO read one card short: whatever comes next, then the collection, the round does
    not end completed with the check unanswered (RoundWatch raises if it does)."""
    reached = _reach(Table("five_card_hilo", method), LABEL)
    assert reached is not None
    engine, watch, script = reached
    event = dict(_events(script))[kind]
    fed(engine, watch, [event, ev("hands_collected")])
    outcome = watch.outcomes.get(1)
    if outcome == "completed":  # only once the dealer's report answered the check
        assert kind == "misdeal_reported"


# ---------------------------------------------------------------- a jam at every point

ROUND_ONE = [
    ev("bets_closed", positions=[1]),
    *draws("2c", "Kd", "3c", "7c", "4c"),
    ev("deal_completed"),
    ev("bonus_settled"),
    ev("dealer_turn"),
    ev("hands_collected"),
]
ROUND_TWO = [
    ev("bets_closed", positions=[1]),
    *draws("5c", "6c"),
    ev("shoe_fault", fault="empty"),  # G5
    ev("shuffle_started"),
    ev("shuffle_completed"),
    ev("shoe_loaded"),
    *draws("9s"),  # the G5 burn card
    *draws("8s", "Qs", "2s"),
    ev("deal_completed"),
    ev("bonus_settled"),
    ev("dealer_turn"),
    ev("hands_collected"),
]


@pytest.mark.parametrize("bart_carter", [False, True])
@pytest.mark.parametrize("at", range(len(ROUND_TWO) + 1))
def test_a_rack_reshuffle_that_jams_at_every_point_of_a_round(at, bart_carter):
    """3C21: the shuffler jams at each point of a round whose shoe runs out, a card drawn
    right after: no card reaches a hand from the unshuffled rack (RoundWatch), the burn after
    the run-out is G5's, once, on the first card after the reshuffle that completed."""
    engine = table("three_card_21", bart_carter=bart_carter)
    watch = RoundWatch(engine)
    fed(engine, watch, ROUND_ONE)
    stream = [*ROUND_TWO[:at], ev("shuffler_fault", fault="jam"), *draws("7s"), *ROUND_TWO[at:]]
    out = fed(engine, watch, stream)
    run_out = next(i for i, (e, _) in enumerate(out) if e.get("fault") == "empty")
    burns = [d for _, ds in out[run_out:] for d in ds if d == ("burn_card", "G5")]
    assert burns == [("burn_card", "G5")]  # (a shoe_loaded after that burn is G2's own)
    after = [ds for e, ds in out[run_out:] if e["type"] == "card_drawn"]
    first_dealt = next(ds for ds in after if ("deal_blocked", "C4") not in ds)
    assert first_dealt == [("burn_card", "G5")]


@pytest.mark.parametrize("game", ["five_card_hilo", "heads_up_holdem", "asia_poker"])
@pytest.mark.parametrize("at", range(8))
def test_a_shuffler_jam_at_every_point_of_a_round_keeps_the_law(game, at):
    engine = table(game)
    watch = RoundWatch(engine)
    opening = [ev("bets_closed", positions=[1])]
    if game == "asia_poker":
        opening.append(ev("starting_position", number=1))
    planned = {"five_card_hilo": 10, "heads_up_holdem": 9, "asia_poker": 49}[game]
    stream = [*opening, *draws(*cards(planned)), ev("deal_completed"), ev("hands_collected")]
    at = min(at, len(stream))
    fed(engine, watch, [*stream[:at], ev("shuffler_fault", fault="jam"), *stream[at:]])
    start = [ev("starting_position", number=1)] if game == "asia_poker" else []
    out = fed(engine, watch, [ev("bets_closed", positions=[1]), *start, *draws("As")])
    assert ("deal_blocked", "C4") in [d for _, ds in out for d in ds] or engine.round is None


# ---------------------------------------------------------------- two decks, one removed


def two_rounds(game: str) -> list[Event]:
    """Round 1 on deck A, B shuffled meanwhile, round 2 on B, A shuffled meanwhile."""
    n = {"five_card_hilo": 10, "heads_up_holdem": 9}[game]
    return [
        ev("bets_closed", positions=[1]),
        *draws(*cards(n)),
        ev("deal_completed"),
        ev("shuffle_completed", deck="B", count=52),
        ev("hands_collected"),
        ev("bets_closed", positions=[1]),
        *draws(*cards(n, 20)),
        ev("deal_completed"),
        ev("shuffle_completed", deck="A", count=52),
        ev("hands_collected"),
    ]


@pytest.mark.parametrize("game", ["five_card_hilo", "heads_up_holdem"])
@pytest.mark.parametrize("removed", ["A", "B"])
@pytest.mark.parametrize("at", range(25))
def test_one_of_two_decks_removed_at_every_point(game, removed, at):
    """A deck count removes one deck at each point of two rounds: a round due on the other
    deck is opened and dealt; only the removed deck's deals and rounds are refused (C10)."""
    engine = table(game, dual_deck=True, shuffler="counting")
    watch = RoundWatch(engine)
    stream = two_rounds(game)
    at = min(at, len(stream))
    removal = ev("shuffle_completed", deck=removed, count=51)
    for event in [*stream[:at], removal, *stream[at:]]:
        (_, ds), *_ = fed(engine, watch, [event])
        if ("rejected", "C10") in ds and event["type"] == "bets_closed":
            assert engine.decks[engine._due_deck()].removed, (event, ds)
        if ("deal_blocked", "C10") in ds:
            # the round's deck, or with no round the one in the shoe or due next
            if engine.round is not None:
                assert engine.decks[engine.round.deck].removed, (event, ds)
            else:
                due = {engine.current, engine._due_deck()}
                assert any(engine.decks[d].removed for d in due), (event, ds)
    # the deck in place still deals a round of its own
    other = "B" if removed == "A" else "A"
    if engine.round is not None:
        fed(engine, watch, [ev("hands_collected")])
    more = fed(engine, watch, [ev("shoe_loaded", deck=other), ev("bets_closed", positions=[1])])
    if engine.round is not None:
        assert engine.round.deck == other
    else:
        assert ("rejected", "C10") in more[-1][1] or ("rejected", "L1") in more[-1][1]


# ---------------------------------------------------------------- a void and a receipt


def void_then_other_deck(game: str, dual: bool) -> list[Event]:
    n = {"five_card_hilo": 10, "heads_up_holdem": 9}[game]
    other = [ev("shoe_loaded", deck="B")] if dual else [ev("shuffle_completed", count=52)]
    return [
        ev("rack_level", cards=0),
        ev("bets_closed", positions=[1]),
        *draws(*cards(3)),
        *draws(*cards(2, 40), face_up=True),  # C2: void
        ev("rack_level", cards=1),
        ev("hands_collected"),
        ev("rack_level", cards=6),
        *other,
        ev("bets_closed", positions=[1]),
        *draws(*cards(n, 10)),
        ev("deal_completed"),
        ev("hands_collected"),
    ]


@pytest.mark.parametrize("game", ["five_card_hilo", "heads_up_holdem"])
@pytest.mark.parametrize("dual", [True, False])
@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("at", range(16))
def test_a_void_and_a_receipt_interleaved(game, dual, named, at):
    """New cards of deck A received at each point around a void round of A: its cards reach
    the discard rack's record at its collection (RoundWatch); with two decks, B's round
    collected into the same rack is D2 whenever A's cards went there first."""
    engine = table(game, dual_deck=dual)
    watch = RoundWatch(engine)
    stream = void_then_other_deck(game, dual)
    at = min(at, len(stream))
    receipt = ev("deck_received", deck="A") if named else ev("deck_received")
    out = fed(engine, watch, [*stream[:at], receipt, *stream[at:]])
    decided = [d for _, ds in out for d in ds]
    # the receipt, once round 1 opened (before: new cards, unshuffled, blocked C10), names
    # deck A or is unnamed before deck B is loaded (it is A's then too)
    first_card = stream.index(draws(cards(1)[0])[0])
    if dual and at >= first_card and (named or at <= stream.index(ev("shoe_loaded", deck="B"))):
        assert ("procedure_violation", "D2") in decided
