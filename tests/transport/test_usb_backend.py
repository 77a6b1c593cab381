"""UsbTransport (real pyusb) against DeviceSides on the simulated usb.backend bus."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest
import usb.core
import usb.util

from tablectl.drivers.transport import TransportConfigError, TransportError, make_transport
from tablectl.drivers.transport.usb import UsbTransport
from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.usb_backend import SimulatedUsbBackend, SimulatedUsbDevice
from tests.transport.conftest import EchoDevice, HostRecorder, wait_for

SHOE = REFERENCE_PRODUCT_IDS["shoe"]


def _transport_threads(transport: UsbTransport) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(transport.name)]


async def _open(
    backend: SimulatedUsbBackend, serial: str | None = "SHOE-1", product_id: int = SHOE
) -> tuple[UsbTransport, HostRecorder]:
    host = HostRecorder()
    transport = UsbTransport(REFERENCE_VENDOR_ID, product_id, serial, backend=backend)
    await transport.open(asyncio.get_running_loop(), host.on_data, host.on_lost)
    return transport, host


async def _bus(
    **options: object,
) -> tuple[SimulatedUsbBackend, SimulatedUsbDevice, EchoDevice]:
    backend = SimulatedUsbBackend(asyncio.get_running_loop())
    device = EchoDevice()
    sim = backend.add_reference_device("shoe", "SHOE-1", device, **options)
    await wait_for(lambda: device.connects == 1)
    return backend, sim, device


def test_pyusb_finds_reference_devices_and_reads_string_descriptors() -> None:
    async def main() -> None:
        backend = SimulatedUsbBackend(asyncio.get_running_loop())
        for kind, serial in (("shoe", "SHOE-1"), ("shuffler", "SHUF-9")):
            backend.add_reference_device(kind, serial, EchoDevice())
        found = list(usb.core.find(find_all=True, backend=backend))
        assert {(d.idVendor, d.idProduct) for d in found} == {
            (0x1209, REFERENCE_PRODUCT_IDS["shoe"]),
            (0x1209, REFERENCE_PRODUCT_IDS["shuffler"]),
        }
        shoe = usb.core.find(idVendor=0x1209, idProduct=SHOE, backend=backend)
        assert shoe is not None
        assert shoe.serial_number == "SHOE-1"
        assert shoe.manufacturer == "tablectl"
        assert shoe.product == "tablectl reference shoe"
        intf = shoe.get_active_configuration()[(0, 0)]
        assert intf.bInterfaceClass == 0xFF
        addresses = sorted(ep.bEndpointAddress for ep in intf)
        assert addresses == [0x01, 0x81]
        assert "SHOE-1" in str(shoe)  # pyusb's full descriptor dump works too
        usb.util.dispose_resources(shoe)
        for dev in found:
            usb.util.dispose_resources(dev)

    asyncio.run(main())


def test_bytes_flow_both_ways_with_callbacks_on_the_loop_thread() -> None:
    async def main() -> None:
        backend, _, device = await _bus()
        other = EchoDevice(echo=False)
        backend.add_reference_device("shoe", "SHOE-2", other)  # same ids, other serial
        transport, host = await _open(backend, "SHOE-1")
        assert transport.name == "usb:1209:7a02:SHOE-1"
        transport.write(b"\x02hello\x03")
        await wait_for(lambda: bytes(host.data) == b"\x02hello\x03")
        assert bytes(device.received) == b"\x02hello\x03"
        assert other.received == bytearray()
        assert host.threads == {threading.get_ident()}
        assert device.receive_threads == {threading.get_ident()}
        await transport.close()

    asyncio.run(main())


def test_large_writes_and_partial_reads(pattern) -> None:
    async def main() -> None:
        backend, sim, device = await _bus(max_in_transfer=700)
        transport, host = await _open(backend)
        payload = pattern(1 << 20)
        transport.write(payload)
        await wait_for(lambda: len(host.data) >= len(payload), timeout=20)
        assert bytes(host.data) == payload
        assert bytes(device.received) == payload
        assert sim.bytes_out == len(payload)
        assert host.chunks >= len(payload) // 700
        await transport.close()

    asyncio.run(main())


def test_unplug_mid_stream_reports_loss_once_then_replug_and_reopen() -> None:
    async def main() -> None:
        backend, sim, device = await _bus()
        transport, host = await _open(backend)
        transport.write(b"before")
        await wait_for(lambda: bytes(host.data) == b"before")
        for _ in range(20):
            transport.write(b"streaming" * 100)
        backend.unplug(sim)
        await wait_for(lambda: len(host.lost) == 1)
        exc = host.lost[0]
        assert isinstance(exc, usb.core.USBError) and exc.errno == errno.ENODEV
        await transport.close()  # right after the loss: waits for the threads, no error
        assert _transport_threads(transport) == []
        assert sim.claimed_by is None
        await asyncio.sleep(0.05)
        assert len(host.lost) == 1
        assert not transport.is_open
        await wait_for(lambda: device.disconnects == 1)
        with pytest.raises(TransportError, match="closed"):
            transport.write(b"x")
        await transport.close()
        assert len(host.lost) == 1

        with pytest.raises(TransportError, match="no such USB device"):
            await _open(backend)  # still unplugged

        backend.plug(sim)
        await wait_for(lambda: device.connects == 2)
        host2 = HostRecorder()  # the same transport object reopens (the daemon's reconnect)
        await transport.open(asyncio.get_running_loop(), host2.on_data, host2.on_lost)
        transport.write(b"again")
        await wait_for(lambda: bytes(host2.data) == b"again")
        await transport.close()
        assert host2.lost == [] and len(host.lost) == 1
        assert _transport_threads(transport) == []

    asyncio.run(main())


def test_missing_device_names_the_ids_and_the_serials_seen() -> None:
    async def main() -> None:
        backend, _, _ = await _bus()
        with pytest.raises(TransportError, match=r"usb:1209:7a02:SHOE-404.*SHOE-1"):
            await _open(backend, "SHOE-404")
        with pytest.raises(TransportError, match="usb:1209:7a01"):
            await _open(backend, None, product_id=REFERENCE_PRODUCT_IDS["shuffler"])

    asyncio.run(main())


def test_kernel_driver_is_detached_then_given_back() -> None:
    async def main() -> None:
        backend, sim, _ = await _bus(kernel_driver_attached=True)
        transport, host = await _open(backend)
        assert not sim.kernel_driver_attached
        transport.write(b"ping")
        await wait_for(lambda: bytes(host.data) == b"ping")
        await transport.close()
        assert sim.kernel_driver_attached
        assert sim.claimed_by is None

    asyncio.run(main())


def test_interface_claimed_elsewhere_is_a_clear_error() -> None:
    async def main() -> None:
        backend, _, _ = await _bus()
        first, _ = await _open(backend)
        with pytest.raises(TransportError, match=r"SHOE-1: cannot claim interface 0.*busy"):
            await _open(backend)
        await first.close()

    asyncio.run(main())


def test_close_is_idempotent_leaves_no_thread_and_releases_the_interface() -> None:
    async def main() -> None:
        backend, sim, _ = await _bus()
        transport, host = await _open(backend)
        assert len(_transport_threads(transport)) == 2
        assert sim.claimed_by is not None
        await transport.close()
        await transport.close()
        assert not transport.is_open
        assert _transport_threads(transport) == []
        assert sim.claimed_by is None
        backend.unplug(sim)
        await asyncio.sleep(0.02)
        assert host.lost == []

    asyncio.run(main())


def test_write_returns_before_the_device_sees_anything(pattern) -> None:
    """The device is served on this loop: write() must hand off and return, not wait for it."""

    async def main() -> None:
        backend, _, device = await _bus(max_in_transfer=4096)
        transport, host = await _open(backend)
        payload = pattern(1 << 20)
        transport.write(payload)
        assert device.received == bytearray() and host.data == bytearray()
        await wait_for(lambda: len(host.data) >= len(payload), timeout=20)
        assert bytes(host.data) == payload
        await transport.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"vendor_id": 0x10000, "product_id": 1}, "vendor_id"),
        ({"vendor_id": 1, "product_id": -1}, "product_id"),
        ({"vendor_id": 1, "product_id": 1, "serial_number": ""}, "serial_number"),
        ({"vendor_id": 1, "product_id": 1, "interface": -1}, "interface"),
    ],
)
def test_bad_usb_options_name_the_option(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UsbTransport(**options)  # type: ignore[arg-type]
    with pytest.raises(TransportConfigError, match=message):
        make_transport("usb", **options)


def test_factory_builds_usb() -> None:
    transport = make_transport("usb", vendor_id=0x1209, product_id=SHOE, serial_number="S1")
    assert isinstance(transport, UsbTransport) and transport.name == "usb:1209:7a02:S1"
    with pytest.raises(TransportConfigError, match=r"missing required option\(s\) product_id"):
        make_transport("usb", vendor_id=0x1209)
