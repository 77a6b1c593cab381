"""The table service: every event through journal, engine, metrics, logs and device commands.

Order matters and is fixed here (DESIGN.md, the data path):
1. the event is stamped with the local time and appended to the journal;
2. the engine decides (its random draws are journaled as they happen, for replay);
3. every decision is appended and the batch made durable (fsync) before anything acts on it;
   with `group_commit=True` only batches that command a device or answer an operator are;
4. only then metrics, logs, operator subscribers and device commands.

On start the journal is replayed through a fresh engine to rebuild the table's state; when it
held anything, the `controller_restarted` event lets the engine decide whether a round in
progress resumes or is voided (engine-api.md), and that decision is journaled like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from time import perf_counter
from typing import Any

from tablectl.controller.common import metrics
from tablectl.controller.common.config import TableConfig
from tablectl.controller.common.faults import fault_point
from tablectl.controller.common.logs import get_logger
from tablectl.controller.engine.core import Engine
from tablectl.controller.record.checkpoints import CheckpointSigner
from tablectl.controller.record.journal import (
    RANDOM_DRAW,
    Journal,
    JournalError,
    JournalRow,
    LocalTimestamp,
    ReplayedDraws,
    SegmentBusy,
    _to_row,
    closed_segment_name,
    engine_from_checkpoint,
    engine_from_table_row,
    recipient_name,
)
from tablectl.controller.record.sealing import Sealer, SealingError

CHECKPOINT_FORMAT = 1
#: Replayed events between two progress reports (STATUS=, EXTEND_TIMEOUT_USEC=).
REPLAY_PROGRESS_EVERY = 2000
#: Events that report on the decks themselves: once the journal holds one, the decks the
#: status shows are what was seen, not the engine's starting assumptions. (A discard rack's
#: level, reported as it connects, says nothing of the shoe.)
CARD_EVENTS = frozenset(
    {
        "shuffle_started",
        "shuffle_completed",
        "shoe_loaded",
        "card_drawn",
        "stack_dispensed",
        "cut_card_reached",
        "stub_counted",
        "deck_received",
        "hands_collected",
    }
)
# (events replayed, seq reached, last seq): told now and then during a long replay.
ReplayProgress = Callable[[int, int, int], None]

# Decisions that the service turns into device commands (lock the dealing shoe, keep the deck in
# the shuffler, disable the reader ...): durable before anything is sent (issue 4, Journal).
DEVICE_COMMAND_DECISIONS = frozenset(
    {
        "deal_blocked",
        "remove_deck",
        "reshuffle",
        "void_round",
        "hands_dead",
        "reader_disabled",
    }
)
# Decisions a person must act on: pushed to operator subscribers as alarms.
ALARM_DECISIONS = frozenset(
    {"notify_supervisor", "procedure_violation", "deal_blocked", "remove_deck", "void_round"}
)
DEVICE_FAULT_EVENTS = frozenset({"shuffler_fault", "shoe_fault", "reader_fault", "rack_fault"})
# Events `_account` counts even when they draw no decision and end no round.
_ACCOUNTED_EVENTS = DEVICE_FAULT_EVENTS | {"device_lost", "device_connected", "hands_collected"}
# How stale the status gauges (rounds since stub count, pending notifications) may be.
GAUGE_REFRESH_SECONDS = 0.05

DeviceCommandSink = Callable[[Mapping[str, Any]], Awaitable[None]]
Publisher = Callable[[Mapping[str, Any]], Awaitable[None]]
# Told of every handled event once it was acted on: (event, decisions, seconds, source).
EventObserver = Callable[[Mapping[str, Any], list[dict[str, Any]], float, str], None]


class ServiceError(RuntimeError):
    """The service cannot start; the message says what to do."""


class _ReplaySource:
    """Random draws during replay come from the journal, in order; live ones are journaled."""

    def __init__(self, service: TableService) -> None:
        self.service = service
        self.replaying: ReplayedDraws | None = None

    def __call__(self, bound: int) -> int:
        if self.replaying is not None:  # even when empty: a replay never draws afresh
            return self.replaying(bound)
        value = self.service.random_source(bound)
        self.service.journal.append(
            "note",
            {"type": RANDOM_DRAW, "bound": bound, "value": value},
            round_number=self.service.engine.round_number,
        )
        return value


class TableService:
    """One table: journal first, then the engine, then metrics, logs and device commands."""

    def __init__(
        self,
        config: TableConfig,
        journal: Journal,
        *,
        random_source: Callable[[int], int] = secrets.randbelow,
        engine_builder: Callable[[Mapping[str, Any], Callable[[int], int]], Engine] = (
            engine_from_table_row
        ),
        clock: Callable[[], datetime.datetime] = datetime.datetime.now,
        group_commit: bool = False,
    ) -> None:
        self.config = config
        # False (the default): each event and its decisions are fsynced before handle_event
        # returns, so kill -9 at any moment loses nothing handled. True (soak runs, benches):
        # rows that command no device and answer no operator ride the journal's group commit.
        self.group_commit = group_commit
        self.journal = journal
        self.random_source = random_source
        self.clock = clock
        # Every event's local `time`: the default clock's text is kept per second (the
        # service stamps every card); an injected clock (tests, replays) is asked each time.
        self._stamp: Callable[[], str] = (
            LocalTimestamp(config.zone)
            if clock is datetime.datetime.now
            else (lambda: clock().isoformat(timespec="microseconds"))
        )
        self.device_commands: DeviceCommandSink | None = None
        self.publish: Publisher | None = None
        # Whether anyone reads the state pushed after every event (a terminal subscribed):
        # decisions and alarms are always published (they are counted), the state only then.
        self.subscribed: Callable[[], bool] = lambda: True
        # Watchers of the event stream inside the process (the demo's automatic dealer waits on
        # the cards it drew this way); they get what the journal got, so never a log or metric.
        self.observers: list[EventObserver] = []
        #: Told `(seq, ends)` right after the engine handled each live event: the rounds it
        #: ended, each as its dealt cards (None: the engine failed on it). The daemon hands
        #: them to its floor summaries (floor/summary.TableSummaries), which count the day's
        #: summaries here without its shipper parsing a row or replaying the engine.
        self.round_ends: Callable[[int, list[list[dict[str, Any]]] | None], None] | None = None
        self._log = get_logger("service", table=config.table_id)
        # A filtered-out debug line still costs its call; the bound logger's level is fixed.
        is_enabled_for = getattr(self._log, "is_enabled_for", None)
        self._log_events = is_enabled_for is None or bool(is_enabled_for(logging.DEBUG))
        self._observe_processing = metrics.EVENT_PROCESSING_SECONDS.observe
        self._draws = _ReplaySource(self)
        self.table_row = config.table_dict()
        self._engine_builder = engine_builder
        self.engine = engine_builder(self.table_row, self._draws)
        # the configuration's table row, held back until the next segment (start())
        self._next_table_row: dict[str, Any] | None = None
        # The engine's status as of the last event handled, built on first read after an event
        # (`tablectl status`, the gauges); the per-event readers take state and round directly.
        self._engine_status: Mapping[str, Any] | None = None
        # The status gauges are refreshed at most every GAUGE_REFRESH_SECONDS, not per event.
        self._gauges_timer: asyncio.TimerHandle | None = None
        self.replayed_events = 0
        self.replay_divergences: list[int] = []
        # Whether the journal holds any event about the cards (a shuffle, a shoe, a card, a
        # count): until then the engine's decks are its assumptions, and the status says
        # "not yet seen" rather than state them as seen.
        self.cards_seen = False
        # A checkpoint at the end of every `checkpoint_rounds`-th round; seals when a key is set.
        self.checkpoint_rounds = config.checkpoint_rounds
        self.sealer: Sealer | None = None
        #: Signs the journal's Merkle log at every round's end (None: no identity key).
        self.checkpoint_signer: CheckpointSigner | None = None
        #: Why seals (and the journal's retention and roll-over) are held: an unresolved clock
        #: step (journal_upkeep.ClockWatch). None: not held.
        self.seals_held: str | None = None
        # Parts of the state kept outside the service (the daemon's interlocks), by name.
        self.checkpoint_parts: dict[str, Callable[[], Any]] = {}
        self._round_voided = False
        self._round_counted = 0
        #: (the event's seq, why) when an event was journaled but the record failed right after
        #: it (its checkpoint): the operator's reply says it was recorded.
        self.recorded_then_failed: tuple[int, str] | None = None
        # The engine's round number when the live journal segment began (0: the table's first
        # segment): the segment holds the rounds after it (the journal's growth per round).
        self.segment_first_round = 0
        self.devices_up: dict[str, bool] = {device.name: False for device in config.devices}
        for name in self.devices_up:
            metrics.set_device_up(name, False)
        metrics.initialise_table(config.table_id, config.game, self.devices_up)
        # When each device last went up or down (the event's time): status says "down since".
        started = self.clock().isoformat(timespec="seconds")
        self.devices_since: dict[str, str] = {name: started for name in self.devices_up}

    # -- start: rebuild from the journal ---------------------------------------------------------

    async def start(
        self,
        rows: Iterable[JournalRow] | None = None,
        *,
        on_row: Callable[[JournalRow], None] | None = None,
        on_checkpoint: Callable[[Mapping[str, Any]], None] | None = None,
        progress: ReplayProgress | None = None,
    ) -> list[dict[str, Any]]:
        """Rebuild the table's state from the journal (or begin it); the restart decisions.

        The state comes from the live segment's last checkpoint (`on_checkpoint` gets its body,
        for the parts of the state the caller keeps) and the rows after it, streamed: never
        the whole journal in memory. Each row replayed goes to `on_row`; `progress(events,
        seq, last_seq)` is called now and then on a long replay. `rows`: replay these instead
        (tests; a journal without checkpoints).
        """
        table, checkpoint = self._segment_start()
        if table is None:
            self.journal.append("table", self.table_row, durable=True)
            self._log.info("journal_started", game=self.config.game)
            self._update_gauges()
            return []
        if table.body != self.table_row and table.body == self.config.table_dict_as_stated():
            # Begun by a version without the options a table now gets unstated (the shuffle
            # watch, Q1-Q2): this segment goes on as written; the next gaming day's segment
            # takes the configuration's row (roll_segment).
            self._log.info(
                "table_options_from_next_segment", implied=list(self.config.implied_options)
            )
            self._next_table_row = self.table_row
            self.table_row = table.body
            self.engine = self._engine_builder(self.table_row, self._draws)
        if table.body != self.table_row:
            raise ServiceError(
                f"{self.journal.path} was written for {table.body}, but "
                f"{self.config.source} now says {self.table_row}: restore the configuration, or "
                "archive the journal and configure a new path"
            )
        first_seq = table.seq
        if checkpoint is not None:
            self._restore(checkpoint)
            if on_checkpoint is not None:
                on_checkpoint(checkpoint.body)
            first_seq = checkpoint.seq + 1
        if rows is None:
            rows = (_to_row(raw) for raw in self.journal.raw_rows_from(first_seq))
        started = time.perf_counter()
        self.replay_divergences = []
        ended = self._round_counted  # the last round that ended before the restart
        last_seq = self.journal.last_seq
        for event, draws, decisions in _event_groups(rows, on_row):
            ended = self._replay_event(event, draws, decisions, ended)
            if progress is not None and self.replayed_events % REPLAY_PROGRESS_EVERY == 0:
                progress(self.replayed_events, event.seq, last_seq)
        self._draws.replaying = None
        if self.replay_divergences:
            # The engine decides differently now than when the journal was written (a new
            # version or interpretation): the journal stays the record; the state is today's.
            self._log.warning(
                "replay_diverged",
                events=len(self.replay_divergences),
                first_seq=self.replay_divergences[0],
            )
        # A round still open when the process died is counted when it ends, voided or not.
        self._round_counted = ended
        self.segment_first_round = self._segment_first_round()
        if not self.replayed_events and checkpoint is None:
            return []
        self._log.info(
            "journal_replayed",
            events=self.replayed_events,
            from_seq=first_seq,
            round=self.engine.round_number,
            seconds=round(time.perf_counter() - started, 6),
        )
        return await self.handle_event({"type": "controller_restarted"}, source="controller")

    def _segment_start(self) -> tuple[JournalRow | None, JournalRow | None]:
        """The live segment's table row and its last checkpoint (None, None: a new journal)."""
        first = self.journal.first_row()
        if first is None:
            return None, None
        # the table row opens the journal, or follows the segment row (and a seal) at most
        table = self.journal.first_of_kind("table", within=4)
        if table is None:
            raise ServiceError(
                f"{self.journal.path}: row {first.seq} begins the journal but it holds no table "
                "row there: not a journal this version wrote"
            )
        return table, self.journal.last_of_kind("checkpoint")

    def _segment_first_round(self) -> int:
        """The round number the live segment began at, from its opening rows (a restart in
        the middle of a gaming day does not read the day's file through): 0 for the table's
        first segment, else the engine's round in the segment's opening checkpoint (written by
        `roll_segment`). A segment without one (not written by this version) counts its rounds
        from this start: bytes per round read high until the next roll-over, the safe side of
        the free-space alert."""
        first = self.journal.first_row()
        if first is None or first.kind != "segment":
            return 0
        opening = self.journal.first_of_kind("checkpoint", within=4)
        if opening is not None:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                return int(opening.body["engine"]["round_number"])
        return self.engine.round_number

    @property
    def segment_rounds(self) -> int:
        """Rounds begun in the live journal segment (a round in play counts)."""
        return max(0, self.engine.round_number - self.segment_first_round)

    def _replay_event(
        self,
        row: JournalRow,
        draws: list[Mapping[str, Any]],
        journaled: list[dict[str, Any]],
        ended: int,
    ) -> int:
        """One journaled event through the engine, with the draws journaled for it."""
        if self._draws.replaying is None:
            self._draws.replaying = ReplayedDraws(())
        self._draws.replaying.extend(draws)
        before = self.engine.round_number
        self._engine_status = None
        try:
            replayed = [d.to_dict() for d in self.engine.handle(row.body, row.seq)]
        except JournalError as error:  # a journaled random draw does not fit
            raise ServiceError(f"{self.journal.path}: row {row.seq}: {error}") from error
        self.replayed_events += 1
        if not self.cards_seen and row.body.get("type") in CARD_EVENTS:
            self.cards_seen = True
        if replayed != journaled:
            self.replay_divergences.append(row.seq)
        if self.engine.round_number > before:
            ended, self._round_voided = max(ended, before), False
        if any(d.get("decision") == "void_round" for d in replayed):
            self._round_voided = True
        rejected = any(d.get("decision") == "rejected" for d in replayed)
        if row.body.get("type") == "hands_collected" and not rejected:
            ended = max(ended, self.engine.round_number)
        return ended

    # -- checkpoints, seals, segments (docs/journal.md) -------------------------------------------

    def between_rounds(self) -> bool:
        """No round open: the last round begun has ended (a checkpoint or a new segment fits)."""
        return self._round_counted >= self.engine.round_number

    def checkpoint_body(self) -> dict[str, Any]:
        """The table's state as a value: the engine's snapshot and the service's counters."""
        body: dict[str, Any] = {
            "type": "checkpoint",
            "format": CHECKPOINT_FORMAT,
            "engine": self.engine.snapshot(),
            "service": {"round_counted": self._round_counted, "round_voided": self._round_voided},
        }
        for name, part in self.checkpoint_parts.items():
            body[name] = part()
        return body

    def checkpoint(self) -> int:
        """Append a checkpoint row (durable) and record the head outside the file."""
        seq = self.journal.append(
            "checkpoint",
            self.checkpoint_body(),
            round_number=self.engine.round_number,
            durable=True,
        )
        self.journal.write_head()
        metrics.JOURNAL_LAST_CHECKPOINT.set(time.time())
        self._log.info("checkpoint", seq=seq, round=self.engine.round_number)
        return seq

    def _restore(self, checkpoint: JournalRow) -> None:
        """The state at a checkpoint row: the engine restored from its snapshot."""
        body = checkpoint.body
        try:
            self.engine = engine_from_checkpoint(self.table_row, body["engine"], self._draws)
            counters = body["service"]
            self._round_counted = int(counters["round_counted"])
            self._round_voided = bool(counters["round_voided"])
        except (KeyError, TypeError, ValueError) as error:
            raise ServiceError(
                f"{self.journal.path}: checkpoint row {checkpoint.seq} cannot be restored: "
                f"{error!r}"
            ) from error
        self._engine_status = None
        self.cards_seen = True  # a checkpoint is written at the end of a round
        metrics.JOURNAL_LAST_CHECKPOINT.set(_row_time(checkpoint))

    def seal(self, now: datetime.datetime | None = None) -> int | None:
        """Seal every row so far with this epoch's key, then erase the key (None: no key, or
        seals held by an unresolved clock step).

        The seal row is committed first, then the key evolved: a crash between them is
        levelled at the next start (`Sealer.level_with`). A key that cannot be written (a full
        disk) fails the journal: fail-stop, like a commit.
        """
        if self.sealer is None or self.seals_held is not None:
            return None
        moment = now or datetime.datetime.now(datetime.UTC)
        body = self.sealer.seal_body(self.journal.last_seq, self.journal.last_hash, moment)
        seq = self.journal.append("seal", body, round_number=self.engine.round_number, durable=True)
        fault_point("seal.after_commit")
        try:
            self.sealer.sealed(body, moment)
        except SealingError as error:
            self.journal.fail(JournalError(str(error)))
            assert self.journal.failure is not None
            raise self.journal.failure from error
        self.journal.write_head()
        metrics.JOURNAL_LAST_SEAL.set(moment.timestamp())
        self._log.info("sealed", seq=seq, epoch=body["epoch"])
        return seq

    def seal_unsealed_at_start(self, now: datetime.datetime | None = None) -> None:
        """Before anything new: rows left unsealed (a crash) get the held key's seal, then the
        keys of the epochs that passed while the daemon was down are erased unused."""
        if self.sealer is None:
            return
        moment = now or datetime.datetime.now(datetime.UTC)
        last_seal = self.journal.last_seal()
        levelled = self.sealer.level_with(last_seal.body if last_seal is not None else None)
        if levelled is not None:
            self._log.warning("sealing_key_levelled", reason=levelled)
        if last_seal is not None:
            metrics.JOURNAL_LAST_SEAL.set(_row_time(last_seal))
        if self.seals_held is not None:
            # a clock step: no seal and no key evolved on a clock nobody trusts yet
            self._log.warning("seals_held", reason=self.seals_held)
            return
        unsealed = self.journal.last_seq > (last_seal.seq if last_seal is not None else 0)
        if unsealed and self.sealer.due(moment):
            self.seal(moment)
        self.sealer.catch_up(moment)

    def roll_segment(self, gaming_day: datetime.date, closing_day: str) -> Path:
        """Close the live segment (sealed to its end) and begin `gaming_day`'s; the closed file.

        The new segment starts with its `segment` row, the table row and a checkpoint, so it
        verifies and restores on its own; retention then removes what is past it.
        """
        # A reader holding the segment (SegmentBusy) defers the roll-over before anything is
        # written; one that comes between this and the close undoes the table row's change.
        why = self.journal.wal_not_checkpointed()
        if why is not None:
            raise SegmentBusy(f"{self.journal.path}: not closed now: {why}")
        if self.sealer is not None:
            self.seal()
        held_back = (self.table_row, self._next_table_row, self.engine)
        if self._next_table_row is not None:
            # the segment held back under an earlier version's table row is over: the new one
            # is the configuration's, and the engine goes on under it from its own state
            self.table_row, self._next_table_row = self._next_table_row, None
            self.engine = engine_from_checkpoint(
                self.table_row, self.engine.snapshot(), self._draws
            )
        fault_point("rollover.after_seal")
        first = self.journal.first_row()
        closed = closed_segment_name(
            self.journal.path, closing_day, first.seq if first is not None else 0
        )
        try:
            self.journal.roll_over(
                closed,
                {"gaming_day": gaming_day.isoformat()},
                [("table", self.table_row), ("checkpoint", self.checkpoint_body())],
            )
        except SegmentBusy:
            self.table_row, self._next_table_row, self.engine = held_back
            raise
        self.segment_first_round = self.engine.round_number
        self.journal.flush()
        metrics.JOURNAL_LAST_CHECKPOINT.set(time.time())
        self._log.info("segment_started", gaming_day=gaming_day.isoformat(), closed=str(closed))
        return closed

    # -- one event -------------------------------------------------------------------------------

    async def handle_event(
        self, event: Mapping[str, Any], *, source: str = "device"
    ) -> list[dict[str, Any]]:
        """Journal, decide, journal the decisions (durable when they command a device), act.

        It runs for every card: the common case (a card dealt, no decision) takes no step it
        does not need, and every step of the rare ones is still in the same order.
        """
        started = perf_counter()
        stamped = dict(event)
        if "time" not in stamped:
            stamped["time"] = self._stamp()
        engine = self.engine
        round_before = engine.round_number
        journal = self.journal
        seq = journal.append("event", stamped, round_number=round_before)
        if self._log_events:
            # The event's type, source and device only: its fields may hold cards (H7).
            self._log.debug(
                "event",
                type=stamped.get("type"),
                source=source,
                seq=seq,
                device=stamped.get("device"),
            )
        self._engine_status = None  # whatever happens in the engine now
        if not self.cards_seen and stamped.get("type") in CARD_EVENTS:
            self.cards_seen = True
        told = self.round_ends
        if told is None:
            decided = engine.handle(stamped, seq)
        else:
            ended: list[list[dict[str, Any]]] = []
            engine.integrity.ended = ended
            try:
                decided = engine.handle(stamped, seq)
            except BaseException:
                told(seq, None)
                raise
            finally:
                engine.integrity.ended = None
            told(seq, ended)
        if decided:
            decisions = [d.to_dict() for d in decided]
            commands = [d for d in decisions if d.get("decision") in DEVICE_COMMAND_DECISIONS]
            durable = not self.group_commit or bool(commands) or source == "operator"
            round_number = engine.round_number
            last = len(decisions) - 1
            for index, decision in enumerate(decisions):
                journal.append(
                    "decision",
                    decision,
                    round_number=round_number,
                    durable=durable and index == last,
                )
        else:
            decisions = commands = []
            if not self.group_commit or source == "operator":
                journal.flush()
        counted = self._round_counted
        self._account(stamped, decisions, round_before)
        if (
            self._round_counted > counted
            and self.between_rounds()
            and self._round_counted % self.checkpoint_rounds == 0
        ):
            try:
                self.checkpoint()
            except JournalError as error:
                # The event and its decisions are durable already: they are acted on below
                # (the journal's failure has stopped dealing); the caller learns it was
                # recorded (`recorded_then_failed`).
                self._log.error("checkpoint_failed", error=str(error), event_seq=seq)
                self.recorded_then_failed = (seq, str(error))
        elapsed = perf_counter() - started
        self._observe_processing(elapsed)
        if commands or (self.publish is not None and (decisions or self.subscribed())):
            await self._act(stamped, decisions, commands)
        for observer in self.observers:
            observer(stamped, decisions, elapsed, source)
        return decisions

    async def handle_operator_event(
        self, event: dict[str, Any], peer: Any = None
    ) -> list[dict[str, Any]]:
        """The operator socket's handler: the event is journaled durably before the reply.

        `peer` is the socket's caller, already logged with the event by the operator server.
        """
        return await self.handle_event(event, source="operator")

    def status(self) -> dict[str, Any]:
        """The public status (`tablectl status`): the engine's view plus table and devices.

        `current_deck` names the deck the table deals from (the engine's `deck_in_play`:
        "in play" is a deck's state, docs/operations.md Vocabulary); `cards_dealt` counts
        this round's cards per recipient, never naming one (H7).
        """
        status = dict(self.engine_status())
        status["current_deck"] = status.pop("deck_in_play", None)
        dealt: dict[str, int] = {}
        for card in self.engine.dealt_cards():
            who = recipient_name(card.get("to"))
            dealt[who] = dealt.get(who, 0) + 1
        status["cards_dealt"] = dealt
        status["decks_seen"] = self.cards_seen
        if not self.cards_seen:
            # The engine's decks are assumptions until a device or dealer reports on the cards:
            # say so, never "shuffled, 52 cards in the shoe" of cards nobody has seen.
            status["decks"] = {
                name: {**deck, "state": "not_seen", "cards_in_shoe": None}
                for name, deck in status["decks"].items()
            }
        status["table"] = self.config.table_id
        status["devices"] = {name: ("up" if up else "down") for name, up in self.devices_up.items()}
        status["devices_since"] = dict(self.devices_since)
        return status

    def engine_status(self) -> Mapping[str, Any]:
        """The engine's status (read-only: it is shared until the next event is handled)."""
        if self._engine_status is None:
            self._engine_status = self.engine.status()
        return self._engine_status

    def close(self) -> None:
        if self._gauges_timer is not None:
            self._gauges_timer.cancel()
            self._refresh_gauges()
        self.journal.close()

    # -- after the journal -----------------------------------------------------------------------

    def _account(
        self, event: Mapping[str, Any], decisions: list[dict[str, Any]], round_before: int
    ) -> None:
        kind = event.get("type")
        if (
            not decisions
            and kind not in _ACCOUNTED_EVENTS
            and self.engine.round_number == round_before
        ):
            # a card dealt: nothing to count but the status gauges, which lag on purpose
            if self._gauges_timer is None:
                self._schedule_gauges()
            return
        device = event.get("device")
        if kind in ("device_lost", "device_connected") and isinstance(device, str):
            self.devices_up[device] = kind == "device_connected"
            self.devices_since[device] = str(event.get("time", ""))
            metrics.set_device_up(device, kind == "device_connected")
        if kind in DEVICE_FAULT_EVENTS:
            metrics.record_device_fault(str(device or kind.split("_")[0]), str(event.get("fault")))
        rejected = any(d.get("decision") == "rejected" for d in decisions)
        for decision in decisions:
            metrics.record_decision(decision)
            self._log.info(
                "decision",
                decision=decision.get("decision"),
                rule_id=decision.get("rule_id"),
                rule=decision.get("rule"),
                on=kind,
                at=decision.get("at"),
            )
        if self.engine.round_number > round_before:
            self._end_round_if_open(round_before)
            self._round_voided = False
        if any(d.get("decision") == "void_round" for d in decisions):
            self._round_voided = True
        if kind == "hands_collected" and not rejected:
            self._end_round_if_open(self.engine.round_number)
        self._schedule_gauges()

    def _schedule_gauges(self) -> None:
        """Refresh the status gauges soon: once per GAUGE_REFRESH_SECONDS at most.

        Building the engine's status for them cost more per event than the engine's own work
        on a card; a gauge scraped every few seconds loses nothing by lagging 50 ms.
        """
        if self._gauges_timer is None:
            self._gauges_timer = asyncio.get_running_loop().call_later(
                GAUGE_REFRESH_SECONDS, self._refresh_gauges
            )

    def _refresh_gauges(self) -> None:
        self._gauges_timer = None
        self._update_gauges()

    def _end_round_if_open(self, round_number: int) -> None:
        if round_number >= 1 and round_number > self._round_counted:
            outcome = "voided" if self._round_voided else "completed"
            metrics.record_round(self.config.game, outcome)
            self._round_counted = round_number
            self._log.info("round_ended", round=round_number, outcome=outcome)
            if self.checkpoint_signer is not None:
                self.checkpoint_signer.request()  # once the round's rows are committed

    def _update_gauges(self) -> None:
        status = self.engine_status()
        decks = status.get("decks", {})
        if isinstance(decks, Mapping):
            for name, deck in decks.items():
                if isinstance(deck, Mapping) and "rounds_since_stub_count" in deck:
                    metrics.set_rounds_since_stub_count(str(name), deck["rounds_since_stub_count"])
        pending = status.get("pending_supervisor_notifications", [])
        metrics.set_supervisor_notifications_pending(len(pending) if pending else 0)

    async def _act(
        self,
        event: Mapping[str, Any],
        decisions: list[dict[str, Any]],
        commands: list[dict[str, Any]],
    ) -> None:
        if self.device_commands is not None:
            for command in commands:
                await self.device_commands(command)
        if self.publish is not None:
            for decision in decisions:
                message = "alarm" if decision.get("decision") in ALARM_DECISIONS else "decision"
                await self.publish({"message": message, **decision})
            if self.subscribed():
                await self.publish({"message": "state", "state": self.engine.state})


async def open_service(config: TableConfig, **options: Any) -> TableService:
    """Open the configured journal, build the engine, replay; the service is ready to serve."""
    try:
        journal = Journal(config.journal_path)
    except JournalError as error:
        raise ServiceError(str(error)) from error
    service = TableService(config, journal, **options)
    try:
        await service.start()
    except Exception:
        journal.close()
        raise
    return service


def _event_groups(
    rows: Iterable[JournalRow], on_row: Callable[[JournalRow], None] | None
) -> Iterator[tuple[JournalRow, list[Mapping[str, Any]], list[dict[str, Any]]]]:
    """Each journaled event with the random draws and decisions journaled after it."""
    event: JournalRow | None = None
    draws: list[Mapping[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    for row in rows:
        if on_row is not None:
            on_row(row)
        if row.kind == "event":
            if event is not None:
                yield event, draws, decisions
            event, draws, decisions = row, [], []
        elif row.kind == "decision":
            decisions.append(row.body)
        elif row.kind == "note" and row.body.get("type") == RANDOM_DRAW:
            draws.append(row.body)
    if event is not None:
        yield event, draws, decisions


def _row_time(row: JournalRow) -> float:
    try:
        return datetime.datetime.fromisoformat(row.recorded_at).timestamp()
    except ValueError:
        return 0.0
