"""Legal rounds, generated: event streams that follow every rule, for property tests,
benchmarks and soak runs. A legal stream must never draw a void, a violation, a removal
or a blocked deal from the engine; ``rng`` makes every choice, so a seed replays it.
"""

from __future__ import annotations

import random
from typing import Any

from tablectl.controller.engine.cards import dealer_stands, hand_total
from tablectl.controller.engine.table import TableSpec

Event = dict[str, Any]


def _ev(kind: str, **fields: Any) -> Event:
    return {"type": kind, **fields}


def _shuffled(rng: random.Random, spec: TableSpec) -> list[str]:
    cards = list(spec.composition().as_counter().elements())
    rng.shuffle(cards)
    return cards


def legal_stream(spec: TableSpec, rng: random.Random, rounds: int) -> list[Event]:
    """The events of ``rounds`` legal rounds at the table ``spec`` (no table line)."""
    if spec.game == "three_card_21":
        return _three_card_21(spec, rng, rounds)
    if spec.game == "asia_poker":
        return _asia_poker(spec, rng, rounds)
    return _stud(spec, rng, rounds)


def _positions(spec: TableSpec, rng: random.Random) -> list[int]:
    n = rng.randint(1, spec.options.positions)
    return sorted(rng.sample(range(1, spec.options.positions + 1), n))


def _shuffle_events(spec: TableSpec, deck: str | None, size: int) -> list[Event]:
    fields: dict[str, Any] = {} if deck is None else {"deck": deck}
    if spec.options.shuffler == "counting":
        fields["count"] = size
    return [
        _ev("shuffle_started", **({} if deck is None else {"deck": deck})),
        _ev("shuffle_completed", **fields),
    ]


def _stud(spec: TableSpec, rng: random.Random, rounds: int) -> list[Event]:
    """HILO and HUH: a shuffle before every round, a stub count after every deal."""
    hilo = spec.game == "five_card_hilo"
    method = spec.options.dealing
    dual = spec.options.dual_deck
    events: list[Event] = []
    if dual:
        events += _shuffle_events(spec, "B", 52)
    for number in range(rounds):
        deck = ("A", "B")[number % 2] if dual else None
        if dual:
            events.append(_ev("shoe_loaded", deck=deck))
        else:
            events += _shuffle_events(spec, deck, 52)
        cards = _shuffled(rng, spec)
        positions = _positions(spec, rng)
        events.append(_ev("bets_closed", positions=positions))
        targets = [str(p) for p in positions] + ["dealer"]
        dealt = 0
        if method == "automated_shoe":
            sizes = [5] * len(targets) if hilo else [5] + [2] * len(targets)
            for size in sizes:
                events.append(_ev("stack_dispensed", cards=cards[dealt : dealt + size]))
                dealt += size
            events.append(_ev("deal_completed"))
        else:
            per_hand = 5 if hilo else 2
            first = 0 if (hilo or method == "hand") else 5
            total = first + per_hand * len(targets)
            events += [_ev("card_drawn", card=c) for c in cards[:total]]
            dealt = total
            events.append(_ev("deal_completed"))
            if not hilo and method == "hand":
                events += [_ev("card_drawn", card=c) for c in cards[dealt : dealt + 5]]
                dealt += 5
        events.append(_ev("stub_counted", count=52 - dealt))
        if dual and number > 0:
            # 40.2(b)3: the other deck is shuffled while this one is played
            events += _shuffle_events(spec, "B" if deck == "A" else "A", 52)
        events.append(_ev("hands_collected"))
    return events


def _asia_poker(spec: TableSpec, rng: random.Random, rounds: int) -> list[Event]:
    events: list[Event] = []
    for _ in range(rounds):
        events += _shuffle_events(spec, None, 53)
        cards = _shuffled(rng, spec)
        events.append(_ev("bets_closed", positions=_positions(spec, rng)))
        if spec.options.ap_start == "operator":
            if rng.random() < 0.5:
                events.append(_ev("starting_position", dice=sum(rng.randint(1, 6) for _ in "123")))
            else:
                events.append(_ev("starting_position", number=rng.randint(1, 7)))
        events += [_ev("card_drawn", card=c) for c in cards[:49]]
        events += [_ev("deal_completed"), _ev("stub_counted", count=4), _ev("hands_collected")]
    return events


def _three_card_21(spec: TableSpec, rng: random.Random, rounds: int) -> list[Event]:
    """Rounds from one shoe; reshuffle when fewer than a round's worth of cards remain, or
    (Bart Carter) once the discard rack holds more than about a deck; the rack sensor
    reports after every collection and every reshuffle."""
    opts = spec.options
    threshold = opts.interpretations.bart_carter_rack_threshold
    events: list[Event] = []
    if opts.reader != "none":
        events.append(_ev("reader_inspected", by="floor"))
    shoe: list[str] = []
    rack = 0
    for _ in range(rounds):
        if len(shoe) < 40 or (opts.bart_carter and rack > threshold):
            events += _shuffle_events(spec, None, spec.composition().size)
            events.append(_ev("rack_level", cards=0))
            events.append(_ev("shoe_loaded"))
            shoe, rack = _shuffled(rng, spec), 0
            if not opts.bart_carter:
                events.append(_ev("card_drawn", card=shoe.pop()))  # G2 burn
                rack += 1
        before = len(shoe)
        positions = _positions(spec, rng)
        events.append(_ev("bets_closed", positions=positions))
        dealer: list[str] = []
        for step in range(3):
            for _p in positions:
                events.append(_ev("card_drawn", card=shoe.pop()))
            if step < 2:
                card = shoe.pop()
                dealer.append(card)
                events.append(_ev("card_drawn", card=card))
        events += [_ev("deal_completed"), _ev("bonus_settled")]
        up = dealer[0]
        if up[0] == "A":
            events.append(_ev("insurance_closed"))
        if opts.reader != "none" and up[0] in "AKQJT":
            events.append(_ev("reader_inserted"))
            events.append(_ev("reader_result", blackjack=hand_total(dealer)[0] == 21))
        for _p in positions:
            for _hit in range(rng.randint(0, 2)):
                events.append(_ev("card_drawn", card=shoe.pop()))
        events.append(_ev("dealer_turn"))
        while not dealer_stands(dealer, opts.dealer_hits_soft_17):
            card = shoe.pop()
            dealer.append(card)
            events.append(_ev("card_drawn", card=card))
        events.append(_ev("hands_collected"))
        rack += before - len(shoe)
        events.append(_ev("rack_level", cards=rack))
    return events
