"""Attach a simulated device to a pseudo-terminal, so the host opens it like a serial port.

The attachment owns the pty's master side and serves it on an asyncio loop with
``add_reader``; the host opens the slave path with pyserial. The attachment keeps
its own slave descriptor open while plugged, as a powered device keeps its line
up whether or not the host has the port open (otherwise the master would report
hang-up and spin the loop). So the device learns of nothing when the host closes
the port -- just like a real UART -- and ``DeviceSide.disconnect`` is called only
on ``unplug()``/``close()``.

Unplug closes both pty descriptors: the host's next read sees EIO/EOF and its
transport reports the loss. Re-plug makes a *new* pty (the kernel picks the
number); when ``link_path`` is given, the attachment keeps a symlink there that
always points at the current slave, so a host configured with that stable path
reopens the same name (like a udev ``SYMLINK+=`` rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
import tty

from tablectl.simulators.link import DeviceSide

READ_CHUNK = 65536
_WOULD_BLOCK = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


class PtyAttachment:
    """Serves one DeviceSide on a new pseudo-terminal; plug/unplug/re-plug at will."""

    def __init__(
        self,
        device: DeviceSide,
        loop: asyncio.AbstractEventLoop | None = None,
        link_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.device = device
        self._loop = loop
        self.link_path = os.fspath(link_path) if link_path is not None else None
        self._master = -1
        self._slave = -1
        self._slave_path: str | None = None
        self._out = bytearray()
        self._writing = False
        self._loop_thread: int | None = None
        #: How many times the attachment has been plugged in (1 after the first plug).
        self.plug_count = 0
        #: Bytes the device tried to send while unplugged (dropped, as on a dead wire).
        self.dropped_bytes = 0

    # -- public API ---------------------------------------------------------

    @property
    def is_plugged(self) -> bool:
        return self._master >= 0

    @property
    def slave_path(self) -> str:
        """The current pty slave path, e.g. ``/dev/pts/7``; changes on every re-plug."""
        if self._slave_path is None:
            raise RuntimeError("pty attachment is not plugged in")
        return self._slave_path

    @property
    def path(self) -> str:
        """The path a host should open: the stable symlink if one is managed, else the slave."""
        return self.link_path if self.link_path is not None else self.slave_path

    def plug(self) -> str:
        """Create the pty, start serving it and connect the device; return ``path``."""
        if self.is_plugged:
            raise RuntimeError(f"pty attachment already plugged in at {self._slave_path}")
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()
        self._loop = loop
        master, slave = os.openpty()
        try:
            tty.setraw(slave)
            tty.setraw(master)
            os.set_blocking(master, False)
            slave_path = os.ttyname(slave)
            if self.link_path is not None:
                tmp = f"{self.link_path}.{os.getpid()}.tmp"
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                os.symlink(slave_path, tmp)
                os.replace(tmp, self.link_path)
        except BaseException:
            os.close(master)
            os.close(slave)
            raise
        self._master, self._slave, self._slave_path = master, slave, slave_path
        self._out.clear()
        self._loop_thread = threading.get_ident()
        loop.add_reader(master, self._on_readable)
        self.plug_count += 1
        self.device.connect(self._send)
        return self.path

    def unplug(self) -> None:
        """Pull the cable: close the pty so the host sees a hang-up; the device is told."""
        if not self.is_plugged:
            return
        assert self._loop is not None
        self._loop.remove_reader(self._master)
        if self._writing:
            self._loop.remove_writer(self._master)
            self._writing = False
        self._out.clear()
        os.close(self._master)
        os.close(self._slave)
        self._master = self._slave = -1
        self._slave_path = None
        if self.link_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.link_path)
        self.device.disconnect()

    def replug(self) -> str:
        """Unplug (if plugged) then plug into a fresh pty; return the path to open."""
        self.unplug()
        return self.plug()

    def close(self) -> None:
        """Tear the attachment down (same as unplug; kept for symmetry with other attachments)."""
        self.unplug()

    # -- device -> host -----------------------------------------------------

    def _send(self, data: bytes) -> None:
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread:
            loop.call_soon_threadsafe(self._send, bytes(data))
            return
        if not self.is_plugged:
            self.dropped_bytes += len(data)
            return
        if not data:
            return
        if self._out:
            self._out += data
            return
        try:
            sent = os.write(self._master, data)
        except OSError as exc:
            if exc.errno not in _WOULD_BLOCK:
                raise
            sent = 0
        if sent < len(data):
            self._out += data[sent:]
            if not self._writing and loop is not None:
                loop.add_writer(self._master, self._on_writable)
                self._writing = True

    def _on_writable(self) -> None:
        try:
            sent = os.write(self._master, self._out)
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return
            raise
        del self._out[:sent]
        if not self._out and self._loop is not None:
            self._loop.remove_writer(self._master)
            self._writing = False

    # -- host -> device -----------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self._master, READ_CHUNK)
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return
            # EIO cannot happen while we hold the slave open; anything else is a real fault.
            raise
        if data:
            self.device.receive(data)
