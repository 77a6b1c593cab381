"""Every device fault through the daemon process: its decision, its metric, its journal row."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from tests.e2e.conftest import Table


def rows_after(table: Table, seq: int) -> list[Any]:
    return [row for row in table.rows() if row.seq > seq]


def last_seq(table: Table) -> int:
    rows = table.rows()
    return rows[-1].seq if rows else 0


def wait_row(table: Table, seq: int, match: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for row in rows_after(table, seq):
            if match(row):
                return row
        time.sleep(0.02)
    raise AssertionError(f"no matching journal row after seq {seq}")


def decisions_of(table: Table, event_row: Any) -> list[dict[str, Any]]:
    """The decisions journaled for one event (they follow it, before the next event)."""
    out = []
    for row in rows_after(table, event_row.seq):
        if row.kind == "event":
            break
        if row.kind == "decision":
            out.append(row.body)
    return out


def fault_event(table: Table, seq: int, kind: str, fault: str) -> Any:
    return wait_row(
        table,
        seq,
        lambda r: r.kind == "event" and r.body["type"] == kind and r.body.get("fault") == fault,
    )


class Subscriber:
    """An operator terminal subscribed to decisions and alarms."""

    def __init__(self, table: Table) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(table.socket_path))
        self.file = self.sock.makefile("r")
        self.sock.sendall(b'{"type": "subscribe"}\n')
        assert json.loads(self.file.readline())["reply"] == "subscribed"

    def until(self, match: Any) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(self.file.readline())
            if match(message):
                return message

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def test_shuffler_reader_link_and_identity_faults(make_table: Any) -> None:
    table = make_table("three_card_21")
    table.start()
    subscriber = Subscriber(table)
    # C4: a jam, a stop or an incomplete shuffle -> the cards must be reshuffled
    for step, fault in (("jam", "jam"), ("stop", "stopped"), ("incomplete", "incomplete")):
        seq = last_seq(table)
        table.sim("step", "shuffler", step=step)
        assert table.sim("shuffle") == "faulted"
        row = fault_event(table, seq, "shuffler_fault", fault)
        assert [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)] == [
            ("reshuffle", "C4")
        ]
        alarm = subscriber.until(lambda m: m.get("decision") == "reshuffle")
        assert alarm["rule_id"] == "C4"
        # and the state after the event, pushed because a terminal is subscribed
        assert subscriber.until(lambda m: m.get("message") == "state")["state"]
        assert table.metric("tablectl_device_faults_total", device="shuffler", fault=fault) == 1
        assert table.metric("tablectl_decisions_total", decision="reshuffle", rule_id="C4") >= 1
        table.sim("step", "shuffler", step="clear_fault")
    assert table.sim("shuffle") == "ready"
    # H5: the reader fails -> it may not be used
    table.op("reader_inspected")  # by: the socket's caller (root)
    seq = last_seq(table)
    table.sim("step", "reader", step="fault")
    row = fault_event(table, seq, "reader_fault", "sensor")
    assert [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)] == [
        ("reader_disabled", "H5")
    ]
    assert table.metric("tablectl_device_faults_total", device="reader", fault="sensor") == 1
    assert table.status()["reader"] != "ok"
    # garbage and bad CRCs on the wire: counted by the driver, recovered by the link, no event
    seq = last_seq(table)
    table.sim("step", "rack", step="garbage", bytes=40)
    table.sim("step", "rack", step="bad_crc", count=2)
    table.sim("call", "rack", method="add", args=[3])
    level = wait_row(table, seq, lambda r: r.kind == "event" and r.body["type"] == "rack_level")
    assert level.body["cards"] == 3
    assert table.metric("tablectl_driver_errors_total", device="rack", error="crc") == 2
    assert table.metric("tablectl_driver_errors_total", device="rack", error="garbage") >= 1
    assert table.status()["devices"]["rack"] == "up"
    # an impostor (identity changed at a reconnect) is refused: journaled, counted, an alarm
    seq = last_seq(table)
    table.sim("step", "rack", step="impostor")
    table.sim("step", "rack", step="disconnect")
    table.sim("step", "rack", step="reconnect")
    refused = wait_row(
        table, seq, lambda r: r.kind == "note" and r.body["type"] == "device_refused"
    )
    assert refused.body["device"] == "rack" and "identity changed" in refused.body["reason"]
    alarm = subscriber.until(lambda m: m.get("alarm") == "device_refused")
    assert alarm["device"] == "rack"
    assert table.metric("tablectl_device_faults_total", device="rack", fault="refused") == 1
    assert table.metric("tablectl_device_up", device="rack") == 0
    status = table.until(lambda s: s["devices"]["rack"] == "down")
    assert "rack" in status["refused_devices"]
    subscriber.close()
    assert table.stop() == 0


def test_automated_shoe_jam_voids_the_round_and_locks_dispensing(make_table: Any) -> None:
    table = make_table("five_card_hilo")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    assert table.sim("call", "shoe", method="dispense") is not None
    seq = last_seq(table)
    table.sim("step", "shoe", step="jam")
    assert table.sim("call", "shoe", method="dispense") is None
    row = fault_event(table, seq, "shoe_fault", "jam")
    assert [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)] == [
        ("void_round", "C5"),
        ("reshuffle", "C5"),
    ]
    assert table.metric("tablectl_device_faults_total", device="shoe", fault="jam") == 1
    assert table.metric("tablectl_rounds_total", game="five_card_hilo", outcome="voided") == 0
    # the daemon locked the ADS after the void (journaled durably before the command went out)
    table.until(lambda s: s["interlocks"]["shoe_locked"] == ["round_void"])
    deadline = time.monotonic() + 3
    while not table.sim("get", "shoe", attr="locked"):
        assert time.monotonic() < deadline, "the shoe was not locked"
        time.sleep(0.02)
    locked_note = wait_row(
        table, seq, lambda r: r.kind == "note" and r.body.get("report") == "dispensing_locked"
    )
    void = next(r for r in rows_after(table, seq) if r.body.get("decision") == "void_round")
    assert void.seq < locked_note.seq
    table.op("hands_collected")
    assert table.metric("tablectl_rounds_total", game="five_card_hilo", outcome="voided") == 1
    # the technician clears the jam, the deck is reshuffled; the next round unlocks the ADS
    table.sim("step", "shoe", step="clear_fault")
    table.sim("call", "shuffler", method="load")
    assert table.sim("shuffle") == "ready"
    table.sim("to_shoe")
    table.op("bets_closed", positions=[2])
    table.until(lambda s: s["interlocks"]["shoe_locked"] == [])
    deadline = time.monotonic() + 3
    while table.sim("get", "shoe", attr="locked"):
        assert time.monotonic() < deadline, "the shoe was not unlocked"
        time.sleep(0.02)
    assert table.sim("call", "shoe", method="dispense") is not None
    # the ADS stops mid-deal: the same remedy (C5)
    seq = last_seq(table)
    table.sim("step", "shoe", step="stop")
    row = fault_event(table, seq, "shoe_fault", "stopped")
    assert ("void_round", "C5") in [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)]
    assert table.metric("tablectl_device_faults_total", device="shoe", fault="stopped") == 1
    assert table.stop() == 0


def test_a_wrong_count_keeps_the_deck_in_the_shuffler(make_table: Any) -> None:
    """C7: the counting shuffler finds a card missing: the deck is removed and not released."""
    table = make_table("five_card_hilo")
    table.start()
    seq = last_seq(table)
    table.sim("step", "shuffler", step="missing_card")
    assert table.sim("shuffle") == "ready"
    row = wait_row(table, seq, lambda r: r.kind == "event" and r.body.get("count") == 51)
    assert [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)] == [
        ("remove_deck", "C7")
    ]
    assert table.metric("tablectl_decisions_total", decision="remove_deck", rule_id="C7") == 1
    wait_row(table, row.seq, lambda r: r.kind == "note" and r.body.get("report") == "deck_locked")
    status = table.status()
    assert status["interlocks"] == {
        "shoe_locked": ["deck_removed"],
        "shuffler_deck_locked": ["deck_removed"],
    }
    assert table.sim("get", "shuffler", attr="locked")
    assert table.sim("get", "shuffler", attr="state") == "ready"
    assert table.stop() == 0


def test_manual_shoe_face_up_foreign_card_and_jam(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    table.sim("call", "shoe", method="draw")
    # C1: a card found face up in the shoe is discarded
    seq = last_seq(table)
    table.sim("step", "shoe", step="face_up")
    table.sim("call", "shoe", method="draw")
    row = wait_row(table, seq, lambda r: r.kind == "event" and r.body.get("face_up") is True)
    assert [(d["decision"], d["rule_id"]) for d in decisions_of(table, row)] == [
        ("discard_card", "C1")
    ]
    # a jammed manual shoe: no rule voids anything, but it is journaled and counted
    seq = last_seq(table)
    table.sim("step", "shoe", step="jam")
    assert table.sim("call", "shoe", method="draw") is None
    row = fault_event(table, seq, "shoe_fault", "jam")
    assert table.metric("tablectl_device_faults_total", device="shoe", fault="jam") == 1
    table.sim("step", "shoe", step="clear_fault")
    # C8: a foreign card (a joker in a 52-card game) voids the round and removes the deck
    seq = last_seq(table)
    table.sim("step", "shoe", step="foreign_card")
    assert table.sim("call", "shoe", method="draw") == "JK"
    row = wait_row(table, seq, lambda r: r.kind == "event" and r.body.get("card") == "JK")
    decided = {(d["decision"], d["rule_id"]) for d in decisions_of(table, row)}
    assert {("void_round", "C8"), ("remove_deck", "C8")} <= decided, decided
    assert table.metric("tablectl_decisions_total", decision="remove_deck", rule_id="C8") == 1
    # the deck is kept in the shuffler and the shoe locked
    status = table.until(lambda s: s["interlocks"]["shuffler_deck_locked"] == ["deck_removed"])
    assert "deck_removed" in status["interlocks"]["shoe_locked"]
    deadline = time.monotonic() + 3
    while not (
        table.sim("get", "shuffler", attr="locked") and table.sim("get", "shoe", attr="locked")
    ):
        assert time.monotonic() < deadline, "the shuffler and shoe were not locked"
        time.sleep(0.02)
    assert table.stop() == 0


def test_a_removed_deck_stays_in_the_shuffler_until_new_cards_are_received(
    make_table: Any,
) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    table.sim("step", "shoe", step="foreign_card")
    table.sim("call", "shoe", method="draw")
    table.until(lambda s: s["interlocks"]["shuffler_deck_locked"] == ["deck_removed"])
    table.op("hands_collected")
    # the next batch may be shuffled, but its deck is kept in the shuffler
    table.sim("call", "shuffler", method="load")
    assert table.sim("shuffle") == "ready"
    time.sleep(0.1)
    assert table.sim("get", "shuffler", attr="locked")
    # new cards received after inspection lift the holds: the shuffled deck is released
    table.op("deck_received")
    status = table.until(lambda s: s["interlocks"]["shuffler_deck_locked"] == [])
    assert status["interlocks"]["shoe_locked"] == ["round_void"]  # until the next round opens
    deadline = time.monotonic() + 3
    while table.sim("get", "shuffler", attr="locked"):
        assert time.monotonic() < deadline, "the deck was not released"
        time.sleep(0.02)
    assert table.sim("to_shoe") == 52
    assert table.stop() == 0


def test_a_device_off_the_allow_list_is_refused_at_start(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    serial = table.devices["shoe"]["serial"]
    text = table.config_path.read_text()
    table.config_path.write_text(text.replace(f'["{serial}"]', '["SHOE-0042"]'))
    table.start("--device-wait", "1")
    ready = next(n for n in table.notices if "READY=1" in n)
    assert "down: shoe" in ready
    refused = next(
        r for r in table.rows() if r.kind == "note" and r.body["type"] == "device_refused"
    )
    assert refused.body["serial"] == serial and "not on the allow-list" in refused.body["reason"]
    assert table.metric("tablectl_device_faults_total", device="shoe", fault="refused") == 1
    assert table.metric("tablectl_device_up", device="shoe") == 0
    assert table.status()["refused_devices"]["shoe"].startswith(f"serial {serial!r}")
    assert '"device_absent_at_start"' in table.log()
    assert table.stop() == 0
