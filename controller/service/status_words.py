"""The table's status in plain words: one vocabulary for rounds, decks and devices.

`tablectl status`, `tablectl status --watch` and `tablectl watch` all say things the same
way, and docs/operations.md ("Vocabulary") lists the same words. The machine form
(`--json`, the operator socket) keeps the engine's identifiers; this module only translates.
Standard library only (with the rule catalogue): a dealer's terminal needs nothing else.

Never a card: the status this reads holds counts and states only (docs/rules.md H7).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from tablectl.controller.engine.rules import CATALOGUE

#: The round's states (controller/engine/machine.py), as a person at the table says them.
ROUND_STATES: dict[str, str] = {
    "idle": "between rounds",
    "shuffling": "shuffling",
    "starting_position": "bets closed, choosing where the deal starts",
    "dealing": "dealing",
    "bonus": "settling the bonus wagers",
    "insurance": "insurance offered",
    "players": "players' turn",
    "dealer_turn": "dealer's turn",
    "play": "hands in play",
    "void": "round void, to be collected",
    "suspended": "suspended until the devices are back",
    "deck_removed": "deck removed from play, waiting for a new one",
}

#: A deck's states (the engine's status), the same words for every deck of every game.
DECK_STATES: dict[str, str] = {
    "needs_shuffle": "needs a shuffle",
    "shuffling": "in the shuffler",
    "shuffle_failed": "shuffle failed, shuffle again",
    "shuffled": "shuffled, ready to deal",
    "in_play": "being dealt",
    "reshuffle_due": "reshuffle due",
    "removed": "removed from play",
    "not_seen": "not yet seen (no shuffle, shoe or card reported since the journal began)",
}

#: The hole-card reader's state.
READER_STATES: dict[str, str] = {
    "none": "none at this table",
    "disabled": "disabled until the next inspection",
    "inspected": "inspected today",
    "not_inspected": "not yet inspected this gaming day",
}

#: Rounds a deck may be dealt between stub counts (docs/rules.md S1), when the status does not say
#: (a table may set `interpretations.stub_count_interval`: the status's `stub_count_every`).
STUB_COUNT_EVERY = 5


def round_state(state: object) -> str:
    return ROUND_STATES.get(str(state), str(state).replace("_", " "))


def deck_state(state: object) -> str:
    """`reshuffle_due (C5)` -> "reshuffle due (rule C5)"."""
    text = str(state)
    name, _, rule = text.partition(" (")
    words = DECK_STATES.get(name, name.replace("_", " "))
    return f"{words} (rule {rule.rstrip(')')})" if rule else words


def rule_words(rule_id: object) -> str:
    """`C9` -> "C9: a card drawn or stack dispensed before ..." (the catalogue's summary)."""
    rule = CATALOGUE.get(str(rule_id))
    return f"{rule_id}: {rule.summary}" if rule else str(rule_id)


def stub_cadence(deck: Mapping[str, Any]) -> str:
    """How far a status deck is into the S1 cadence, e.g. "3 of 5 rounds since its stub count"."""
    rounds = deck.get("rounds_since_stub_count", 0)
    every = deck.get("stub_count_every", STUB_COUNT_EVERY)
    try:
        count = int(str(rounds))
    except ValueError:
        return f"{rounds} rounds since its stub count"
    if count > every:
        return f"{count} rounds since its stub count: OVERDUE (S1: every {every})"
    if count == every:
        return f"{count} of {every} rounds since its stub count: count it now (S1)"
    return f"{count} of {every} rounds since its stub count"


def stub_cadence_short(deck: Mapping[str, Any]) -> str:
    """The S1 cadence in a table's column: "3 of 5", "5 of 5, count now", "6: OVERDUE"."""
    rounds = deck.get("rounds_since_stub_count", 0)
    every = deck.get("stub_count_every", STUB_COUNT_EVERY)
    try:
        count = int(str(rounds))
    except ValueError:
        return str(rounds)
    if count > every:
        return f"{count}: OVERDUE"
    if count == every:
        return f"{count} of {every}, count now"
    return f"{count} of {every}"


def deck_words(deck: Mapping[str, Any], *, short: bool = False) -> list[str]:
    """A deck as `status` and `watch` both say it: its state, then, once anything was reported
    on it, the S1 cadence and the cards in the shoe (`short`: the watch's table columns). A
    deck nothing reported on yet is "not yet seen", never a state the engine assumes."""
    state = deck.get("state")
    if state == "not_seen":
        return ["not yet seen"] if short else [deck_state(state)]
    cards = deck.get("cards_in_shoe", 0)
    if short:
        return [deck_state(state), stub_cadence_short(deck), str(cards)]
    return [deck_state(state), stub_cadence(deck), f"{cards} cards in the shoe"]


def when(stamp: object) -> str:
    """An ISO time as the local clock reads it ("14:02:11", or with the date if not today)."""
    try:
        moment = datetime.datetime.fromisoformat(str(stamp))
    except ValueError:
        return str(stamp)
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    if moment.date() == datetime.date.today():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def device_line(name: str, up: bool, down: Mapping[str, Any] | None) -> str:
    """ "shoe: up" or "shoe: DOWN since 14:02:11: transport lost"."""
    if up:
        return f"{name}: up"
    down = down or {}
    since = f" since {when(down['since'])}" if down.get("since") else ""
    reason = str(down.get("reason") or "").strip() or "no reason reported"
    return f"{name}: DOWN{since}: {reason}"


def fault_words(fault: object) -> str:
    """A device's fault as it reported it; a blank one says so instead of showing nothing."""
    text = str(fault or "").strip()
    return text.replace("_", " ") if text else "a fault without a description from the device"


def cards_dealt_line(cards_dealt: Mapping[str, Any]) -> str:
    if not cards_dealt:
        return "none yet"
    return ", ".join(f"{who} {count}" for who, count in cards_dealt.items())


def describe(status: Mapping[str, Any]) -> list[str]:
    """The public status as lines a dealer, a supervisor or casino IT reads at a glance."""
    lines = [
        f"table {status.get('table', '?')}: {str(status.get('game', '?')).replace('_', ' ')}, "
        f"round {status.get('round', 0)}, {round_state(status.get('state'))}"
    ]
    lines.append(f"cards dealt this round: {cards_dealt_line(status.get('cards_dealt') or {})}")
    current = status.get("current_deck")
    decks = status.get("decks") or {}
    lines.append("decks:")
    for name, deck in decks.items():
        marker = " (current)" if name == current and len(decks) > 1 else ""
        lines.append(f"  {name}{marker}: {'; '.join(deck_words(deck))}")
    devices = status.get("devices") or {}
    down = status.get("devices_down") or {}
    lines.append("devices:")
    for name, state in devices.items():
        lines.append("  " + device_line(name, state == "up", down.get(name)))
    faults = status.get("device_faults") or {}
    if faults:
        lines.append("device faults not yet cleared:")
        lines += [f"  {name}: {fault_words(fault)}" for name, fault in faults.items()]
    refused = status.get("refused_devices") or {}
    if refused:
        lines.append("devices refused at the handshake:")
        lines += [f"  {name}: {reason}" for name, reason in refused.items()]
    reader = status.get("reader")
    if reader and reader != "none":
        lines.append(f"hole-card reader: {READER_STATES.get(str(reader), str(reader))}")
    floor = status.get("floor")
    if isinstance(floor, Mapping):  # the floor store's shipping (docs/floor.md), as it says it
        lines.append("floor:")
        lines += [f"  {key}: {value}" for key, value in floor.items()]
    lines += witness_lines(status.get("witnesses"))
    dealing = status.get("dealing_stopped")
    if isinstance(dealing, Mapping):
        lines.append(f"DEALING STOPPED: {dealing.get('reason', 'no reason given')}")
    locks = status.get("interlocks") or {}
    held = [f"{what.replace('_', ' ')} ({', '.join(why)})" for what, why in locks.items() if why]
    lines.append(f"interlocks: {'; '.join(held) if held else 'none'}")
    pending = status.get("pending_supervisor_notifications") or []
    if pending:
        lines.append(f"supervisor notifications pending ({len(pending)}):")
        lines += [f"  {rule_words(rule)}" for rule in pending]
        lines.append("  (a supervisor acknowledges: `a` in tablectl watch, or `tablectl op")
        lines.append("  supervisor_ack`)")
    else:
        lines.append("supervisor notifications pending: none")
    return lines


def witness_lines(witnesses: object) -> list[str]:
    """The table's witnesses (docs/journal.md, "The witness"): each one's cosigned size, how
    far behind it is, its refusal or its last error."""
    if not isinstance(witnesses, Mapping):
        return []
    lines = [
        f"witnesses (quorum {witnesses.get('quorum')}; {witnesses.get('quorum_cosigned_size')} "
        "rows cosigned by the quorum):"
    ]
    for name, witness in (witnesses.get("witnesses") or {}).items():
        if not isinstance(witness, Mapping):
            continue
        if witness.get("refused"):
            said = f"REFUSES THE JOURNAL: {witness['refused']}"
        else:
            said = (
                f"cosigned {witness.get('cosigned_size')} rows, "
                f"{witness.get('behind_checkpoints')} checkpoint(s) behind"
            )
            if witness.get("last_error"):
                said += f"; last error: {witness['last_error']}"
        lines.append(f"  {name} ({witness.get('url')}): {said}")
    return lines


#: `tablectl status` exit statuses, the monitoring plugins' convention (a Nagios/Icinga check
#: runs it as is): 0 healthy, 1 degraded, 2 stopped or unreachable.
HEALTHY, DEGRADED, UNREACHABLE = 0, 1, 2


def degraded_reasons(status: Mapping[str, Any]) -> list[str]:
    """Why the table is degraded (a device down or faulted, a notification pending, dealing
    stopped or held), in words; empty when it is healthy."""
    devices = status.get("devices") or {}
    reasons = [f"{name} down" for name, state in devices.items() if state != "up"]
    reasons += [f"{name} refused" for name in status.get("refused_devices") or {}]
    reasons += [
        f"{name} fault: {fault_words(fault)}"
        for name, fault in (status.get("device_faults") or {}).items()
    ]
    pending = status.get("pending_supervisor_notifications") or []
    if pending:
        reasons.append(f"supervisor notification pending ({', '.join(map(str, pending))})")
    dealing = status.get("dealing_stopped")
    if isinstance(dealing, Mapping):
        reasons.append(f"dealing stopped: {dealing.get('reason', 'no reason given')}")
    locks = status.get("interlocks") or {}
    held = sorted({why for reasons_held in locks.values() for why in reasons_held or []})
    if held:
        reasons.append(f"dealing held ({', '.join(held)})")
    witnesses = status.get("witnesses")
    if isinstance(witnesses, Mapping):
        for name, witness in (witnesses.get("witnesses") or {}).items():
            if isinstance(witness, Mapping) and witness.get("refused"):
                reasons.append(f"witness {name} refuses the journal")
    journal = status.get("journal")
    if isinstance(journal, Mapping) and journal.get("started_damaged"):
        reasons.append("the journal was damaged at start")
    return reasons


def health_line(status: Mapping[str, Any]) -> tuple[int, str]:
    """The exit status of `tablectl status` and its last line: "health: OK" or the reasons."""
    reasons = degraded_reasons(status)
    if not reasons:
        return HEALTHY, "health: OK"
    return DEGRADED, f"health: DEGRADED: {'; '.join(reasons)}"
