"""Write the acceptance scenario files (tests/acceptance/scenarios/*.jsonl).

The scenarios are derived by hand from the regulation texts; this script only
keeps the bookkeeping exact: every expectation is attached to the event line that
causes it, and the script turns that into the 1-based line number (`at`) that
EVENTS.md defines, counting comment and blank lines. Run it after editing a
scenario here:

    python tests/acceptance/make_scenarios.py

File syntax beyond EVENTS.md (the replay ignores every `#` line):
    #> {json}   an expected decision, in order
    #~ {json}   a decision that may or may not appear there (the rule leaves it open)
    #? text     what the rule leaves open in this scenario
    #! exit N   the exit status `tablectl replay` must return (default: not checked)
    #! hidden CARD before N   CARD must not appear in any output caused by lines < N (H7)
An expectation's `at` (or `rule_id`) may be a list: any one of them is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCENARIO_DIR = Path(__file__).parent / "scenarios"

RANKS = "A23456789TJQK"
SUITS = "cdhs"
DECK_52 = [r + s for s in SUITS for r in RANKS]


def fresh_cards() -> Iterator[str]:
    """A 52-card deck in a fixed order: no card repeats within one shuffle."""
    return iter(DECK_52)


class Scenario:
    def __init__(self, name: str, game: str, about: str, **options: Any) -> None:
        self.name = name
        self.lines: list[str] = [json.dumps({"type": "table", "game": game, "options": options})]
        self.expected: list[tuple[str, dict[str, Any]]] = []
        self.open_points: list[str] = []
        self.directives: list[str] = []
        for text in about.strip().splitlines():
            self.lines.append(f"# {text.strip()}")

    @property
    def next_line(self) -> int:
        return len(self.lines) + 1

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def ev(self, type_: str, *expect: tuple[Any, ...], **fields: Any) -> int:
        """Append one event; each `expect` is (decision, rule_id[, extra dict])."""
        self.lines.append(json.dumps({"type": type_, **fields}))
        line = len(self.lines)
        for item in expect:
            self.expect(line, *item)
        return line

    def expect(
        self,
        at: int | list[int],
        decision: str,
        rule_id: str | list[str],
        extra: dict[str, Any] | None = None,
        optional: bool = False,
    ) -> None:
        record = {"at": at, "decision": decision, "rule_id": rule_id, **(extra or {})}
        self.expected.append(("#~" if optional else "#>", record))

    def open(self, text: str) -> None:
        self.open_points.append(text)

    def directive(self, text: str) -> None:
        self.directives.append(text)

    def render(self) -> str:
        out = list(self.lines)
        out.append("")
        out.extend(f"#! {d}" for d in self.directives)
        out.extend(f"#? {t}" for t in self.open_points)
        out.extend(f"{mark} {json.dumps(rec)}" for mark, rec in self.expected)
        return "\n".join(out) + "\n"

    # --- dealing helpers -------------------------------------------------

    def draw(self, cards: Iterator[str], count: int) -> None:
        for _ in range(count):
            self.ev("card_drawn", card=next(cards))

    def hilo_round(
        self, positions: list[int], dealing: str, cards: Iterator[str], shoe: bool = True
    ) -> None:
        """One clean 5 Card Hi-Lo round (40.7(d), 40.8(c), 40.9(c))."""
        self.ev("bets_closed", positions=positions)
        if dealing == "automated_shoe":
            for _ in [*positions, "dealer"]:
                self.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
        else:
            self.draw(cards, 5 * (len(positions) + 1))
        self.ev("deal_completed")
        self.ev("hands_collected")

    def huh_round(self, positions: list[int], dealing: str, cards: Iterator[str]) -> None:
        """One clean Heads Up Hold'em round (39.7(d), 39.8(c), 39.9(c), 39.10(c))."""
        self.ev("bets_closed", positions=positions)
        if dealing == "automated_shoe":
            self.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
            for _ in [*positions, "dealer"]:
                self.ev("stack_dispensed", cards=[next(cards) for _ in range(2)])
            self.ev("deal_completed")
        elif dealing == "manual_shoe":
            self.draw(cards, 5 + 2 * (len(positions) + 1))
            self.ev("deal_completed")
        else:
            self.draw(cards, 2 * (len(positions) + 1))
            self.ev("deal_completed")
            self.note("flop, then turn and river, dealt from the hand as play reaches them")
            self.draw(cards, 3)
            self.draw(cards, 2)
        self.ev("hands_collected")

    def ap_round(self, positions: list[int], cards: Iterator[str], dice: int = 8) -> None:
        """One clean Asia Poker round from a manual shoe (31.8)."""
        self.ev("bets_closed", positions=positions)
        self.ev("starting_position", ("starting_position", "A1"), dice=dice)
        self.draw(cards, 49)
        self.ev("deal_completed")
        self.ev("stub_counted", count=4)
        self.ev("hands_collected")

    def tc21_round(
        self,
        player_cards: list[list[str]],
        up: str,
        hole: str,
        dealer_draws: list[str] = (),  # type: ignore[assignment]
        positions: list[int] | None = None,
    ) -> None:
        """One 3C21 round dealt in the order of 2C.6(d); no hits for players."""
        positions = positions or list(range(1, len(player_cards) + 1))
        self.ev("bets_closed", positions=positions)
        for hand in player_cards:
            self.ev("card_drawn", card=hand[0])
        self.ev("card_drawn", card=up)
        for hand in player_cards:
            self.ev("card_drawn", card=hand[1])
        self.ev("card_drawn", card=hole)
        for hand in player_cards:
            self.ev("card_drawn", card=hand[2])
        self.ev("deal_completed")
        self.ev("bonus_settled")
        if up[0] == "A":
            self.ev("insurance_closed")
        self.ev("dealer_turn")
        for card in dealer_draws:
            self.ev("card_drawn", card=card)
        self.ev("hands_collected")


def opening(sc: Scenario, count: int | None = 52, deck: str | None = None) -> None:
    """Deck received and inspected, shuffled by the ASD (with its count)."""
    extra: dict[str, Any] = {} if deck is None else {"deck": deck}
    sc.ev("deck_received", **extra)
    if count is None:
        sc.ev("shuffle_completed", **extra)
    else:
        sc.ev("shuffle_completed", count=count, **extra)


def tc21_opening(sc: Scenario, burn: str = "5h", count: int = 312) -> int:
    """3C21: decks received, shuffled (count), loaded; the burn card (G2). Returns its line."""
    sc.ev("deck_received")
    sc.ev("shuffle_completed", count=count)
    sc.ev("shoe_loaded")
    line = sc.ev("card_drawn", card=burn)
    sc.expect(line, "burn_card", "G2", optional=True)
    return line


BURN_OPEN = (
    "G2 says the burn card goes to the discard rack; whether the engine also emits a "
    "burn_card decision for it is not fixed by RULES.md, so that decision is optional (#~)."
)

ALL: list[Scenario] = []


def scenario(name: str, game: str, about: str, **options: Any) -> Scenario:
    sc = Scenario(name, game, about, **options)
    ALL.append(sc)
    return sc


# ---------------------------------------------------------------------------
# Clean rounds: every game under every dealing method the texts allow. No
# void, violation or removal may come out of these.
# ---------------------------------------------------------------------------


def clean_rounds() -> None:
    for dealing in ("manual_shoe", "hand", "automated_shoe"):
        sc = scenario(
            f"CLEAN_hilo_{dealing}",
            "five_card_hilo",
            f"""Two clean 5 Card Hi-Lo rounds dealt by {dealing}, shuffled by a counting ASD
            between them (40.4(a)). Nothing may be decided.""",
            dealing=dealing,
        )
        opening(sc)
        if dealing != "hand":
            sc.ev("shoe_loaded")
        sc.hilo_round([1, 3, 7], dealing, fresh_cards())
        sc.ev("shuffle_started")
        sc.ev("shuffle_completed", count=52)
        if dealing != "hand":
            sc.ev("shoe_loaded")
        sc.hilo_round([2], dealing, fresh_cards())

        sc = scenario(
            f"CLEAN_huh_{dealing}",
            "heads_up_holdem",
            f"""Two clean Heads Up Hold'em rounds dealt by {dealing} (39.7/39.8/39.9,
            39.10(c)), shuffled by a counting ASD between them. Nothing may be decided.""",
            dealing=dealing,
        )
        opening(sc)
        if dealing != "hand":
            sc.ev("shoe_loaded")
        sc.huh_round([1, 2, 6], dealing, fresh_cards())
        sc.ev("shuffle_started")
        sc.ev("shuffle_completed", count=52)
        if dealing != "hand":
            sc.ev("shoe_loaded")
        sc.huh_round([4], dealing, fresh_cards())

    for game, rounder in (("five_card_hilo", "hilo"), ("heads_up_holdem", "huh")):
        sc = scenario(
            f"CLEAN_{rounder}_dual_deck",
            game,
            """Two decks of different backs alternating (40.2(b)/39.2(b)): deck A is dealt
            while B is shuffled, then B while A is shuffled; A's cards leave the rack for
            the shuffler before B's reach it. Nothing may be decided.""",
            dealing="manual_shoe",
            dual_deck=True,
        )
        sc.ev("deck_received", deck="A")
        sc.ev("deck_received", deck="B")
        sc.ev("shuffle_completed", deck="A", count=52)
        sc.ev("shuffle_completed", deck="B", count=52)
        for deck in ("A", "B", "A"):
            sc.ev("shoe_loaded", deck=deck)
            if rounder == "hilo":
                sc.hilo_round([1, 2], "manual_shoe", fresh_cards())
            else:
                sc.huh_round([1, 2], "manual_shoe", fresh_cards())
            sc.note(f"deck {deck}'s cards leave the rack for the shuffler")
            sc.ev("shuffle_started", deck=deck)
            sc.ev("shuffle_completed", deck=deck, count=52)

    sc = scenario(
        "CLEAN_3c21_manual_shoe",
        "three_card_21",
        """Two clean Three Card 21 rounds from the shoe (2C.6(c),(d)); the dealer stands on
        hard 17 in the first, draws 16 -> 19 in the second. Nothing may be voided.""",
    )
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"], ["Kh", "4c", "5d"]], up="Td", hole="7s")
    sc.tc21_round([["8c", "8d", "2s"]], up="9h", hole="7c", dealer_draws=["3h"])
    sc.open(BURN_OPEN)

    sc = scenario(
        "CLEAN_ap_manual_shoe",
        "asia_poker",
        """Two clean Asia Poker rounds from a manual shoe (31.8): 49 cards to seven positions,
        four left in the stub; a counting ASD reports 53 after each shuffle (C7).""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    cards = iter([*DECK_52, "JK"])
    sc.ap_round([1, 2, 6], cards, dice=8)
    sc.ev("shuffle_started")
    sc.ev("shuffle_completed", count=53)
    sc.ev("shoe_loaded")
    sc.ap_round([3], iter(["JK", *DECK_52]), dice=14)
    sc.open(
        "S4(d)1: with four cards left they go to the rack unexposed and unwagered positions "
        "are collected; RULES.md names no decision for this, so none is expected."
    )


# ---------------------------------------------------------------------------
# C: every game
# ---------------------------------------------------------------------------


def c_rules() -> None:
    sc = scenario(
        "C1_face_up_card_discarded_hilo",
        "five_card_hilo",
        """40.12(a): a card found face up in the shoe is not used, goes to the rack; the next
        card takes its place. One player: 10 cards after the discarded one complete the deal;
        deal_completed must then find the deal complete (11 drawn, 1 discarded).""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    cards = fresh_cards()
    sc.ev("card_drawn", ("discard_card", "C1"), card=next(cards), face_up=True)
    sc.draw(cards, 10)
    sc.ev("deal_completed")
    sc.ev("hands_collected")

    sc = scenario(
        "C1_face_up_card_discarded_3c21",
        "three_card_21",
        """2C.14(a): a card found face up in the shoe (the shoe reports face_up) is discarded;
        the cards the dealer turns up himself are drawn face down (face_up false).""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("discard_card", "C1"), card="Qh", face_up=True)
    for card in ["9c", "Td", "2d", "7s", "3s"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    for game, slug in (("five_card_hilo", "hilo"), ("heads_up_holdem", "huh")):
        sc = scenario(
            f"C2_second_face_up_card_voids_{slug}",
            game,
            """40.12(a)/39.12(a): a second card found face up during the same deal voids
            all hands and the cards are reshuffled; the first one is only discarded.""",
            shuffler="batch",
        )
        opening(sc, count=None)
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1, 2])
        cards = fresh_cards()
        sc.ev("card_drawn", ("discard_card", "C1"), card=next(cards), face_up=True)
        sc.draw(cards, 3)
        sc.ev(
            "card_drawn",
            ("void_round", "C2"),
            ("reshuffle", "C2"),
            card=next(cards),
            face_up=True,
        )

    sc = scenario(
        "C2_face_up_cards_in_different_rounds_3c21",
        "three_card_21",
        """2C.14(a): "more than one card found face up ... during the dealing" is per round:
        one face-up card in each of two rounds is two discards, no void.""",
    )
    tc21_opening(sc)
    for _ in range(2):
        sc.ev("bets_closed", positions=[1])
        sc.ev("card_drawn", ("discard_card", "C1"), card="Qh", face_up=True)
        for card in ["9c", "Td", "2d", "7s", "3s"]:
            sc.ev("card_drawn", card=card)
        sc.ev("deal_completed")
        sc.ev("bonus_settled")
        sc.ev("dealer_turn")
        sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    for game, slug, count in (
        ("five_card_hilo", "hilo", 10),
        ("heads_up_holdem", "huh", 9),
    ):
        sc = scenario(
            f"C3_card_drawn_in_error_is_next_card_{slug}",
            game,
            f"""40.12(c)/39.12(b): a card drawn in error without its face exposed is used as
            the next card. The dealer pulled one card too early (the shoe cannot tell); the
            deal still has exactly {count} cards for one player and the dealer: no misdeal,
            no void, nothing at all.""",
            shuffler="batch",
        )
        opening(sc, count=None)
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1])
        cards = fresh_cards()
        sc.note("the next card is drawn in error, face not exposed, and used as the next card")
        sc.draw(cards, count)
        sc.ev("deal_completed")
        sc.ev("hands_collected")

    sc = scenario(
        "C3_exposed_card_drawn_in_error_after_initial_deal_3c21",
        "three_card_21",
        """2C.14(c): after the initial three cards, a card drawn in error and exposed is
        dealt as the next card: not a misdeal, not a discard (the shoe saw it leave face
        down, face_up false).""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1, 2])
    for card in ["9c", "2h", "Td", "2d", "3h", "7s", "3s", "4h"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.note("drawn in error and exposed: it becomes position 1's hit")
    sc.ev("card_drawn", card="5c")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    sc = scenario(
        "C4_shuffler_jam_then_deal_blocked_3c21",
        "three_card_21",
        """2C.14(i): the ASD jams; the cards are reshuffled, and cards of that batch may not
        be dealt until a later shuffle completes (RULES.md C4).""",
    )
    sc.ev("deck_received")
    sc.ev("shuffle_started")
    sc.ev("shuffler_fault", ("reshuffle", "C4"), fault="jam")
    sc.ev("shoe_loaded")
    sc.ev("card_drawn", ("deal_blocked", "C4"), card="5h")

    for fault in ("stopped", "incomplete"):
        sc = scenario(
            f"C4_shuffler_{fault}_then_completed_huh",
            "heads_up_holdem",
            f"""39.12(e): the ASD reports '{fault}': reshuffle. A later shuffle completes
            with 52 cards; the round that follows is clean.""",
        )
        sc.ev("deck_received")
        sc.ev("shuffle_started")
        sc.ev("shuffler_fault", ("reshuffle", "C4"), fault=fault)
        sc.ev("shuffle_started")
        sc.ev("shuffle_completed", count=52)
        sc.ev("shoe_loaded")
        sc.huh_round([1], "manual_shoe", fresh_cards())

    for game, slug, size in (("five_card_hilo", "hilo", 5), ("heads_up_holdem", "huh", 2)):
        sc = scenario(
            f"C5_ads_jam_voids_round_{slug}",
            game,
            """40.12(f)/39.12(f): the automated dealing shoe jams during the round: the
            round is void and the cards are reshuffled with those already dealt.""",
            dealing="automated_shoe",
        )
        opening(sc)
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1, 2])
        cards = fresh_cards()
        if slug == "huh":
            sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
        sc.ev("stack_dispensed", cards=[next(cards) for _ in range(size)])
        sc.ev("shoe_fault", ("void_round", "C5"), ("reshuffle", "C5"), fault="jam")

    sc = scenario(
        "C5_ads_fails_to_deal_all_cards_hilo",
        "five_card_hilo",
        """40.12(f): "fails to deal all cards during a round" ('incomplete'): void + reshuffle.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[3])
    sc.ev("shoe_fault", ("void_round", "C5"), ("reshuffle", "C5"), fault="incomplete")

    sc = scenario(
        "C6_manual_deal_at_ads_table_without_removal_hilo",
        "five_card_hilo",
        """40.12(g): an ADS must be removed before any other dealing method is used. The
        table is configured with an ADS; a card comes out of a manual shoe (card_drawn)
        with no device_removed: deal_blocked.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", "C6"), card="As")
    sc.open(
        "EVENTS.md does not name the `device` values; 'automated_shoe' and 'shuffler' are used."
    )

    sc = scenario(
        "C6_manual_deal_after_ads_removed_hilo",
        "five_card_hilo",
        """40.12(g): after device_removed for the ADS, manual dealing is allowed. The ASD still
        counts, but without the ADS the 40.9(f) exemption is gone (S2); first round: no
        stub count due yet. Nothing may be decided.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("device_removed", device="automated_shoe")
    sc.ev("shoe_loaded")
    sc.hilo_round([1], "manual_shoe", fresh_cards())
    sc.open(
        "EVENTS.md does not name the `device` values; 'automated_shoe' and 'shuffler' are used."
    )

    sc = scenario(
        "C6_3c21_asd_removed_without_empty_check",
        "three_card_21",
        """2C.14(j): before the ASD is removed a supervisor must inspect it for cards left
        inside (shuffler_empty_confirmed). Removed without that check, the next deal by
        another method (a manual shuffle, then the shoe) is deal_blocked.""",
    )
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("device_removed", device="shuffler")
    sc.note("the cards are shuffled by hand (no event) and put back into the shoe")
    sc.ev("shoe_loaded")
    sc.ev("card_drawn", ("deal_blocked", "C6"), card="4h")
    sc.open(BURN_OPEN)
    sc.open(
        "the blocked card is the would-be burn card after shoe_loaded; a manual shuffle has "
        "no event of its own, so the first card out of the reloaded shoe is the first deal "
        "by the other method"
    )

    sc = scenario(
        "C6_3c21_asd_removed_after_empty_check",
        "three_card_21",
        """2C.14(j): supervisor confirms the ASD empty, then it is removed: the table may go
        on with a manual shuffle. The reloaded shoe burns a card (2C.6(c)), the round is
        clean.""",
    )
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("shuffler_empty_confirmed", by="floor-17")
    sc.ev("device_removed", device="shuffler")
    sc.ev("shoe_loaded")
    line = sc.ev("card_drawn", card="4h")
    sc.expect(line, "burn_card", "G2", optional=True)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.open(BURN_OPEN)

    for game, slug, count, size in (
        ("five_card_hilo", "hilo", 51, "52"),
        ("heads_up_holdem", "huh", 53, "52"),
        ("asia_poker", "ap", 52, "53"),
        ("three_card_21", "3c21", 311, "6 x 52 = 312"),
    ):
        sc = scenario(
            f"C7_counting_asd_wrong_count_{slug}",
            game,
            f"""40.9(f)/39.7(g) and RULES.md C7: a counting ASD reports {count} cards where
            the deck holds {size}: remove_deck; then C10: any deal is deal_blocked until a
            deck is received (and shuffled).""",
        )
        sc.ev("deck_received")
        sc.ev("shuffle_completed", ("remove_deck", "C7"), count=count)
        sc.ev("shoe_loaded")
        if slug in ("hilo", "huh", "ap"):
            # Engine review (issue 32): "no more bets" comes once the cards are in the shoe
            # (40.7(a)-(b), 40.9(b), 39.7(a)-(b), 31.8(a)); with the deck removed it is
            # refused (C10, docs/rules.md), no longer taken in silence
            sc.ev("bets_closed", ("rejected", "*"), positions=[1])
        sc.ev("card_drawn", ("deal_blocked", "C10"), card="As")
        if slug == "3c21":
            sc.open(
                "C7 for 3C21 is RULES.md's interpretation (no counting-ASD rule in 2C); "
                "13:69E-1.18 not in regs/."
            )

    sc = scenario(
        "C10_fresh_deck_must_be_shuffled_first_hilo",
        "five_card_hilo",
        """RULES.md C10 (13:69E-1.18): after remove_deck, deals stay blocked until a deck is
        received AND, being fresh, shuffled: received but not yet shuffled is still
        deal_blocked.""",
    )
    sc.ev("deck_received")
    sc.ev("shuffle_completed", ("remove_deck", "C7"), count=51)
    sc.ev("deck_received")
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", ["C10", "D3"]), card="As")
    sc.open("A fresh deck not yet shuffled could also be blocked under D3's reading.")

    sc = scenario(
        "C10_deck_replaced_then_clean_hilo",
        "five_card_hilo",
        """C7 then C10: after remove_deck a fresh deck is received and shuffled (52 counted):
        the next round is dealt normally.""",
        dealing="automated_shoe",
    )
    sc.ev("deck_received")
    sc.ev("shuffle_completed", ("remove_deck", "C7"), count=50)
    sc.ev("deck_received")
    sc.ev("shuffle_completed", count=52)
    sc.ev("shoe_loaded")
    sc.hilo_round([1, 2], "automated_shoe", fresh_cards())

    sc = scenario(
        "C8_joker_in_52_card_deck_hilo",
        "five_card_hilo",
        """RULES.md C8 (13:69E-1.17/1.18 interpretation): the shoe reads a joker in a 52-card
        game: void the round, remove the deck, tell a supervisor. JK is a valid card name
        (EVENTS.md), so this is no `rejected`.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", card="As")
    sc.ev(
        "card_drawn",
        ("void_round", "C8"),
        ("remove_deck", "C8"),
        ("notify_supervisor", "C8"),
        card="JK",
    )
    sc.ev("hands_collected")
    sc.ev("bets_closed", ("rejected", "*"), positions=[1])  # issue 32: refused (C10)
    sc.ev("card_drawn", ("deal_blocked", "C10"), card="2s")

    sc = scenario(
        "C8_same_card_twice_since_shuffle_huh",
        "heads_up_holdem",
        """RULES.md C8: the same card read twice since the last shuffle (one deck holds one
        of each): void + remove_deck + notify_supervisor.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    for card in ["2c", "3c", "4c", "5c", "6c", "7c"]:
        sc.ev("card_drawn", card=card)
    sc.ev(
        "card_drawn",
        ("void_round", "C8"),
        ("remove_deck", "C8"),
        ("notify_supervisor", "C8"),
        card="4c",
    )

    sc = scenario(
        "C8_joker_is_legal_in_asia_poker",
        "asia_poker",
        """Asia Poker's deck has 53 cards with the joker: a JK read is no C8 event. One
        clean round in which the joker is the first card dealt.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ap_round([2], iter(["JK", *DECK_52]), dice=10)

    sc = scenario(
        "C8_seventh_copy_in_six_deck_shoe_3c21",
        "three_card_21",
        """RULES.md C8: six decks hold six aces of spades; a seventh since the shuffle is
        one card more often than the composition holds.""",
    )
    tc21_opening(sc, burn="As")
    sc.ev("bets_closed", positions=[1, 2])
    for card in ["As", "As", "As", "As", "As"]:
        sc.ev("card_drawn", card=card)
    sc.ev(
        "card_drawn",
        ("void_round", "C8"),
        ("remove_deck", "C8"),
        ("notify_supervisor", "C8"),
        card="As",
    )
    sc.open(BURN_OPEN)

    for game, slug, dealing in (
        ("five_card_hilo", "hilo", "manual_shoe"),
        ("heads_up_holdem", "huh", "automated_shoe"),
        ("asia_poker", "ap", "manual_shoe"),
    ):
        sc = scenario(
            f"C9_card_before_no_more_bets_{slug}",
            game,
            """40.7(b)/39.7(b)/39.9(b)2/31.8(a): "no more bets" comes before any card is
            dealt. A card or stack before bets_closed: procedure_violation +
            notify_supervisor.""",
            dealing=dealing,
        )
        opening(sc, count=53 if slug == "ap" else 52)
        sc.ev("shoe_loaded")
        if dealing == "automated_shoe":
            sc.ev(
                "stack_dispensed",
                ("procedure_violation", "C9"),
                ("notify_supervisor", "C9"),
                cards=["As", "2s", "3s", "4s", "5s"],
            )
        else:
            sc.ev(
                "card_drawn",
                ("procedure_violation", "C9"),
                ("notify_supervisor", "C9"),
                card="As",
            )

    sc = scenario(
        "C9_3c21_burn_before_bets_is_expected",
        "three_card_21",
        """C9 does not apply to 3C21: the burn card after shoe_loaded is drawn before any
        bets are closed and is expected (2C.6(c), G2). Nothing but the optional burn.""",
    )
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.open(BURN_OPEN)

    for game, slug, too_many in (
        ("three_card_21", "3c21", [1, 2, 3, 4, 5, 6, 7]),
        ("five_card_hilo", "hilo", [1, 2, 3, 4, 5, 6, 7, 8]),
        ("heads_up_holdem", "huh", [1, 2, 3, 4, 5, 6, 7]),
        ("asia_poker", "ap", [1, 7]),
    ):
        sc = scenario(
            f"C11_bets_closed_too_many_positions_{slug}",
            game,
            """C11 (1.10D(a), 1.13Z, 31.8(c)): bets_closed naming a position the game does
            not have is rejected and nothing changes: a card drawn afterwards is still a card
            before "no more bets" (C9) in the games where C9 applies.""",
            shuffler="batch",
        )
        sc.ev("deck_received")
        sc.ev("shuffle_completed")
        sc.ev("shoe_loaded")
        if slug == "3c21":
            line = sc.ev("card_drawn", card="5h")
            sc.expect(line, "burn_card", "G2", optional=True)
            sc.open(BURN_OPEN)
        sc.ev("bets_closed", ("rejected", "*"), positions=too_many)
        if slug != "3c21":
            sc.ev(
                "card_drawn",
                ("procedure_violation", "C9"),
                ("notify_supervisor", "C9"),
                card="As" if slug != "ap" else "JK",
            )
        if slug == "ap":
            sc.open(
                "AP: position 7 is the dealer's (31.8(c) deals to seven positions, the "
                "dealer included); only 1-6 can hold a wager."
            )

    sc = scenario(
        "C11_hilo_seven_positions_allowed",
        "five_card_hilo",
        """1.13Z(b)1: 5 Card Hi-Lo has up to seven player positions; seven is accepted and
        the round is clean.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.hilo_round([1, 2, 3, 4, 5, 6, 7], "automated_shoe", fresh_cards())

    for game, slug, positions in (
        ("three_card_21", "3c21", 7),
        ("five_card_hilo", "hilo", 8),
        ("heads_up_holdem", "huh", 7),
        ("asia_poker", "ap", 7),
    ):
        sc = scenario(
            f"C11_config_too_many_positions_{slug}",
            game,
            """C11: a table configured with more positions than the game allows: the
            replay refuses the table (exit status 2), no decision.""",
            positions=positions,
        )
        sc.ev("deck_received")
        sc.directive("exit 2")


# ---------------------------------------------------------------------------
# S: stub counts and full-deck checks
# ---------------------------------------------------------------------------

STUB_AT_OPEN = (
    "S1 says stub_count_required comes 'in that round' without naming the event: it is "
    "accepted at the round's bets_closed or at its first deal."
)


def stub_series(
    sc: Scenario,
    game: str,
    dealing: str,
    rounds: int,
    count: int | None,
    counted_in: dict[int, int],
    required_in: dict[int, str | None],
    decks: tuple[str, ...] = ("",),
) -> None:
    """Rounds from one deck (or alternating decks), one player at position 1.

    counted_in: round -> stub count reported in that round; required_in: round ->
    the deck (or None) for which stub_count_required is expected in that round.
    """
    for deck in decks:
        extra = {"deck": deck} if deck else {}
        sc.ev("deck_received", **extra)
    for number in range(1, rounds + 1):
        deck = decks[(number - 1) % len(decks)]
        extra = {"deck": deck} if deck else {}
        sc.note(f"round {number}" + (f", deck {deck}" if deck else ""))
        if count is None:
            sc.ev("shuffle_completed", **extra)
        else:
            sc.ev("shuffle_completed", count=count, **extra)
        if dealing != "hand" or deck:
            sc.ev("shoe_loaded", **extra)
        first = sc.ev("bets_closed", positions=[1])
        cards = fresh_cards()
        if game == "five_card_hilo":
            if dealing == "automated_shoe":
                for _ in range(2):
                    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
            else:
                sc.draw(cards, 10)
        elif dealing == "automated_shoe":
            sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
            for _ in range(2):
                sc.ev("stack_dispensed", cards=[next(cards) for _ in range(2)])
        else:
            sc.draw(cards, 9)
        if number in required_in:
            req_deck = required_in[number]
            sc.expect(
                [first, first + 1],
                "stub_count_required",
                "S1",
                {"deck": req_deck} if req_deck else None,
            )
        sc.ev("deal_completed")
        if number in counted_in:
            sc.ev("stub_counted", count=counted_in[number])
        sc.ev("hands_collected")
        sc.ev("shuffle_started", **extra)
    if required_in:
        sc.open(STUB_AT_OPEN)


def s_rules() -> None:
    for game, slug, stub in (("five_card_hilo", "hilo", 42), ("heads_up_holdem", "huh", 43)):
        sc = scenario(
            f"S1_fifth_round_requires_count_sixth_blocked_{slug}",
            game,
            """40.7(f)/39.7(f): the stub is counted at least once every five rounds. The
            inspection at receipt is the last verified count; the fifth round from the deck
            brings stub_count_required; it is not counted, so the sixth deal is blocked.
            (Batch ASD: no count of its own, S2 does not apply.)""",
            shuffler="batch",
        )
        stub_series(sc, game, "manual_shoe", 5, None, {}, {5: None})
        sc.note("round 6 without a count since receipt")
        sc.ev("shuffle_completed")
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1])
        sc.ev("card_drawn", ("deal_blocked", "S1"), card="As")

        sc = scenario(
            f"S1_count_in_fifth_round_restarts_cadence_{slug}",
            game,
            f"""40.7(f)/39.7(f): counted in round 5 (stub {stub} = 52 - cards dealt to one
            player and the dealer), round 6 may be dealt; the next count falls due in round
            10 (five rounds after the count of round 5).""",
            shuffler="batch",
        )
        stub_series(sc, game, "manual_shoe", 10, None, {5: stub}, {5: None, 10: None})

        sc = scenario(
            f"S1_early_count_restarts_cadence_{slug}",
            game,
            """A count may come sooner than the fifth round ("at least once every five"):
            counted in round 2, the next is due in round 7, not round 5.""",
            shuffler="batch",
            dealing="hand",
        )
        stub_series(sc, game, "hand", 7, None, {2: stub}, {7: None})

    sc = scenario(
        "S1_two_decks_counted_per_deck_hilo",
        "five_card_hilo",
        """RULES.md S1 interpretation: with two decks alternating (40.2(b)) the five rounds
        are counted per deck: deck A deals rounds 1,3,5,7,9 (its fifth is round 9), deck B
        rounds 2,...,10 (its fifth is round 10).""",
        shuffler="batch",
        dual_deck=True,
    )
    stub_series(sc, "five_card_hilo", "manual_shoe", 10, None, {}, {9: "A", 10: "B"}, ("A", "B"))
    sc.open(
        "'Per deck' is RULES.md's interpretation; the text ('once every five rounds of play') "
        "could also be read per table, which would require counts in rounds 5 and 10."
    )

    for dealing in ("manual_shoe", "hand"):
        sc = scenario(
            f"S2_hilo_counting_asd_no_exemption_{dealing}",
            "five_card_hilo",
            f"""40.9(f) exempts from stub counts only when dealing from an automated shoe;
            40.7 and 40.8 have no such paragraph. Dealing by {dealing} with a counting ASD
            that reports 52 after every shuffle, round 5 still needs a stub count.""",
        )
        stub_series(sc, "five_card_hilo", dealing, 5, 52, {}, {5: None})

    sc = scenario(
        "S2_hilo_ads_with_counting_asd_exempt",
        "five_card_hilo",
        """40.9(f): ADS dealing + an ASD that counts 52 after each shuffle: no stub count is
        required; six rounds without one are all dealt. Nothing may be decided.""",
        dealing="automated_shoe",
    )
    stub_series(sc, "five_card_hilo", "automated_shoe", 6, 52, {}, {})

    sc = scenario(
        "S2_hilo_ads_with_batch_asd_not_exempt",
        "five_card_hilo",
        """40.9(f) needs an ASD that counts: with a batch ASD the ADS alone exempts nothing.""",
        dealing="automated_shoe",
        shuffler="batch",
    )
    stub_series(sc, "five_card_hilo", "automated_shoe", 5, None, {}, {5: None})

    for dealing in ("manual_shoe", "hand", "automated_shoe"):
        sc = scenario(
            f"S2_huh_counting_asd_exempt_{dealing}",
            "heads_up_holdem",
            f"""39.7(g), 39.8(f), 39.9(f): for Heads Up Hold'em the counting-ASD exemption
            holds for every dealing method, {dealing} included: six rounds, nothing due.""",
            dealing=dealing,
        )
        stub_series(sc, "heads_up_holdem", dealing, 6, 52, {}, {})

    sc = scenario(
        "S3_stub_count_right_after_discard_hilo",
        "five_card_hilo",
        """40.7(f)1 and RULES.md S3: cards out of the deck this round include a discarded
        face-up card: 1 discarded + 10 dealt + stub 41 = 52: correct, nothing decided
        beyond the discard.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    cards = fresh_cards()
    sc.ev("card_drawn", ("discard_card", "C1"), card=next(cards), face_up=True)
    sc.draw(cards, 10)
    sc.ev("deal_completed")
    sc.ev("stub_counted", count=41)
    sc.ev("hands_collected")

    for game, slug, out, per_hand in (
        ("five_card_hilo", "hilo", 10, 5),
        ("heads_up_holdem", "huh", 9, 2),
    ):
        sc = scenario(
            f"S3_stub_short_no_misdeal_removes_deck_{slug}",
            game,
            f"""40.7(f)2/39.7(f)2: the stub shows a wrong number of cards and no hand is
            misdealt: all hands void, the deck removed (13:69E-1.18). {out} out, stub
            {52 - out - 1} (one card missing). Then C10 blocks the next deal.""",
            shuffler="batch",
        )
        opening(sc, count=None)
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1])
        sc.draw(fresh_cards(), out)
        sc.ev("deal_completed")
        sc.ev(
            "stub_counted",
            ("void_round", "S3"),
            ("remove_deck", "S3"),
            count=52 - out - 1,
            hand_counts={"1": per_hand, "dealer": per_hand},
        )
        sc.ev("hands_collected")
        sc.ev("bets_closed", ("rejected", "*"), positions=[1])  # issue 32: refused (C10)
        sc.ev("card_drawn", ("deal_blocked", "C10"), card="As")

    # Engine review (branch engine): these two files first expected S3's void_round. The
    # stub counts here are right (42 + 10 = 52, 43 + 9 = 52), so 40.7(f)2/39.7(f)2, whose
    # misdeal clause applies only "if the count of the stub indicates that the number of
    # cards in the deck is incorrect", do not apply: 40.7(f)1/39.7(f)1 do, and the misdealt
    # hands fall under the irregularity rules, 40.12(d) (M1, M2) and 39.12(c) (M4).
    sc = scenario(
        "M1_M2_hilo_right_stub_count_misdealt_hands",
        "five_card_hilo",
        """40.7(f)1: stub 42 + 10 out = 52, the deck is whole; the hands hold 6 (player)
        and 4 (dealer). 40.12(d): the player's hand is void, the dealer's hand is
        completed with a fifth card. Not S3: 40.7(f)2 needs an incorrect stub count.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.draw(fresh_cards(), 10)
    sc.ev("deal_completed")
    sc.ev(
        "stub_counted",
        ("void_hand", "M1", {"position": 1}),
        ("deal_dealer_card", "M2"),
        count=42,
        hand_counts={"1": 6, "dealer": 4},
    )
    sc.open(
        "40.7(f)2's 'all hands void' is conditional on an incorrect stub count; with a right "
        "count 40.12(d) rules the misdealt hands (M1 for the player, M2 for the dealer)."
    )

    sc = scenario(
        "M4_huh_right_stub_count_misdealt_hands",
        "heads_up_holdem",
        """39.7(f)1: stub 43 + 9 out = 52, the deck is whole, but the player holds one card
        and the dealer three. 39.12(c): a player dealt an incorrect number of cards voids
        all hands and the cards are reshuffled (M4). Not S3: 39.7(f)2 needs an incorrect
        stub count.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.draw(fresh_cards(), 9)
    sc.ev("deal_completed")
    sc.ev(
        "stub_counted",
        ("void_round", "M4"),
        ("reshuffle", "M4"),
        count=43,
        hand_counts={"1": 1, "dealer": 3},
    )
    sc.open(
        "39.7(f)2's 'all hands are void' is conditional on an incorrect stub count; with a "
        "right count 39.12(c) rules the misdeal: void and reshuffle (M4)."
    )

    sc = scenario(
        "S4_four_cards_left_ap",
        "asia_poker",
        """31.8(d)1: 49 cards dealt, four left: they go unexposed to the rack; positions
        without wagers are collected. Nothing is decided.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ap_round([2, 5], iter([*DECK_52, "JK"]), dice=3)

    sc = scenario(
        "S4_not_four_with_misdeal_voids_ap",
        "asia_poker",
        """31.8(d)2: not four left and a position holds other than seven cards: all hands
        void (31.14). 48 dealt (position 4 got six), five left: the deck is complete.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 4])
    sc.ev("starting_position", ("starting_position", "A1"), number=1)
    sc.draw(iter([*DECK_52, "JK"]), 48)
    sc.ev("stub_counted", ("void_round", "S4"), count=5, hand_counts={"4": 6})
    sc.open(
        "deal_completed is left out: 48 of 49 drawn, and whether the engine decides at "
        "deal_completed or at the stub count is not fixed; the stub count is 31.8(d)'s check."
    )

    sc = scenario(
        "S4_not_four_without_misdeal_removes_deck_ap",
        "asia_poker",
        """31.8(d)2: not four left and no misdeal (every position seven): all hands void and
        the deck removed (13:69E-1.18). 49 dealt, three left: a card is missing.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[3])
    sc.ev("starting_position", ("starting_position", "A1"), dice=12)
    sc.draw(iter([*DECK_52, "JK"]), 49)
    sc.ev("deal_completed")
    sc.ev(
        "stub_counted",
        ("void_round", "S4"),
        ("remove_deck", "S4"),
        count=3,
        hand_counts={str(p): 7 for p in range(1, 7)} | {"dealer": 7},
    )
    sc.ev("hands_collected")
    sc.ev("bets_closed", ("rejected", "*"), positions=[3])  # issue 32: refused (C10)
    sc.ev("card_drawn", ("deal_blocked", "C10"), card="As")


# ---------------------------------------------------------------------------
# A1: Asia Poker's starting position
# ---------------------------------------------------------------------------

A1_OPEN = (
    "EVENTS.md v1 has no decision that shows the resolved starting position, so 31.11(b)'s "
    "examples (8 -> dealer, 14 -> sixth position after the dealer) cannot be observed in "
    "replay output; they are asserted only as accepted events and a clean deal. The engine's "
    "unit tests must check the mapping itself."
)


def a_rules() -> None:
    for dice in (8, 14, 3, 18):
        sc = scenario(
            f"A1_dice_{dice}_accepted_ap",
            "asia_poker",
            f"""31.11(b): a dice total of {dice} (3-18) is a valid starting position; counting
            counterclockwise with the dealer as one ({dice} -> {
                "the dealer"
                if dice % 7 == 1
                else f"position {(dice - 1) % 7} counted after the dealer"
            }). The round is clean.""",
        )
        opening(sc, count=53)
        sc.ev("shoe_loaded")
        sc.ap_round([1, 2, 3, 4, 5, 6], iter([*DECK_52, "JK"]), dice=dice)
        sc.open(A1_OPEN)

    sc = scenario(
        "A1_number_1_to_7_accepted_ap",
        "asia_poker",
        """31.11: `number` 1-7 selects the position directly; 7 and 1 are both valid.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.ev("starting_position", ("starting_position", "A1"), number=7)
    sc.draw(iter([*DECK_52, "JK"]), 49)
    sc.ev("deal_completed")
    sc.ev("stub_counted", count=4)
    sc.ev("hands_collected")
    sc.ev("shuffle_started")
    sc.ev("shuffle_completed", count=53)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[6])
    sc.ev("starting_position", ("starting_position", "A1"), number=1)
    sc.draw(iter(["JK", *DECK_52]), 49)
    sc.ev("deal_completed")
    sc.ev("stub_counted", count=4)
    sc.ev("hands_collected")
    sc.open(A1_OPEN)

    sc = scenario(
        "A1_impossible_values_rejected_ap",
        "asia_poker",
        """EVENTS.md: dice is 3-18 (three dice), number 1-7. Anything else is rejected and
        nothing changes; a valid value afterwards is accepted.""",
    )
    opening(sc, count=53)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.ev("starting_position", ("rejected", "*"), dice=2)
    sc.ev("starting_position", ("rejected", "*"), dice=19)
    sc.ev("starting_position", ("rejected", "*"), number=0)
    sc.ev("starting_position", ("rejected", "*"), number=8)
    sc.ev("starting_position", ("starting_position", "A1"), dice=9)
    sc.draw(iter([*DECK_52, "JK"]), 49)
    sc.ev("deal_completed")
    sc.ev("stub_counted", count=4)
    sc.ev("hands_collected")


# ---------------------------------------------------------------------------
# M: misdeals
# ---------------------------------------------------------------------------


def m_rules() -> None:
    sc = scenario(
        "M1_hilo_ads_short_stack_voids_that_hand_only",
        "five_card_hilo",
        """40.12(d): a player dealt the wrong number of cards: THAT player's hand is void; the
        others play on (no void_round, no reshuffle). Position 2's stack has four.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 2, 3])
    cards = fresh_cards()
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev(
        "stack_dispensed",
        ("void_hand", "M1", {"position": 2}),
        cards=[next(cards) for _ in range(4)],
    )
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("deal_completed")
    sc.ev("hands_collected")

    sc = scenario(
        "M1_hilo_ads_long_stack_voids_that_hand_only",
        "five_card_hilo",
        """40.12(d): six cards to position 3 (the first wagered position is 3): only
        position 3's hand is void.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[3, 5])
    cards = fresh_cards()
    sc.ev(
        "stack_dispensed",
        ("void_hand", "M1", {"position": 3}),
        cards=[next(cards) for _ in range(6)],
    )
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("deal_completed")
    sc.ev("hands_collected")

    sc = scenario(
        "M1_hilo_manual_misdeal_reported_voids_that_hand_only",
        "five_card_hilo",
        """40.12(d) with a card-reading manual shoe: the dealer reports position 4 holds six
        cards (two players, 15 drawn: position 1 got four). void_hand for each position
        reported; the dealer's hand is whole.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 4])
    sc.draw(fresh_cards(), 15)
    sc.ev("misdeal_reported", ("void_hand", "M1", {"position": 4}), position=4, cards=6)
    sc.ev("misdeal_reported", ("void_hand", "M1", {"position": 1}), position=1, cards=4)
    sc.ev("deal_completed")
    sc.ev("hands_collected")
    sc.open(
        "misdeal_reported precedes deal_completed, so the engine knows the hands before it "
        "checks the total (15 = 15 expected): no further decision at deal_completed."
    )

    sc = scenario(
        "M2_hilo_dealer_four_cards_gets_fifth",
        "five_card_hilo",
        """40.12(d): the dealer dealt four cards: one more card completes the hand; no
        void. ADS: the dealer's stack has four; the dealer then gets one more card.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    cards = fresh_cards()
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev(
        "stack_dispensed",
        ("deal_dealer_card", "M2"),
        cards=[next(cards) for _ in range(4)],
    )
    sc.ev("stack_dispensed", cards=[next(cards)])
    sc.ev("deal_completed")
    sc.ev("hands_collected")
    sc.open(
        "How the fifth dealer card arrives from an ADS is not specified; a one-card "
        "stack_dispensed is used and must be taken as completing the dealer's hand."
    )

    sc = scenario(
        "M2_hilo_manual_dealer_four_cards_reported",
        "five_card_hilo",
        """40.12(d) with a manual shoe: the dealer reports four cards in the dealer's hand;
        deal_dealer_card; the next card drawn completes the dealer's hand, no void.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[2])
    cards = fresh_cards()
    sc.draw(cards, 9)
    sc.ev("misdeal_reported", ("deal_dealer_card", "M2"), position="dealer", cards=4)
    sc.ev("card_drawn", card=next(cards))
    sc.ev("deal_completed")
    sc.ev("hands_collected")

    for cards_n, why in ((6, "six"), (3, "three")):
        sc = scenario(
            f"M3_hilo_dealer_{why}_cards_voids_round",
            "five_card_hilo",
            f"""40.12(d): any other misdeal to the dealer ({why} cards) voids all hands and
            the cards are reshuffled.""",
            dealing="automated_shoe",
        )
        opening(sc)
        sc.ev("shoe_loaded")
        sc.ev("bets_closed", positions=[1, 2])
        cards = fresh_cards()
        sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
        sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
        sc.ev(
            "stack_dispensed",
            ("void_round", "M3"),
            ("reshuffle", "M3"),
            cards=[next(cards) for _ in range(cards_n)],
        )

    sc = scenario(
        "M3_hilo_manual_dealer_six_reported",
        "five_card_hilo",
        """40.12(d): manual shoe, the dealer reports six cards in the dealer's hand: void all,
        reshuffle.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.draw(fresh_cards(), 10)
    sc.ev("misdeal_reported", ("void_round", "M3"), ("reshuffle", "M3"), position="dealer", cards=6)

    sc = scenario(
        "M4_huh_player_wrong_hole_cards_voids_round",
        "heads_up_holdem",
        """39.12(c): a player dealt the wrong number of cards voids ALL hands and the cards
        are reshuffled (unlike 5 Card Hi-Lo's 40.12(d)). ADS: position 2's stack has three.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 2, 3])
    cards = fresh_cards()
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(2)])
    sc.ev(
        "stack_dispensed",
        ("void_round", "M4"),
        ("reshuffle", "M4"),
        cards=[next(cards) for _ in range(3)],
    )

    sc = scenario(
        "M4_huh_manual_player_misdeal_reported_voids_round",
        "heads_up_holdem",
        """39.12(c), manual shoe: the dealer reports position 1 holds one card: void all,
        reshuffle (never void_hand in this game).""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 2])
    sc.draw(fresh_cards(), 10)
    sc.ev("misdeal_reported", ("void_round", "M4"), ("reshuffle", "M4"), position=1, cards=1)

    sc = scenario(
        "M4_huh_dealer_wrong_hole_cards_voids_round",
        "heads_up_holdem",
        """RULES.md M4 (39.7(f)2's misdeal definition): the dealer's stack has one card.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    cards = fresh_cards()
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(5)])
    sc.ev("stack_dispensed", cards=[next(cards) for _ in range(2)])
    sc.ev("stack_dispensed", ("void_round", "M4"), ("reshuffle", "M4"), cards=[next(cards)])
    sc.open(
        "39.12(c) names only players; the dealer (and the community stack below) come from "
        "RULES.md M4 via 39.7(f)2, which defines the misdeal but prescribes only 'void'."
    )

    sc = scenario(
        "M4_huh_community_stack_not_five_voids_round",
        "heads_up_holdem",
        """RULES.md M4: a community stack other than five cards: void + reshuffle.""",
        dealing="automated_shoe",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.ev(
        "stack_dispensed",
        ("void_round", "M4"),
        ("reshuffle", "M4"),
        cards=["As", "2s", "3s", "4s"],
    )
    sc.open("The community stack of four is RULES.md's extension; 39.12 has no such clause.")

    sc = scenario(
        "M5_huh_dealer_card_exposed_voids_round",
        "heads_up_holdem",
        """39.12(d): a dealer card exposed before the dealer's reveal: all hands void,
        reshuffle.""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1])
    sc.draw(fresh_cards(), 9)
    sc.ev("deal_completed")
    sc.ev("dealer_card_exposed", ("void_round", "M5"), ("reshuffle", "M5"))
    sc.open(
        "39.12(d) cites the reveal 'as prescribed in 39.10(f)', but the dealer's reveal is "
        "39.10(i); (f) is the second raise. The reveal itself has no event in EVENTS.md v1."
    )

    sc = scenario(
        "M6_3c21_player_without_initial_cards_hand_dead",
        "three_card_21",
        """2C.14(g): no initial cards to a player's hand: that hand is dead (void_hand) and
        the player joins the next deal. Position 2 was skipped: 8 cards drawn for three
        players and the dealer.""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1, 2, 3])
    for card in ["9c", "Kh", "Td", "2d", "5d", "7s", "3s", "4c"]:
        sc.ev("card_drawn", card=card)
    sc.ev("misdeal_reported", ("void_hand", "M6", {"position": 2}), position=2, cards=0)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    for n, text in ((1, "one card"), (2, "two cards")):
        sc = scenario(
            f"M6_3c21_player_with_{n}_initial_cards_no_void",
            "three_card_21",
            f"""2C.14(g): {text} to a player: no void; the missing card(s) come after the
            other players'. Position 1 short, then completed.""",
        )
        tc21_opening(sc)
        sc.ev("bets_closed", positions=[1, 2])
        if n == 1:  # p1 9c, p2 Kh, up Td, p2 5d, hole 7s, p2 3s; p1 skipped twice
            drawn, missing = ["9c", "Kh", "Td", "5d", "7s", "3s"], ["2d", "4c"]
        else:  # p1 9c, p2 Kh, up Td, p1 2d, p2 5d, hole 7s, p2 3s; p1's third skipped
            drawn, missing = ["9c", "Kh", "Td", "2d", "5d", "7s", "3s"], ["4c"]
        for card in drawn:
            sc.ev("card_drawn", card=card)
        sc.ev("misdeal_reported", position=1, cards=n)
        sc.note("the missing card(s) to position 1, after the other players")
        for card in missing:
            sc.ev("card_drawn", card=card)
        sc.ev("deal_completed")
        sc.ev("bonus_settled")
        sc.ev("dealer_turn")
        sc.ev("hands_collected")
        sc.open(BURN_OPEN)
        if n == 2:
            sc.open(
                "2C.14(g) says the missing third card comes 'after all other players have "
                "received a second card' (likely meant 'third'); either way, no void."
            )

    sc = scenario(
        "M6_3c21_dealer_missing_card_no_void",
        "three_card_21",
        """2C.14(e): the dealer missed the first card: the players' three cards are dealt,
        then the dealer's; no void.""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1])
    for card in ["9c", "2d", "7s", "3s"]:
        sc.ev("card_drawn", card=card)
    sc.ev("misdeal_reported", position="dealer", cards=1)
    sc.ev("card_drawn", card="Td")
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)


# ---------------------------------------------------------------------------
# H: the hole-card reader (3C21)
# ---------------------------------------------------------------------------


def reader_deal(sc: Scenario, up: str, hole: str) -> None:
    """bets_closed, the 2C.6(d) deal for position 1, deal_completed."""
    sc.ev("bets_closed", positions=[1])
    for card in ["9c", up, "2d", hole, "3s"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")


def h_rules() -> None:
    sc = scenario(
        "H1_reader_used_without_daily_inspection",
        "three_card_21",
        """1.10D(f): the floorperson inspects the reader at the start of each gaming day;
        used with no reader_inspected yet: reader_disabled + notify_supervisor, the result
        is ignored.""",
    )
    tc21_opening(sc)
    reader_deal(sc, "Td", "7s")
    sc.ev("bonus_settled")
    insert = sc.ev("reader_inserted")
    result = sc.ev("reader_result", blackjack=False)
    sc.expect([insert, result], "reader_disabled", "H1")
    sc.expect([insert, result], "notify_supervisor", "H1")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)
    sc.open("H1 may be decided when the card is inserted or when the result comes back.")

    sc = scenario(
        "H1_reader_inspected_clean_rounds",
        "three_card_21",
        """1.10D(f), 2C.6(e), 2C.7: inspected reader, used after the bonus wagers and (ace up)
        after insurance: two rounds, nothing decided. Ace up + 9 hole: no blackjack; King up
        + ace hole: blackjack.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    reader_deal(sc, "Ah", "9d")
    sc.ev("bonus_settled")
    sc.ev("insurance_closed")
    sc.ev("reader_inserted")
    sc.ev("reader_result", blackjack=False)
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    reader_deal(sc, "Kh", "Ac")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted")
    sc.ev("reader_result", blackjack=True)
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    for model, outcome in (("concealed", "continue_play"), ("revealing", "hands_dead")):
        sc = scenario(
            f"H2_hole_card_inserted_under_nine_{model}_reader",
            "three_card_21",
            f"""2C.14(k): the hole card inserted while the up card is a 9 (not A, K, Q, J, 10):
            the supervisor is told first, then ({model} reader) {outcome}. The hole card
            (Qs) must not appear in any output before the dealer's turn (H7).""",
            reader=model,
        )
        sc.ev("reader_inspected", by="floor-17")
        tc21_opening(sc)
        reader_deal(sc, "9h", "Qs")
        sc.ev("bonus_settled")
        sc.ev("reader_inserted", ("notify_supervisor", "H2"), (outcome, "H2"))
        if model == "concealed":
            sc.ev("reader_result", blackjack=False)
            turn = sc.ev("dealer_turn")
        else:
            turn = sc.next_line
        sc.ev("hands_collected")
        sc.directive(f"hidden Qs before {turn}")
        sc.open(BURN_OPEN)

    sc = scenario(
        "H2_ten_up_is_allowed",
        "three_card_21",
        """2C.14(k) lists A, K, Q, J, 10: with a 10 up the reader may be used: nothing.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    reader_deal(sc, "Tc", "6d")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted")
    sc.ev("reader_result", blackjack=False)
    sc.ev("dealer_turn")
    sc.ev("card_drawn", card="2h")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    sc = scenario(
        "H3_ace_up_reader_before_insurance_closed",
        "three_card_21",
        """2C.7(a)2: with a card reader in use, insurance bets are placed before the hole card
        is inserted: ace up, the reader used before insurance_closed: procedure_violation +
        notify_supervisor.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    reader_deal(sc, "Ad", "8c")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted", ("procedure_violation", "H3"), ("notify_supervisor", "H3"))
    sc.open(BURN_OPEN)

    sc = scenario(
        "H4_reader_before_bonus_settled",
        "three_card_21",
        """2C.6(e): the bonus wagers are settled before any card reader is used: a K up, the
        reader used before bonus_settled: procedure_violation + notify_supervisor.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    reader_deal(sc, "Kd", "8c")
    sc.ev("reader_inserted", ("procedure_violation", "H4"), ("notify_supervisor", "H4"))
    sc.open(BURN_OPEN)

    sc = scenario(
        "H5_reader_fault_disables_play_continues",
        "three_card_21",
        """2C.14(l): a malfunctioning reader: play goes on without it (reader_disabled); the
        round itself is not voided.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    reader_deal(sc, "Kd", "7c")
    sc.ev("bonus_settled")
    sc.ev("reader_fault", ("reader_disabled", "H5"), fault="no_read")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)

    sc = scenario(
        "H5_reader_stops_answering",
        "three_card_21",
        """2C.14(l) / RULES.md H5: the reader stops answering (device_lost): reader_disabled;
        play continues.""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    sc.ev("device_lost", ("reader_disabled", "H5"), device="hole_card_reader")
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.open(BURN_OPEN)
    sc.open("EVENTS.md does not name device values; 'hole_card_reader' is used.")

    for up, hole, says in (("Ah", "9d", True), ("Kc", "Ad", False)):
        sc = scenario(
            f"H6_reader_contradicts_shoe_{up}{hole}",
            "three_card_21",
            f"""RULES.md H6 (2C.14(l) interpretation): the shoe read {up} up and {hole} in the
            hole; the reader says blackjack={str(says).lower()}: a malfunction, H5 +
            notify_supervisor.""",
        )
        sc.ev("reader_inspected", by="floor-17")
        tc21_opening(sc)
        reader_deal(sc, up, hole)
        sc.ev("bonus_settled")
        if up[0] == "A":
            sc.ev("insurance_closed")
        sc.ev("reader_inserted")
        sc.ev(
            "reader_result",
            ("reader_disabled", "H6"),
            ("notify_supervisor", "H6"),
            blackjack=says,
        )
        sc.open(BURN_OPEN)
        sc.open("H6 says 'H5 + notify_supervisor'; rule_id H6 is expected on both decisions.")

    sc = scenario(
        "H7_huh_dealer_hole_cards_not_in_output",
        "heads_up_holdem",
        """RULES.md H7: no face-down card in any output before it is revealed. HUH manual shoe,
        two players; a second face-up card (C2) voids the round mid-deal; no decision may
        name a face-down card dealt before it (community cards, hole cards, 7d the dealer's).""",
        shuffler="batch",
    )
    opening(sc, count=None)
    sc.ev("shoe_loaded")
    sc.ev("bets_closed", positions=[1, 2])
    hidden = ["2c", "3c", "4c", "5c", "6c", "9s", "Ts", "7d"]
    sc.note("community cards face down, then a card to each player and the dealer")
    for card in hidden:
        sc.ev("card_drawn", card=card)
    sc.ev("card_drawn", ("discard_card", "C1"), card="Kc", face_up=True)
    hidden.append("Js")
    sc.ev("card_drawn", card="Js")
    end = sc.ev("card_drawn", ("void_round", "C2"), ("reshuffle", "C2"), card="Qd", face_up=True)
    for card in hidden:
        sc.directive(f"hidden {card} before {end + 1}")


# ---------------------------------------------------------------------------
# G: the 3C21 shoe
# ---------------------------------------------------------------------------


def g_rules() -> None:
    for decks in (5, 9):
        sc = scenario(
            f"G1_config_{decks}_decks_refused",
            "three_card_21",
            f"""2C.2(a): not less than six nor more than eight decks: {decks} is refused
            (exit 2).""",
            decks=decks,
        )
        sc.ev("deck_received")
        sc.directive("exit 2")

    sc = scenario(
        "G1_eight_decks_accepted",
        "three_card_21",
        """2C.2(a): eight decks are allowed; a counting ASD reports 8 x 52 = 416.""",
        decks=8,
    )
    tc21_opening(sc, count=416)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.open(BURN_OPEN)

    distinguish = (
        "If the burn were taken for a dealt card, the dealer's up card would be 9c and the "
        "reader use would be H2 (notify + continue_play) instead of H3."
    )
    sc = scenario(
        "G2_burn_after_shoe_loaded",
        "three_card_21",
        """2C.6(c): after a full set is placed in the shoe the first card is burned. The
        burn is 5h, so the dealer's up card is Ah; the reader used before insurance_closed
        shows which card the engine took for the up card (H3).""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc, burn="5h")
    reader_deal(sc, "Ah", "Kd")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted", ("procedure_violation", "H3"), ("notify_supervisor", "H3"))
    sc.open(BURN_OPEN)
    sc.open(distinguish)

    sc = scenario(
        "G2_burn_after_dealer_changed",
        "three_card_21",
        """2C.6(c): each new dealer burns one card before dealing. Mid-shoe dealer change:
        the 6h is burned; the Ah after 9c is the up card (H3 shows it).""",
    )
    sc.ev("reader_inspected", by="floor-17")
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("dealer_changed")
    line = sc.ev("card_drawn", card="6h")
    sc.expect(line, "burn_card", "G2", optional=True)
    reader_deal(sc, "Ah", "Kd")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted", ("procedure_violation", "H3"), ("notify_supervisor", "H3"))
    sc.open(BURN_OPEN)

    sc = scenario(
        "G2_no_burn_with_bart_carter",
        "three_card_21",
        """2C.6(c) last sentence: no burn with the Bart Carter shuffle, neither after
        shoe_loaded nor after dealer_changed. The first card out is position 1's, the second
        (Ah) the up card: the reader before insurance_closed is H3. A burn taken here would
        make 2d the up card: H2 instead.""",
        bart_carter=True,
    )
    sc.ev("reader_inspected", by="floor-17")
    sc.ev("deck_received")
    sc.ev("shuffle_completed", count=312)
    sc.ev("shoe_loaded")
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("dealer_changed")
    reader_deal(sc, "Ah", "Kd")
    sc.ev("bonus_settled")
    sc.ev("reader_inserted", ("procedure_violation", "H3"), ("notify_supervisor", "H3"))

    sc = scenario(
        "G3_cut_card_reshuffle_after_round_then_blocked",
        "three_card_21",
        """2C.4(h): the cut card comes out mid-round; the round is completed, then the cards
        are reshuffled; a deal before that reshuffle is deal_blocked.""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", card="9c")
    sc.ev("card_drawn", card="Td")
    cut = sc.ev("cut_card_reached")
    for card in ["2d", "7s", "3s"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    end = sc.ev("hands_collected")
    sc.expect([cut, end], "reshuffle", "G3")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", "G3"), card="4h")
    sc.open(BURN_OPEN)
    sc.open("G3's reshuffle may be announced at the cut card or when the round ends.")

    sc = scenario(
        "G3_cut_card_round_completed_then_new_shoe",
        "three_card_21",
        """2C.4(h): cut card mid-round: the round goes on to the end with no void; after the
        reshuffle the new shoe burns its first card and deals normally.""",
    )
    tc21_opening(sc)
    sc.ev("bets_closed", positions=[1, 2])
    sc.ev("card_drawn", card="9c")
    cut = sc.ev("cut_card_reached")
    for card in ["Kh", "Td", "2d", "4c", "7s", "3s", "5d"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    end = sc.ev("hands_collected")
    sc.expect([cut, end], "reshuffle", "G3")
    sc.ev("shuffle_started")
    sc.ev("shuffle_completed", count=312)
    sc.ev("shoe_loaded")
    line = sc.ev("card_drawn", card="Jh")
    sc.expect(line, "burn_card", "G2", optional=True)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.open(BURN_OPEN)

    sc = scenario(
        "G4_bart_carter_rack_over_one_deck",
        "three_card_21",
        """2C.4(h)2: with the Bart Carter shuffle a reshuffle takes place after the discard
        rack exceeds about one deck (threshold 52): 52 is not more than 52; 57 is. Each
        round puts 5 cards in the rack (consistent with R1).""",
        bart_carter=True,
    )
    sc.ev("deck_received")
    sc.ev("shuffle_completed", count=312)
    sc.ev("shoe_loaded")
    sc.ev("rack_level", cards=42)
    for level in (47, 52):
        sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
        sc.ev("rack_level", cards=level)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("rack_level", ("reshuffle", "G4"), cards=57)
    sc.open("The reading comes after hands_collected, so the round is already over.")

    sc = scenario(
        "G5_shoe_runs_out_mid_round_no_void",
        "three_card_21",
        """2C.14(f): not enough cards to complete the round: the discard rack is shuffled,
        the first card burned, the round completed; no void. (Batch ASD: the rack's cards
        are not a full set, so no count.)""",
        shuffler="batch",
    )
    sc.ev("deck_received")
    sc.ev("shuffle_completed")
    sc.ev("shoe_loaded")
    line = sc.ev("card_drawn", card="5h")
    sc.expect(line, "burn_card", "G2", optional=True)
    sc.ev("bets_closed", positions=[1, 2])
    for card in ["9c", "Kh", "Td", "2d"]:
        sc.ev("card_drawn", card=card)
    sc.ev("shoe_fault", ("reshuffle", "G5"), fault="empty")
    sc.ev("shuffle_started")
    sc.ev("shuffle_completed")
    sc.ev("shoe_loaded")
    line = sc.ev("card_drawn", card="8h")
    sc.expect(line, "burn_card", ["G5", "G2"], optional=True)
    for card in ["4c", "7s", "3s", "5d"]:
        sc.ev("card_drawn", card=card)
    sc.ev("deal_completed")
    sc.ev("bonus_settled")
    sc.ev("dealer_turn")
    sc.ev("hands_collected")
    sc.open(BURN_OPEN)
    sc.open(
        "EVENTS.md has no event for 'the shoe ran out'; shoe_fault with fault 'empty' is used. "
        "It must not be read as C5 (an ADS fault): this is a manual shoe."
    )

    for why, up, hole, draws, extra in (
        ("hard_17", "Td", "7s", ["4h"], {}),
        ("soft_18", "Ah", "7c", ["4h"], {}),
        ("soft_17_stand_table", "6h", "Ad", ["4h"], {}),
        ("hard_19_after_hit", "9h", "7c", ["3h", "2c"], {}),
    ):
        sc = scenario(
            f"G6_dealer_draws_on_{why}",
            "three_card_21",
            f"""2C.14(d) / 2C.11(b): the dealer holds {up}+{hole}{
                " then " + draws[0] if len(draws) > 1 else ""
            } and draws again: that card is burned, not part of the
            dealer's hand.""",
            **extra,
        )
        tc21_opening(sc)
        sc.ev("bets_closed", positions=[1])
        for card in ["9c", up, "2d", hole, "3s"]:
            sc.ev("card_drawn", card=card)
        sc.ev("deal_completed")
        sc.ev("bonus_settled")
        if up[0] == "A":
            sc.ev("insurance_closed")
        sc.ev("dealer_turn")
        for card in draws[:-1]:
            sc.ev("card_drawn", card=card)
        sc.ev("card_drawn", ("burn_card", "G6"), card=draws[-1])
        sc.ev("hands_collected")
        sc.open(BURN_OPEN)
        if why == "soft_17_stand_table":
            sc.open(
                "2C.14(d) names only 'hard 17 or hard or soft 18'; soft 17 on a table that "
                "stands on soft 17 is burned by RULES.md G6 (2C.11(b)(i) forbids the draw)."
            )
        if why == "hard_19_after_hit":
            sc.open(
                "19 is not in 2C.14(d)'s list (hard 17, hard/soft 18); RULES.md G6 says 'or "
                "more', backed by 2C.11(b) (no draw at 17-21)."
            )

    sc = scenario(
        "G6_soft_17_hit_on_h17_table_is_a_hit",
        "three_card_21",
        """2C.11(b)(ii): a table where the dealer hits soft 17 draws to 6h+Ad: a normal
        hit (soft 19 after 2c), nothing burned.""",
        dealer_hits_soft_17=True,
    )
    tc21_opening(sc)
    sc.tc21_round([["9c", "2d", "3s"]], up="6h", hole="Ad", dealer_draws=["2c"])
    sc.open(BURN_OPEN)

    for decks, total in ((6, 312), (8, 416)):
        sc = scenario(
            f"G7_rack_above_shoe_total_{decks}_decks",
            "three_card_21",
            f"""1.10D(e): the rack is as high as the cards of all decks in the shoe; a reading
            above {total} ({decks} decks) cannot be right: notify_supervisor. {total}
            itself is fine.""",
            decks=decks,
        )
        sc.ev("deck_received")
        sc.ev("shuffle_completed", count=total)
        sc.ev("rack_level", cards=total)
        sc.ev("rack_level", ("notify_supervisor", "G7"), cards=total + 1)


# ---------------------------------------------------------------------------
# D: two decks alternating; R: rack reconciliation
# ---------------------------------------------------------------------------


def dual_opening(sc: Scenario) -> None:
    sc.ev("deck_received", deck="A")
    sc.ev("deck_received", deck="B")
    sc.ev("shuffle_completed", deck="A")
    sc.ev("shuffle_completed", deck="B")


def d_rules() -> None:
    for game, slug in (("five_card_hilo", "hilo"), ("heads_up_holdem", "huh")):
        rnd = Scenario.hilo_round if slug == "hilo" else Scenario.huh_round
        sc = scenario(
            f"D1_same_deck_two_rounds_running_{slug}",
            game,
            """40.2(b)4/39.2(b)4: each deck is used every other round: deck A again in the
            next round, even freshly shuffled, is deal_blocked.""",
            dual_deck=True,
            shuffler="batch",
        )
        dual_opening(sc)
        sc.ev("shoe_loaded", deck="A")
        rnd(sc, [1], "manual_shoe", fresh_cards())
        sc.ev("shuffle_started", deck="A")
        sc.ev("shuffle_completed", deck="A")
        sc.ev("shoe_loaded", deck="A")
        sc.ev("bets_closed", positions=[1])
        sc.ev("card_drawn", ("deal_blocked", "D1"), card="As")

        sc = scenario(
            f"D1_deck_whose_shuffle_has_not_completed_{slug}",
            game,
            """40.2(b)3: one deck is shuffled while the other is played. Round 3 comes back to
            deck A, whose shuffle started but never completed: deal_blocked.""",
            dual_deck=True,
            shuffler="batch",
        )
        dual_opening(sc)
        sc.ev("shoe_loaded", deck="A")
        rnd(sc, [1], "manual_shoe", fresh_cards())
        sc.ev("shuffle_started", deck="A")
        sc.ev("shoe_loaded", deck="B")
        rnd(sc, [1], "manual_shoe", fresh_cards())
        sc.ev("shuffle_started", deck="B")
        sc.ev("shoe_loaded", deck="A")
        sc.ev("bets_closed", positions=[1])
        sc.ev("card_drawn", ("deal_blocked", ["D1", "D3"]), card="As")
        sc.open("Both D1 (shuffle not completed) and D3 (not shuffled since its last round) fit.")

    sc = scenario(
        "D2_other_deck_into_rack_before_emptied_hilo",
        "five_card_hilo",
        """40.2(b)5: cards of only one deck in the rack at any time. Deck A's cards stay in
        the rack (no shuffle_started for A) while deck B's round is collected into it:
        procedure_violation + notify_supervisor.""",
        dual_deck=True,
        shuffler="batch",
    )
    dual_opening(sc)
    sc.ev("shoe_loaded", deck="A")
    sc.hilo_round([1], "manual_shoe", fresh_cards())
    sc.ev("shoe_loaded", deck="B")
    sc.ev("bets_closed", positions=[1])
    sc.draw(fresh_cards(), 10)
    done = sc.ev("deal_completed")
    end = sc.ev("hands_collected")
    sc.expect([done, end], "procedure_violation", "D2")
    sc.expect([done, end], "notify_supervisor", "D2")
    sc.open(
        "EVENTS.md has no 'rack emptied' event: shuffle_started for a deck is read as its "
        "cards leaving the rack. B's stub goes to the rack after the deal (40.7(e)), so the "
        "violation may be found at deal_completed or at hands_collected."
    )

    for dealing in ("manual_shoe", "automated_shoe"):
        sc = scenario(
            f"D3_single_deck_not_reshuffled_{dealing}",
            "five_card_hilo",
            """40.4(a): the deck is shuffled after each round. A second round from the same
            deck without a shuffle is deal_blocked.""",
            dealing=dealing,
        )
        opening(sc)
        sc.ev("shoe_loaded")
        sc.hilo_round([1], dealing, fresh_cards())
        sc.ev("bets_closed", positions=[1])
        if dealing == "automated_shoe":
            sc.ev("stack_dispensed", ("deal_blocked", "D3"), cards=["As", "2s", "3s", "4s", "5s"])
        else:
            sc.ev("card_drawn", ("deal_blocked", "D3"), card="As")

    sc = scenario(
        "D3_huh_shuffle_started_not_completed",
        "heads_up_holdem",
        """39.4(a): shuffled after each round; a shuffle that started but did not complete
        is not a shuffle: deal_blocked.""",
    )
    opening(sc)
    sc.ev("shoe_loaded")
    sc.huh_round([1], "manual_shoe", fresh_cards())
    sc.ev("shuffle_started")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", "D3"), card="As")

    for game, slug in (("five_card_hilo", "hilo"), ("heads_up_holdem", "huh")):
        sc = scenario(
            f"D4_hand_dealing_without_asd_refused_{slug}",
            game,
            """40.8(b)1/39.8(b)1: dealing from the hand requires an ASD: a table configured
            with dealing=hand and shuffler=none is refused (exit 2).""",
            dealing="hand",
            shuffler="none",
        )
        sc.ev("deck_received")
        sc.directive("exit 2")

    sc = scenario(
        "D4_hand_dealing_after_asd_removed_blocked_hilo",
        "five_card_hilo",
        """40.8(b)1: with the ASD removed, hand dealing is deal_blocked.""",
        dealing="hand",
    )
    opening(sc)
    sc.ev("device_removed", device="shuffler")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", "D4"), card="As")

    sc = scenario(
        "D4_hand_dealing_after_asd_fault_blocked_huh",
        "heads_up_holdem",
        """39.8(b)1 and 39.12(e): the ASD jams (reshuffle, C4); hand dealing is blocked.""",
        dealing="hand",
    )
    sc.ev("deck_received")
    sc.ev("shuffle_started")
    sc.ev("shuffler_fault", ("reshuffle", "C4"), fault="jam")
    sc.ev("bets_closed", positions=[1])
    sc.ev("card_drawn", ("deal_blocked", ["D4", "C4"]), card="As")
    sc.open("The blocked deal fits both D4 (ASD faulted) and C4 (batch not shuffled).")


def r_rules() -> None:
    sc = scenario(
        "R1_rack_short_after_collection",
        "three_card_21",
        """RULES.md R1 (1.10D(e), 40.7(f) intent): after hands_collected the rack must rise
        by the cards that left the shoe (tolerance 2). Rounds of 5 cards: +5 ok, +4 ok
        (within 2), +2 is three short: notify_supervisor.""",
    )
    tc21_opening(sc)
    sc.ev("rack_level", cards=1)
    for level in (6, 10):
        sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
        sc.ev("rack_level", cards=level)
    sc.tc21_round([["9c", "2d", "3s"]], up="Td", hole="7s")
    sc.ev("rack_level", ("notify_supervisor", "R1"), cards=12)
    sc.open(BURN_OPEN)
    sc.open(
        "R1's baseline is the last reading before the round; whether the next expected "
        "level after a within-tolerance reading (10 instead of 11) is 15 or 16 is open, "
        "but 12 is short either way."
    )


def build_all() -> list[Scenario]:
    """Every scenario, built afresh."""
    ALL.clear()
    for build in (clean_rounds, c_rules, s_rules, a_rules, m_rules, h_rules, g_rules):
        build()
    d_rules()
    r_rules()
    names = [sc.name for sc in ALL]
    if len(names) != len(set(names)):
        raise ValueError("duplicate scenario names")
    return list(ALL)


def write_all(out_dir: Path = SCENARIO_DIR) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.jsonl"):
        old.unlink()
    scenarios = build_all()
    for sc in scenarios:
        (out_dir / f"{sc.name}.jsonl").write_text(sc.render())
    return len(scenarios)


if __name__ == "__main__":
    print(f"wrote {write_all()} scenarios to {SCENARIO_DIR}")
