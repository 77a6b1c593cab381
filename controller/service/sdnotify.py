"""sd_notify(3) in a few lines: tell systemd READY, STATUS, WATCHDOG and STOPPING.

The protocol is one datagram of `KEY=VALUE` lines to the Unix socket named by NOTIFY_SOCKET
(a path, or `@name` for the abstract namespace). Without NOTIFY_SOCKET every call is a no-op,
so the daemon runs the same outside systemd.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping


def watchdog_interval(environ: Mapping[str, str] = os.environ) -> float | None:
    """Seconds within which systemd expects WATCHDOG=1, or None when no watchdog is set.

    WATCHDOG_PID, when present, must be this process (a child must not ping for its parent).
    Callers ping at half this interval, as sd_watchdog_enabled(3) advises.
    """
    usec_text = environ.get("WATCHDOG_USEC")
    if not usec_text:
        return None
    pid_text = environ.get("WATCHDOG_PID")
    if pid_text and pid_text != str(os.getpid()):
        return None
    try:
        usec = int(usec_text)
    except ValueError:
        return None
    return usec / 1_000_000 if usec > 0 else None


class SdNotifier:
    """Sends notifications to systemd's socket; `enabled` is False outside systemd."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        address = environ.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        if address.startswith("@"):
            self.address = "\0" + address[1:]
        elif address.startswith("/"):
            self.address = address
        self._socket: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *assignments: str, drop_when_busy: bool = False) -> bool:
        """Send `KEY=VALUE` lines in one datagram; True when sent, False when not under systemd.

        `drop_when_busy`: a notice the next one supersedes (STATUS=) is dropped rather than
        wait while the receiver's queue is full (net.unix.max_dgram_qlen, 10 by default): the
        event loop sends it, and a slow reader must not stall dealing."""
        if self.address is None:
            return False
        if self._socket is None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        message = "\n".join(assignments).encode()
        if drop_when_busy:
            try:
                self._socket.sendto(message, socket.MSG_DONTWAIT, self.address)
            except BlockingIOError:
                return False
            return True
        self._socket.sendto(message, self.address)
        return True

    def ready(self, status: str | None = None) -> bool:
        lines = ["READY=1", f"MAINPID={os.getpid()}"]
        if status is not None:
            lines.append(f"STATUS={_one_line(status)}")
        return self.notify(*lines)

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={_one_line(text)}", drop_when_busy=True)

    def watchdog(self) -> bool:
        # pings queued unread say the loop is alive already: one more is dropped, not waited
        # for (a blocked send would stall the very loop whose health it reports)
        return self.notify("WATCHDOG=1", drop_when_busy=True)

    def stopping(self, status: str | None = None) -> bool:
        lines = ["STOPPING=1"]
        if status is not None:
            lines.append(f"STATUS={_one_line(status)}")
        return self.notify(*lines)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


class Watchdog:
    """Pings WATCHDOG=1 from the event loop at half systemd's interval.

    Driven by the loop itself (call_later), so a blocked or wedged loop stops the pings and
    systemd restarts the service: that is the point of pinging from the loop, not a thread.
    """

    def __init__(
        self,
        notifier: SdNotifier,
        loop: asyncio.AbstractEventLoop,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        interval = watchdog_interval(environ)
        self.period = interval / 2 if interval is not None else None
        self._notifier = notifier
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> bool:
        """Begin pinging; False when systemd asked for no watchdog (or we are not under it)."""
        if self.period is None or not self._notifier.enabled:
            return False
        self._ping()
        return True

    def _ping(self) -> None:
        self._notifier.watchdog()
        assert self.period is not None
        self._handle = self._loop.call_later(self.period, self._ping)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
