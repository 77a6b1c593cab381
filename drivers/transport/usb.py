"""USB transport: one vendor-specific interface with a bulk OUT and a bulk IN endpoint, via pyusb.

libusb calls block, so they stay off the loop: a reader thread loops on bulk IN
reads with a short timeout and hands data to the loop with
``call_soon_threadsafe``; a writer thread drains a queue of outgoing chunks
with bulk OUT writes, so ``write()`` never blocks. Opening (find, detach the
kernel driver, configure, claim) runs on a short-lived thread too. A USBError
other than a timeout (ENODEV, EIO, EPIPE...) means the device is gone: the
transport closes itself and calls ``on_lost`` once, on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import usb.core
import usb.util

from tablectl.drivers.transport.base import DataCallback, LostCallback, Transport, TransportError

T = TypeVar("T")

#: Bulk IN read timeout: bounds how long close() waits for the reader thread.
READ_TIMEOUT_MS = 100
#: Bulk OUT timeout: a device that accepts nothing for this long is treated as lost.
WRITE_TIMEOUT_MS = 2000
#: Largest single bulk OUT transfer; bigger writes are split.
WRITE_CHUNK = 16384
#: Bulk IN buffer, in max-size packets.
READ_PACKETS = 64

_STOP = object()


def _check_id(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise ValueError(f"usb transport: {name} must be an integer 0..0xFFFF, got {value!r}")
    return value


class UsbTransport(Transport):
    """A USB device found by vendor/product id (and serial number), on one asyncio loop."""

    def __init__(
        self,
        vendor_id: int,
        product_id: int,
        serial_number: str | None = None,
        interface: int = 0,
        backend: Any = None,
    ) -> None:
        self.vendor_id = _check_id("vendor_id", vendor_id)
        self.product_id = _check_id("product_id", product_id)
        if serial_number is not None and (not isinstance(serial_number, str) or not serial_number):
            raise ValueError(
                f"usb transport: serial_number must be a non-empty string, got {serial_number!r}"
            )
        if isinstance(interface, bool) or not isinstance(interface, int) or interface < 0:
            raise ValueError(
                f"usb transport: interface must be a non-negative integer, got {interface!r}"
            )
        self.serial_number = serial_number
        self.interface = interface
        self.backend = backend
        self.name = f"usb:{vendor_id:04x}:{product_id:04x}" + (
            f":{serial_number}" if serial_number else ""
        )
        self._device: Any = None
        self._ep_in: Any = None
        self._ep_out: Any = None
        self._detached_kernel_driver = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_data: DataCallback | None = None
        self._on_lost: LostCallback | None = None
        self._open = False
        self._stop = threading.Event()
        self._outgoing: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._threads_done: list[asyncio.Future[None]] = []
        self._cleanup: asyncio.Task[None] | None = None

    @property
    def is_open(self) -> bool:
        return self._open

    # -- open ---------------------------------------------------------------------

    async def open(
        self,
        loop: asyncio.AbstractEventLoop,
        on_data: DataCallback,
        on_lost: LostCallback,
    ) -> None:
        if self._open:
            raise TransportError(f"{self.name}: already open")
        if self._cleanup is not None:
            await asyncio.shield(self._cleanup)
            self._cleanup = None
        self._loop = loop
        await self._in_thread(loop, self._open_device, "open")
        self._on_data = on_data
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._outgoing = queue.SimpleQueue()
        self._open = True
        self._threads = []
        self._threads_done = []
        self._start_thread(loop, self._read_loop, "reader")
        self._start_thread(loop, self._write_loop, "writer")

    def _open_device(self) -> None:
        """Find, detach kernel driver, configure, claim (blocking; runs off the loop)."""
        try:
            candidates = list(
                usb.core.find(
                    find_all=True,
                    idVendor=self.vendor_id,
                    idProduct=self.product_id,
                    backend=self.backend,
                )
            )
        except usb.core.NoBackendError as exc:
            raise TransportError(f"{self.name}: no USB backend available (libusb?): {exc}") from exc
        except usb.core.USBError as exc:
            raise TransportError(f"{self.name}: USB enumeration failed: {exc}") from exc
        device = None
        seen: list[str] = []
        for candidate in candidates:
            if self.serial_number is None:
                device = candidate
                break
            try:
                serial = candidate.serial_number
            except (usb.core.USBError, ValueError) as exc:
                seen.append(f"<unreadable: {exc}>")
                continue
            if serial == self.serial_number:
                device = candidate
                break
            seen.append(str(serial))
            usb.util.dispose_resources(candidate)
        if device is None:
            found = f" (found serial numbers: {', '.join(seen)})" if seen else ""
            raise TransportError(f"{self.name}: no such USB device{found}")
        try:
            self._claim(device)
        except TransportError:
            usb.util.dispose_resources(device)
            raise
        except usb.core.USBError as exc:
            usb.util.dispose_resources(device)
            raise TransportError(
                f"{self.name}: cannot claim interface {self.interface}: {exc}"
            ) from exc

    def _claim(self, device: Any) -> None:
        self._detached_kernel_driver = False
        try:
            if device.is_kernel_driver_active(self.interface):
                device.detach_kernel_driver(self.interface)
                self._detached_kernel_driver = True
        except NotImplementedError:
            pass  # backends without kernel drivers (e.g. Windows) have nothing to detach
        try:
            configuration = device.get_active_configuration()
        except usb.core.USBError:
            device.set_configuration()
            configuration = device.get_active_configuration()
        try:
            intf = configuration[(self.interface, 0)]
        except (usb.core.USBError, IndexError) as exc:
            raise TransportError(
                f"{self.name}: the device has no interface {self.interface}"
            ) from exc

        def bulk(direction: int) -> Callable[[Any], bool]:
            return lambda ep: bool(
                usb.util.endpoint_direction(ep.bEndpointAddress) == direction
                and usb.util.endpoint_type(ep.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK
            )

        ep_out = usb.util.find_descriptor(intf, custom_match=bulk(usb.util.ENDPOINT_OUT))
        ep_in = usb.util.find_descriptor(intf, custom_match=bulk(usb.util.ENDPOINT_IN))
        if ep_out is None or ep_in is None:
            raise TransportError(
                f"{self.name}: interface {self.interface} lacks a bulk "
                f"{'OUT' if ep_out is None else 'IN'} endpoint"
            )
        usb.util.claim_interface(device, self.interface)
        self._device, self._ep_in, self._ep_out = device, ep_in, ep_out

    # -- data path ------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self._open:
            raise TransportError(f"{self.name}: write on a closed transport")
        for start in range(0, len(data), WRITE_CHUNK):
            self._outgoing.put(bytes(data[start : start + WRITE_CHUNK]))

    def _read_loop(self) -> None:
        size = max(int(self._ep_in.wMaxPacketSize), 1) * READ_PACKETS
        address = self._ep_in.bEndpointAddress
        while not self._stop.is_set():
            try:
                data = self._device.read(address, size, timeout=READ_TIMEOUT_MS)
            except usb.core.USBTimeoutError:
                continue
            except usb.core.USBError as exc:
                if not self._stop.is_set():
                    self._to_loop(self._lose, exc)
                return
            if len(data):
                self._to_loop(self._deliver, bytes(data))

    def _write_loop(self) -> None:
        address = self._ep_out.bEndpointAddress
        while True:
            item = self._outgoing.get()
            if item is _STOP:
                return
            assert isinstance(item, bytes)
            try:
                self._device.write(address, item, timeout=WRITE_TIMEOUT_MS)
            except usb.core.USBError as exc:
                if not self._stop.is_set():
                    self._to_loop(self._lose, exc)
                return

    def _to_loop(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop was closed under us: nobody to tell, stop the threads
            self._stop.set()
            self._outgoing.put(_STOP)

    def _deliver(self, data: bytes) -> None:
        if self._open and self._on_data is not None:
            self._on_data(data)

    # -- close and loss ---------------------------------------------------------------

    def _lose(self, exc: Exception | None) -> None:
        """On the loop: the device went away. Stop the threads, free the handle, tell once."""
        if not self._open:
            return
        on_lost = self._on_lost
        self._shutdown_threads()
        assert self._loop is not None
        self._cleanup = self._loop.create_task(self._finish(), name=f"{self.name} cleanup")
        if on_lost is not None:
            on_lost(exc)

    async def close(self) -> None:
        if self._open:
            self._shutdown_threads()
            await self._finish()
        elif self._cleanup is not None:
            # After a loss: let the cleanup started then finish, so no thread outlives close().
            await asyncio.shield(self._cleanup)
        self._cleanup = None

    def _shutdown_threads(self) -> None:
        self._open = False
        self._on_data = None
        self._on_lost = None
        self._stop.set()
        self._outgoing.put(_STOP)

    async def _finish(self) -> None:
        """Wait (without blocking the loop) for both threads, then release the device."""
        done, self._threads_done = self._threads_done, []
        if done:
            await asyncio.gather(*done)
        for thread in self._threads:
            thread.join()
        self._threads = []
        device, self._device = self._device, None
        if device is None:
            return
        assert self._loop is not None
        await self._in_thread(self._loop, lambda: self._release(device), "release")

    def _release(self, device: Any) -> None:
        with contextlib.suppress(usb.core.USBError):
            usb.util.release_interface(device, self.interface)
        if self._detached_kernel_driver:
            with contextlib.suppress(usb.core.USBError, NotImplementedError):
                device.attach_kernel_driver(self.interface)
        with contextlib.suppress(usb.core.USBError):
            usb.util.dispose_resources(device)

    # -- threads ----------------------------------------------------------------------

    def _start_thread(
        self, loop: asyncio.AbstractEventLoop, target: Callable[[], None], role: str
    ) -> None:
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                target()
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_set_result, done)

        thread = threading.Thread(target=run, name=f"{self.name} {role}", daemon=True)
        self._threads.append(thread)
        self._threads_done.append(done)
        thread.start()

    async def _in_thread(
        self, loop: asyncio.AbstractEventLoop, target: Callable[[], None], role: str
    ) -> None:
        """Run a blocking libusb step on a short-lived thread, awaiting it from the loop."""
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                target()
            except BaseException as exc:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_set_exception, done, exc)
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_set_result, done)

        thread = threading.Thread(target=run, name=f"{self.name} {role}", daemon=True)
        thread.start()
        try:
            await done
        finally:
            thread.join()


def _set_result(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _set_exception(future: asyncio.Future[None], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
