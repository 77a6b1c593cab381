"""The fault matrix, device level: simulators -> wire -> the daemon (`run_daemon`) -> journal.

Each cell runs the daemon of one table in-process (controller/service/daemon.py: the drivers built
from the configuration with their allow-lists, the TableService, the journal, the interlocks that
lock the hardware after a decision, the operator entry point) with the simulated shuffler and
shoe behind a FaultyWire, attached over a real pty (pyserial) or the simulated pyusb bus (which
must live in the daemon's process, hence in-process). One round of 5 Card Hi-Lo (counting
shuffler, automated dealing shoe) or, for face-up cards, Heads Up Hold'em (card-reading manual
shoe) is played; the fault is injected into a simulator or its wire at one phase, and the cell
asserts the decision RULES.md requires (the fault catalogue, tests/soak/faults.py), read back
from the journal, that the journal verifies, and that nothing was voided twice.
`make test` runs each fault at its main phase over a pty; `make soak`
(TABLECTL_FAULT_MATRIX=all) runs every phase over both pty and USB.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.service.daemon import Daemon, run_daemon
from tablectl.drivers.protocol.messages import Fault
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.table import SimulatedTable
from tablectl.simulators.usb_backend import SimulatedUsbBackend
from tests.e2e.tables import table_toml

ATTACHMENTS = ("pty", "usb")
PHASES = ("shuffling", "betting", "dealing", "play", "collection")
POSITIONS = [1, 2]
CARDS = 5 * (len(POSITIONS) + 1)
C4 = (("reshuffle", "C4"),)
C5_VOID = (("void_round", "C5"), ("reshuffle", "C5"))
C5 = (("reshuffle", "C5"),)
C8 = (("void_round", "C8"), ("remove_deck", "C8"), ("notify_supervisor", "C8"))
IN_ROUND = ("dealing", "play")


@dataclass(frozen=True)
class DeviceFault:
    """One device fault: where it is injected, at which phases it can happen, what it needs."""

    name: str
    device: str  # "shuffler" or "shoe"
    phases: tuple[str, ...]
    game: str = "five_card_hilo"  # the e2e tables: HILO with an ADS, HUH with a manual shoe
    main_phase: str = "dealing"

    def expected(self, phase: str) -> tuple[tuple[str, str], ...]:
        """RULES.md's decision for this fault at ``phase`` (C4, C5, C7, C8, C1; none for the
        wire faults that the link layer absorbs)."""
        if self.name in ("shuffler_jam", "shuffler_stopped", "shuffler_incomplete"):
            return C4
        if self.name == "shuffler_disconnect":
            return C4 if phase == "shuffling" else ()
        if self.name in ("shoe_jam", "shoe_disconnect", "shoe_impostor"):
            return C5_VOID if phase in IN_ROUND else ()
        if self.name == "shoe_stopped":
            return C5_VOID if phase in IN_ROUND else C5
        if self.name == "foreign_card":
            return C8
        if self.name == "extra_card":
            # the duplicate is found when its twin is dealt too (C8), else by the stub count:
            # one card too many in the stub (S3); see also_accepted
            return C8
        if self.name == "missing_card":
            return (("remove_deck", "C7"),)
        if self.name == "face_up_card":
            return (("discard_card", "C1"),)
        return ()  # garbage, bad_crc: retransmission, nothing to decide

    def also_accepted(self, phase: str) -> tuple[tuple[str, str], ...] | None:
        """The other decision RULES.md allows, where what the devices see decides which."""
        if self.name == "extra_card":
            return (("void_round", "S3"), ("remove_deck", "S3"))
        return None


DEVICE_FAULTS = (
    # the shuffler runs only while shuffling at a one-deck table: its faults happen then
    DeviceFault("shuffler_jam", "shuffler", ("shuffling",), main_phase="shuffling"),
    DeviceFault("shuffler_stopped", "shuffler", ("shuffling",), main_phase="shuffling"),
    DeviceFault("shuffler_incomplete", "shuffler", ("shuffling",), main_phase="shuffling"),
    DeviceFault("shuffler_disconnect", "shuffler", PHASES, main_phase="shuffling"),
    DeviceFault("missing_card", "shuffler", ("shuffling",), main_phase="shuffling"),
    DeviceFault("shoe_jam", "shoe", ("dealing",)),
    DeviceFault("shoe_stopped", "shoe", PHASES),
    DeviceFault("shoe_disconnect", "shoe", PHASES),
    DeviceFault("shoe_impostor", "shoe", PHASES),
    DeviceFault("foreign_card", "shoe", ("dealing",)),
    DeviceFault("extra_card", "shoe", ("dealing",)),
    DeviceFault("face_up_card", "shoe", ("dealing",), game="heads_up_holdem"),
    DeviceFault("garbage", "shoe", PHASES),
    DeviceFault("bad_crc", "shoe", PHASES),
    DeviceFault("shuffler_garbage", "shuffler", PHASES, main_phase="shuffling"),
)


def matrix(everything: bool) -> list[tuple[str, str, str]]:
    attachments = list(ATTACHMENTS) if everything else ["pty"]
    cells = []
    for fault in DEVICE_FAULTS:
        phases = fault.phases if everything else (fault.main_phase,)
        cells += [(fault.name, phase, a) for phase in phases for a in attachments]
    return cells


CELLS = matrix(os.environ.get("TABLECTL_FAULT_MATRIX") == "all")


class DaemonTable:
    """The daemon of one table in this process, with its two simulators behind fault wires."""

    def __init__(self, tmp: Path, attachment: str, game: str) -> None:
        self.tmp = tmp
        self.attachment = attachment
        self.game = game
        self.sims = SimulatedTable(
            seed=3, automated_shoe=game == "five_card_hilo", shuffle_seconds=0.08
        )
        self.wires: dict[str, FaultyWire] = {}
        self.cables: dict[str, Any] = {}
        self.seen: Counter[str] = Counter()
        self.daemon: Daemon | None = None
        self.stop = asyncio.Event()
        self._task: asyncio.Task[int] | None = None
        self.journal = tmp / "journal.sqlite"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        backend = SimulatedUsbBackend(loop)
        devices: dict[str, dict[str, Any]] = {}
        for name, sim in (("shuffler", self.sims.shuffler), ("shoe", self.sims.shoe)):
            wire = self.wires[name] = FaultyWire(sim)
            ident = {"serial": sim.identity.serial, "firmware_sha256": sim.identity.firmware_sha256}
            if self.attachment == "usb":
                device = backend.add_reference_device(name, sim.identity.serial, wire)
                self.cables[name] = _UsbCable(backend, device)
                devices[name] = {"kind": name, "usb": True, **ident}
            else:
                pty = PtyAttachment(wire, loop, link_path=self.tmp / name)
                self.cables[name] = pty
                devices[name] = {"kind": name, "port": pty.plug(), **ident}
        path = self.tmp / "table.toml"
        path.write_text(
            table_toml(self.game, self.tmp, devices, metrics_port=0, log_level="warning")
        )
        ready: list[Daemon] = []
        self._task = loop.create_task(
            run_daemon(
                load_config(path),
                stop=self.stop,
                usb_backend=backend,
                on_ready=ready.append,
                device_wait=5,
                handle_signals=False,
            )
        )
        await _until(lambda: bool(ready) or self._task.done(), 10)
        assert ready, f"the daemon did not become ready: {self._task}"
        self.daemon = ready[0]
        for name, driver in self.daemon.drivers.items():
            assert driver.up, f"{name} is not up"
        self._watch()

    def _watch(self) -> None:
        """Count the drivers' events as they pass (what the daemon receives)."""
        assert self.daemon is not None
        for driver in self.daemon.drivers.values():
            driver.emit = self._counting(driver.emit)  # type: ignore[method-assign]

    def _counting(self, forward: Any) -> Any:
        def emit(event_type: str, /, **fields: Any) -> None:  # fields may hold "kind"
            self.seen[event_type] += 1
            forward(event_type, **fields)

        return emit

    @property
    def last_seq(self) -> int:
        assert self.daemon is not None
        return self.daemon.service.journal.last_seq

    async def settle(self, seconds: float = 0.03) -> None:
        await asyncio.sleep(seconds)
        assert self.daemon is not None
        await self.daemon.drain()

    async def wait_seen(self, kind: str, count: int = 1, timeout: float = 5.0) -> None:
        await _until(lambda: self.seen[kind] >= count, timeout)
        await self.settle()

    async def operator(self, kind: str, **fields: Any) -> None:
        await self.settle()
        assert self.daemon is not None
        await self.daemon.operator_event({"type": kind, **fields})

    async def close(self) -> None:
        self.stop.set()
        if self._task is not None:
            assert await self._task == 0
        for cable in self.cables.values():
            closer = getattr(cable, "close", None)
            if closer is not None:
                closer()

    def rows_after(self, seq: int) -> list[Any]:
        return [row for row in read_rows(self.journal) if row.seq > seq]


class _UsbCable:
    def __init__(self, backend: SimulatedUsbBackend, device: Any) -> None:
        self.backend, self.device = backend, device

    def unplug(self) -> None:
        self.backend.unplug(self.device)

    def replug(self) -> None:
        self.backend.plug(self.device)


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    """Liveness only: a hang fails the cell; no timing is asserted."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def inject(table: DaemonTable, fault: DeviceFault) -> None:
    """The fault, at the device or on its wire, now."""
    sims, wire = table.sims, table.wires[fault.device]
    name = fault.name
    if name in ("shuffler_jam", "shuffler_stopped", "shuffler_incomplete"):
        kind = {"jam": Fault.JAM, "stopped": Fault.STOPPED, "incomplete": Fault.INCOMPLETE}
        sims.shuffler.fault(kind[name.split("_")[1]])  # armed: fires mid-shuffle
    elif name == "missing_card":
        sims.shuffler.missing_card()
    elif name.endswith("_disconnect") or name == "shoe_impostor":
        if name == "shoe_impostor":
            sims.shoe.impersonate(serial="IMPOSTOR-1")
        table.cables[fault.device].unplug()
        await table.wait_seen("device_lost", table.seen["device_lost"] + 1)
        table.cables[fault.device].replug()
        if name == "shoe_impostor":
            await table.wait_seen("device_refused")
        else:
            await table.wait_seen("device_connected", table.seen["device_connected"] + 1)
    elif name == "shoe_jam":
        sims.shoe.jam()
    elif name == "shoe_stopped":
        sims.shoe.stop()
    elif name == "foreign_card":
        sims.shoe.foreign_card()
    elif name == "extra_card":
        sims.shoe.extra_card()
    elif name == "face_up_card":
        sims.shoe.face_up_next()
    elif name.endswith("garbage"):
        wire.garbage(b"\x00\xa5\x5a\x01garbage on the line\xff" * 3)
    elif name == "bad_crc":
        wire.bad_crc(1)
    else:
        raise AssertionError(f"no injection for {name}")
    await table.settle(0.05)


async def play_round(table: DaemonTable, fault: DeviceFault, phase: str) -> int:
    """One round with ``fault`` at ``phase``; returns the journal seq before the fault."""
    assert table.daemon is not None
    drivers = table.daemon.drivers
    mark = table.last_seq

    async def at(here: str) -> None:
        nonlocal mark
        if here == phase:
            await table.settle()
            mark = table.last_seq
            await inject(table, fault)

    def refused() -> bool:
        """A refused shoe deals nothing the table may use: the floor stops the round there."""
        return fault.name == "shoe_impostor" and not drivers["shoe"].up

    sims = table.sims
    during_shuffle = fault.device == "shoe" or fault.name == "shuffler_disconnect"
    if phase == "shuffling" and not during_shuffle:
        mark = table.last_seq
        await inject(table, fault)  # armed before the cycle: it strikes mid-shuffle
    await drivers["shuffler"].start_shuffle()
    await table.wait_seen("shuffle_started")
    if phase == "shuffling" and during_shuffle:
        await table.settle()
        mark = table.last_seq
        await inject(table, fault)
    shuffled = sims.shuffler.state == "ready" or await _shuffle_done(table)
    if refused():
        return mark
    if shuffled and not sims.shuffler.locked:
        sims.shuffled_deck_to_shoe()
        await table.wait_seen("shoe_loaded")
    await at("betting")
    if refused():
        return mark
    await table.operator("bets_closed", positions=POSITIONS)
    cards = CARDS if table.game == "five_card_hilo" else 5 + 2 * (len(POSITIONS) + 1)
    dealt = 0
    while dealt < cards:
        if dealt == 5:
            await at("dealing")
            if refused():
                break
        if table.game == "five_card_hilo":
            stack = sims.dispense()
            dealt += 5
        else:
            card = sims.draw()
            stack = None if card is None else [card]
            dealt += 1
        if stack is None:
            break
        await table.settle(0.005)
    await table.settle()
    await table.operator("deal_completed")
    await at("play")
    await table.operator("stub_counted", count=len(sims.shoe.cards))
    await table.operator("hands_collected")
    sims.collect_round()
    await at("collection")
    await table.settle()
    return mark


async def _shuffle_done(table: DaemonTable) -> bool:
    await _until(lambda: table.sims.shuffler.state != "shuffling", 5)
    await table.settle()
    return table.sims.shuffler.state == "ready"


@pytest.mark.parametrize(("fault_name", "phase", "attachment"), CELLS)
def test_device_fault_yields_its_rule_decision(tmp_path, fault_name, phase, attachment):
    fault = next(f for f in DEVICE_FAULTS if f.name == fault_name)

    async def run() -> tuple[int, DaemonTable]:
        table = DaemonTable(tmp_path, attachment, fault.game)
        await table.start()
        try:
            return await play_round(table, fault, phase), table
        finally:
            await table.close()

    mark, table = asyncio.run(run())
    rows = list(read_rows(table.journal))
    decisions = [row.body for row in rows if row.kind == "decision"]
    after_fault = [row.body for row in rows if row.kind == "decision" and row.seq > mark]
    made = {(d["decision"], d["rule_id"]) for d in after_fault}
    expected = fault.expected(phase)
    other = fault.also_accepted(phase)
    assert set(expected) <= made or (other is not None and set(other) <= made), (
        f"{fault_name} at {phase}: {sorted(made)}"
    )
    if not expected:
        # the fault needs no decision: the round plays as if nothing happened
        bad = {d["decision"] for d in decisions} & {"void_round", "remove_deck", "rejected"}
        assert not bad, f"{fault_name} at {phase} drew {sorted(made)}"
    voids = [d for d in decisions if d["decision"] == "void_round"]
    assert len(voids) <= 1, f"voided twice: {voids}"
    if fault_name == "shoe_impostor":
        assert table.seen["device_refused"] == 1
        lost = max(r.seq for r in rows if r.kind == "event" and r.body["type"] == "device_lost")
        after = [
            r.body["type"]
            for r in rows
            if r.seq > lost and r.kind == "event" and r.body.get("device") == "shoe"
        ]
        assert after == [], f"events from the refused shoe reached the table: {after}"
    assert verify_journal(table.journal).ok
