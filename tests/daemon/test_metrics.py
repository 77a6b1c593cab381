"""Metrics: a real HTTP endpoint, the names issue 4 asks for, promtool-clean, no card labels."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import urllib.request

import pytest

from tablectl.controller import __version__
from tablectl.controller.common import metrics

REQUIRED = (
    "tablectl_rounds_total",
    "tablectl_decisions_total",
    "tablectl_device_up",
    "tablectl_device_faults_total",
    "tablectl_rounds_since_stub_counted",
    "tablectl_event_processing_seconds_bucket",
    "tablectl_journal_write_seconds_bucket",
    "tablectl_build_info",
    "tablectl_supervisor_notifications_pending",
)


@pytest.fixture
def server():
    running = metrics.start_metrics_server("127.0.0.1", 0)
    yield running
    running.close()


def scrape(server: metrics.MetricsServer) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as reply:
        assert reply.status == 200
        return reply.read().decode()


def populate() -> None:
    metrics.record_round("five_card_hilo", "completed")
    metrics.record_decision({"decision": "void_round", "rule_id": "C2", "rule": "40.12(a)"})
    metrics.set_device_up("shoe", True)
    metrics.record_device_fault("shuffler", "jam")
    metrics.set_rounds_since_stub_count("A", 3)
    metrics.set_supervisor_notifications_pending(1)
    metrics.EVENT_PROCESSING_SECONDS.observe(0.00004)


def test_scrape_over_http_has_every_required_metric(server):
    populate()
    text = scrape(server)
    for name in REQUIRED:
        assert f"\n{name}" in text, name
    assert 'tablectl_rounds_total{game="five_card_hilo",outcome="completed"}' in text
    assert 'tablectl_decisions_total{decision="void_round",rule_id="C2"}' in text
    assert 'tablectl_device_faults_total{device="shuffler",fault="jam"}' in text
    assert f'version="{__version__}"' in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_check_metrics_accepts_the_output(server):
    populate()
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=scrape(server), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_server_binds_loopback_only_and_reports_its_port(server):
    assert server.port > 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=2):
        pass


def test_taken_port_is_an_error(server):
    with pytest.raises(OSError):
        metrics.start_metrics_server("127.0.0.1", server.port)


@pytest.mark.parametrize(
    "value", ["As", "10h", "td", "JK", "kd", "As Kd", "<script>", "", "x" * 60]
)
def test_card_shaped_or_odd_label_values_become_other(value):
    assert metrics.label_value(value) == "other"


@pytest.mark.parametrize("value", ["jam", "Stopped", "incomplete", "shoe", "a", "void_round"])
def test_plain_words_pass_as_lower_case(value):
    assert metrics.label_value(value) == value.lower()


def test_a_fault_word_holding_a_card_never_reaches_the_exposition(server):
    metrics.record_device_fault("shoe", "Qh")
    text = scrape(server)
    assert 'fault="Qh"' not in text and 'fault="qh"' not in text
    assert 'tablectl_device_faults_total{device="shoe",fault="other"}' in text


def test_rule_ids_keep_their_case_and_nothing_else_passes():
    assert metrics.rule_id_label("H7") == "H7"
    assert metrics.rule_id_label(None) == "none"
    assert metrics.rule_id_label("As") == "other"
    assert metrics.rule_id_label("C1; drop") == "other"


def test_rounds_since_stub_count_per_deck(server):
    metrics.set_rounds_since_stub_count("B", 5)
    metrics.set_rounds_since_stub_count("B", 6)
    assert metrics.ROUNDS_SINCE_STUB_COUNT.value("B") == 6
    assert 'tablectl_rounds_since_stub_counted{deck="B"} 6.0' in scrape(server)


def test_idle_server_thread_sleeps_and_close_is_prompt():
    import time

    running = metrics.start_metrics_server("127.0.0.1", 0)
    assert metrics.IDLE_POLL_SECONDS >= 60  # no wake-ups when nobody scrapes
    started = time.monotonic()
    running.close()
    assert not running._thread.is_alive()
    assert time.monotonic() - started < 30, "close must not wait for the idle poll interval"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", running.port), timeout=1)


def test_ipv6_loopback_listener():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        running = metrics.start_metrics_server("::1", 0)
    except OSError as error:
        pytest.skip(f"IPv6 loopback unavailable: {error}")
    try:
        url = f"http://[::1]:{running.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            assert b"tablectl_build_info" in reply.read()
    finally:
        running.close()


def test_the_stub_cadence_is_a_typed_gauge_with_no_created_series_and_no_floor(server):
    """What a Prometheus user expects: every series typed (the stub cadence a gauge, named
    without the `_count` a gauge may not end in), no `_created` series, and no floor metric
    on a table without a floor (a 0 "rows behind" would read as "the floor is up to date")."""
    populate()
    text = scrape(server)
    assert "# TYPE tablectl_rounds_since_stub_counted gauge" in text
    assert 'tablectl_rounds_since_stub_counted{deck="A"} 3.0' in text
    assert "untyped" not in text and " unknown\n" not in text
    assert "_created" not in text
    # no floor metric without a floor: shown in a fresh interpreter by the test below (in this
    # process a floor test that ran before, in a random order, has registered them)


def test_floor_metrics_appear_once_a_floor_is_configured(tmp_path):
    """A table with a `[floor]` exposes them (each shipper registers them once per process)."""
    code = (
        "from tablectl.controller.common import metrics\n"
        "from prometheus_client import REGISTRY, generate_latest\n"
        "assert b'tablectl_floor_' not in generate_latest(REGISTRY)\n"
        "metrics.register_floor_metrics(); metrics.register_floor_metrics()\n"
        "text = generate_latest(REGISTRY).decode()\n"
        "assert 'tablectl_floor_rows_behind 0.0' in text, text\n"
    )
    done = subprocess.run([sys.executable, "-c", code])
    assert done.returncode == 0
