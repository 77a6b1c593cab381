"""Serial transport: pyserial configures the port, the asyncio loop moves the bytes.

pyserial opens the device path or URL and sets the line (baud rate, framing, raw
mode). The transport then works on the port's file descriptor directly: reads
are driven by ``loop.add_reader`` (no thread, no polling) and writes go out
non-blocking, with the rest buffered and flushed from ``loop.add_writer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from typing import Any

import serial
import serial.serialposix
import serial.urlhandler.protocol_socket

from tablectl.drivers.transport.base import DataCallback, LostCallback, Transport, TransportError

#: Bytes asked for per read; a pty or UART hands over what it has, up to this.
READ_CHUNK = 65536

#: How long ``close()`` waits for buffered writes to reach the device.
CLOSE_DRAIN_TIMEOUT = 1.0

VALID_BYTESIZES = (5, 6, 7, 8)
VALID_PARITIES = ("N", "E", "O", "M", "S")
VALID_STOPBITS = (1, 1.5, 2)

#: errnos that mean "try again later" on a non-blocking descriptor.
_WOULD_BLOCK = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


def _moves_raw_bytes(port: Any) -> bool:
    """True when the port's descriptor carries the line's bytes unchanged.

    The transport reads and writes the descriptor itself, so a pyserial handler that
    transforms bytes in ``read``/``write`` (``spy://``, ``rfc2217://``) or has no
    descriptor (``loop://``) cannot be driven this way.
    """
    cls = type(port)
    raw = (serial.serialposix.Serial, serial.urlhandler.protocol_socket.Serial)
    return any(
        issubclass(cls, base) and cls.read is base.read and cls.write is base.write for base in raw
    )


class SerialTransport(Transport):
    """A serial port (device path such as ``/dev/pts/5``, or a pyserial URL) on one loop."""

    def __init__(
        self,
        port: str,
        baudrate: int = 115200,
        bytesize: int = 8,
        parity: str = "N",
        stopbits: float = 1,
        xonxoff: bool = False,
        rtscts: bool = False,
        dsrdtr: bool = False,
        exclusive: bool = True,
    ) -> None:
        if not isinstance(port, str) or not port:
            raise ValueError(f"serial transport: port must be a non-empty string, got {port!r}")
        if isinstance(baudrate, bool) or not isinstance(baudrate, int) or baudrate <= 0:
            raise ValueError(
                f"serial port {port!r}: baudrate must be a positive integer, got {baudrate!r}"
            )
        if bytesize not in VALID_BYTESIZES:
            raise ValueError(
                f"serial port {port!r}: bytesize must be one of {VALID_BYTESIZES}, got {bytesize!r}"
            )
        if parity not in VALID_PARITIES:
            raise ValueError(
                f"serial port {port!r}: parity must be one of {VALID_PARITIES}, got {parity!r}"
            )
        if stopbits not in VALID_STOPBITS:
            raise ValueError(
                f"serial port {port!r}: stopbits must be one of {VALID_STOPBITS}, got {stopbits!r}"
            )
        for flag, value in (
            ("xonxoff", xonxoff),
            ("rtscts", rtscts),
            ("dsrdtr", dsrdtr),
            ("exclusive", exclusive),
        ):
            if not isinstance(value, bool):
                raise ValueError(
                    f"serial port {port!r}: {flag} must be true or false, got {value!r}"
                )
        self.port = port
        self.baudrate = baudrate
        self.bytesize = bytesize
        self.parity = parity
        self.stopbits = stopbits
        #: software (XON/XOFF), RTS/CTS and DSR/DTR flow control, as the device's manual says
        self.xonxoff = xonxoff
        self.rtscts = rtscts
        self.dsrdtr = dsrdtr
        #: an advisory lock (TIOCEXCL/flock) so a second process cannot open the same port
        self.exclusive = exclusive
        self.name = f"serial:{port}"
        self._serial: Any = None
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_data: DataCallback | None = None
        self._on_lost: LostCallback | None = None
        self._out = bytearray()
        self._writing = False
        self._drained: asyncio.Event | None = None

    @property
    def is_open(self) -> bool:
        return self._serial is not None

    async def open(
        self,
        loop: asyncio.AbstractEventLoop,
        on_data: DataCallback,
        on_lost: LostCallback,
    ) -> None:
        if self._serial is not None:
            raise TransportError(f"{self.name}: already open")
        try:
            port = serial.serial_for_url(
                self.port,
                baudrate=self.baudrate,
                bytesize=self.bytesize,
                parity=self.parity,
                stopbits=self.stopbits,
                xonxoff=self.xonxoff,
                rtscts=self.rtscts,
                dsrdtr=self.dsrdtr,
                timeout=0,
                write_timeout=0,
                # flock(LOCK_EX) on the port: a second process (another daemon for this table, a
                # terminal program left open) cannot open it and interleave bytes with ours.
                # `exclusive = false` in [devices.NAME.transport] only for a port shared on purpose.
                exclusive=self.exclusive,
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise TransportError(f"serial port {self.port!r}: cannot open: {exc}") from exc
        if not _moves_raw_bytes(port):
            port.close()
            raise TransportError(
                f"serial port {self.port!r}: pyserial's {type(port).__module__} handler has no "
                "file descriptor carrying the raw bytes for the event loop to watch; use a device "
                "path or a socket:// URL"
            )
        fd = port.fileno()
        os.set_blocking(fd, False)
        self._serial = port
        self._fd = fd
        self._loop = loop
        self._on_data = on_data
        self._on_lost = on_lost
        self._out.clear()
        self._drained = asyncio.Event()
        self._drained.set()
        loop.add_reader(fd, self._on_readable)

    def write(self, data: bytes) -> None:
        if self._serial is None or self._loop is None:
            raise TransportError(f"{self.name}: write on a closed transport")
        if not data:
            return
        if self._out:
            self._out += data
            return
        try:
            sent = os.write(self._fd, data)
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                sent = 0
            else:
                # Tell the owner from the loop, not from inside its own write() call.
                on_lost, loop = self._on_lost, self._loop
                self._teardown()
                if on_lost is not None:
                    loop.call_soon(on_lost, exc)
                return
        if sent < len(data):
            self._out += data[sent:]
            self._start_writer()

    async def close(self) -> None:
        if self._serial is None:
            return
        if self._out and self._drained is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_DRAIN_TIMEOUT):  # not wait_for (gh-86296)
                    await self._drained.wait()
        self._teardown()

    # -- loop callbacks -----------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, READ_CHUNK)
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return
            self._lose(exc)  # EIO: the other end hung up (pty master closed, USB UART gone)
            return
        if not data:
            self._lose(None)  # EOF: the device went away
            return
        if self._on_data is not None:
            self._on_data(data)

    def _on_writable(self) -> None:
        if self._serial is None:
            return
        try:
            sent = os.write(self._fd, self._out)
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return
            self._lose(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._stop_writer()

    def _start_writer(self) -> None:
        if not self._writing and self._loop is not None:
            self._loop.add_writer(self._fd, self._on_writable)
            self._writing = True
            if self._drained is not None:
                self._drained.clear()

    def _stop_writer(self) -> None:
        if self._writing and self._loop is not None:
            self._loop.remove_writer(self._fd)
            self._writing = False
        if self._drained is not None:
            self._drained.set()

    def _lose(self, exc: Exception | None) -> None:
        if self._serial is None:
            return
        on_lost = self._on_lost
        self._teardown()
        if on_lost is not None:
            on_lost(exc)

    def _teardown(self) -> None:
        port, self._serial = self._serial, None
        if port is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
        self._stop_writer()
        self._out.clear()
        with contextlib.suppress(Exception):
            port.close()
        self._fd = -1
        self._on_data = None
        self._on_lost = None
