"""Every event in every state: the engine's answer to each event type of docs/events.md in
each state of each game's chart, for each dealing method the game allows.

    python -m tests.engine_matrix.matrix        (or: make matrix-regen)

writes tests/engine_matrix/golden/GAME.md; `make test` compares (test_engine_matrix.py).
Each cell starts from a fresh table, reaches its state by a scripted prefix, then takes the
one event. The conservation law (controller/engine/conservation.py) is checked after every event
of the prefix and after the cell's event; a refused event must leave the engine's snapshot
as it was. Review `git diff tests/engine_matrix` after a regeneration: every changed line
is a changed ruling.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.engine.conservation import RoundWatch
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.registry import find_game
from tablectl.controller.engine.table import TableSpec, TableSpecError

GOLDEN = Path(__file__).resolve().parent / "golden"
GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
Event = dict[str, Any]

# Decisions of a step taken as the rules expect (the rest name an irregularity).
NORMAL = {
    ("burn_card", "G2"),
    ("starting_position", "A1"),
    ("stub_count_required", "S1"),
    ("continue_play", "X1"),
    ("reshuffle", "G3"),
    ("reshuffle", "G8"),
    ("reshuffle", "D3"),
}


def ev(kind: str, **fields: Any) -> Event:
    return {"type": kind, **fields}


@dataclass
class Table:
    """A fresh table of one game and dealing method, and the cards it deals in order."""

    game: str
    method: str

    def engine(self, label: str = "") -> Engine:
        options = {"dealing": self.method, **LABEL_OPTIONS.get(label, {})}
        spec = TableSpec.from_dict({"game": self.game, "options": options})
        return Engine(spec, random_source=random.Random(0).randrange)


def _cards(engine: Engine) -> list[str]:
    """The composition's cards, one copy each, in a fixed order (a deal never repeats one)."""
    return sorted(engine.composition.as_counter())


class Script:
    """Events for one table, drawing cards in order from the table's own composition."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.deck = _cards(engine)
        self.next = 0

    def take(self, n: int) -> list[str]:
        cards = self.deck[self.next : self.next + n]
        self.next += n
        return cards

    def draw(self, n: int = 1, **fields: Any) -> list[Event]:
        return [ev("card_drawn", card=c, **fields) for c in self.take(n)]

    def stack(self, n: int) -> Event:
        return ev("stack_dispensed", cards=self.take(n))


POSITIONS = [1, 2]


def _open(s: Script) -> list[Event]:
    out = [ev("bets_closed", positions=POSITIONS)]
    if s.engine.game == "asia_poker":
        out.append(ev("starting_position", number=1))
    return out


def _first(s: Script) -> list[Event]:
    if s.engine.method == "automated_shoe":
        return [s.stack(5)]  # HILO's position 1, HUH's board
    return s.draw()


def _dealt(s: Script, ace_up: bool = False) -> list[Event]:
    """The whole initial deal to positions 1 and 2 and the dealer, then deal_completed."""
    game, method = s.engine.game, s.engine.method
    if game == "three_card_21":
        up = "Ah" if ace_up else "Kh"
        # 2C.6(d): position 1, 2, the up card, 1, 2, the hole card, 1, 2
        cards = ["2c", "3c", up, "4c", "5c", "9d", "6c", "7c"]
        deal = [ev("card_drawn", card=c) for c in cards]
    elif method == "automated_shoe":
        sizes = [5, 5, 5] if game == "five_card_hilo" else [5, 2, 2, 2]
        deal = [s.stack(n) for n in sizes]
    else:
        count = {
            "five_card_hilo": 15,
            "heads_up_holdem": 6 if method == "hand" else 11,
            "asia_poker": 49,
        }[game]
        deal = s.draw(count)
    return [*_open(s), *deal, ev("deal_completed")]


# The states of the charts, each with the prefix that reaches it from a fresh table; a
# label in parentheses is a second view of the same chart state.
Prefix = Callable[[Script], list[Event]]
PREFIXES: dict[str, Prefix] = {
    "idle": lambda s: [],
    "shuffling": lambda s: [ev("shuffle_started")],
    "starting_position": lambda s: [ev("bets_closed", positions=POSITIONS)],
    "dealing (before its first card)": _open,
    "dealing": lambda s: [*_open(s), *_first(s)],
    "play": _dealt,
    "bonus": _dealt,
    "insurance": lambda s: [*_dealt(s, ace_up=True), ev("bonus_settled")],
    "players": lambda s: [*_dealt(s), ev("bonus_settled")],
    "dealer_turn": lambda s: [*_dealt(s), ev("bonus_settled"), ev("dealer_turn")],
    "void": lambda s: [
        *_open(s),
        *_first(s),
        *(
            [ev("shoe_fault", fault="jam")]  # C5
            if s.engine.method == "automated_shoe"
            else s.draw(2, face_up=True)  # C2
        ),
    ],
    "suspended": lambda s: [*_open(s), *_first(s), ev("device_lost", device="shoe")],
    "deck_removed": lambda s: [ev("shuffle_completed", count=s.engine.composition.size - 1)],
}


def _one_of_two_removed(s: Script) -> list[Event]:
    """Two decks: round 1 on deck A, whose stub count does not add up: A removed (S3)."""
    if s.engine.game not in ("five_card_hilo", "heads_up_holdem"):
        return []
    dealt = _dealt(s)
    return [*dealt, ev("stub_counted", count=1), ev("hands_collected")]


def _void_and_receipt(s: Script) -> list[Event]:
    """A void round whose deck's new cards arrive before its cards are collected."""
    return [*PREFIXES["void"](s), ev("deck_received")]


def _check_unanswered(s: Script) -> list[Event]:
    """HILO read card by card: one card short, deal_completed asks for a check (M1)."""
    if s.engine.game != "five_card_hilo" or s.engine.method == "automated_shoe":
        return []
    return [*_open(s), *s.draw(14), ev("deal_completed")]


def _rack_reshuffle_jammed(s: Script) -> list[Event]:
    """3C21: round 1 played and collected, round 2's shoe runs out (G5), the rack's
    reshuffle jams (C4)."""
    if s.engine.game != "three_card_21":
        return []
    round_one = [*_dealt(s), ev("bonus_settled"), ev("dealer_turn"), ev("hands_collected")]
    return [
        *round_one,
        ev("bets_closed", positions=POSITIONS),
        ev("card_drawn", card="Qs"),
        ev("shoe_fault", fault="empty"),
        ev("shuffler_fault", fault="jam"),
    ]


# Issue 32's states (a second view of a chart state each); a table option some need.
PREFIXES.update(
    {
        "idle (one of two decks removed)": _one_of_two_removed,
        "void (new cards of its deck received)": _void_and_receipt,
        "play (misdeal check unanswered)": _check_unanswered,
        "dealing (rack reshuffle jammed)": _rack_reshuffle_jammed,
    }
)
LABEL_OPTIONS: dict[str, dict[str, Any]] = {"idle (one of two decks removed)": {"dual_deck": True}}
# the states each issue-32 view follows, in the file
EXTRA_VIEWS = {
    "idle": ["idle (one of two decks removed)"],
    "void": ["void (new cards of its deck received)"],
    "play": ["play (misdeal check unanswered)"],
    "dealing": ["dealing (rack reshuffle jammed)"],
}

UNREACHABLE = {
    "suspended": "an automated dealing shoe lost mid-round voids the round (C5); only a "
    "manual shoe's round is suspended",
    "idle (one of two decks removed)": "the game is dealt from one deck (or shoe)",
    "play (misdeal check unanswered)": "only 5 Card Hi-Lo read card by card asks the dealer "
    "to check the hands (M1); stacks say whose hand is wrong",
    "dealing (rack reshuffle jammed)": "only Three Card 21's shoe is reshuffled from the "
    "discard rack mid-round (G5)",
}


def _events(s: Script) -> list[tuple[str, Event]]:
    """The cell events: each docs/events.md type, a few with a second payload."""
    engine = s.engine
    size = engine.composition.size
    stack = 5
    if engine.round is not None and engine.round.stacks:
        stack = engine.round.stacks[0][1]
    card = s.take(1)[0]
    face_up = s.take(1)[0]
    return [
        ("shuffle_started", ev("shuffle_started")),
        ("shuffle_completed", ev("shuffle_completed", count=size)),
        ("shuffle_completed (wrong count)", ev("shuffle_completed", count=size - 1)),
        ("shuffler_fault", ev("shuffler_fault", fault="jam")),
        ("shoe_loaded", ev("shoe_loaded")),
        ("card_drawn", ev("card_drawn", card=card)),
        ("card_drawn (face up)", ev("card_drawn", card=face_up, face_up=True)),
        ("stack_dispensed", ev("stack_dispensed", cards=s.take(stack))),
        ("cut_card_reached", ev("cut_card_reached")),
        ("shoe_fault", ev("shoe_fault", fault="jam")),
        ("shoe_fault (empty)", ev("shoe_fault", fault="empty")),
        ("shoe_fault (undecodable_frame)", ev("shoe_fault", fault="undecodable_frame")),
        ("reader_inserted", ev("reader_inserted")),
        ("reader_result", ev("reader_result", blackjack=False)),
        ("reader_fault", ev("reader_fault", fault="sensor")),
        ("rack_level", ev("rack_level", cards=5)),
        ("rack_cleared", ev("rack_cleared")),
        ("device_lost (shoe)", ev("device_lost", device="shoe")),
        ("device_lost (shuffler)", ev("device_lost", device="shuffler")),
        ("device_connected (shoe)", ev("device_connected", device="shoe")),
        ("deck_received", ev("deck_received")),
        ("reader_inspected", ev("reader_inspected", by="floor")),
        ("bets_closed", ev("bets_closed", positions=[1, 2])),
        ("starting_position", ev("starting_position", number=1)),
        ("deal_completed", ev("deal_completed")),
        ("stub_counted", ev("stub_counted", count=engine.ledger(engine.current).count("shoe"))),
        ("dealer_changed", ev("dealer_changed")),
        ("bonus_settled", ev("bonus_settled")),
        ("insurance_closed", ev("insurance_closed")),
        ("dealer_turn", ev("dealer_turn")),
        ("dealer_card_exposed", ev("dealer_card_exposed")),
        ("misdeal_reported", ev("misdeal_reported", position=1, cards=1)),
        ("hands_collected", ev("hands_collected")),
        ("reshuffle_requested", ev("reshuffle_requested")),
        ("device_removed (shuffler)", ev("device_removed", device="shuffler")),
        ("device_removed (shoe)", ev("device_removed", device="shoe")),
        ("shuffler_empty_confirmed", ev("shuffler_empty_confirmed", by="floor")),
        ("supervisor_ack", ev("supervisor_ack", by="floor")),
        ("controller_restarted", ev("controller_restarted")),
    ]


class MatrixError(AssertionError):
    """A cell broke the law or a refused event changed the engine; the message names it."""


def _fed(engine: Engine, watch: RoundWatch, event: Event, at: int) -> list[Decision]:
    decisions = engine.handle(event, at)
    watch.after(event, decisions)
    return decisions


def _reach(t: Table, label: str) -> tuple[Engine, RoundWatch, Script] | None:
    """A table in the state ``label`` names, or None where the method cannot reach it."""
    try:
        engine = t.engine(label)
    except TableSpecError:
        return None  # an option the game does not have (two decks)
    watch = RoundWatch(engine)
    script = Script(engine)
    for at, event in enumerate(PREFIXES[label](script), start=2):
        _fed(engine, watch, event, at)
    state = label.split(" (", 1)[0]
    return (engine, watch, script) if engine.state == state else None


def _outcome(decisions: list[Decision]) -> str:
    pairs = [(d.decision, d.rule_id) for d in decisions]
    if any(d == "rejected" for d, _ in pairs):
        return "refused"
    if all(p in NORMAL for p in pairs):
        return "acted"
    return "irregularity"


def _cell(t: Table, label: str, kind: str) -> str:
    reached = _reach(t, label)
    assert reached is not None
    engine, watch, script = reached
    event = dict(_events(script))[kind]
    before = engine.snapshot()
    try:
        decisions = engine.handle(event, 100)
        watch.after(event, decisions)
    except Exception as error:  # a broken law names the cell
        raise MatrixError(f"{t.game} {t.method} {label} {kind}: {error}") from error
    outcome = _outcome(decisions)
    if outcome == "refused" and engine.snapshot() != before:
        raise MatrixError(f"{t.game} {t.method} {label} {kind}: refused but the engine changed")
    said = ", ".join(f"{d.decision} {d.rule_id}" for d in decisions) or "—"
    after = engine.state + (f" r{engine.round.number}" if engine.round is not None else "")
    return f"| {kind} | {outcome} | {said} | {after} |"


def states_of(game: str) -> list[str]:
    """The labels of the game's chart states (with the second view of "dealing")."""
    chart = find_game(game).chart()
    labels = []
    for state in chart.states:
        if state == "dealing":
            labels.append("dealing (before its first card)")
        labels.append(state)
        labels += EXTRA_VIEWS.get(state, [])
    return labels


def render(game: str) -> str:
    """The golden text of one game: every method, every state, every event."""
    methods = find_game(game).profile.methods
    lines = [
        f"# {game}: every event in every state",
        "",
        "Generated by `make matrix-regen` (tests/engine_matrix/matrix.py); compared by",
        "`make test`. Each row: the event taken in that state from a fresh table brought",
        "there by a scripted prefix (positions 1 and 2); its outcome (acted on, refused,",
        "irregularity), the decisions with their rule IDs (docs/rules.md), and the state",
        "after (rN: the round open). The conservation law held after every event.",
        "Dealing methods (the table option `dealing`): `manual_shoe`, the card-reading",
        "manual dealing shoe (each card read as it leaves); `hand`, dealt from the",
        "dealer's hand (here read card by card too); `automated_shoe`, the ADS (stacks).",
        "A state a method cannot reach says so.",
    ]
    for method in methods:
        table = Table(game, method)
        for label in states_of(game):
            lines += ["", f"## {method} — {label}", ""]
            reached = _reach(table, label)
            if reached is None:
                why = UNREACHABLE.get(label, "the prefix ends elsewhere")
                lines.append(f"Not reachable with {method}: {why}.")
                continue
            lines += ["| event | outcome | decisions | state after |", "| --- | --- | --- | --- |"]
            lines += [_cell(table, label, kind) for kind, _ in _events(reached[2])]
    return "\n".join(lines) + "\n"


def golden_path(game: str) -> Path:
    return GOLDEN / f"{game}.md"


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    for game in GAMES:
        golden_path(game).write_text(render(game), encoding="utf-8")
        print(f"wrote {golden_path(game)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
