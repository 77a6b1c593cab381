"""The round state machine: one chart per game, used to build the table's
``transitions.Machine`` and, by transitions' own diagram support, to draw it
(``tablectl diagram``).

The chart is where the rules that allow or refuse a step live: each such rule is a
``transitions`` condition named after it (``S1_stub_counted_in_time``,
``C11_positions_within_the_table``...), on the transitions it gates. The engine defines
each condition once, as a method of that name; the machine calls it, and the diagram
prints its name on the edge. Machines are plain ``Machine(auto_transitions=False)``,
built once per table; not queued (no callback ever triggers another transition), so a
trigger answers whether its conditions let it through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from transitions import Machine

from tablectl.controller.engine.registry import find_game

Transition = tuple[str, tuple[str, ...], str, tuple[str, ...]]

# The rules that gate the deal of a round's first card or stack, in the order they are
# checked (the first that fails names the deal_blocked decision). Each is an Engine method.
DEAL_CONDITIONS = (
    "C10_deck_not_removed",
    "C6_no_other_method_at_the_table",
    "D4_hand_deal_has_a_working_shuffler",
    "C4_shuffle_completed",
    "C10_new_cards_shuffled",
    "reshuffle_done",  # the rule that ordered it: C2, C5, G3, G4, M3, M4, M5 ...
    "D1_D3_shuffled_since_the_last_round",
    "S1_stub_counted_in_time",
)


@dataclass(frozen=True)
class MachineDefinition:
    """States, transitions (trigger, sources, dest, conditions) and the initial state."""

    game: str
    states: tuple[str, ...]
    transitions: tuple[Transition, ...]
    round_states: tuple[str, ...]
    initial: str = "idle"
    #: the round states before its deal is complete (the first state after "no more bets"
    #: up to "dealing"): a round is not collected in them (L2)
    deal_states: tuple[str, ...] = ("dealing",)

    @property
    def conditions(self) -> tuple[str, ...]:
        """Every condition named on the chart, once each, in order."""
        return tuple(dict.fromkeys(c for *_, conds in self.transitions for c in conds))


def chart(
    game: str,
    round_states: tuple[str, ...],
    play: list[Transition],
    first_state: str = "dealing",
    collect_rules: tuple[str, ...] = (),
) -> MachineDefinition:
    """A game's chart: the common frame (shuffling, betting, the deal's gates, voids,
    suspension, removal, collection) around the game's own steps ``play``; a game's own
    rules on the collection of a round (``collect_rules``) join L2 there."""
    in_round = (*round_states, "suspended")
    transitions: list[Transition] = [
        ("start_shuffle", ("idle",), "shuffling", ()),
        ("finish_shuffle", ("shuffling",), "idle", ()),
        ("fault_shuffle", ("shuffling",), "idle", ()),
        # L3: the deck of a round in play is not shuffled before the round ends (a game's
        # own mid-round shuffle, a batch of its own or a rack reshuffled by its rule, passes)
        ("shuffle_mid_round", in_round, "=", ("L3_the_rounds_cards_stay_out_of_the_shuffle",)),
        # C11: never more positions than the game and the table have; L1: "no more bets"
        # once a round, which ends (collected or void) before another opens; C10: not
        # while the deck the round would be dealt from is removed
        (
            "close_bets",
            ("idle", "shuffling", *in_round),
            first_state,
            (
                "L1_no_round_in_play",
                "C11_positions_within_the_table",
                "C10_the_rounds_deck_in_place",
            ),
        ),
        # the first card or stack of the round: every rule that may refuse the deal
        ("start_deal", ("dealing",), "dealing", DEAL_CONDITIONS),
        *play,
        # L2: a round in play is collected only once its deal is complete
        ("collect", (*in_round, "void"), "idle", ("L2_deal_complete", *collect_rules)),
        ("void", in_round, "void", ()),
        ("suspend", round_states, "suspended", ()),
        # C10 per deck: one of two decks removed, the other deals on; the last, no deal
        (
            "remove_deck",
            ("idle", "shuffling", *in_round, "void"),
            "idle",
            ("C10_another_deck_in_place",),
        ),
        ("remove_deck", ("idle", "shuffling", *in_round, "void"), "deck_removed", ()),
        ("receive_deck", ("deck_removed",), "idle", ()),
    ]
    states = ("idle", "shuffling", *round_states, "void", "suspended", "deck_removed")
    deal_states = round_states[: round_states.index("dealing") + 1]
    return MachineDefinition(game, states, tuple(transitions), round_states, "idle", deal_states)


class RoundModel:
    """The object the machine drives; ``state`` and ``trigger`` are set by transitions,
    the rule conditions by :func:`build` (bound to the engine that defines them)."""

    state: str
    trigger: Callable[..., bool]


def _machine_transitions(defn: MachineDefinition) -> list[dict[str, Any]]:
    return [
        {"trigger": t, "source": list(src), "dest": dst, "conditions": list(conds)}
        for t, src, dst, conds in defn.transitions
    ]


def build(defn: MachineDefinition, model: RoundModel, rules: object) -> Any:
    """Build the one machine of a table (about 0.3 ms; never per round).

    Each condition of the chart is looked up by name on ``rules`` (the engine).
    """
    for name in defn.conditions:
        setattr(model, name, getattr(rules, name))
    return Machine(
        model=model,
        states=list(defn.states),
        transitions=_machine_transitions(defn),
        initial=defn.initial,
        auto_transitions=False,
    )


def definition(game: str) -> MachineDefinition:
    """The chart of the game registered as ``game``."""
    defn: MachineDefinition = find_game(game).chart()
    return defn


class _Drawn:
    """The model of a machine built only to be drawn."""

    state: str


def graph(defn: MachineDefinition, engine: Literal["mermaid", "graphviz"] = "mermaid") -> Any:
    """The chart as transitions' own diagram graph (its ``mermaid`` or ``graphviz``
    engine), each transition labelled with its trigger and the rules that gate it."""
    # imported here: only `tablectl diagram` and the docs draw, not the daemon's start
    from transitions.extensions.diagrams import GraphMachine

    model = _Drawn()
    GraphMachine(
        model=model,
        states=list(defn.states),
        transitions=_machine_transitions(defn),
        initial=defn.initial,
        auto_transitions=False,
        show_conditions=True,
        graph_engine=engine,
        title=defn.game,
    )
    return model.get_graph()  # type: ignore[attr-defined]


def mermaid(defn: MachineDefinition) -> str:
    """The chart as mermaid ``stateDiagram-v2`` text, drawn by transitions."""
    text: str = graph(defn, "mermaid").draw(None)
    return text if text.endswith("\n") else text + "\n"


class DrawingToolMissing(Exception):
    """An optional tool the SVG needs is not installed; the message says which and how."""


def svg(defn: MachineDefinition) -> bytes:
    """The chart as SVG, drawn by transitions' graphviz engine (needs the ``graphviz``
    package and graphviz's ``dot``); DrawingToolMissing names the one that is absent."""
    try:
        import graphviz  # type: ignore[import-untyped]
    except ImportError:
        raise DrawingToolMissing(
            "the graphviz Python package is not installed (pip install 'tablectl[diagrams]')"
        ) from None
    try:
        drawn: bytes = graph(defn, "graphviz").draw(None, format="svg", prog="dot")
    except graphviz.ExecutableNotFound:
        raise DrawingToolMissing(
            "graphviz's `dot` program is not on PATH (Debian: apt-get install graphviz)"
        ) from None
    return drawn
