"""The automatic dealer: plays legal rounds on a SimulatedTable, as a dealer's hands and terminal.

It lives with the simulators because it *is* part of the simulated world: it presses the
shuffler's button, lifts the shuffled deck into the shoe, draws cards (the shoe reports them to
the daemon through the production drivers), inserts the hole card into the reader, collects
the cards into the discard rack, and types the operator events a dealer or floorperson would
send (docs/events.md). Every card comes from the simulated shoe; none is invented. It never learns
the shuffled order beyond the card in its hand, exactly like a human dealer.

The dealer waits, after each physical action, until the daemon has handled the event the
device reported (``EventFeed``), so that operator events follow the cards they refer to.
With ``fault_rate`` > 0 it injects, now and then, one fault per round (a shuffler jam, a
face-up card, an ADS jam, a reader fault, a device unplugged and plugged back) and records
which fault it was so the caller can check the daemon's decision.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.drivers.protocol.messages import Fault
from tablectl.simulators.table import SimulatedTable

Event = dict[str, Any]
Decision = dict[str, Any]
OperatorSink = Callable[[Event], Awaitable[list[Decision]]]
#: the round the daemon's engine holds open: (state, positions, first card dealt), or None
OpenRound = Callable[[], tuple[str, list[int], bool] | None]
#: what the dealer's terminal shows of the table (`tablectl status`: the engine's status)
TableStatus = Callable[[], Mapping[str, Any]]

#: the decisions a legal round must never draw (roundgen's contract, docs/rules.md)
ILLEGAL_IN_A_LEGAL_ROUND = frozenset(
    {"void_round", "void_hand", "procedure_violation", "remove_deck", "deal_blocked", "rejected"}
)

#: The faults the dealer can inject, and the decision (decision, rule_id) the daemon must
#: answer each with; None: no rule applies, but device_lost/device_connected are journaled and
#: tablectl_device_up follows them. `expected_decision` adds the dealing method's difference.
FAULT_DECISIONS: dict[str, tuple[str, str] | None] = {
    "shuffler_jam": ("reshuffle", "C4"),
    "face_up_card": ("discard_card", "C1"),
    "ads_jam": ("void_round", "C5"),
    "reader_fault": ("reader_disabled", "H5"),
    "reader_misuse": ("notify_supervisor", "H2"),
    "unplug_rack": None,
    "unplug_shoe": None,
}
FAULTS = tuple(FAULT_DECISIONS)


def expected_decision(fault: str, dealing: str) -> tuple[str, str] | None:
    """The decision a fault must draw: the USB shoe pulled mid-round is C5 for an ADS only
    (a manual shoe's round is suspended and resumes when it is back)."""
    if fault == "unplug_shoe" and dealing == "automated_shoe":
        return ("void_round", "C5")
    return FAULT_DECISIONS[fault]


class DealerStuck(RuntimeError):
    """An event the dealer waited for never reached the daemon; the message says which."""


class Cable(Protocol):
    """How a simulated device is attached (pty or USB): it can be pulled and put back."""

    def unplug(self) -> None: ...

    def replug(self) -> None: ...


@dataclass(frozen=True)
class HandledEvent:
    event: Event
    decisions: list[Decision]
    seconds: float
    source: str


class EventFeed:
    """The events the daemon has handled, in order, with their decisions and processing time.

    Marks are absolute event counts; `forget_before` drops what no round needs any more, so a
    demo left running for days keeps only the round in play.
    """

    def __init__(self) -> None:
        self.handled: list[HandledEvent] = []
        self._dropped = 0
        self._changed = asyncio.Event()

    def record(
        self, event: Mapping[str, Any], decisions: list[Decision], seconds: float, source: str
    ) -> None:
        self.handled.append(HandledEvent(dict(event), list(decisions), seconds, source))
        self._changed.set()

    def mark(self) -> int:
        return self._dropped + len(self.handled)

    def since(self, mark: int) -> list[HandledEvent]:
        return self.handled[max(0, mark - self._dropped) :]

    def forget_before(self, mark: int) -> None:
        drop = max(0, min(mark - self._dropped, len(self.handled)))
        del self.handled[:drop]
        self._dropped += drop

    async def wait_for(
        self, event_type: str, since: int, count: int = 1, timeout: float = 5.0
    ) -> HandledEvent:
        """The ``count``-th ``event_type`` handled after ``since``; DealerStuck after timeout."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    seen = [h for h in self.since(since) if h.event.get("type") == event_type]
                    if len(seen) >= count:
                        return seen[count - 1]
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise DealerStuck(
                f"waited {timeout}s for the daemon to handle {event_type!r} "
                f"(#{count} since event {since}); the device or its driver did not report it"
            ) from None


@dataclass
class RoundReport:
    """One round as the dealer played it, for the live summary line (no card identities)."""

    number: int
    game: str
    positions: list[int] = field(default_factory=list)
    cards_dealt: int = 0
    faults: list[str] = field(default_factory=list)
    handled: list[HandledEvent] = field(default_factory=list)

    @property
    def decisions(self) -> list[Decision]:
        return [d for h in self.handled for d in h.decisions]

    @property
    def outcome(self) -> str:
        kinds = {d.get("decision") for d in self.decisions}
        if "void_round" in kinds:
            return "voided"
        if "hands_dead" in kinds:
            return "hands_dead"
        return "completed"

    def decision_counts(self) -> Counter[str]:
        return Counter(f"{d.get('rule_id')}:{d.get('decision')}" for d in self.decisions)

    def summary_line(self) -> str:
        """Round, game, outcome, decisions by rule id, latency: never a card (H7)."""
        counts = self.decision_counts()
        decided = (
            " ".join(f"{key}" + (f"x{n}" if n > 1 else "") for key, n in sorted(counts.items()))
            or "-"
        )
        times = sorted(h.seconds for h in self.handled)
        if times:
            median = statistics.median(times) * 1000
            latency = f"events {len(times)} p50 {median:.2f}ms max {times[-1] * 1000:.2f}ms"
        else:
            latency = "events 0"
        seats = ",".join(str(p) for p in self.positions) or "-"
        fault = f" fault {'+'.join(self.faults)}" if self.faults else ""
        links = [
            f"{h.event.get('device')}:{'lost' if h.event['type'] == 'device_lost' else 'up'}"
            for h in self.handled
            if h.event.get("type") in ("device_lost", "device_connected")
        ]
        seen = f" devices {','.join(links)}" if links else ""
        return (
            f"round {self.number:>4} {self.game:<15} {self.outcome:<9} positions {seats:<13} "
            f"cards {self.cards_dealt:>3} decisions {decided}{fault}{seen} | {latency}"
        )


def _total(cards: list[str]) -> tuple[int, bool]:
    """A 3C21 hand's total and whether it is soft (an ace counted as 11)."""
    value = 0
    aces = 0
    for card in cards:
        rank = card[0]
        if rank == "A":
            aces += 1
            value += 1
        elif rank in "TJQK":
            value += 10
        else:
            value += int(rank)
    if aces and value + 10 <= 21:
        return value + 10, True
    return value, False


def dealer_stands(cards: list[str], hits_soft_17: bool) -> bool:
    total, soft = _total(cards)
    if total >= 18 or (total == 17 and not soft):
        return True
    return total == 17 and soft and not hits_soft_17


class AutoDealer:
    """Plays one legal round at a time on ``table``; see the module docstring."""

    def __init__(
        self,
        table: SimulatedTable,
        *,
        game: str,
        options: Mapping[str, Any],
        operator: OperatorSink,
        feed: EventFeed,
        cables: Mapping[str, Cable],
        rng: random.Random,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = FAULTS,
        gaming_day_start: datetime.time = datetime.time(6, 0),
        clock: Callable[[], datetime.datetime] = datetime.datetime.now,
        wait_timeout: float = 20.0,
        round_number: Callable[[], int] | None = None,
        pace: float = 0.0,
        open_round: OpenRound | None = None,
        status: TableStatus | None = None,
    ) -> None:
        self.table = table
        # seconds the dealer pauses after each step (a card, an operator event): a person
        # watching the demo can follow the round; 0 plays as fast as the daemon answers
        self.pace = pace
        self.game = game
        self.options = dict(options)
        self.operator = operator
        self.feed = feed
        self.cables = cables
        self.rng = rng
        self.fault_rate = fault_rate
        unknown = sorted(set(fault_kinds) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
        self.fault_kinds = tuple(fault_kinds)
        self.gaming_day_start = gaming_day_start
        self.clock = clock
        self.wait_timeout = wait_timeout
        # the engine's number of the round in play (the journal's), when the caller knows it
        self.round_number = round_number
        # the round the journal left open at a restart (X1), finished by resume()
        self.open_round = open_round
        self._resumed_positions: list[int] | None = None
        # the table's status as the terminal shows it (S1: rounds since each deck's count)
        self.status = status
        self.method = str(self.options.get("dealing", "manual_shoe"))
        self.positions = int(self.options.get("positions", 7 if game == "five_card_hilo" else 6))
        self.has_reader = game == "three_card_21" and self.options.get("reader", "concealed") != (
            "none"
        )
        self.rounds_played = 0
        # 40.2(b), 39.2(b): two decks of different backs, one shuffled while the other is dealt
        self.dual_deck = bool(self.options.get("dual_deck", False)) and game in (
            "five_card_hilo",
            "heads_up_holdem",
        )
        self.deck_in_shoe: str | None = None
        self._other_shuffle_mark: int | None = None
        self.reader_usable = False
        self._inspected_day: datetime.date | None = None
        self._needs_shuffle = True
        self._report: RoundReport | None = None
        self._face_up_pending = False
        self._planned: str | None = None
        self._round_start = 0

    # -- the building blocks --------------------------------------------------------------

    async def say(self, event_type: str, **fields: Any) -> list[Decision]:
        """An operator event from the dealer's terminal."""
        decisions = await self.operator({"type": event_type, **fields})
        await self._pause()
        return decisions

    async def _await(self, event_type: str, since: int, count: int = 1) -> HandledEvent:
        handled = await self.feed.wait_for(event_type, since, count, self.wait_timeout)
        await self._pause()
        return handled

    async def _pause(self) -> None:
        if self.pace > 0:
            await asyncio.sleep(self.pace)

    def _gaming_day(self) -> datetime.date:
        return gaming_day_of(self.clock(), self.gaming_day_start)

    async def _inspect_reader_if_due(self) -> None:
        """H1: the floorperson inspects the reader at the start of each gaming day."""
        if not self.has_reader:
            return
        day = self._gaming_day()
        if self._inspected_day != day:
            await self.say("reader_inspected")  # by: the terminal's user, from the socket
            self._inspected_day = day
            self.reader_usable = True

    async def _shuffle(self, deck_to_shoe: bool = True) -> None:
        """The round's cards back into the shuffler, a shuffle, the deck lifted into the shoe."""
        if self.table.discards or self.table.shoe.cards:
            mark = self.feed.mark()
            self.table.cards_back_to_shuffler()
            await self._await("rack_level", mark)
        if self._inject("shuffler_jam"):
            self.table.shuffler.fault(Fault.JAM)
            mark = self.feed.mark()
            self.table.shuffler.press_start()
            await self._await("shuffler_fault", mark)
            self.table.shuffler.clear_fault()  # a technician clears it; C4: shuffle again
        mark = self.feed.mark()
        self.table.shuffler.press_start()
        await self._await("shuffle_completed", mark)
        if deck_to_shoe:
            mark = self.feed.mark()
            self.table.shuffled_deck_to_shoe()
            await self._await("shoe_loaded", mark)
        self._needs_shuffle = False

    async def _alternate_decks(self) -> None:
        """Two decks alternating: the shuffled one into the shoe, the one just played into the
        shuffler (the rack emptied with it), its shuffle started to run during this round."""
        shuffler = self.table.shuffler
        first = self.deck_in_shoe is None
        if first:
            # deck A shuffled and set aside, then deck B (the other back colour) shuffled
            for label in ("A", "B"):
                mark = self.feed.mark()
                if label == "B":
                    shuffler.load()
                shuffler.press_start(label)
                await self._await("shuffle_completed", mark)
                if label == "A":
                    next_cards = shuffler.take_deck()
            label = "A"
        else:
            await self._other_deck_shuffled()
            next_cards = shuffler.take_deck()
            label = "B" if self.deck_in_shoe == "A" else "A"
            mark = self.feed.mark()
            self.table.cards_back_to_shuffler()
            await self._await("rack_level", mark)
        mark = self.feed.mark()
        self.table.shoe.load(next_cards, label)
        await self._await("shoe_loaded", mark)
        self.deck_in_shoe = label
        if not first:
            self._other_shuffle_mark = self.feed.mark()
            shuffler.press_start("B" if label == "A" else "A")

    async def _other_deck_shuffled(self) -> None:
        """The deck shuffling during this round has finished (40.2(b)3) before it is needed."""
        if self._other_shuffle_mark is not None:
            await self._await("shuffle_completed", self._other_shuffle_mark)
            self._other_shuffle_mark = None

    async def _shoe_unlocked(self) -> None:
        """The daemon may hold the shoe (after a void, until bets close): wait for its release."""
        async with asyncio.timeout(self.wait_timeout):
            while self.table.shoe.locked:
                await asyncio.sleep(0.01)

    async def _draw(self) -> str:
        """One card out of the manual shoe, once the daemon has seen it."""
        shoe = self.table.shoe
        await self._shoe_unlocked()
        mark = self.feed.mark()
        face_up = self._face_up_pending
        if face_up:
            shoe.face_up_next()
            self._face_up_pending = False
        card = self.table.draw()
        if card is None:
            raise DealerStuck("the shoe gave no card (locked, faulted or empty)")
        await self._await("card_drawn", mark)
        if shoe.cut_card_after is not None and shoe.dealt == shoe.cut_card_after:
            await self._await("cut_card_reached", mark)
            self._needs_shuffle = True
        if self._report is not None:
            self._report.cards_dealt += 1
        if face_up:
            # C1: the face-up card goes to no hand; the next card takes its place
            return await self._draw()
        return card

    async def _dispense(self, size: int) -> list[str] | None:
        """A stack from the ADS; None when it jammed (the stuck cards join the round's)."""
        shoe = self.table.shoe
        await self._shoe_unlocked()
        mark = self.feed.mark()
        if self._inject("ads_jam"):
            stuck = shoe.cards[: size // 2]
            shoe.jam()
            self.table.dispense(size)
            await self._await("shoe_fault", mark)
            self.table.in_play.extend(stuck)  # pulled out of the jammed device by hand
            shoe.clear_fault()
            return None
        stack = self.table.dispense(size)
        if stack is None:
            raise DealerStuck("the automated shoe dispensed nothing (locked or empty)")
        await self._await("stack_dispensed", mark)
        if self._report is not None:
            self._report.cards_dealt += len(stack)
        return stack

    async def _bets(self) -> list[int]:
        if self._resumed_positions is not None:
            # the round the daemon resumed had closed its bets already (L1: once a round)
            positions, self._resumed_positions = self._resumed_positions, None
        else:
            count = self.rng.randint(1, self.positions)
            positions = sorted(self.rng.sample(range(1, self.positions + 1), count))
            await self.say("bets_closed", positions=positions)
        if self._report is not None:
            self._report.positions = positions
            if self.round_number is not None:
                self._report.number = self.round_number()
        # the injected face-up card is one of the deal's, not the burn card
        self._face_up_pending = self._inject("face_up_card")
        if self._inject("unplug_shoe"):
            await self._unplug_shoe()
        return positions

    async def _collect(self) -> None:
        """hands_collected, then the cards into the discard rack (its sensor reports)."""
        await self.say("hands_collected")
        mark = self.feed.mark()
        self.table.collect_round()
        await self._await("rack_level", mark)

    async def _stub_count_if_asked(self, round_mark: int, always: bool = False) -> None:
        """S1/S4: the dealer counts the stub (the cards really left in the shoe) when asked."""
        asked = always or any(
            d.get("decision") == "stub_count_required"
            for h in self.feed.since(round_mark)
            for d in h.decisions
        )
        if asked:
            await self.say("stub_counted", count=len(self.table.shoe.cards))

    async def _stub_count_if_due(self) -> None:
        """S1 as the terminal shows it: a deck dealt its fifth round since its last verified
        count is counted before its next deal. The round that asked (stub_count_required) may
        never have reached this dealer: a restart voided it (X1) before the count, or an ADS
        jam voided it; without a count its sixth round is deal_blocked (S1), the shoe held.
        Counted once the shuffled deck is in the shoe: the stub is the whole shoe."""
        if self.status is None:
            return
        status = self.status()
        name = str(status.get("deck_in_play", "A"))
        if self.dual_deck and name != self.deck_in_shoe:
            return  # the other deck's cadence is counted when it is in the shoe
        deck = status.get("decks", {}).get(name)
        if deck is not None and deck["rounds_since_stub_count"] >= deck["stub_count_every"]:
            await self.say("stub_counted", count=len(self.table.shoe.cards))

    # -- faults ------------------------------------------------------------------------------

    def _inject(self, fault: str) -> bool:
        """True (and the fault recorded) when this round's planned fault is ``fault``."""
        if self._planned != fault or self._report is None:
            return False
        self._planned = None
        self._report.faults.append(fault)
        return True

    def _voided(self) -> bool:
        """The daemon voided the round in play: the dealer stops dealing and collects."""
        return any(
            d.get("decision") in ("void_round", "hands_dead")
            for h in self.feed.since(self._round_start)
            for d in h.decisions
        )

    def _start_chosen(self) -> bool:
        """AP: the resumed round's starting position was chosen before the restart (A1)."""
        found = self.open_round() if self.open_round is not None else None
        return found is not None and found[0] != "starting_position"

    def _shuffle_due(self) -> bool:
        if self.game != "three_card_21":
            return True
        return self._needs_shuffle or len(self.table.shoe.cards) < 60

    def _possible_faults(self) -> list[str]:
        faults = ["unplug_rack", "unplug_shoe"]
        if (
            self.options.get("shuffler", "counting") != "none"
            and self._shuffle_due()
            and not self.dual_deck
        ):
            faults.append("shuffler_jam")
        if self.method == "manual_shoe" and self.game != "asia_poker":
            faults.append("face_up_card")
        if self.method == "automated_shoe":
            faults.append("ads_jam")
        if self.has_reader and self.reader_usable:
            faults += ["reader_fault", "reader_misuse"]
        return [fault for fault in faults if fault in self.fault_kinds]

    async def _pull_and_replug(self, name: str) -> int:
        """Pull a device's cable, wait for the loss, plug it back, wait for the handshake.

        Returns the feed's mark from just before the replug (what the device said since).
        """
        cable = self.cables[name]
        mark = self.feed.mark()
        cable.unplug()
        await self._await("device_lost", mark)
        mark = self.feed.mark()
        cable.replug()
        await self._await("device_connected", mark)
        return mark

    async def _unplug_shoe(self) -> None:
        """The shoe's USB cable is pulled mid-round, then plugged back."""
        await self._pull_and_replug("shoe")

    async def _unplug_rack(self) -> None:
        """The rack sensor's cable is pulled and put back between rounds."""
        mark = await self._pull_and_replug("rack")
        await self._await("rack_level", mark)  # the sensor reports its level at the handshake

    async def _reader_fault(self) -> None:
        """The reader breaks (H5); repaired and re-inspected before the next round."""
        mark = self.feed.mark()
        self.table.reader.fault(Fault.SENSOR, "lens dirty")
        await self._await("reader_fault", mark)
        self.reader_usable = False

    async def _after_faults(self) -> None:
        if self.has_reader and not self.reader_usable:
            self.table.reader.repair()
            await self.say("reader_inspected")  # by: the terminal's user, from the socket
            self.reader_usable = True
        await self._acknowledge()

    async def _acknowledge(self) -> None:
        """A supervisor acknowledges every notification raised this round."""
        if self._report is None:
            return
        if any(d.get("decision") == "notify_supervisor" for d in self._report.decisions):
            await self.say("supervisor_ack")  # by: the terminal's user, from the socket

    # -- a restart ---------------------------------------------------------------------------

    async def resume(self) -> None:
        """Finish the round the daemon's journal held open when it restarted (X1).

        The daemon's round is the journal's: a new "no more bets" would be refused (L1). A
        void round is collected; a round being played (Three Card 21 resumes, its cards face
        up) is played to its end with the steps it still lacks and collected; a round whose
        deal had not begun is dealt by the next play_round, to its own positions.
        """
        found = self.open_round() if self.open_round is not None else None
        if found is None:
            return
        state, positions, started = found
        if state != "void" and not started:
            self._resumed_positions = list(positions)
            return
        steps = {
            "dealing": "deal_completed",
            "bonus": "bonus_settled",
            "insurance": "insurance_closed",
            "players": "dealer_turn",
        }
        for _step in range(len(steps) + 1):
            now = self.open_round() if self.open_round is not None else None
            if now is None:
                return
            step = steps.get(now[0])
            if step is None:  # played out (or void): collected
                await self.say("hands_collected")
                return
            await self.say(step)

    # -- rounds -------------------------------------------------------------------------------

    async def play_round(self) -> RoundReport:
        """Play one round (with a shuffle where the game needs one); its report."""
        self.rounds_played += 1
        report = RoundReport(self.rounds_played, self.game)
        self._report = report
        start = self.feed.mark()
        self.feed.forget_before(start)
        await self._inspect_reader_if_due()
        self._round_start = start
        self._planned = None
        possible = self._possible_faults()
        if possible and self.fault_rate > 0 and self.rng.random() < self.fault_rate:
            self._planned = self.rng.choice(possible)
        if self._inject("unplug_rack"):
            await self._unplug_rack()
        if self._inject("reader_fault"):
            await self._reader_fault()
        if self.game == "three_card_21":
            await self._three_card_21()
        elif self.game == "asia_poker":
            await self._asia_poker()
        else:
            await self._stud()
        report.handled = self.feed.since(start)
        await self._after_faults()
        report.handled = self.feed.since(start)
        self._report = None
        return report

    async def _three_card_21(self) -> None:
        """2C.6: burn after loading, three passes (up card, hole card), bonus, reader, play."""
        if self._shuffle_due():
            await self._shuffle()
            if not self.options.get("bart_carter", False):
                await self._draw()  # G2: the burn card
        positions = await self._bets()
        dealer: list[str] = []
        for step in range(3):
            for _position in positions:
                await self._draw()
            if step < 2:
                dealer.append(await self._draw())
        await self.say("deal_completed")
        await self.say("bonus_settled")
        up, hole = dealer
        if up[0] == "A":
            await self.say("insurance_closed")
        misuse = up[0] not in "AKQJT" and self.reader_usable and self._inject("reader_misuse")
        if self.has_reader and self.reader_usable and (up[0] in "AKQJT" or misuse):
            # H2 (misuse): a hole card inserted under a low up card; a concealed reader
            # tells the players nothing, so play continues once a supervisor is told
            mark = self.feed.mark()
            self.table.reader.insert(up, hole)
            await self._await("reader_result", mark)
        blackjack = _total(dealer)[0] == 21
        if self._voided():
            await self._collect()
            return
        if not blackjack:
            for _position in positions:
                for _hit in range(self.rng.randint(0, 2)):
                    await self._draw()
        await self.say("dealer_turn")
        hits = bool(self.options.get("dealer_hits_soft_17", False))
        while not blackjack and not dealer_stands(dealer, hits):
            dealer.append(await self._draw())
        await self._collect()

    async def _stud(self) -> None:
        """HILO and HUH, one deck shuffled before every round (40.4(a), 39.4(a))."""
        hilo = self.game == "five_card_hilo"
        if self.dual_deck:
            await self._alternate_decks()
        else:
            await self._shuffle()
        await self._stub_count_if_due()
        round_mark = self.feed.mark()
        positions = await self._bets()
        targets = len(positions) + 1
        voided = False
        if self.method == "automated_shoe":
            sizes = [5] * targets if hilo else [5] + [2] * targets
            for size in sizes:
                if self._voided() or await self._dispense(size) is None:
                    voided = True
                    break
            if not voided:
                await self.say("deal_completed")
        else:
            if not hilo:
                for _community in range(5):
                    await self._draw()
            for _pass in range(5 if hilo else 2):
                for _target in range(targets):
                    await self._draw()
            await self.say("deal_completed")
        if not voided:
            await self._stub_count_if_asked(round_mark)
        await self._other_deck_shuffled()
        await self._collect()

    async def _asia_poker(self) -> None:
        """31.8/31.11: the starting position, 7 cards to each of 7 positions, 4 remain (S4)."""
        await self._shuffle()
        round_mark = self.feed.mark()
        resumed = self._resumed_positions is not None
        await self._bets()
        if self.options.get("ap_start", "operator") == "operator" and not (
            resumed and self.open_round is not None and self._start_chosen()
        ):
            if self.rng.random() < 0.5:
                dice = sum(self.rng.randint(1, 6) for _ in range(3))
                await self.say("starting_position", dice=dice)
            else:
                await self.say("starting_position", number=self.rng.randint(1, 7))
        for _card in range(49):
            await self._draw()
        await self.say("deal_completed")
        await self._stub_count_if_asked(round_mark, always=True)
        await self._collect()


__all__ = [
    "FAULT_DECISIONS",
    "ILLEGAL_IN_A_LEGAL_ROUND",
    "AutoDealer",
    "Cable",
    "DealerStuck",
    "EventFeed",
    "HandledEvent",
    "RoundReport",
    "dealer_stands",
]
