"""Fail-safe parts on their own: the table lock, the journal on a really full disk, alarm
coalescing, the free-text card mask, every malformed card spelling through every driver, and
a start failing while devices handshake (20 times: the hang of CPython gh-86296 is gone)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tablectl.controller.common import metrics
from tablectl.controller.common.config import load_config
from tablectl.controller.common.logs import configure_logging, mask_card_text
from tablectl.controller.record.journal import Journal, JournalError, read_rows
from tablectl.controller.record.tablelock import (
    TableLocked,
    acquire_table_lock,
    holder_pid,
    lock_path_for,
)
from tablectl.controller.service.daemon import EXIT_REFUSED, AlarmCoalescer, run_daemon
from tablectl.controller.service.operator_client import request
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import Msg
from tablectl.drivers.reference import REFERENCE_DRIVERS
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.scenario import SIMULATORS
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim
from tests.e2e.tables import table_toml
from tests.tools.smallfs import fill, small_filesystem

# -- one daemon per table ---------------------------------------------------------------------


def test_the_lock_is_exclusive_names_its_holder_and_is_released(tmp_path: Path) -> None:
    journal = tmp_path / "t" / "journal.sqlite"
    assert lock_path_for(journal) == tmp_path / "t" / "journal.sqlite.lock"
    lock = acquire_table_lock(journal)
    assert holder_pid(lock.path) == os.getpid()
    with pytest.raises(TableLocked) as refused:
        acquire_table_lock(journal)  # another open file description: refused like a process
    assert str(lock.path) in str(refused.value) and f"PID {os.getpid()}" in str(refused.value)
    lock.release()
    with acquire_table_lock(journal) as again:
        assert again.held
    assert (tmp_path / "t").stat().st_mode & 0o777 == 0o700


def test_run_daemon_refuses_a_table_already_locked(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(table_toml("heads_up_holdem", tmp_path, {}, metrics_port=0))
    config = load_config(path)
    with acquire_table_lock(config.journal_path):
        code = asyncio.run(run_daemon(config, handle_signals=False, device_wait=0))
    assert code == EXIT_REFUSED
    assert not config.journal_path.exists()  # nothing touched


# -- the journal on a really full filesystem --------------------------------------------------


def test_a_failed_commit_fails_every_later_write_and_is_told_once(tmp_path: Path) -> None:
    with small_filesystem(24) as mount:
        told: list[JournalError] = []
        errors_before = metrics.JOURNAL_WRITE_ERRORS._value.get()
        with capture_logs() as logs:
            journal = Journal(mount / "journal.sqlite")
        # too little room to preallocate the -wal (4.6 MiB + a 32 MiB reserve): not filled
        assert any(entry["event"] == "wal_preallocation_skipped" for entry in logs)
        assert os.path.getsize(mount / "journal.sqlite-wal") < 1024 * 1024
        journal.on_failure = told.append
        journal.append("table", {"type": "table", "game": "asia_poker"}, durable=True)
        filler = fill(mount)
        with pytest.raises(JournalError, match="journal write failed"):
            for number in range(100_000):
                journal.append("event", {"type": "dealer_changed", "n": number}, durable=True)
        assert len(told) == 1 and "journal write failed" in str(told[0])
        assert metrics.JOURNAL_WRITE_ERRORS._value.get() == errors_before + 1
        filler.unlink()  # space is back, but what failed is never written later
        with pytest.raises(JournalError, match="failed earlier"):
            journal.append("event", {"type": "dealer_changed"}, durable=True)
        journal.close()  # no exception, nothing written
        assert len(told) == 1
        rows = list(read_rows(mount / "journal.sqlite"))
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1))


# -- alarms ------------------------------------------------------------------------------------


def test_repeated_alarms_are_one_message_and_a_count() -> None:
    async def main() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def publish(message: Any) -> None:
            sent.append(dict(message))

        alarms = AlarmCoalescer(publish, window=0.1)
        for _ in range(2993):
            await alarms({"message": "alarm", "decision": "deal_blocked", "rule_id": "C2"})
        await alarms({"message": "alarm", "alarm": "device_lost", "device": "shoe"})
        await alarms({"message": "state", "state": "void"})
        await asyncio.sleep(0.3)
        await alarms({"message": "alarm", "decision": "deal_blocked", "rule_id": "C2"})
        alarms.close()
        return sent

    sent = asyncio.run(main())
    assert [m.get("decision") or m.get("alarm") or m["message"] for m in sent] == [
        "deal_blocked",
        "device_lost",
        "state",
        "repeated",
        "deal_blocked",  # a new window: the cause is shown again at once
    ]
    assert sent[3]["of"] == "deal_blocked" and sent[3]["count"] == 2992
    assert sent[3]["rule_id"] == "C2"


# -- no card in any error text ----------------------------------------------------------------

CANONICAL = {r + s for r in "A23456789TJQK" for s in "cdhs"} | {"JK"}
#: Every two-character spelling of a card a firmware might send that the protocol refuses.
MALFORMED = sorted(
    ({r + s for r in "A23456789TJQKatjqk1" for s in "cdhsCDHS"} | {"jk", "Jk", "jK"}) - CANONICAL
)


def _leaks(spelling: str, text: str) -> bool:
    token = re.compile(rf"(?<![A-Za-z0-9]){re.escape(spelling)}(?![A-Za-z0-9])")
    hexed = re.compile(rf"(?<![0-9a-fA-F]){spelling.encode('latin-1').hex()}(?![0-9a-fA-F])")
    return bool(token.search(text) or hexed.search(text))


@pytest.mark.parametrize("kind", sorted(REFERENCE_DRIVERS))
def test_no_malformed_card_spelling_reaches_a_log_through_any_driver(kind: str) -> None:
    from tests.devices.device_bench import bench

    rendered = io.StringIO()

    async def go() -> list[dict[str, Any]]:
        sim = SIMULATORS[kind](seed=1)
        entries: list[dict[str, Any]] = []
        async with bench(sim, REFERENCE_DRIVERS[kind]) as b:
            for spelling in MALFORMED:
                raw = spelling.encode("latin-1")
                with capture_logs() as logs:
                    sim.send_frame(Msg.CARD_DRAWN, raw + b"\x00")
                    sim.send_frame(Msg.STACK_DISPENSED, b"\x02" + b"As" + raw)
                    await asyncio.sleep(0.005)
                for entry in logs:
                    entry["_spelling"] = spelling
                entries += logs
            sim.send_frame(Msg.CARD_DRAWN, b"\xc3\x81\x00")  # not ASCII
            await asyncio.sleep(0.05)
            events = b.events
        if kind == "shoe":
            faults = [e for e in events if e.get("fault") == "undecodable_frame"]
            assert len(faults) == 2 * len(MALFORMED) + 1
            assert not [e for e in events if e["type"] in ("card_drawn", "stack_dispensed")]
        return entries

    configure_logging("debug", mode="json", stream=rendered)
    try:
        entries = asyncio.run(go())
    finally:
        configure_logging("info", mode="json", stream=io.StringIO())
    assert entries, "the drivers logged nothing about the frames"
    for entry in entries:
        spelling = entry.pop("_spelling")
        assert not any(_leaks(spelling, str(value)) for value in entry.values()), entry
    output = rendered.getvalue()
    assert "bad_payload" in output or "unknown_message" in output
    for spelling in MALFORMED:
        assert not re.search(rf"""['"]{re.escape(spelling)}['"]""", output), spelling


def test_codec_errors_never_echo_the_card() -> None:
    for spelling in MALFORMED:
        raw = spelling.encode("latin-1")
        for decode, payload in (
            (m.unpack_card_drawn, raw + b"\x00"),
            (m.unpack_stack, b"\x01" + raw),
        ):
            with pytest.raises(m.PayloadError) as error:
                decode(payload)
            assert not _leaks(spelling, str(error.value)), str(error.value)


def test_the_second_guard_masks_card_shaped_text() -> None:
    assert mask_card_text("bad card 'AH' in 'kd' and \"10h\"") == (
        "bad card [card] in [card] and [card]"
    )
    assert mask_card_text("dealt Ah then Td, then JK") == "dealt [card] then [card], then [card]"
    assert mask_card_text("no handshake answer within 2.0s; ACK lost") == (
        "no handshake answer within 2.0s; ACK lost"
    )
    stream = io.StringIO()
    configure_logging("info", mode="json", stream=stream)
    try:
        from tablectl.controller.common.logs import get_logger

        log = get_logger("test")
        try:
            raise ValueError("bad card 'QS' from the firmware")
        except ValueError:
            log.exception("failed", detail="a card 'qs' and Qs")
    finally:
        configure_logging("info", mode="json", stream=io.StringIO())
    text = stream.getvalue()
    assert "QS" not in text and "qs" not in text and "Qs" not in text, text
    assert "[card]" in text


def test_the_wire_and_the_event_language_spell_cards_alike() -> None:
    from tablectl.controller.engine.cards import JOKER, STANDARD_DECK

    for card in (*STANDARD_DECK, JOKER):
        assert m.unpack_card_drawn(m.pack_card_drawn(card, False)) == (card, False)
    for spelling in MALFORMED:
        with pytest.raises(m.PayloadError):
            m.check_card(spelling)


# -- a start failing while devices handshake: bounded, every time -----------------------------


@pytest.mark.parametrize("failure", ["busy_metrics_port", "missing_group"])
def test_a_start_failing_during_a_handshake_never_hangs(tmp_path: Path, failure: str) -> None:
    """20 starts that fail while the devices are handshaking (their answers arrive 0-10 ms
    late): each returns EXIT_REFUSED within 2 s. With asyncio.wait_for in the drivers, some
    hung for ever: a cancellation arriving with the handshake's answer was swallowed (CPython
    gh-86296) and stop() awaited a supervisor that went on. run_daemon is called directly:
    the preflight of `tablectl run` refuses both causes before any device is touched.
    """

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        shuffler, shoe = ShufflerSim(seed=1), ShoeSim(seed=2)
        wires = {"shuffler": FaultyWire(shuffler), "shoe": FaultyWire(shoe)}
        ptys = {name: PtyAttachment(wire, loop) for name, wire in wires.items()}
        devices = {
            name: {
                "kind": name,
                "port": ptys[name].plug(),
                "serial": sim.identity.serial,
                "firmware_sha256": sim.identity.firmware_sha256,
            }
            for name, sim in (("shuffler", shuffler), ("shoe", shoe))
        }
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        path = tmp_path / "t.toml"
        path.write_text(
            table_toml(
                "heads_up_holdem",
                tmp_path,
                devices,
                metrics_port=busy.getsockname()[1] if failure == "busy_metrics_port" else 0,
                group="tablectl-no-such-group" if failure == "missing_group" else "root",
            )
        )
        config = load_config(path)
        durations = []
        try:
            for attempt in range(20):
                for wire in wires.values():
                    wire.slow(0.0005 * attempt)
                started = time.monotonic()
                async with asyncio.timeout(2.0):
                    code = await run_daemon(config, handle_signals=False, device_wait=1)
                durations.append(time.monotonic() - started)
                assert code == EXIT_REFUSED
        finally:
            busy.close()
            for attachment in ptys.values():
                attachment.unplug()
        return durations

    durations = asyncio.run(main())
    assert max(durations) < 2.0, durations


def test_run_mirrors_the_daemons_defaults_and_exit_codes() -> None:
    """`tablectl run` imports the daemon only once the lock is held; its copies must agree."""
    from tablectl.controller.commands import run
    from tablectl.controller.service import daemon

    assert run.DEFAULT_DEVICE_WAIT == daemon.DEFAULT_DEVICE_WAIT
    assert run.DEFAULT_FAIL_STOP_LINGER == daemon.DEFAULT_FAIL_STOP_LINGER
    assert run.EXIT_REFUSED == daemon.EXIT_REFUSED
    for code in (daemon.EXIT_OK, daemon.EXIT_FAILED, daemon.EXIT_REFUSED):
        assert f"  {code}  " in run.EXIT_CODES
    assert f"  {daemon.EXIT_STOPPED_DEALING}  stopped dealing" in run.EXIT_CODES


def test_running_holder_names_the_running_daemon_and_creates_nothing(tmp_path: Path) -> None:
    from tablectl.controller.record.tablelock import running_holder

    journal = tmp_path / "journal.sqlite"
    assert running_holder(journal) is None
    assert not list(tmp_path.iterdir())
    with acquire_table_lock(journal):
        assert running_holder(journal) == os.getpid()
    assert running_holder(journal) is None


def test_a_live_socket_is_never_taken_over_nor_removed_when_not_ours(tmp_path: Path) -> None:
    from tablectl.controller.service.operator import OperatorError, OperatorServer

    async def handler(event: Any, peer: Any) -> list[dict[str, Any]]:
        return []

    async def main() -> None:
        path = tmp_path / "operator.sock"
        first = OperatorServer(path, allowed_group="root", handle_event=handler, status=dict)
        await first.start()
        second = OperatorServer(path, allowed_group="root", handle_event=handler, status=dict)
        with pytest.raises(OperatorError, match="another process accepts connections"):
            await second.start()
        reply = await asyncio.to_thread(request, path, {"type": "status"})
        assert reply["reply"] == "status"  # still the first's
        # someone removed the first's file and bound their own there: closing leaves it
        path.unlink()
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.bind(str(path))
        other.listen()
        await first.close()
        assert path.is_socket()
        other.close()

    asyncio.run(main())
