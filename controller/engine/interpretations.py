"""Interpretations: the points where the regulation text is silent or ambiguous.

Each is a named switch whose default is the choice docs/rules.md made, kept here and only
here so that another jurisdiction can change it through the table's options, e.g.
``{"options": {"interpretations": {"stub_count_interval": 4}}}``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Interpretations:
    """Named interpretation switches; defaults are docs/rules.md's choices."""

    # S1: the stub is counted at least once every this many rounds ...
    stub_count_interval: int = 5
    # ... counted per deck (rounds dealt from that deck), not per table.
    stub_count_per_deck: bool = True
    # S2: HILO's counting-shuffler exemption holds only with an ADS (40.9(f)); HUH's always.
    hilo_counting_exemption_needs_ads: bool = True
    # C7: a wrong shuffler count also removes the deck in 3C21 and Asia Poker.
    count_mismatch_removes_deck_everywhere: bool = True
    # C9: a card drawn before "no more bets" in 3C21 (other than a G2 burn) is a violation.
    three_card_21_early_card_is_violation: bool = True
    # D3: Asia Poker's 53 cards are shuffled after every round, like HILO and HUH.
    asia_poker_shuffles_every_round: bool = True
    # The table opens with its deck(s) received, inspected and pre-shuffled (13:69E-1.18(r)).
    opening_decks_preshuffled: bool = True
    # X1: after a controller restart mid-round, 3C21 (cards dealt face up) resumes, the
    # face-down games void the round.
    restart_resumes_three_card_21: bool = True
    # H6: a reader answer that contradicts the shoe's reading is a malfunction.
    reader_contradiction_is_malfunction: bool = True
    # R1: reconcile the discard rack's level with the cards that left the shoe.
    reconcile_discard_rack: bool = True
    # Q1, Q2: watch the dealt order for a replayed or inadequate shuffle (2C.4(a), 40.4(a),
    # 39.4(a): "randomly intermixed"); findings tell surveillance and block nothing. Off in a
    # bare scenario file, whose hand-written orders repeat on purpose; a table's
    # configuration turns it on (config.py), and a scenario file may ask for it.
    shuffle_integrity: bool = False
    # G4: the Bart Carter reshuffle threshold, "approximately one deck" (2C.4(h)2).
    bart_carter_rack_threshold: int = 52

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def overridden(self, changes: dict[str, Any]) -> Interpretations:
        """A copy with ``changes`` applied; raises ValueError naming a bad key or value."""
        defaults = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in changes.items():
            if name not in defaults:
                raise ValueError(
                    f"unknown interpretation {name!r}; known: {', '.join(sorted(defaults))}"
                )
            expected = type(defaults[name])
            if type(value) is not expected:
                raise ValueError(
                    f"interpretation {name!r} must be {expected.__name__}, got {value!r}"
                )
            if expected is int and value < 1:
                raise ValueError(f"interpretation {name!r} must be at least 1, got {value!r}")
        return replace(self, **changes)
