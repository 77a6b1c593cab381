"""The device layer's figures (part of tests/bench/harness.py; never asserted).

1. ``driver_event_latency``: device frame on a pty -> EVENTS.md event on the loop.

A simulated shoe draws a card: its CARD_DRAWN frame goes onto a real pseudo-terminal,
the host's SerialTransport (pyserial, ``loop.add_reader``) reads it, the reference
codec and link layer decode and acknowledge it, and the ReferenceShoe driver delivers
``card_drawn`` to its callback. The time from the draw to the callback is compared
with the frame's wire time at 115200 baud 8N1 (goal: median <= 0.2x, p99 <= 1x).
2. ``inprocess_events_per_second``: card_drawn frames through codec, link and driver over the
   in-process pairing (the device layer's share of a soak run).
3. ``transport_latency``: raw bytes device -> host and host -> device over a real pty (pyserial)
   and the simulated pyusb backend.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.drivers.base import DriverSettings
from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import OVERHEAD, wire_time
from tablectl.drivers.reference import ReferenceShoe
from tablectl.drivers.transport.base import Transport
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.drivers.transport.usb import UsbTransport
from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.cards import composition
from tablectl.simulators.inprocess import InProcessTransport
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.usb_backend import SimulatedUsbBackend
from tests.transport.conftest import EchoDevice

SAMPLES = 3000
WARMUP = 100


async def driver_event_latency(samples: int = SAMPLES) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sim = ShoeSim(seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        attachment = PtyAttachment(sim, loop, link_path=Path(tmp) / "shoe")
        path = attachment.plug()
        driver = ReferenceShoe(
            SerialTransport(path), settings=DriverSettings(heartbeat_interval=None)
        )
        arrived: asyncio.Future[float] | None = None

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "card_drawn" and arrived is not None and not arrived.done():
                arrived.set_result(time.perf_counter())

        await driver.start(loop, on_event)
        assert await driver.wait_connected(5)
        latencies: list[float] = []
        for i in range(samples + WARMUP):
            if not sim.cards:
                sim.cards = composition(1)
            while not sim.link.idle:  # the previous frame's ACK is back
                await asyncio.sleep(0)
            arrived = loop.create_future()
            start = time.perf_counter()
            sim.draw()
            end = await arrived
            if i >= WARMUP:
                latencies.append(end - start)
        await driver.stop()
        attachment.close()
    frame_size = OVERHEAD + len(m.pack_card_drawn("As", False))
    wire = wire_time(frame_size, 115200)
    latencies.sort()
    median = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return {
        "samples": len(latencies),
        "frame_bytes": frame_size,
        "wire_time_us": round(wire * 1e6, 1),
        "median_us": round(median * 1e6, 1),
        "p99_us": round(p99 * 1e6, 1),
        "median_vs_wire": round(median / wire, 4),
        "p99_vs_wire": round(p99 / wire, 4),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": sys.version.split()[0],
    }


async def inprocess_events_per_second(events: int = 30_000) -> dict[str, Any]:
    """A simulated shoe draws card after card; each CARD_DRAWN goes through codec, link
    (with its ACK) and the ReferenceShoe driver to the event callback."""
    loop = asyncio.get_running_loop()
    sim = ShoeSim(seed=1)
    driver = ReferenceShoe(
        InProcessTransport(sim), settings=DriverSettings(heartbeat_interval=None)
    )
    seen = 0

    def on_event(event: dict[str, Any]) -> None:
        nonlocal seen
        if event["type"] == "card_drawn":
            seen += 1

    await driver.start(loop, on_event)
    assert await driver.wait_connected(5)
    start = time.perf_counter()
    for _ in range(events):
        if not sim.cards:
            sim.cards = composition(1)
        target = seen + 1
        sim.draw()
        while seen < target:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - start
    await driver.stop()
    return {
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_second": round(events / elapsed),
    }


RAW_FRAME = bytes(range(32))


async def _raw_latency(transport: Transport, device: EchoDevice, rounds: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    arrived = bytearray()
    waiter: asyncio.Future[None] | None = None

    def on_data(data: bytes) -> None:
        arrived.extend(data)
        if waiter is not None and len(arrived) >= len(RAW_FRAME) and not waiter.done():
            waiter.set_result(None)

    await transport.open(loop, on_data, lambda exc: None)
    to_host: list[float] = []
    to_device: list[float] = []
    device.echo = False
    for _ in range(rounds):
        arrived.clear()
        waiter = loop.create_future()
        start = time.perf_counter()
        assert device.send is not None
        device.send(RAW_FRAME)
        await waiter
        to_host.append(time.perf_counter() - start)

        before = len(device.received)
        start = time.perf_counter()
        transport.write(RAW_FRAME)
        while len(device.received) < before + len(RAW_FRAME):
            await asyncio.sleep(0)
        to_device.append(time.perf_counter() - start)
    await transport.close()

    def figures(samples: list[float]) -> dict[str, float]:
        samples.sort()
        return {
            "median_us": round(statistics.median(samples) * 1e6, 1),
            "p99_us": round(samples[int(len(samples) * 0.99)] * 1e6, 1),
        }

    return {
        **{f"device_to_host_{k}": v for k, v in figures(to_host).items()},
        **{f"host_to_device_{k}": v for k, v in figures(to_device).items()},
    }


async def transport_latency(rounds: int = 2000) -> dict[str, Any]:
    """32 raw bytes each way over a real pty and over the simulated pyusb backend."""
    device = EchoDevice()
    pty = PtyAttachment(device)
    serial = await _raw_latency(SerialTransport(pty.plug()), device, rounds)
    pty.close()
    backend = SimulatedUsbBackend(asyncio.get_running_loop())
    usb_device = EchoDevice()
    backend.add_reference_device("shoe", "BENCH-1", usb_device)
    await asyncio.sleep(0.01)
    usb = await _raw_latency(
        UsbTransport(
            REFERENCE_VENDOR_ID, REFERENCE_PRODUCT_IDS["shoe"], "BENCH-1", backend=backend
        ),
        usb_device,
        rounds,
    )
    return {
        "frame_bytes": len(RAW_FRAME),
        "wire_time_us_115200": round(len(RAW_FRAME) * 10 / 115200 * 1e6, 1),
        "serial_pty": serial,
        "usb_simulated": usb,
    }
