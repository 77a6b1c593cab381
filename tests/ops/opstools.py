"""Helpers for the operations artifacts' tests (systemd, udev, Prometheus, Grafana).

These tests run the real tools. A tool that is absent skips its tests on a
developer's machine, but under CI (``CI`` set to a true value) an absent tool is
a failure: tests/tools/install-system-tools.sh must have installed it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SYSTEMD_DIR = REPO / "systemd"
PROMETHEUS_DIR = REPO / "config" / "prometheus"
GRAFANA_DIR = REPO / "config" / "grafana"

#: Metric names the daemon exports (issue 4); alerts and the dashboard may use
#: only these (histograms also as _bucket/_sum/_count) and Prometheus's own `up`.
KNOWN_METRICS = frozenset(
    {
        "tablectl_rounds_total",
        "tablectl_decisions_total",
        "tablectl_device_up",
        "tablectl_device_faults_total",
        "tablectl_rounds_since_stub_counted",
        "tablectl_event_processing_seconds",
        "tablectl_journal_write_seconds",
        "tablectl_build_info",
        "tablectl_supervisor_notifications_pending",
        "tablectl_table_info",
        "tablectl_driver_frames_received_total",
        "tablectl_driver_frames_sent_total",
        "tablectl_driver_retransmissions_total",
        "tablectl_driver_errors_total",
        "tablectl_driver_reconnect_attempts_total",
        "tablectl_device_link_losses_total",
        "tablectl_floor_rows_behind",
        "tablectl_floor_seconds_behind",
        "tablectl_floor_diverged",
        "tablectl_floor_ship_errors_total",
        "tablectl_floor_last_error_timestamp_seconds",
        # the record's health (issue 9 fail-stop; issue 11 visible health)
        "tablectl_journal_write_errors_total",
        "tablectl_journal_free_bytes",
        "tablectl_journal_size_bytes",
        "tablectl_journal_bytes_per_round",
        "tablectl_journal_last_seal_timestamp_seconds",
        "tablectl_journal_last_checkpoint_timestamp_seconds",
        "tablectl_journal_started_damaged",
        # issue 21: the background walk of every segment
        "tablectl_journal_background_damage",
        "tablectl_journal_background_verified_seq",
        "tablectl_journal_background_last_run_timestamp_seconds",
        "tablectl_dealing_stopped",
        "tablectl_alarms_coalesced_total",
        # time cannot erase or freeze the record (issue 21)
        "tablectl_clock_step_unresolved",
        "tablectl_clock_steps_total",
        # the witnesses outside the casino (issue 30)
        "tablectl_witness_behind_checkpoints",
        "tablectl_witness_behind_seconds",
        "tablectl_witness_cosigned_size",
        "tablectl_witness_refused",
        "tablectl_witness_errors_total",
    }
)
HISTOGRAMS = frozenset({"tablectl_event_processing_seconds", "tablectl_journal_write_seconds"})
ALLOWED_SERIES = (
    KNOWN_METRICS
    | {f"{name}{suffix}" for name in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")}
    | {"up", "process_start_time_seconds"}  # Prometheus's own; prometheus-client's process
)


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(what: str) -> None:
    """Skip on a developer's machine; fail under CI, where everything must be present."""
    if under_ci():
        pytest.fail(f"{what} (CI=true: tests/tools/install-system-tools.sh must provide it)")
    pytest.skip(what)


def require_tool(name: str) -> str:
    """The absolute path of a command, or skip/fail as described above."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed")
        raise AssertionError("unreachable")  # missing() raises
    return path


def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a tool, capturing text output; never raises on a non-zero exit."""
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=120, cwd=cwd)


_PROMQL_WORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless"}
    | {"offset", "bool", "inf", "nan"}
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (strings, label matchers,
    grouping clauses, durations and function names removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?(?:ms|[smhdwy])?\b", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        after = text[match.end() :].lstrip()
        if word.lower() in _PROMQL_WORDS or after.startswith("("):
            continue
        names.add(word)
    return names
