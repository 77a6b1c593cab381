"""The round state machine of each game: one definition, used to build the table's
``transitions.Machine`` and to draw the state charts (``tablectl diagram``).

Machines are plain ``Machine(queued=True, auto_transitions=False)``, built once per
table; they carry no callbacks: the engine decides, the machine only records where the
round is and refuses a transition that the definition does not allow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transitions import Machine

ROUND_STATES = {
    "three_card_21": ("dealing", "bonus", "insurance", "players", "dealer_turn"),
    "five_card_hilo": ("dealing", "play"),
    "heads_up_holdem": ("dealing", "play"),
    "asia_poker": ("starting_position", "dealing", "play"),
}


@dataclass(frozen=True)
class MachineDefinition:
    """States, transitions (trigger, sources, dest) and the initial state of one game."""

    game: str
    states: tuple[str, ...]
    transitions: tuple[tuple[str, tuple[str, ...], str], ...]
    initial: str = "idle"

    @property
    def round_states(self) -> tuple[str, ...]:
        return ROUND_STATES[self.game]


def definition(game: str) -> MachineDefinition:
    """The state chart of ``game``: opening, shuffling, betting, dealing, play, collection."""
    rounds = ROUND_STATES[game]
    in_round = (*rounds, "suspended")
    transitions: list[tuple[str, tuple[str, ...], str]] = [
        ("start_shuffle", ("idle",), "shuffling"),
        ("finish_shuffle", ("shuffling",), "idle"),
        ("fault_shuffle", ("shuffling",), "idle"),
    ]
    if game == "asia_poker":
        transitions += [
            ("close_bets", ("idle", "shuffling"), "starting_position"),
            ("choose_start", ("starting_position",), "dealing"),  # A1
            ("complete_deal", ("dealing",), "play"),
        ]
    elif game == "three_card_21":
        transitions += [
            ("close_bets", ("idle", "shuffling"), "dealing"),
            ("complete_deal", ("dealing",), "bonus"),
            ("settle_bonus_ace_up", ("bonus",), "insurance"),  # H3: insurance before the reader
            ("settle_bonus", ("bonus",), "players"),  # H4: reader only after this
            ("close_insurance", ("insurance",), "players"),
            ("start_dealer_turn", ("bonus", "insurance", "players"), "dealer_turn"),  # G6
        ]
    else:
        transitions += [
            ("close_bets", ("idle", "shuffling"), "dealing"),
            ("complete_deal", ("dealing",), "play"),
        ]
    transitions += [
        ("collect", (*in_round, "void"), "idle"),
        ("void", in_round, "void"),
        ("suspend", rounds, "suspended"),
        ("remove_deck", ("idle", "shuffling", *in_round, "void"), "deck_removed"),  # C10
        ("receive_deck", ("deck_removed",), "idle"),
    ]
    states = ("idle", "shuffling", *rounds, "void", "suspended", "deck_removed")
    return MachineDefinition(game, states, tuple(transitions))


class RoundModel:
    """The object the machine drives; ``state`` and ``trigger`` are set by transitions."""

    state: str
    trigger: Callable[..., bool]


def build(defn: MachineDefinition, model: RoundModel) -> Any:
    """Build the one machine of a table (about 0.3 ms; never per round)."""
    return Machine(
        model=model,
        states=list(defn.states),
        transitions=[
            {"trigger": t, "source": list(src), "dest": dst} for t, src, dst in defn.transitions
        ],
        initial=defn.initial,
        queued=True,
        auto_transitions=False,
    )


def mermaid(defn: MachineDefinition) -> str:
    """The state chart as mermaid ``stateDiagram-v2`` text."""
    lines = ["stateDiagram-v2", f"    [*] --> {defn.initial}"]
    for trigger, sources, dest in defn.transitions:
        for source in sources:
            lines.append(f"    {source} --> {dest}: {trigger}")
    return "\n".join(lines) + "\n"


def graphviz(defn: MachineDefinition) -> str:
    """The state chart as graphviz ``dot`` text (rendered to SVG when ``dot`` exists)."""
    lines = [
        f'digraph "{defn.game}" {{',
        "  rankdir=LR;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        "  start [shape=point];",
        f"  start -> {defn.initial};",
    ]
    for trigger, sources, dest in defn.transitions:
        for source in sources:
            lines.append(f'  {source} -> {dest} [label="{trigger}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
