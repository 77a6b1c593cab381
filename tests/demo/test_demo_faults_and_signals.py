"""`tablectl demo --faults`: each injected fault yields its decision; SIGTERM and Ctrl-C end a
run cleanly (exit 0, the journal closed and intact); a busy metrics port is said clearly."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from demo_helpers import (
    CARD_TOKEN,
    decisions,
    demo_command,
    events,
    journal_rows,
    line_decisions,
    line_faults,
    run_demo,
    summary_lines,
    verify_journal,
)

from tablectl.simulators.autodealer import ILLEGAL_IN_A_LEGAL_ROUND, expected_decision

CASES = [
    ("three_card_21", "shuffler_jam"),
    ("three_card_21", "face_up_card"),
    ("three_card_21", "reader_fault"),
    ("three_card_21", "reader_misuse"),
    ("three_card_21", "unplug_rack"),
    ("three_card_21", "unplug_shoe"),
    ("five_card_hilo", "face_up_card"),
    ("heads_up_holdem", "ads_jam"),
    ("heads_up_holdem", "unplug_shoe"),
    ("asia_poker", "shuffler_jam"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("game", "fault"), CASES)
def test_each_injected_fault_draws_its_decision(game: str, fault: str, tmp_path: Path) -> None:
    result = run_demo(
        tmp_path,
        *("--game", game, "--rounds", "2", "--seed", "7"),
        *("--faults", "1", "--fault-kind", fault),
    )
    assert result.returncode == 0, result.stderr
    lines = summary_lines(result.stdout)
    assert len(lines) == 2
    injected = [line for line in lines if fault in line_faults(line)]
    assert injected, f"{fault} was never injected: {result.stdout}"
    dealing = "automated_shoe" if game == "heads_up_holdem" else "manual_shoe"
    expected = expected_decision(fault, dealing)
    for line in injected:
        assert not CARD_TOKEN.search(line), line
        if expected is not None:
            decision, rule_id = expected
            assert f"{rule_id}:{decision}" in line_decisions(line), line
    rows = journal_rows(tmp_path / "journal.sqlite")
    assert verify_journal(tmp_path / "journal.sqlite").returncode == 0
    if fault.startswith("unplug_"):
        device = fault.removeprefix("unplug_")
        assert all(f"devices {device}:lost,{device}:up" in line for line in injected), injected
        assert any(e["device"] == device for e in events(rows, "device_lost"))
        # plugged back: the device handshook again (once at start, once after the replug)
        assert sum(e["device"] == device for e in events(rows, "device_connected")) >= 2
    if expected is not None and expected[0] == "notify_supervisor":
        assert events(rows, "supervisor_ack"), "the supervisor never acknowledged"
    # a void, removal or violation only ever follows the injected fault
    unexpected = [
        d
        for d in decisions(rows)
        if d.get("decision") in ILLEGAL_IN_A_LEGAL_ROUND
        and (d["decision"], d["rule_id"]) != expected
    ]
    assert unexpected == [], unexpected


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        demo_command(tmp_path, "--seed", "3", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until_round(process: subprocess.Popen[str], timeout: float = 30) -> list[str]:
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if line.startswith("round "):
            return seen
    process.kill()
    raise AssertionError(f"no round played: {seen}")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_run_ends_cleanly(signum: int, tmp_path: Path) -> None:
    process = _start(tmp_path, "--game", "heads_up_holdem")
    seen = _read_until_round(process)
    metrics_url = next(
        re.search(r"(http://\S+/metrics)", line).group(1)  # type: ignore[union-attr]
        for line in seen
        if line.startswith("metrics on ")
    )
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        exposition = response.read().decode()
    count = re.search(r"^tablectl_event_processing_seconds_count (\S+)$", exposition, re.M)
    assert count and float(count.group(1)) > 0
    assert 'tablectl_rounds_total{game="heads_up_holdem",outcome="completed"}' in exposition
    process.send_signal(signum)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "stopped after" in out
    verified = verify_journal(tmp_path / "journal.sqlite")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.slow
def test_a_busy_metrics_port_is_said_clearly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_demo(
            tmp_path, "--rounds", "1", "--metrics-listen", f"127.0.0.1:{port}", timeout=30
        )
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr and "busy" in result.stderr
    assert "--metrics-listen" in result.stderr


def test_bad_options_are_refused_with_the_reason(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--rounds", "0", timeout=30)
    assert result.returncode == 2 and "--rounds" in result.stderr and "at least 1" in result.stderr
    result = run_demo(tmp_path, "--faults", "2", timeout=30)
    assert result.returncode == 2 and "between 0 and 1" in result.stderr
