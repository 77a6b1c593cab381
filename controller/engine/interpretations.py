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
    # Issue 32's open questions (docs/rules.md, "Interpretations"):
    # I2: new cards of a void round's deck may be received before that round's cards are
    # collected (they are the old deck's and still go to the discard rack); true refuses the
    # receipt until the void round is collected.
    deck_receipt_waits_for_void_collection: bool = False
    # I3: a void round counts as its deck's turn in the two-deck alternation (D1).
    void_round_counts_in_alternation: bool = True
    # I4: a faulted hole-card reader re-inspected on the gaming day it went out stays out
    # (H5: "for the rest of the gaming day"; no repair is recorded); true lets any
    # re-inspection return it to service.
    reader_reinspection_same_day_restores: bool = False
    # I5: a reader answer with nothing inserted is a malfunction (H5, as H6).
    reader_answer_without_insertion_is_malfunction: bool = True
    # I6: a manual Three Card 21 shoe that jams mid-round: the dealt (face-up) cards stand and
    # the round goes on once it deals again (G9); true voids the round as for an ADS (C5).
    three_card_21_manual_shoe_jam_voids_round: bool = False
    # I7: Asia Poker's starting position, once determined, is not determined again before the
    # first card (A1); true lets a second determination before any card replace it.
    asia_poker_start_redetermined_before_first_card: bool = False
    # I8: a Three Card 21 round restarted with an ace up and insurance open resumes with
    # insurance open (X1; H3 still gates the reader); false voids it as a face-down round.
    restart_with_insurance_open_resumes: bool = True

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
