"""run_daemon in-process: USB devices on the simulated pyusb bus need the daemon's own loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.service.daemon import Daemon, run_daemon
from tablectl.controller.service.operator_client import request
from tablectl.drivers.protocol.messages import pack_deck
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim
from tablectl.simulators.usb_backend import SimulatedUsbBackend
from tests.e2e.tables import table_toml


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def test_hilo_round_over_pty_and_usb_in_process(tmp_path: Path) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        shuffler = ShufflerSim(seed=1, shuffle_seconds=0.05)
        shoe = ShoeSim(seed=2, automated=True)
        pty = PtyAttachment(FaultyWire(shuffler), loop)
        port = pty.plug()
        backend = SimulatedUsbBackend(loop)
        usb_device = backend.add_reference_device("shoe", shoe.identity.serial, FaultyWire(shoe))
        devices = {
            "shuffler": {"kind": "shuffler", "port": port, **_ident(shuffler)},
            "shoe": {"kind": "shoe", "usb": True, **_ident(shoe)},
        }
        path = tmp_path / "t.toml"
        path.write_text(table_toml("five_card_hilo", tmp_path, devices, metrics_port=0))
        config = load_config(path)
        stop = asyncio.Event()
        ready: list[Daemon] = []
        task = loop.create_task(
            run_daemon(config, stop=stop, usb_backend=backend, on_ready=ready.append, device_wait=5)
        )
        await _until(lambda: bool(ready))
        daemon = ready[0]
        assert all(driver.up for driver in daemon.drivers.values())
        sock = config.operator_socket

        def op(event: dict[str, Any]) -> dict[str, Any]:
            return request(sock, event)

        shuffler._cmd_start(pack_deck(None))  # the dealer presses the shuffler's button
        await _until(lambda: shuffler.state == "ready", 3)
        await _until(lambda: daemon.status()["decks"]["A"]["state"] == "shuffled", 3)
        shoe.load(shuffler.take_deck())
        reply = await asyncio.to_thread(op, {"type": "bets_closed", "positions": [1]})
        assert reply["reply"] == "decisions", reply
        shoe.dispense()
        shoe.dispense()
        await _until(lambda: daemon.service.engine.status()["decks"]["A"]["cards_in_shoe"] == 42)
        for event in (
            {"type": "deal_completed"},
            {"type": "stub_counted", "count": 42},
            {"type": "hands_collected"},
        ):
            decided = await daemon.operator_event(event)  # in-process, as the demo's dealer
            assert "rejected" not in [d["decision"] for d in decided], decided
        # A foreign card from the ADS (C8): the round is void, the deck removed; the daemon locks
        # the shoe's dispensing and keeps the next shuffled deck in the shuffler.
        shuffler.load()
        shuffler._cmd_start(pack_deck(None))
        await _until(lambda: shuffler.state == "ready", 3)
        shoe.load(shuffler.take_deck())
        await asyncio.to_thread(op, {"type": "bets_closed", "positions": [2]})
        shoe.foreign_card()
        shoe.dispense()
        await _until(lambda: shoe.locked, 3)
        assert daemon.interlocks.shoe == {"round_void", "deck_removed"}
        await _until(lambda: shuffler.locked, 3)
        with pytest.raises(RuntimeError, match="locked"):
            shuffler.take_deck()
        # pull the USB shoe and plug it back: device_lost then device_connected, lock re-sent
        backend.unplug(usb_device)
        await _until(lambda: not daemon.drivers["shoe"].up, 3)
        shoe.locked = False
        backend.plug(usb_device)
        await _until(lambda: daemon.drivers["shoe"].up and shoe.locked, 5)
        stop.set()
        assert await task == 0
        pty.close()

    asyncio.run(main())
    rows = list(read_rows(tmp_path / "journal.sqlite"))
    events = [r.body["type"] for r in rows if r.kind == "event"]
    assert events.count("stack_dispensed") >= 3
    assert "device_lost" in events and events.count("device_connected") >= 3
    decisions = [r.body.get("decision") for r in rows if r.kind == "decision"]
    assert {"void_round", "remove_deck", "notify_supervisor"} <= set(decisions)
    assert verify_journal(tmp_path / "journal.sqlite").ok


def _ident(sim: Any) -> dict[str, str]:
    return {"serial": sim.identity.serial, "firmware_sha256": sim.identity.firmware_sha256}


@pytest.fixture(autouse=True)
def _quiet_logs() -> None:
    from tablectl.controller.common.logs import configure_logging

    configure_logging("warning", mode="json")


async def _deviceless_daemon(
    config: Any,
) -> tuple[Daemon, asyncio.Event, asyncio.Task[int]]:
    """`run_daemon` of a table with no device, ready; set the event to stop it."""
    stop = asyncio.Event()
    ready: list[Daemon] = []
    task = asyncio.get_running_loop().create_task(
        run_daemon(config, stop=stop, on_ready=ready.append, handle_signals=False)
    )
    await _until(lambda: bool(ready))
    return ready[0], stop, task


def _deviceless_config(tmp_path: Path) -> Any:
    path = tmp_path / "t.toml"
    path.write_text(table_toml("heads_up_holdem", tmp_path, {}, metrics_port=0))
    return load_config(path)


def test_a_driver_cannot_send_an_operator_event_or_a_random_draw(tmp_path: Path) -> None:
    """Only the operator socket speaks for the dealer; a driver's claim is a note, not an event."""
    config = _deviceless_config(tmp_path)

    async def main() -> None:
        daemon, stop, task = await _deviceless_daemon(config)
        before = daemon.status()["state"]
        on_event = daemon._device_event  # what every driver is given
        on_event({"type": "bets_closed", "positions": [1], "device": "shoe", "kind": "shoe"})
        on_event({"type": "random_draw", "bound": 52, "value": 0, "device": "shoe"})
        await daemon.drain()
        assert daemon.status()["state"] == before
        stop.set()
        assert await task == 0

    asyncio.run(main())
    rows = list(read_rows(tmp_path / "journal.sqlite"))
    assert not any(r.kind == "event" and r.body["type"] == "bets_closed" for r in rows)
    notes = [r.body for r in rows if r.kind == "note"]
    assert [n["report"] for n in notes] == ["bets_closed", "random_draw"]
    assert all(n["type"] == "device_report" for n in notes)


def test_a_device_event_with_nothing_ahead_is_handled_at_once_else_in_order(
    tmp_path: Path,
) -> None:
    """The drivers' callback handles an event at once when the daemon is idle (no loop turn:
    issue 16); behind a held lock or a handler still under way it waits its turn, in order."""
    config = _deviceless_config(tmp_path)
    cut = {"type": "cut_card_reached", "device": "shoe", "kind": "shoe"}

    def event_rows(daemon: Daemon) -> list[int]:
        rows = read_rows(daemon.service.journal.path)
        return [r.seq for r in rows if r.kind == "event" and r.body.get("type") == cut["type"]]

    async def main() -> None:
        daemon, stop, task = await _deviceless_daemon(config)
        # idle: journaled (and committed) before the callback returns, no await between
        daemon._device_event(dict(cut))
        assert len(event_rows(daemon)) == 1
        # an operator event or the journal's upkeep holds the lock: the event waits
        async with daemon._lock:
            daemon._device_event(dict(cut))
            assert len(event_rows(daemon)) == 1
        await daemon.drain()
        assert len(event_rows(daemon)) == 2
        # a handler that suspends (a push that waits) finishes in a task; the next event
        # waits behind it, and drain waits for both
        pushed: list[int] = []

        async def slow_push(message: Any) -> None:
            await asyncio.sleep(0.05)
            if message.get("message") == "state":  # one per event, after its decisions
                pushed.append(daemon.service.journal.last_seq)

        daemon.service.publish = slow_push
        daemon.service.subscribed = lambda: True
        daemon._device_event(dict(cut))
        daemon._device_event(dict(cut))
        assert len(event_rows(daemon)) == 3 and daemon._events.qsize() == 1
        await daemon.drain()
        seqs = event_rows(daemon)
        assert len(seqs) == 4
        assert pushed == sorted(pushed) and len(pushed) == 2
        assert pushed[0] < seqs[3] <= pushed[1]  # the second was handled after the first
        stop.set()
        assert await task == 0
        assert verify_journal(config.journal_path).ok

    asyncio.run(main())
