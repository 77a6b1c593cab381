"""`tablectl witness serve`'s HTTP server: C2SP tlog-witness over the standard library.

    POST /add-checkpoint         old size, consistency proof, the table's signed checkpoint
                                 -> 200 and this witness's cosignature line (tlog-witness)
    GET  /checkpoint?origin=O    the last checkpoint cosigned for O (the table's signature and
                                 this witness's cosignature): what a table's start, and anyone
                                 else, checks a journal against (tlog-witness leaves reading to
                                 be specified; this is tablectl's)
    GET  /metrics                the witness's own Prometheus metrics

One thread per connection (HTTP/1.1 keep-alive, as the protocol asks of clients); the state
(controller/record/witness_state.py) serialises the check and the update of each log and
answers once the cosigned checkpoint is durable.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from tablectl.controller.common.logs import get_logger
from tablectl.controller.record.witness_state import (
    MAX_REQUEST_BYTES,
    Answer,
    WitnessState,
)

_NOTE = "text/plain; charset=utf-8"


class WitnessMetrics:
    """The witness's own metrics, on a registry of its own (it is not a table)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.answers = Counter(
            "tablectl_witness_server_answers",
            "add-checkpoint answers by HTTP status (200 cosigned, 409 stale or conflicting, "
            "422 a proof that does not verify, ...)",
            ["status"],
            registry=self.registry,
        )
        for status in ("200", "400", "403", "404", "409", "422", "503"):
            self.answers.labels(status=status)
        self.refused = Gauge(
            "tablectl_witness_server_inconsistent_refusals",
            "Refusals kept as evidence of a rewritten log (evidence/ in the state directory)",
            registry=self.registry,
        )
        self.logs = Gauge(
            "tablectl_witness_server_logs",
            "Logs (tables) this witness knows",
            registry=self.registry,
        )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: WitnessHTTPServer

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path != self.server.prefix + "/add-checkpoint":
            self._send(Answer.text(404, f"no such endpoint: POST {path}"))
            return
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self._send(Answer.text(411, "a Content-Length is required"), close=True)
            return
        length = int(length_text)
        if length > MAX_REQUEST_BYTES:
            self._send(
                Answer.text(413, f"a request of {length} bytes: at most {MAX_REQUEST_BYTES}"),
                close=True,
            )
            return
        body = self.rfile.read(length)
        answer = self.server.state.add_checkpoint(body)
        metrics = self.server.metrics
        metrics.answers.labels(status=str(answer.status)).inc()
        self._send(answer)

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        if parts.path == self.server.prefix + "/checkpoint":
            origin = urllib.parse.parse_qs(parts.query).get("origin", [""])[0]
            latest = self.server.state.latest(origin)
            if latest is None:
                self._send(Answer.text(404, f"no checkpoint cosigned for origin {origin[:120]!r}"))
            else:
                self._send(Answer(200, latest.checkpoint.encode(), _NOTE))
            return
        if parts.path == "/metrics":
            self.server.metrics.refused.set(len(self.server.state.refusals()))
            self.server.metrics.logs.set(len(self.server.state.logs))
            self._send(
                Answer(
                    200, generate_latest(self.server.metrics.registry), "text/plain; version=0.0.4"
                )
            )
            return
        self._send(Answer.text(404, f"no such endpoint: GET {parts.path}"))

    def _send(self, answer: Answer, *, close: bool = False) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        self.server.log.debug("witness_http", client=self.client_address[0], line=format % args)


class WitnessHTTPServer(ThreadingHTTPServer):
    """The witness on HOST:PORT (port 0: one the kernel chooses; `port` says which)."""

    daemon_threads = True
    #: pending connections the kernel queues (socketserver's default, 5, resets the 6th of a
    #: burst: a floor of tables rolling over at once, each sending its checkpoint)
    request_queue_size = 128

    def __init__(
        self,
        state: WitnessState,
        host: str,
        port: int,
        *,
        prefix: str = "",
        bound: socket.socket | None = None,
    ) -> None:
        """`bound`: a socket already bound (and held) by the caller, served from now on."""
        self.state = state
        self.prefix = prefix.rstrip("/")
        self.metrics = WitnessMetrics()
        self.log = get_logger("witness_server")
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler, bind_and_activate=bound is None)
        if bound is not None:
            self.socket.close()
            self.socket = bound
            self.server_address = bound.getsockname()
            self.server_activate()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> threading.Thread:
        """Serve on a thread of its own (tests, the demo); `close` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="witness-http", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.shutdown()
        self.server_close()
