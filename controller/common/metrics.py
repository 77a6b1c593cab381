"""Prometheus metrics of the table service (issue 4), on prometheus-client's default registry.

Labels carry only bounded, public words: games, outcomes, decisions, rule ids, device names,
fault words, deck letters. Never a card, a hand or a player (docs/rules.md H7): every label value
goes through `label_value`, which refuses anything shaped like a card.
"""

from __future__ import annotations

import contextlib
import platform
import re
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import Collector

from tablectl.controller import __version__
from tablectl.controller.engine.rules import CATALOGUE

# No `_created` series beside each counter and histogram: a start time per label set, which
# Prometheus does not use (it sees resets itself), doubled every series a dashboard lists.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Latencies run from microseconds (one event in process) to the wire time of a frame (~1.4 ms at
# 115200 baud) and, for fsync on slow disks, tens of milliseconds.
LATENCY_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)

ROUNDS_TOTAL = Counter(
    "tablectl_rounds",
    "Rounds ended, by game and outcome (completed, voided ...)",
    ["game", "outcome"],
)
DECISIONS_TOTAL = Counter(
    "tablectl_decisions",
    "Decisions the controller emitted, by decision and rule",
    ["decision", "rule_id"],
)
DEVICE_UP = Gauge(
    "tablectl_device_up", "1 when the device answers and passed its handshake", ["device"]
)
DEVICE_FAULTS_TOTAL = Counter(
    "tablectl_device_faults", "Faults reported by or detected on a device", ["device", "fault"]
)


class RoundsSinceStubCount(Collector):
    """`tablectl_rounds_since_stub_counted{deck}`: a gauge, typed as one.

    Named without a `_count` suffix, which Prometheus reserves for histograms and summaries
    (promtool refuses it on a gauge); it was `tablectl_rounds_since_stub_count`, exposed
    untyped to pass that check, until 0.x (README, "Metrics").
    """

    name = "tablectl_rounds_since_stub_counted"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def set(self, deck: str, rounds: float) -> None:
        with self._lock:
            self._values[deck_label(deck)] = rounds

    def value(self, deck: str) -> float | None:
        with self._lock:
            return self._values.get(deck_label(deck))

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            self.name, "Rounds dealt from the deck since its last verified count", labels=["deck"]
        )
        with self._lock:
            for deck, rounds in sorted(self._values.items()):
                family.add_metric([deck], rounds)
        yield family


ROUNDS_SINCE_STUB_COUNT = RoundsSinceStubCount()
REGISTRY.register(ROUNDS_SINCE_STUB_COUNT)
SUPERVISOR_NOTIFICATIONS_PENDING = Gauge(
    "tablectl_supervisor_notifications_pending", "Supervisor notifications not yet acknowledged"
)
EVENT_PROCESSING_SECONDS = Histogram(
    "tablectl_event_processing_seconds",
    "From an event's arrival to its decisions journaled and acted on",
    buckets=LATENCY_BUCKETS,
)
JOURNAL_WRITE_SECONDS = Histogram(
    "tablectl_journal_write_seconds",
    "Time of one journal commit (a durable row or a group-committed batch)",
    buckets=LATENCY_BUCKETS,
)
# The floor store (docs/floor.md): how far the floor's copy trails the local journal. Exposed
# only by a table that ships to a floor (register_floor_metrics): on a table without one, a
# 0 rows behind would read as "the floor is up to date", which nothing has checked.
FLOOR_ROWS_BEHIND = Gauge(
    "tablectl_floor_rows_behind",
    "Journal rows committed locally, not yet on the floor store",
    registry=None,
)
FLOOR_SECONDS_BEHIND = Gauge(
    "tablectl_floor_seconds_behind",
    "Age of the oldest journal row not yet on the floor store (0 when none is waiting)",
    registry=None,
)
FLOOR_SHIP_ERRORS_TOTAL = Counter(
    "tablectl_floor_ship_errors",
    "Failures to ship rows to the floor store, by kind (connection, refused, diverged ...)",
    ["error"],
    registry=None,
)
FLOOR_DIVERGED = Gauge(
    "tablectl_floor_diverged",
    "1 while the local journal no longer matches the floor's copy (shipping stopped)",
    registry=None,
)
FLOOR_LAST_ERROR_TIMESTAMP = Gauge(
    "tablectl_floor_last_error_timestamp_seconds",
    "Unix time of the last failure to ship to the floor store (0: none since start)",
    registry=None,
)
FLOOR_METRICS = (
    FLOOR_ROWS_BEHIND,
    FLOOR_SECONDS_BEHIND,
    FLOOR_SHIP_ERRORS_TOTAL,
    FLOOR_DIVERGED,
    FLOOR_LAST_ERROR_TIMESTAMP,
)
_floor_lock = threading.Lock()
_floor_exposed: list[bool] = []  # [True] once registered


def register_floor_metrics() -> None:
    """Expose the floor metrics (once per process: a demo of three tables ships thrice)."""
    with _floor_lock:
        if not _floor_exposed:
            for metric in FLOOR_METRICS:
                REGISTRY.register(metric)
            _floor_exposed.append(True)


# The table's witnesses (docs/journal.md, "The witness"): exposed only by a table with a
# [witness] section (register_witness_metrics), one series per configured witness.
WITNESS_BEHIND_CHECKPOINTS = Gauge(
    "tablectl_witness_behind_checkpoints",
    "Signed checkpoints of the journal's log not yet cosigned by this witness",
    ["witness"],
    registry=None,
)
WITNESS_BEHIND_SECONDS = Gauge(
    "tablectl_witness_behind_seconds",
    "Age of the oldest signed checkpoint this witness has not cosigned (0: none waiting)",
    ["witness"],
    registry=None,
)
WITNESS_COSIGNED_SIZE = Gauge(
    "tablectl_witness_cosigned_size",
    "Tree size (rows) of the last checkpoint this witness cosigned (0: none yet)",
    ["witness"],
    registry=None,
)
WITNESS_REFUSED = Gauge(
    "tablectl_witness_refused",
    "1 while this witness refuses the journal's checkpoints as inconsistent with what it "
    "cosigned (the history was rewritten or cut)",
    ["witness"],
    registry=None,
)
WITNESS_ERRORS_TOTAL = Counter(
    "tablectl_witness_errors",
    "Failed attempts to reach a witness or have it cosign, by kind (connection, refused, "
    "unknown_log, bad_answer)",
    ["witness", "error"],
    registry=None,
)
WITNESS_METRICS = (
    WITNESS_BEHIND_CHECKPOINTS,
    WITNESS_BEHIND_SECONDS,
    WITNESS_COSIGNED_SIZE,
    WITNESS_REFUSED,
    WITNESS_ERRORS_TOTAL,
)
WITNESS_ERROR_WORDS = ("connection", "refused", "unknown_log", "bad_answer")
_witness_exposed: list[bool] = []


def register_witness_metrics(witnesses: Iterable[str]) -> None:
    """Expose the witness metrics (once per process), every series at 0 from the start."""
    with _floor_lock:
        if not _witness_exposed:
            for metric in WITNESS_METRICS:
                REGISTRY.register(metric)
            _witness_exposed.append(True)
    for name in witnesses:
        for gauge in (WITNESS_BEHIND_CHECKPOINTS, WITNESS_BEHIND_SECONDS, WITNESS_COSIGNED_SIZE):
            gauge.labels(witness=name)
        WITNESS_REFUSED.labels(witness=name).set(0)
        for word in WITNESS_ERROR_WORDS:
            WITNESS_ERRORS_TOTAL.labels(witness=name, error=word)


# Ages as timestamps (Prometheus practice): an alert computes `time() - value`; 0 = never.
JOURNAL_LAST_CHECKPOINT = Gauge(
    "tablectl_journal_last_checkpoint_timestamp_seconds",
    "Unix time of the journal's last checkpoint row (the state a start replays from)",
)
JOURNAL_LAST_SEAL = Gauge(
    "tablectl_journal_last_seal_timestamp_seconds",
    "Unix time of the journal's last forward-secure seal (0: never sealed, e.g. no key)",
)
JOURNAL_START_DAMAGE = Gauge(
    "tablectl_journal_started_damaged",
    "1 when the daemon was started on purpose on a journal that failed its start check",
)
JOURNAL_BACKGROUND_DAMAGE = Gauge(
    "tablectl_journal_background_damage",
    "1 when the background walk of the journal's segments found a damaged or missing row",
)
JOURNAL_BACKGROUND_VERIFIED_SEQ = Gauge(
    "tablectl_journal_background_verified_seq",
    "The last row the background walk of the journal's segments has verified",
)
JOURNAL_BACKGROUND_LAST_RUN = Gauge(
    "tablectl_journal_background_last_run_timestamp_seconds",
    "Unix time the background walk of the journal's segments last finished (0: not yet)",
)
JOURNAL_WRITE_ERRORS = Counter(
    "tablectl_journal_write_errors_total",
    "Writes of the record that failed (a journal commit, the head file, the sealing key, a "
    "checkpoint, a roll-over: a full disk, an I/O error): each stops dealing (fail-stop)",
)
CLOCK_STEP = Gauge(
    "tablectl_clock_step_unresolved",
    "1 while a clock step is unresolved (not acknowledged, the clock not agreeing again): "
    "seals, retention and the journal's roll-over are held",
)
CLOCK_STEPS = Counter(
    "tablectl_clock_steps_total",
    "Clock steps detected (journaled as clock_step notes), by direction",
    ["direction"],
)
JOURNAL_FREE_BYTES = Gauge(
    "tablectl_journal_free_bytes", "Free bytes, for the service user, under the journal"
)
JOURNAL_SIZE_BYTES = Gauge(
    "tablectl_journal_size_bytes", "The journal's size on disk (database, -wal and -shm)"
)
JOURNAL_BYTES_PER_ROUND = Gauge(
    "tablectl_journal_bytes_per_round",
    "The journal's measured growth per round: the live segment's size over the rounds it "
    "holds (since the gaming day's roll-over). While the segment holds no round yet the last "
    "figure stands (0 until a first measurement), never a size over rounds it does not hold",
)
DEALING_STOPPED = Gauge(
    "tablectl_dealing_stopped",
    "1 while the daemon has stopped dealing and locked the dispensing devices (fail-stop)",
    ["reason"],
)
ALARMS_COALESCED = Counter(
    "tablectl_alarms_coalesced_total",
    "Repeats of an alarm folded into one message with a count (the first stays visible)",
    ["alarm"],
)
BUILD_INFO = Info("tablectl_build", "The running tablectl's version")
BUILD_INFO.info({"version": __version__, "python": platform.python_version()})

TABLE_INFO = Gauge(
    "tablectl_table_info",
    "Always 1: the table this daemon runs and its game (join on instance to name the table)",
    ["table", "game"],
)

#: Outcomes of a round as `tablectl_rounds_total` counts them (docs/operations.md, Vocabulary).
ROUND_OUTCOMES = ("completed", "voided")
#: Fault words docs/events.md names for shufflers, shoes and readers, and `refused` (allow-list).
DEVICE_FAULT_WORDS = ("jam", "stopped", "incomplete", "refused")
#: Decisions the alerts count (config/prometheus/alerts.yml), by every rule of the catalogue.
ALERTED_DECISIONS = ("remove_deck",)

_CARD_SHAPED = re.compile(r"^(?:10|[2-9tjqka])[cdhs]$|^jk$", re.IGNORECASE)
_LABEL_WORD = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
OTHER = "other"


def label_value(text: object) -> str:
    """A safe label value: a short lower-case word, never card-shaped; anything else is 'other'.

    Device fault words come from untrusted firmware ("or another word", docs/events.md), so they are
    bounded here both for cardinality and so a card can never be smuggled into a label.
    """
    word = str(text).strip().lower()
    if not _LABEL_WORD.match(word) or _CARD_SHAPED.match(word):
        return OTHER
    return word


_RULE_ID = re.compile(r"^[A-Z][0-9]{1,2}$")


def rule_id_label(rule_id: object) -> str:
    """A rule ID (docs/rules.md: C1, S3, H7 ...) as written; 'none' when absent, else 'other'."""
    if rule_id is None or rule_id == "":
        return "none"
    text = str(rule_id)
    return text if _RULE_ID.match(text) else OTHER


def deck_label(deck: object) -> str:
    """A deck letter as docs/events.md writes it (`A`, `B`); a single deck is `main`."""
    text = str(deck) if deck is not None else "main"
    if len(text) == 1 and text.isalpha():
        return text.upper()
    return label_value(text)


def record_decision(decision: Mapping[str, Any]) -> None:
    """Count one decision (a Decision.to_dict()): its name and rule id only."""
    DECISIONS_TOTAL.labels(
        decision=label_value(decision.get("decision", OTHER)),
        rule_id=rule_id_label(decision.get("rule_id")),
    ).inc()


def record_round(game: str, outcome: str) -> None:
    ROUNDS_TOTAL.labels(game=label_value(game), outcome=label_value(outcome)).inc()


def set_device_up(device: str, up: bool) -> None:
    DEVICE_UP.labels(device=label_value(device)).set(1 if up else 0)


def record_device_fault(device: str, fault: str) -> None:
    DEVICE_FAULTS_TOTAL.labels(device=label_value(device), fault=label_value(fault)).inc()


def initialise_table(table: str, game: str, devices: Iterable[str]) -> None:
    """Every series the table has, at 0, from the daemon's start (`tablectl_table_info` at 1).

    An alert on `increase(counter[10m])` needs the counter's 0 before its first increment:
    a series born at 1 has no increase to see, and one seen first long after its increment
    (Prometheus starting, or back after a gap) must not page as if the increment were new.
    """
    TABLE_INFO.labels(table=label_value_or_id(table), game=label_value(game)).set(1)
    for outcome in ROUND_OUTCOMES:
        ROUNDS_TOTAL.labels(game=label_value(game), outcome=outcome)
    for device in devices:
        for fault in DEVICE_FAULT_WORDS:
            DEVICE_FAULTS_TOTAL.labels(device=label_value(device), fault=fault)
    for decision in ALERTED_DECISIONS:
        for rule_id in CATALOGUE:
            DECISIONS_TOTAL.labels(decision=decision, rule_id=rule_id_label(rule_id))


_TABLE_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def label_value_or_id(table: str) -> str:
    """A table id as configured (config.TABLE_ID_PATTERN), else `other`: never a card."""
    return table if _TABLE_ID.match(table) and not _CARD_SHAPED.match(table) else OTHER


def set_rounds_since_stub_count(deck: str, rounds: int) -> None:
    ROUNDS_SINCE_STUB_COUNT.set(deck, rounds)


def set_supervisor_notifications_pending(count: int) -> None:
    SUPERVISOR_NOTIFICATIONS_PENDING.set(count)


class _MetricsHTTPServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a log line each."""


# The server thread sleeps in select() this long between wake-ups when idle; close() wakes it
# at once, so the daemon has no polling loop when idle (DESIGN.md: no polling when idle).
IDLE_POLL_SECONDS = 3600.0


@dataclass
class MetricsServer:
    """The running HTTP endpoint; `port` is the bound one (useful when 0 asked for any)."""

    host: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    def close(self) -> None:
        """Stop serving and release the port."""
        stopper = threading.Thread(target=self._server.shutdown, daemon=True)
        stopper.start()
        wake_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        while stopper.is_alive():
            # A connection wakes the serving thread's select() so it sees the shutdown now.
            with contextlib.suppress(OSError):
                socket.create_connection((wake_host, self.port), timeout=1).close()
            stopper.join(0.05)
        self._server.server_close()
        self._thread.join(timeout=5)


def start_metrics_server(host: str, port: int) -> MetricsServer:
    """Serve /metrics from the default registry on HOST:PORT (read-only; loopback by default).

    Port 0 binds any free port (tests); raises OSError when the address cannot be bound.
    """
    server_class = type(
        "MetricsHTTPServer",
        (_MetricsHTTPServer,),
        {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET},
    )
    server: WSGIServer = make_server(
        host, port, make_wsgi_app(), server_class, handler_class=_QuietHandler
    )
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": IDLE_POLL_SECONDS},
        name="metrics-http",
        daemon=True,
    )
    thread.start()
    return MetricsServer(
        host=host, port=int(server.server_address[1]), _server=server, _thread=thread
    )
