"""The conservation law (docs/rules.md, "L"), as checks a test or a soak runs after every event.

Every card the table read is, at every moment, in exactly one place the ledger names: the
shoe (or the shuffler), a hand or the board, burned, the discard rack, or removed; cards on
the layout belong to the round in play (or the void round not yet collected) of their deck.
A round ends only with an outcome the journal records: completed (collected once its deal
was complete) or void (a ``void_round`` or ``hands_dead`` decision for it).

:func:`check` is the state's half (after any event); :class:`RoundWatch` follows a table
event by event and adds the half that spans events: no round disappears without an outcome.
Pure: it reads the engine, never changes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.ledger import DISCARD, REMOVED, SHOE, LedgerError

#: the places that are not the layout: a card there belongs to no round
OFF_LAYOUT = (SHOE, DISCARD, REMOVED)
#: the decisions that give a round its void outcome
VOID_DECISIONS = frozenset({"void_round", "hands_dead"})


class ConservationError(LedgerError):
    """The conservation law is broken; the message says how (never a card: H7)."""


def check(engine: Engine) -> None:
    """Raise ConservationError unless every card is in one named place, the layout holds
    cards only of the round in play, and the state is the chart's and agrees with the round."""
    definition = engine.chart()
    if engine.state not in definition.states:
        raise ConservationError(f"state {engine.state!r} is not a state of the chart")
    rnd = engine.round
    in_round = (*definition.round_states, "suspended", "void")
    if rnd is None and engine.state in definition.round_states:
        raise ConservationError(f"state {engine.state} with no round")
    if rnd is not None and engine.state not in in_round:
        raise ConservationError(f"round {rnd.number} still held in state {engine.state}")
    for deck in engine.decks.values():
        try:
            deck.ledger.check()
        except LedgerError as error:
            raise ConservationError(f"deck {deck.name}: {error}") from None
        layout = sorted(
            place for place, held in deck.ledger.places.items() if held and place not in OFF_LAYOUT
        )
        if layout and (rnd is None or rnd.deck != deck.name):
            raise ConservationError(
                f"deck {deck.name}: cards on the layout ({', '.join(layout)}) with no round "
                "of that deck in play"
            )


def _counts(held: Iterable[tuple[str, Any]]) -> Iterable[tuple[str, int]]:
    """(place, cards held there) of a ledger's places."""
    return ((place, sum(counter.values())) for place, counter in held)


class RoundWatch:
    """Follows one engine event by event: :meth:`after` checks the law after each.

    A round that is gone (collected, replaced, dropped) must have ended with an outcome:
    void (a void decision while it was open) or completed (collected by ``hands_collected``
    once its deal was complete, and never with the dealer's misdeal check unanswered, M7).
    A round's cards collected by ``hands_collected`` go to the discard rack as its deck's
    (D2 sees them, whatever new cards of the deck came meanwhile); no card reaches a hand
    from a rack whose reshuffle mid-round jammed (G5, then C4) until a reshuffle completes.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.deal_states = engine.chart().deal_states
        self.open: int | None = None
        self.voided = False
        self.dealt_out = False
        self.check_pending = False
        self.had_layout = False
        self.round_deck: str | None = None
        self.outcomes: dict[int, str] = {}
        self._see()

    def _see(self) -> None:
        rnd = self.engine.round
        if rnd is None:
            self.open = None
            return
        if rnd.number != self.open:
            self.open, self.voided, self.dealt_out = rnd.number, False, False
            self.had_layout = False
        self.check_pending = rnd.check_pending
        self.round_deck = rnd.deck
        held = self.engine.decks[rnd.deck].ledger.places.items()
        self.had_layout |= any(n for place, n in _counts(held) if place not in OFF_LAYOUT)
        state = self.engine.state
        # a collection with every planned card read completes the deal first
        self.dealt_out |= self.engine.deal_fulfilled()
        if state == "void":
            self.voided = True
        elif state == "suspended":
            self.dealt_out |= self.engine.suspended_from not in self.deal_states
        elif state not in self.deal_states:
            self.dealt_out = True

    def after(self, event: Mapping[str, Any], decisions: Iterable[Decision]) -> None:
        """The law after ``event`` and the ``decisions`` it drew."""
        check(self.engine)
        decisions = list(decisions)
        names = {d.decision for d in decisions}
        self._jammed_rack(event, decisions)
        opened = self.engine.round is not None
        if event.get("type") == "bets_closed" and "rejected" not in names and not opened:
            raise ConservationError(
                "'no more bets' was neither refused nor followed by a round (C10, L1)"
            )
        if self.open is not None:
            if names & VOID_DECISIONS:
                self.voided = True
            rnd = self.engine.round
            if rnd is None or rnd.number != self.open:
                if self.voided:
                    self.outcomes[self.open] = "voided"
                elif event.get("type") == "hands_collected" and self.dealt_out:
                    if self.check_pending:
                        raise ConservationError(
                            f"round {self.open} completed with the dealer's misdeal check "
                            "unanswered (M7: 40.12(d) asks a remedy first)"
                        )
                    self.outcomes[self.open] = "completed"
                else:
                    raise ConservationError(
                        f"round {self.open} ended at {event.get('type')!r} with no outcome "
                        "(neither collected once dealt nor void)"
                    )
                self._collected_to_the_rack(event)
        self._see()

    def _collected_to_the_rack(self, event: Mapping[str, Any]) -> None:
        """D2: a round's cards collected by hands_collected are its deck's in the rack."""
        engine = self.engine
        deck = self.round_deck
        if (
            event.get("type") != "hands_collected"
            or not self.had_layout
            or deck is None
            or not engine.options.dual_deck
            or engine.decks[deck].removed
        ):
            return
        if engine.rack_deck != deck:
            raise ConservationError(
                f"round {self.open}'s cards of deck {deck} were collected but the discard "
                f"rack's record says deck {engine.rack_deck} (D2 cannot see them)"
            )

    def _jammed_rack(self, event: Mapping[str, Any], decisions: list[Decision]) -> None:
        """C4 after G5: while the rack's mid-round reshuffle is jammed, no card is dealt."""
        engine = self.engine
        jammed = self._rack_jammed
        self._rack_jammed = engine.burn_pending == "G5" and engine.decks[engine.current].faulted
        if jammed and event.get("type") == "card_drawn":
            blocked = any(d.decision == "deal_blocked" for d in decisions)
            if not blocked:
                raise ConservationError(
                    "a card was taken from the discard rack whose reshuffle jammed (G5, C4) "
                    "before any reshuffle completed"
                )

    _rack_jammed = False
