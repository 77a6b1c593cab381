"""sd_notify against a real datagram socket, path and abstract namespace."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from tablectl.controller.service.sdnotify import SdNotifier, watchdog_interval


def receiver(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(2)
    return sock


def test_ready_status_watchdog_stopping_over_a_path_socket(tmp_path):
    path = str(tmp_path / "notify")
    sock = receiver(path)
    notifier = SdNotifier({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.ready(status="table t01: idle")
    assert sock.recv(4096).decode().split("\n") == [
        "READY=1",
        f"MAINPID={os.getpid()}",
        "STATUS=table t01: idle",
    ]
    notifier.status("round 3: dealing\nsecond line")
    assert sock.recv(4096) == b"STATUS=round 3: dealing second line"
    notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    notifier.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    notifier.close()
    sock.close()


def test_abstract_namespace_socket():
    name = f"tablectl-test-{uuid.uuid4().hex}"
    sock = receiver("\0" + name)
    notifier = SdNotifier({"NOTIFY_SOCKET": f"@{name}"})
    notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    notifier.close()
    sock.close()


def test_outside_systemd_nothing_is_sent():
    notifier = SdNotifier({})
    assert not notifier.enabled
    assert notifier.ready() is False


def test_a_vanished_socket_is_an_error_not_silence(tmp_path):
    notifier = SdNotifier({"NOTIFY_SOCKET": str(tmp_path / "gone")})
    with pytest.raises(OSError):
        notifier.watchdog()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"WATCHDOG_USEC": "20000000"}, 20.0),
        ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}, 0.5),
        ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval(environ, expected):
    assert watchdog_interval(environ) == expected


def test_watchdog_pings_from_the_loop_at_half_the_interval(tmp_path):
    import asyncio

    from tablectl.controller.service.sdnotify import Watchdog

    path = str(tmp_path / "notify")
    sock = receiver(path)
    sock.setblocking(False)
    environ = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "40000"}

    def drain() -> int:
        count = 0
        while True:
            try:
                assert sock.recv(64) == b"WATCHDOG=1"
            except BlockingIOError:
                return count
            count += 1

    async def run() -> tuple[int, float, int]:
        loop = asyncio.get_running_loop()
        watchdog = Watchdog(SdNotifier(environ), loop, environ)
        assert watchdog.period == 0.02
        started = loop.time()
        assert watchdog.start()
        await asyncio.sleep(0.11)
        watchdog.stop()
        elapsed = loop.time() - started
        during = drain()
        await asyncio.sleep(0.05)
        return during, elapsed, drain()

    during, elapsed, after_stop = asyncio.run(run())
    assert 3 <= during <= elapsed / 0.02 + 1  # one at start, then one every 20 ms
    assert after_stop == 0
    sock.close()


def test_no_watchdog_requested_means_no_pings(tmp_path):
    import asyncio

    from tablectl.controller.service.sdnotify import Watchdog

    async def run() -> bool:
        environ = {"NOTIFY_SOCKET": str(tmp_path / "n")}
        return Watchdog(SdNotifier(environ), asyncio.get_running_loop(), environ).start()

    assert asyncio.run(run()) is False


def test_a_status_to_a_reader_that_falls_behind_is_dropped_not_waited_for(tmp_path):
    """A notify socket nobody reads (systemd busy, a test's socket between two reads) holds
    net.unix.max_dgram_qlen datagrams; a STATUS= past that is dropped (the next supersedes it)
    instead of blocking the event loop that sends it, where the send used to wait for ever."""
    import threading

    path = str(tmp_path / "notify")
    sock = receiver(path)
    notifier = SdNotifier({"NOTIFY_SOCKET": path})
    sent: list[bool] = []
    sender = threading.Thread(
        target=lambda: sent.extend(notifier.status(f"round {n}") for n in range(200)), daemon=True
    )
    sender.start()
    sender.join(30)
    assert not sender.is_alive(), "status() blocked on a full notify socket"
    assert sent[0] and not all(sent)  # the queue took some, the rest were dropped
    assert sock.recv(4096) == b"STATUS=round 0"
    notifier.close()
    sock.close()


def test_the_watchdog_never_stalls_the_loop_on_a_notify_socket_nobody_reads(tmp_path):
    """Pings every 5 ms for half a second into a socket never read (systemd busy; a test under
    CPU stress that drains late): the queue fills at net.unix.max_dgram_qlen, the loop goes on
    (issue 34: the ping blocked and the loop with it, the test hung)."""
    import asyncio
    import threading

    from tablectl.controller.service.sdnotify import Watchdog

    path = str(tmp_path / "notify")
    sock = receiver(path)
    environ = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "10000"}
    ticks: list[int] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        watchdog = Watchdog(SdNotifier(environ), loop, environ)
        assert watchdog.start()
        for tick in range(50):  # the loop's own work, between the pings
            await asyncio.sleep(0.01)
            ticks.append(tick)
        watchdog.stop()

    runner = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), f"the loop stalled after {len(ticks)} ticks"
    assert len(ticks) == 50
    assert sock.recv(64) == b"WATCHDOG=1"
    sock.close()
