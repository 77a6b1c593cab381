"""Helpers for transport tests: a scripted device, a host-side recorder, waiting without sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest


class EchoDevice:
    """A DeviceSide that records what the host wrote and echoes it back (when ``echo``)."""

    def __init__(self, echo: bool = True) -> None:
        self.echo = echo
        self.received = bytearray()
        self.send: Callable[[bytes], None] | None = None
        self.connects = 0
        self.disconnects = 0
        self.receive_threads: set[int] = set()

    def connect(self, send: Callable[[bytes], None]) -> None:
        self.send = send
        self.connects += 1

    def receive(self, data: bytes) -> None:
        self.receive_threads.add(threading.get_ident())
        self.received += data
        if self.echo and self.send is not None:
            self.send(data)

    def disconnect(self) -> None:
        self.send = None
        self.disconnects += 1


class HostRecorder:
    """The host's on_data/on_lost callbacks; remembers the thread they ran on."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.chunks = 0
        self.lost: list[Exception | None] = []
        self.threads: set[int] = set()

    def on_data(self, data: bytes) -> None:
        self.threads.add(threading.get_ident())
        self.data += data
        self.chunks += 1

    def on_lost(self, exc: Exception | None) -> None:
        self.threads.add(threading.get_ident())
        self.lost.append(exc)


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Yield to the loop until ``condition()`` holds; fail the test after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.002)


@pytest.fixture
def pattern() -> Callable[[int], bytes]:
    """Deterministic, non-repeating-looking payloads of any size."""

    def make(size: int) -> bytes:
        return bytes((i * 31 + (i >> 8) * 7) & 0xFF for i in range(size))

    return make
