"""The fault catalogue shared by the soak run and the fault matrix, generated from RULES.md.

Each fault is what a device reports when it fails (EVENTS.md device events), injected into a
legal round (controller.roundgen) at one phase of the round: shuffling, betting, dealing, play
or collection. ``expected`` is the decision RULES.md requires *from the fault's own events*,
as (decision, rule_id) pairs; an empty tuple means the rules require that the fault changes
nothing (the round goes on and settles).

Faults that live below the event language (garbage bytes, bad CRCs, an impostor device) are
in tests/faults/ (through the drivers and simulators), not here.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tablectl.controller.engine.table import TableSpec

Event = dict[str, object]
Expected = tuple[tuple[str, str], ...]
PHASES = ("shuffling", "betting", "dealing", "play", "collection")
DEAL_EVENTS = ("card_drawn", "stack_dispensed")

# The tables of the soak: every game under every dealing method it allows, plus the
# two-deck variants (D rules) and a 3C21 without a reader.
TABLES: tuple[tuple[str, dict[str, object]], ...] = (
    ("three_card_21", {}),
    ("three_card_21", {"reader": "none", "decks": 8}),
    ("five_card_hilo", {"dealing": "manual_shoe"}),
    ("five_card_hilo", {"dealing": "hand"}),
    ("five_card_hilo", {"dealing": "automated_shoe"}),
    ("five_card_hilo", {"dealing": "manual_shoe", "dual_deck": True}),
    ("heads_up_holdem", {"dealing": "manual_shoe"}),
    ("heads_up_holdem", {"dealing": "hand"}),
    ("heads_up_holdem", {"dealing": "automated_shoe"}),
    ("heads_up_holdem", {"dealing": "automated_shoe", "dual_deck": True}),
    ("asia_poker", {}),
)


def table_label(game: str, options: dict[str, object]) -> str:
    return game + "".join(f",{k}={v}" for k, v in sorted(options.items()))


def split_rounds(events: list[Event]) -> list[list[Event]]:
    """A legal stream cut into rounds, each ending with its `hands_collected`.

    What comes before a round's `bets_closed` (shuffles, shoe loads, the 3C21 rack report of
    the previous collection) belongs to that round; whatever trails the last collection is
    kept with the last round.
    """
    rounds: list[list[Event]] = [[]]
    for event in events:
        rounds[-1].append(event)
        if event["type"] == "hands_collected":
            rounds.append([])
    if not rounds[-1]:
        rounds.pop()
    elif len(rounds) > 1:
        rounds[-2].extend(rounds.pop())
    return rounds


@dataclass(frozen=True)
class Injection:
    """A round with a fault in it: the events, which of them are the fault's, what it needs."""

    events: list[Event]
    fault_at: tuple[int, ...]  # indexes into events
    expected: Expected


Injector = Callable[[TableSpec, list[Event], int, "InjectionContext"], Injection | None]


@dataclass
class InjectionContext:
    """What an injector may need beyond the round: the cards already out of the shoe."""

    spent: Counter[str]  # cards drawn from this shoe before the round
    rng: random.Random
    phase: str


@dataclass(frozen=True)
class FaultKind:
    """One device fault: its device, the rule that governs it, where it can happen."""

    name: str
    device: str
    rule_id: str
    phases: tuple[str, ...]
    applies: Callable[[TableSpec], bool]
    inject: Injector


def has_asd(spec: TableSpec) -> bool:
    return spec.options.shuffler != "none"


def counting_asd(spec: TableSpec) -> bool:
    return spec.options.shuffler == "counting"


def is_ads(spec: TableSpec) -> bool:
    return spec.options.dealing == "automated_shoe"


def reads_cards(spec: TableSpec) -> bool:
    """Cards leave one by one through a card-reading shoe (C1/C2 see face-up cards there)."""
    return spec.options.dealing != "automated_shoe"


def has_reader(spec: TableSpec) -> bool:
    return spec.game == "three_card_21" and spec.options.reader != "none"


def phase_index(events: list[Event], phase: str) -> int | None:
    """Where in the round a fault at ``phase`` is inserted (before that index)."""
    kinds = [e["type"] for e in events]
    if phase == "shuffling":
        return kinds.index("shuffle_started") + 1 if "shuffle_started" in kinds else None
    if "bets_closed" not in kinds:
        return None
    bets = kinds.index("bets_closed")
    if phase == "betting":
        return bets
    if phase == "dealing":
        deals = [i for i in range(bets + 1, len(kinds)) if kinds[i] in DEAL_EVENTS]
        return deals[1] if len(deals) > 1 else None
    if phase == "play":
        return kinds.index("deal_completed") + 1 if "deal_completed" in kinds else None
    if phase == "collection":
        return kinds.index("hands_collected") + 1 if "hands_collected" in kinds else None
    raise ValueError(f"unknown phase {phase!r}; phases are {', '.join(PHASES)}")


def _insert(events: list[Event], at: int, new: list[Event], expected: Expected) -> Injection:
    return Injection(events[:at] + new + events[at:], tuple(range(at, at + len(new))), expected)


def _in_round(phase: str) -> bool:
    return phase in ("dealing", "play")


def _device_fault(kind: str, fault: str) -> Injector:
    event_type = f"{kind}_fault"

    def inject(spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext) -> Injection:
        phase = ctx.phase
        if kind == "shuffler":
            expected: Expected = (("reshuffle", "C4"),)
        elif _in_round(phase):
            expected = (("void_round", "C5"), ("reshuffle", "C5"))
        else:
            expected = (("reshuffle", "C5"),)
        return _insert(events, at, [{"type": event_type, "fault": fault, "device": kind}], expected)

    return inject


def _unread_card() -> Injector:
    """X2: a card-reading shoe's frame that cannot be decoded (a card may have left unread)."""

    def inject(spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext) -> Injection:
        expected: Expected = (
            (("void_round", "X2"), ("reshuffle", "X2"))
            if _in_round(ctx.phase)
            else (("reshuffle", "X2"),)
        )
        event = {"type": "shoe_fault", "fault": "undecodable_frame", "device": "shoe"}
        return _insert(events, at, [event], expected)

    return inject


def _disconnect(kind: str) -> Injector:
    def inject(spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext) -> Injection:
        phase = ctx.phase
        expected: Expected = ()
        if kind == "shuffler" and phase == "shuffling":
            expected = (("reshuffle", "C4"),)
        elif kind == "shoe" and is_ads(spec) and _in_round(phase):
            expected = (("void_round", "C5"), ("reshuffle", "C5"))
        elif kind == "hole_card_reader":
            expected = (("reader_disabled", "H5"),)
        pair: list[Event] = [
            {"type": "device_lost", "device": kind},
            {"type": "device_connected", "device": kind},
        ]
        return _insert(events, at, pair, expected)

    return inject


def _unspent_card(spec: TableSpec, ctx: InjectionContext, round_events: list[Event]) -> str:
    """A card still in the shoe: neither drawn before nor dealt later in this round."""
    left = spec.composition().as_counter() - ctx.spent - dealt_cards(round_events)
    choices = sorted(left.elements())
    return ctx.rng.choice(choices)


def dealt_cards(events: list[Event]) -> Counter[str]:
    cards: Counter[str] = Counter()
    for event in events:
        if event["type"] == "card_drawn":
            cards[str(event["card"])] += 1
        elif event["type"] == "stack_dispensed":
            cards.update(str(c) for c in event["cards"])  # type: ignore[attr-defined]
    return cards


def _less_stub(events: list[Event], by: int) -> list[Event]:
    """The stub count after ``by`` more cards left the deck (S3 counts discards as out)."""
    return [
        {**e, "count": int(e["count"]) - by} if e["type"] == "stub_counted" else e  # type: ignore[call-overload]
        for e in events
    ]


def _face_up(times: int) -> Injector:
    def inject(
        spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext
    ) -> Injection | None:
        new: list[Event] = []
        for _ in range(times):
            card = _unspent_card(spec, ctx, events + new)
            new.append({"type": "card_drawn", "card": card, "face_up": True})
        expected: Expected = (
            (("discard_card", "C1"),)
            if times == 1
            else (("discard_card", "C1"), ("void_round", "C2"), ("reshuffle", "C2"))
        )
        return _insert(_less_stub(events, times), at, new, expected)

    return inject


C8: Expected = (("void_round", "C8"), ("remove_deck", "C8"), ("notify_supervisor", "C8"))


def _wrong_card(which: str) -> Injector:
    """A foreign card (a joker where there is none) or a second copy of a dealt card."""

    def inject(
        spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext
    ) -> Injection | None:
        if which == "foreign" and spec.game != "asia_poker":
            card = "JK"
        else:
            # C8 counts copies: a card is extra once the shoe has given all the composition holds
            out = ctx.spent + dealt_cards(events[:at])
            held = spec.composition().as_counter()
            spent = sorted(c for c, n in out.items() if n >= held[c])
            if not spent:
                return None
            card = ctx.rng.choice(spent)
        target = events[at]
        if target["type"] == "stack_dispensed":
            stack = list(target["cards"])  # type: ignore[call-overload]
            stack[ctx.rng.randrange(len(stack))] = card
            replaced = [*events[:at], {**target, "cards": stack}, *events[at + 1 :]]
            return Injection(replaced, (at,), C8)
        return _insert(events, at, [{"type": "card_drawn", "card": card}], C8)

    return inject


def _count_off(by: int) -> Injector:
    """A counting ASD that finds a card missing (-1) or one too many (+1): C7."""

    def inject(
        spec: TableSpec, events: list[Event], at: int, ctx: InjectionContext
    ) -> Injection | None:
        done = next(
            (i for i in range(at, len(events)) if events[i]["type"] == "shuffle_completed"), None
        )
        if done is None or "count" not in events[done]:
            return None
        changed = {**events[done], "count": int(events[done]["count"]) + by}  # type: ignore[call-overload]
        return Injection(
            [*events[:done], changed, *events[done + 1 :]], (done,), (("remove_deck", "C7"),)
        )

    return inject


ALL = PHASES
FAULTS: tuple[FaultKind, ...] = (
    FaultKind("shuffler_jam", "shuffler", "C4", ALL, has_asd, _device_fault("shuffler", "jam")),
    FaultKind(
        "shuffler_stopped", "shuffler", "C4", ALL, has_asd, _device_fault("shuffler", "stopped")
    ),
    FaultKind(
        "shuffler_incomplete",
        "shuffler",
        "C4",
        ALL,
        has_asd,
        _device_fault("shuffler", "incomplete"),
    ),
    FaultKind("shuffler_disconnect", "shuffler", "C4", ALL, has_asd, _disconnect("shuffler")),
    FaultKind("shoe_jam", "shoe", "C5", ALL, is_ads, _device_fault("shoe", "jam")),
    FaultKind("shoe_stopped", "shoe", "C5", ALL, is_ads, _device_fault("shoe", "stopped")),
    FaultKind("shoe_disconnect", "shoe", "C5", ALL, lambda s: True, _disconnect("shoe")),
    FaultKind("shoe_unread_card", "shoe", "X2", ALL, reads_cards, _unread_card()),
    FaultKind(
        "reader_disconnect",
        "hole_card_reader",
        "H5",
        ALL,
        has_reader,
        _disconnect("hole_card_reader"),
    ),
    FaultKind("face_up_card", "shoe", "C1", ("dealing",), reads_cards, _face_up(1)),
    FaultKind("second_face_up_card", "shoe", "C2", ("dealing",), reads_cards, _face_up(2)),
    FaultKind("foreign_card", "shoe", "C8", ("dealing",), lambda s: True, _wrong_card("foreign")),
    # A card is extra once the shoe has given every copy the composition holds: reachable in
    # a short legal session only where that is one copy (a 3C21 shoe holds six to eight; its
    # seventh copy is tested in tests/unit/engine: test_C8_three_card_21_seventh_copy_...).
    FaultKind(
        "extra_card",
        "shoe",
        "C8",
        ("dealing",),
        lambda s: s.game != "three_card_21",
        _wrong_card("extra"),
    ),
    FaultKind(
        "missing_card_at_count", "shuffler", "C7", ("shuffling",), counting_asd, _count_off(-1)
    ),
    FaultKind(
        "extra_card_at_count", "shuffler", "C7", ("shuffling",), counting_asd, _count_off(+1)
    ),
)
FAULTS_BY_NAME = {fault.name: fault for fault in FAULTS}


def inject(
    spec: TableSpec,
    fault: FaultKind,
    phase: str,
    events: list[Event],
    spent: Counter[str],
    rng: random.Random,
) -> Injection | None:
    """``events`` (one round) with ``fault`` at ``phase``; None where the round has no such
    moment (a 3C21 round dealt from a shoe shuffled in an earlier round has no shuffle)."""
    at = phase_index(events, phase)
    if at is None or at >= len(events) + (1 if phase == "collection" else 0):
        return None
    ctx = InjectionContext(spent, rng, phase)
    return fault.inject(spec, events, at, ctx)
