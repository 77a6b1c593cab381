"""Transport latency figures (run by `make bench`, never by `make test`; no timing assertions).

Device -> host: a frame sent by the simulated device until the host transport's on_data has
all of it, over a real pty (pyserial) and over the simulated pyusb backend; host -> device the
other way. Printed next to the frame's wire time at 115200 baud 8N1, and saved to .bench/.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

from drivers.transport.base import Transport
from drivers.transport.serial import SerialTransport
from drivers.transport.usb import UsbTransport
from drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from simulators.pty import PtyAttachment
from simulators.usb_backend import SimulatedUsbBackend
from tests.transport.conftest import EchoDevice

FRAME = bytes(range(32))
ROUNDS = 2000
WIRE_TIME_S = len(FRAME) * 10 / 115200


async def _measure(transport: Transport, device: EchoDevice) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    arrived = bytearray()
    waiter: asyncio.Future[None] | None = None

    def on_data(data: bytes) -> None:
        arrived.extend(data)
        if waiter is not None and len(arrived) >= len(FRAME) and not waiter.done():
            waiter.set_result(None)

    await transport.open(loop, on_data, lambda exc: None)
    to_host: list[float] = []
    to_device: list[float] = []
    device.echo = False
    for _ in range(ROUNDS):
        arrived.clear()
        waiter = loop.create_future()
        start = time.perf_counter()
        assert device.send is not None
        device.send(FRAME)
        await waiter
        to_host.append(time.perf_counter() - start)

        before = len(device.received)
        start = time.perf_counter()
        transport.write(FRAME)
        while len(device.received) < before + len(FRAME):
            await asyncio.sleep(0)
        to_device.append(time.perf_counter() - start)
    await transport.close()

    def figures(samples: list[float]) -> dict[str, float]:
        samples.sort()
        return {
            "median_ms": statistics.median(samples) * 1000,
            "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
        }

    return {
        **{f"device_to_host_{k}": v for k, v in figures(to_host).items()},
        **{f"host_to_device_{k}": v for k, v in figures(to_device).items()},
    }


def test_transport_latency() -> None:
    async def main() -> dict[str, dict[str, float]]:
        device = EchoDevice()
        pty = PtyAttachment(device)
        serial = await _measure(SerialTransport(pty.plug()), device)
        pty.close()

        backend = SimulatedUsbBackend(asyncio.get_running_loop())
        usb_device = EchoDevice()
        backend.add_reference_device("shoe", "BENCH-1", usb_device)
        await asyncio.sleep(0.01)
        usb = await _measure(
            UsbTransport(
                REFERENCE_VENDOR_ID, REFERENCE_PRODUCT_IDS["shoe"], "BENCH-1", backend=backend
            ),
            usb_device,
        )
        return {"serial_pty": serial, "usb_simulated": usb}

    results = asyncio.run(main())
    report = {"frame_bytes": len(FRAME), "wire_time_ms_115200": WIRE_TIME_S * 1000, **results}
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    (out / "transport_latency.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
