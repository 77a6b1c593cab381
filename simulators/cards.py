"""Deck compositions for the simulators (cards spelled as docs/events.md says)."""

from __future__ import annotations

from tablectl.drivers.protocol.messages import RANKS, SUITS

ONE_DECK: tuple[str, ...] = tuple(rank + suit for suit in SUITS for rank in RANKS)
TEN_VALUE = frozenset("TJQK")


def composition(decks: int = 1, joker: bool = False) -> list[str]:
    """The cards of ``decks`` standard decks, plus one joker if asked (Asia Poker)."""
    if not 1 <= decks <= 8:
        raise ValueError(f"decks must be 1 to 8, got {decks}")
    return [*ONE_DECK * decks, *(["JK"] if joker else [])]


def is_blackjack(up_card: str, hole_card: str) -> bool:
    """An ace with a ten-value card, the way a hole-card reader judges it."""
    ranks = {up_card[0], hole_card[0]}
    return "A" in ranks and bool(ranks & TEN_VALUE) and up_card != "JK" and hole_card != "JK"
