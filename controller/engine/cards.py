"""Cards as docs/events.md spells them, and the deck compositions the four games use.

A card is a two-character string: rank ``A 2 3 4 5 6 7 8 9 T J Q K`` then suit
``c d h s``; the joker is ``JK``. Input may say ``10h``; output always says ``Th``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

RANKS = "A23456789TJQK"
SUITS = "cdhs"
JOKER = "JK"
STANDARD_DECK: tuple[str, ...] = tuple(r + s for s in SUITS for r in RANKS)


class CardError(ValueError):
    """A card or a composition that docs/events.md does not allow; the message names the value."""


#: Every card as docs/events.md spells it: what nearly every device and terminal sends.
CANONICAL_CARDS = frozenset((*STANDARD_DECK, JOKER))


def parse_card(value: object) -> str:
    """Return the canonical spelling of ``value`` or raise CardError naming it."""
    if not isinstance(value, str):
        raise CardError(f"a card must be a string like 'As' or 'JK', got {type(value).__name__}")
    if type(value) is str and value in CANONICAL_CARDS:
        return value  # already canonical: every card of every dealt round goes by here
    text = value.strip()
    if text.upper() == JOKER:
        return JOKER
    if len(text) == 3 and text[:2] == "10":
        text = "T" + text[2]
    if len(text) == 2:
        rank, suit = text[0].upper(), text[1].lower()
        if rank in RANKS and suit in SUITS:
            return rank + suit
    # The value is not echoed: a misspelled card is still a card, maybe face down (H7).
    raise CardError(
        f"bad card ({len(value)} characters, not shown): expected a rank of "
        f"{' '.join(RANKS)} (or 10) followed by "
        f"a suit of {' '.join(SUITS)}, or JK for the joker"
    )


# A card-shaped word in any case (AH, ah, 10H, jk), standing alone: in a device's own text
# nothing says which case is a word and which a card, so every such word counts as a card.
_CARD_WORD = re.compile(r"(?<![\w.])(?:10|[2-9tjqka])[cdhs](?!\w)|(?<![\w.])jk(?!\w)", re.I)
CARD_WORD_MASK = "[card]"


def mask_card_words(text: str) -> str:
    """`text` with every card-shaped word, in any case, replaced by [card] (H7).

    For a device's own words (a fault's name or detail): untrusted firmware could put a face-
    down card there, and they reach decisions' reasons, logs, alarms and `status`. The journal
    keeps the device's text as it came.
    """
    return _CARD_WORD.sub(CARD_WORD_MASK, text)


def is_ten_or_ace(card: str) -> bool:
    """A, K, Q, J or 10: the up cards with which a hole-card reader may be used (2C.14(k))."""
    return card != JOKER and card[0] in "AKQJT"


def blackjack_value(card: str) -> int:
    """Point value with an ace counted as 1 (2C.2(b)); the caller promotes one ace to 11."""
    rank = card[0]
    if rank == "A":
        return 1
    if rank in "TJQK":
        return 10
    return int(rank)


def hand_total(cards: list[str]) -> tuple[int, bool]:
    """The best blackjack total of ``cards`` and whether it is soft (an ace counted as 11)."""
    total = sum(blackjack_value(c) for c in cards)
    has_ace = any(c[0] == "A" for c in cards)
    if has_ace and total + 10 <= 21:
        return total + 10, True
    return total, False


def dealer_stands(cards: list[str], hits_soft_17: bool) -> bool:
    """G6: hard 17+, soft 18+, and soft 17 unless the table hits soft 17 (2C.11(b))."""
    total, soft = hand_total(cards)
    if total >= 18 or (total == 17 and not soft):
        return True
    return total == 17 and soft and not hits_soft_17


class Composition:
    """How many copies of each card a table's deck (or shoe of decks) holds."""

    __slots__ = ("copies", "label", "size")

    def __init__(self, copies: Mapping[str, int], label: str) -> None:
        self.copies: dict[str, int] = dict(copies)
        self.size = sum(self.copies.values())
        self.label = label

    def holds(self, card: str) -> int:
        return self.copies.get(card, 0)

    def as_counter(self) -> Counter[str]:
        return Counter(self.copies)

    def __repr__(self) -> str:
        return f"Composition({self.label}, {self.size} cards)"


def standard_deck() -> Composition:
    """52 cards, one of each: Hi-Lo and Heads Up Hold'em (40.2(a), 39.2(a))."""
    return Composition(dict.fromkeys(STANDARD_DECK, 1), "52-card deck")


def deck_with_joker() -> Composition:
    """53 cards, 52 and the joker: Asia Poker (subchapter 31)."""
    copies = dict.fromkeys(STANDARD_DECK, 1)
    copies[JOKER] = 1
    return Composition(copies, "53-card deck (52 + joker)")


def multi_deck_shoe(decks: int) -> Composition:
    """6 to 8 decks of 52 for Three Card 21 "N" Done (2C.2(a)); anything else is refused."""
    if isinstance(decks, bool) or not isinstance(decks, int) or not 6 <= decks <= 8:
        raise CardError(f"a Three Card 21 shoe holds 6 to 8 decks, not {decks!r}")
    return Composition(dict.fromkeys(STANDARD_DECK, decks), f"{decks}-deck shoe")
