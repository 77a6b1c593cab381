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

import datetime
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tablectl.controller import metrics
from tablectl.controller.config import TableConfig
from tablectl.controller.engine import Engine
from tablectl.controller.journal import (
    RANDOM_DRAW,
    Journal,
    JournalError,
    JournalRow,
    ReplayedDraws,
    engine_from_table_row,
    read_rows,
    recipient_name,
)
from tablectl.controller.logs import get_logger

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
DEVICE_FAULT_EVENTS = frozenset({"shuffler_fault", "shoe_fault", "reader_fault"})

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
        if self.replaying:
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
        self.device_commands: DeviceCommandSink | None = None
        self.publish: Publisher | None = None
        # Watchers of the event stream inside the process (the demo's automatic dealer waits on
        # the cards it drew this way); they get what the journal got, so never a log or metric.
        self.observers: list[EventObserver] = []
        self._log = get_logger("service", table=config.table_id)
        self._draws = _ReplaySource(self)
        self.table_row = config.table_dict()
        self.engine = engine_builder(self.table_row, self._draws)
        # The engine's status as of the last event handled: gauges, the operator's state push
        # and the daemon's STATUS= line all read it per event; built once per event, not thrice.
        self._engine_status: Mapping[str, Any] | None = None
        self.replayed_events = 0
        self.replay_divergences: list[int] = []
        self._round_voided = False
        self._round_counted = 0
        self.devices_up: dict[str, bool] = {device.name: False for device in config.devices}
        for name in self.devices_up:
            metrics.set_device_up(name, False)
        metrics.initialise_table(config.table_id, config.game, self.devices_up)
        # When each device last went up or down (the event's time): status says "down since".
        started = self.clock().isoformat(timespec="seconds")
        self.devices_since: dict[str, str] = {name: started for name in self.devices_up}

    # -- start: rebuild from the journal ---------------------------------------------------------

    async def start(self, rows: Sequence[JournalRow] | None = None) -> list[dict[str, Any]]:
        """Replay the journal (or begin it); returns the restart decisions, if any.

        `rows`: the journal's rows when the caller has already read them (the daemon rebuilds
        its device holds from the same rows), so the file is read once at start-up.
        """
        if rows is None:
            rows = list(read_rows(self.journal.path))
        tables = [row for row in rows if row.kind == "table"]
        if not tables:
            self.journal.append("table", self.table_row, durable=True)
            self._log.info("journal_started", game=self.config.game)
            self._update_gauges()
            return []
        if tables[0].body != self.table_row:
            raise ServiceError(
                f"{self.journal.path} was written for {tables[0].body}, but "
                f"{self.config.source} now says {self.table_row}: restore the configuration, or "
                "archive the journal and configure a new path"
            )
        self._draws.replaying = ReplayedDraws(
            [row.body for row in rows if row.kind == "note" and row.body.get("type") == RANDOM_DRAW]
        )
        journaled: dict[int, list[dict[str, Any]]] = {}
        current_event = 0
        for row in rows:
            if row.kind == "event":
                current_event = row.seq
            elif row.kind == "decision":
                journaled.setdefault(current_event, []).append(row.body)
        started = time.perf_counter()
        self.replay_divergences = []
        ended = 0  # the last round that ended before the restart (counted by that process)
        for row in rows:
            if row.kind == "event":
                before = self.engine.round_number
                self._engine_status = None
                try:
                    replayed = [d.to_dict() for d in self.engine.handle(row.body, row.seq)]
                except JournalError as error:  # a journaled random draw does not fit
                    raise ServiceError(f"{self.journal.path}: row {row.seq}: {error}") from error
                self.replayed_events += 1
                if replayed != journaled.get(row.seq, []):
                    self.replay_divergences.append(row.seq)
                if self.engine.round_number > before:
                    ended, self._round_voided = max(ended, before), False
                if any(d.get("decision") == "void_round" for d in replayed):
                    self._round_voided = True
                rejected = any(d.get("decision") == "rejected" for d in replayed)
                if row.body.get("type") == "hands_collected" and not rejected:
                    ended = max(ended, self.engine.round_number)
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
        if not self.replayed_events:
            return []
        self._log.info(
            "journal_replayed",
            events=self.replayed_events,
            round=self.engine.round_number,
            seconds=round(time.perf_counter() - started, 6),
        )
        return await self.handle_event({"type": "controller_restarted"}, source="controller")

    # -- one event -------------------------------------------------------------------------------

    async def handle_event(
        self, event: Mapping[str, Any], *, source: str = "device"
    ) -> list[dict[str, Any]]:
        """Journal, decide, journal the decisions (durable when they command a device), act."""
        started = time.perf_counter()
        stamped = dict(event)
        stamped.setdefault("time", self.clock().isoformat(timespec="microseconds"))
        round_before = self.engine.round_number
        seq = self.journal.append("event", stamped, round_number=round_before)
        # The event's type, source and device only: its fields may hold cards (H7).
        self._log.debug(
            "event", type=stamped.get("type"), source=source, seq=seq, device=stamped.get("device")
        )
        self._engine_status = None  # whatever happens in the engine now
        decisions = [d.to_dict() for d in self.engine.handle(stamped, seq)]
        commands = [d for d in decisions if d.get("decision") in DEVICE_COMMAND_DECISIONS]
        durable = not self.group_commit or bool(commands) or source == "operator"
        round_number = self.engine.round_number
        for index, decision in enumerate(decisions):
            last = index == len(decisions) - 1
            self.journal.append(
                "decision", decision, round_number=round_number, durable=durable and last
            )
        if durable and not decisions:
            self.journal.flush()
        self._account(stamped, decisions, round_before)
        elapsed = time.perf_counter() - started
        metrics.EVENT_PROCESSING_SECONDS.observe(elapsed)
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
        self.journal.close()

    # -- after the journal -----------------------------------------------------------------------

    def _account(
        self, event: Mapping[str, Any], decisions: list[dict[str, Any]], round_before: int
    ) -> None:
        kind = event.get("type")
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
        self._update_gauges()

    def _end_round_if_open(self, round_number: int) -> None:
        if round_number >= 1 and round_number > self._round_counted:
            outcome = "voided" if self._round_voided else "completed"
            metrics.record_round(self.config.game, outcome)
            self._round_counted = round_number
            self._log.info("round_ended", round=round_number, outcome=outcome)

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
            await self.publish({"message": "state", "state": self.engine_status().get("state")})


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
