"""SerialTransport (real pyserial) against a DeviceSide served on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from tablectl.drivers.transport import TransportConfigError, TransportError, make_transport
from tablectl.drivers.transport.serial import SerialTransport
from tablectl.simulators.pty import PtyAttachment
from tests.transport.conftest import EchoDevice, HostRecorder, wait_for


async def _open(path: str) -> tuple[SerialTransport, HostRecorder]:
    host = HostRecorder()
    transport = SerialTransport(path)
    await transport.open(asyncio.get_running_loop(), host.on_data, host.on_lost)
    return transport, host


def test_bytes_flow_both_ways_on_the_loop_thread() -> None:
    async def main() -> None:
        threads_before = threading.active_count()
        device = EchoDevice()
        pty = PtyAttachment(device)
        path = pty.plug()
        assert path.startswith("/dev/pts/")
        transport, host = await _open(path)
        assert transport.is_open and transport.name == f"serial:{path}"
        transport.write(b"\x02hello\x00\xff\x03")
        await wait_for(lambda: bytes(host.data) == b"\x02hello\x00\xff\x03")
        assert bytes(device.received) == b"\x02hello\x00\xff\x03"
        assert host.threads == {threading.get_ident()}
        assert device.receive_threads == {threading.get_ident()}
        assert threading.active_count() == threads_before  # no helper thread on the serial path
        await transport.close()
        pty.close()

    asyncio.run(main())


def test_large_write_does_not_block_the_loop_and_arrives_in_pieces(pattern) -> None:
    """1 MiB is far beyond the pty's buffer; the device is served on the same loop, so a
    blocking write would deadlock here. The echo comes back intact, in several reads."""

    async def main() -> None:
        device = EchoDevice()
        pty = PtyAttachment(device)
        transport, host = await _open(pty.plug())
        payload = pattern(1 << 20)
        transport.write(payload[:1000])
        transport.write(payload[1000:])
        assert device.received == bytearray()  # write() returned before the device ran
        await wait_for(lambda: len(host.data) >= len(payload), timeout=20)
        assert bytes(host.data) == payload
        assert bytes(device.received) == payload
        assert host.chunks > 1
        assert host.lost == []
        await transport.close()
        pty.close()

    asyncio.run(main())


def test_partial_frames_are_delivered_as_they_come() -> None:
    async def main() -> None:
        device = EchoDevice(echo=False)
        pty = PtyAttachment(device)
        transport, host = await _open(pty.plug())
        assert device.send is not None
        device.send(b"\x02par")
        await wait_for(lambda: bytes(host.data) == b"\x02par")
        device.send(b"tial\x03")
        await wait_for(lambda: bytes(host.data) == b"\x02partial\x03")
        assert host.chunks == 2
        await transport.close()
        pty.close()

    asyncio.run(main())


def test_unplug_mid_stream_reports_loss_exactly_once() -> None:
    async def main() -> None:
        device = EchoDevice()
        pty = PtyAttachment(device)
        transport, host = await _open(pty.plug())
        transport.write(b"before")
        await wait_for(lambda: bytes(host.data) == b"before")
        assert device.send is not None
        device.send(b"x" * 5000)  # still streaming when the cable goes
        pty.unplug()
        assert device.disconnects == 1
        await wait_for(lambda: len(host.lost) == 1)
        await asyncio.sleep(0.05)
        assert len(host.lost) == 1
        exc = host.lost[0]
        assert exc is None or isinstance(exc, OSError)
        assert not transport.is_open
        with pytest.raises(TransportError, match="closed"):
            transport.write(b"after")
        await transport.close()  # after a loss: a no-op, no second on_lost
        assert len(host.lost) == 1

    asyncio.run(main())


def test_replug_behind_a_stable_symlink_and_reopen(tmp_path: Path) -> None:
    async def main() -> None:
        device = EchoDevice()
        link = tmp_path / "shoe-123"
        pty = PtyAttachment(device, link_path=link)
        assert pty.plug() == str(link)
        first_slave = pty.slave_path
        assert os.readlink(link) == first_slave
        transport, host = await _open(str(link))
        transport.write(b"one")
        await wait_for(lambda: bytes(host.data) == b"one")

        pty.unplug()
        assert not link.exists() and not link.is_symlink()
        await wait_for(lambda: len(host.lost) == 1)

        pty.plug()
        assert device.connects == 2 and pty.plug_count == 2
        assert os.readlink(link) == pty.slave_path
        host2 = HostRecorder()  # the same transport object reopens the same path
        await transport.open(asyncio.get_running_loop(), host2.on_data, host2.on_lost)
        transport.write(b"two")
        await wait_for(lambda: bytes(host2.data) == b"two")
        assert bytes(device.received) == b"onetwo"
        assert len(host.lost) == 1 and host2.lost == []
        await transport.close()
        pty.close()
        assert not link.is_symlink()

    asyncio.run(main())


def test_replug_without_link_gives_a_new_path() -> None:
    async def main() -> None:
        device = EchoDevice()
        pty = PtyAttachment(device)
        pty.plug()
        second = pty.replug()
        assert second == pty.slave_path
        assert (pty.plug_count, device.connects, device.disconnects) == (2, 2, 1)
        transport, host = await _open(second)
        transport.write(b"ok")
        await wait_for(lambda: bytes(host.data) == b"ok")
        await transport.close()
        pty.close()
        with pytest.raises(RuntimeError, match="not plugged"):
            _ = pty.slave_path

    asyncio.run(main())


def test_bad_port_names_the_port() -> None:
    async def main() -> None:
        transport = SerialTransport("/dev/tablectl/no-such-shoe")
        host = HostRecorder()
        with pytest.raises(TransportError, match="/dev/tablectl/no-such-shoe"):
            await transport.open(asyncio.get_running_loop(), host.on_data, host.on_lost)
        assert not transport.is_open
        with pytest.raises(TransportError, match="no-such-shoe"):
            transport.write(b"x")

    asyncio.run(main())


@pytest.mark.parametrize("url", ["loop://", "spy:///dev/ptmx"])
def test_url_without_a_raw_descriptor_is_refused_clearly(url: str) -> None:
    async def main() -> None:
        transport = SerialTransport(url)
        with pytest.raises(TransportError, match=rf"'{url}'.*file descriptor"):
            await transport.open(asyncio.get_running_loop(), lambda d: None, lambda e: None)

    asyncio.run(main())


def test_socket_url_works_and_reports_the_peer_closing() -> None:
    """Any pyserial URL with a raw descriptor: socket:// to a loopback echo server."""

    async def main() -> None:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            data = await reader.read(100)
            writer.write(data)
            await writer.drain()
            writer.close()  # then hang up: the transport must see it as a loss

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport, host = await _open(f"socket://127.0.0.1:{port}")
        transport.write(b"over tcp")
        await wait_for(lambda: bytes(host.data) == b"over tcp")
        await wait_for(lambda: len(host.lost) == 1)
        assert not transport.is_open
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_close_is_idempotent_and_never_reports_loss() -> None:
    async def main() -> None:
        device = EchoDevice()
        pty = PtyAttachment(device)
        transport, host = await _open(pty.plug())
        await transport.close()
        await transport.close()
        assert not transport.is_open
        pty.unplug()  # the old port's hang-up must not reach a closed transport
        await asyncio.sleep(0.02)
        assert host.lost == []
        # a closed transport can be opened again
        transport2, host2 = await _open(pty.plug())
        transport2.write(b"again")
        await wait_for(lambda: bytes(host2.data) == b"again")
        await transport2.close()
        pty.close()

    asyncio.run(main())


def test_close_drains_buffered_writes(pattern) -> None:
    async def main() -> None:
        device = EchoDevice(echo=False)
        pty = PtyAttachment(device)
        transport, _ = await _open(pty.plug())
        payload = pattern(256 * 1024)
        transport.write(payload)
        await transport.close()
        await wait_for(lambda: len(device.received) >= len(payload))
        assert bytes(device.received) == payload
        pty.close()

    asyncio.run(main())


def test_line_settings_are_applied_by_pyserial() -> None:
    async def main() -> None:
        pty = PtyAttachment(EchoDevice())
        transport = SerialTransport(pty.plug(), baudrate=9600, bytesize=7, parity="E", stopbits=2)
        await transport.open(asyncio.get_running_loop(), lambda d: None, lambda e: None)
        port = transport._serial
        assert (port.baudrate, port.bytesize, port.parity, port.stopbits) == (9600, 7, "E", 2)
        await transport.close()
        pty.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": "/dev/x", "baudrate": 0}, "baudrate"),
        ({"port": "/dev/x", "bytesize": 9}, "bytesize"),
        ({"port": "/dev/x", "parity": "X"}, "parity"),
        ({"port": "/dev/x", "stopbits": 3}, "stopbits"),
        ({"port": ""}, "port"),
    ],
)
def test_bad_serial_options_name_the_option(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SerialTransport(**options)  # type: ignore[arg-type]
    with pytest.raises(TransportConfigError, match=message):
        make_transport("serial", **options)


def test_factory_builds_serial_and_names_bad_kind_and_options() -> None:
    transport = make_transport("serial", port="/dev/ttyUSB0", baudrate=57600)
    assert isinstance(transport, SerialTransport)
    assert transport.name == "serial:/dev/ttyUSB0" and transport.baudrate == 57600
    with pytest.raises(TransportConfigError, match=r"'bluetooth'.*serial, usb"):
        make_transport("bluetooth", port="x")
    with pytest.raises(TransportConfigError, match=r"unknown option\(s\) baud\b.*baudrate"):
        make_transport("serial", port="/dev/ttyUSB0", baud=9600)
    with pytest.raises(TransportConfigError, match=r"missing required option.*port"):
        make_transport("serial")


def test_loss_found_by_a_write_is_reported_once_from_the_loop_not_inside_write() -> None:
    async def main() -> None:
        pty = PtyAttachment(EchoDevice())
        transport, host = await _open(pty.plug())
        pty.unplug()  # the reader has not run yet: the write is the first to notice
        transport.write(b"into the void")
        assert host.lost == []  # not re-entrantly, from inside write()
        assert not transport.is_open
        await wait_for(lambda: len(host.lost) == 1)
        assert isinstance(host.lost[0], OSError)
        await asyncio.sleep(0.02)
        assert len(host.lost) == 1

    asyncio.run(main())


def test_device_may_send_from_another_thread() -> None:
    async def main() -> None:
        device = EchoDevice(echo=False)
        pty = PtyAttachment(device)
        transport, host = await _open(pty.plug())
        send = device.send
        assert send is not None
        worker = threading.Thread(target=lambda: [send(bytes([i])) for i in range(200)])
        worker.start()
        worker.join()
        await wait_for(lambda: bytes(host.data) == bytes(range(200)))
        await transport.close()
        pty.close()

    asyncio.run(main())
