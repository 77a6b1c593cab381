"""Loopback ports the kernel chose, held for as long as their server lives (tests and demos).

A port number chosen by binding port 0, closing the socket and handing the number on is free
only until someone else binds it: under a loaded suite another test (or the kernel's next
`bind(0)`) may take it between the choice and the server's own bind. `HeldPort` closes that
window: its socket is bound to 127.0.0.1:0 with SO_REUSEADDR and never listened on, so the
kernel hands the number to no other `bind(0)` nor to a plain bind of it, while a server that
sets SO_REUSEADDR on its own listening socket (PostgreSQL, pgbouncer, Go's net for etcd and
Prometheus, Python's HTTPServer/wsgiref for Patroni and tablectl's metrics) binds and listens
beside it. The number stays ours, across the server's restarts, until `close`.
"""

from __future__ import annotations

import socket


class HeldPort:
    """A loopback port the kernel chose, held (bound, SO_REUSEADDR, not listening) until
    closed: no other process gets it meanwhile; a server with SO_REUSEADDR binds it beside."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.number = int(self._socket.getsockname()[1])

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> HeldPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: the ports `port_held_for_life` handed out, held until this process exits
_HELD_FOR_LIFE: list[HeldPort] = []


def port_held_for_life() -> int:
    """A port number for a server whose life this process does not track (a daemon a test
    starts and stops, a scrape target named before its listener, an address nobody answers
    on): held by a socket kept until this process exits, so no other bind gets it meanwhile."""
    held = HeldPort()
    _HELD_FOR_LIFE.append(held)
    return held.number
