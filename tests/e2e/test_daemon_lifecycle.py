"""The daemon's life as systemd sees it: READY/STATUS/WATCHDOG, kill -9 and restart, a device
pulled mid-shuffle, an absent device, a garbled file, a stranger, the live metrics endpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, tablectl


def test_notify_ready_status_watchdog_and_stopping(make_table: Any) -> None:
    table = make_table("heads_up_holdem", WATCHDOG_USEC="200000")
    table.start()
    ready = next(n for n in table.notices if "READY=1" in n)
    assert f"MAINPID={table.daemon.pid}" in ready
    assert "STATUS=round 0 idle; all devices up" in ready
    # WATCHDOG=1 from the event loop, at half the interval
    table.wait_notice(lambda n: n == "WATCHDOG=1", 1.0)
    table.wait_notice(lambda n: n == "WATCHDOG=1", 1.0)
    # STATUS follows the round's state
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    table.wait_notice(lambda n: n.startswith("STATUS=round 1"), 2.0)
    # `tablectl op` and `tablectl status` against the running daemon; no face-down card shown
    hole = [table.sim("call", "shoe", method="draw") for _ in range(2)]
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 50)
    op = subprocess.run(
        tablectl("op", "--socket", str(table.socket_path), "dealer_changed"),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert op.returncode == 0 and "dealer_changed: accepted" in op.stdout, op.stderr
    shown = subprocess.run(
        tablectl("status", "--socket", str(table.socket_path), "--json"),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr
    assert '"devices": {"shuffler": "up", "shoe": "up"}' in shown.stdout
    assert not any(f'"{card}"' in shown.stdout for card in hole)
    assert table.stop() == 0
    table.wait_notice(lambda n: "STOPPING=1" in n, 2.0)


def test_kill_9_mid_round_then_restart_voids_the_round_and_loses_nothing(
    make_table: Any,
) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1, 2])
    for _ in range(6):  # the board and a face-down card out
        table.sim("call", "shoe", method="draw")
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 46)
    before = table.rows()
    table.kill9()
    ready = table.start()
    assert ready < 10
    after = table.rows()
    # nothing journaled was lost or changed; the restart is journaled after it
    assert [(r.seq, r.hash) for r in after[: len(before)]] == [(r.seq, r.hash) for r in before]
    restarted = next(
        r
        for r in after[len(before) :]
        if r.kind == "event" and r.body["type"] == "controller_restarted"
    )
    decided = [r.body for r in after if r.kind == "decision" and r.seq > restarted.seq]
    assert ("void_round", "X1") in {(d["decision"], d["rule_id"]) for d in decided}
    status = table.status()
    assert status["round"] == 1 and status["state"] == "void"
    # the restarted daemon locked the shoe after the void, and the round can be closed
    table.until(lambda s: "round_void" in s["interlocks"]["shoe_locked"])
    table.op("hands_collected")
    assert table.metric("tablectl_rounds_total", game="heads_up_holdem", outcome="voided") == 1
    assert table.stop() == 0
    check = subprocess.run(
        tablectl("journal", "verify", str(table.journal)), cwd=ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_shuffler_unplugged_mid_shuffle_and_plugged_back(make_table: Any) -> None:
    table = make_table("heads_up_holdem", shuffle_seconds=2.0)
    table.start()
    table.sim("shuffle", wait=False)
    table.until(lambda s: s["decks"]["A"]["state"] == "shuffling")
    table.sim("unplug", "shuffler")
    status = table.until(lambda s: s["devices"]["shuffler"] == "down")
    assert status["decks"]["A"]["state"] in ("shuffle_failed", "needs_shuffle")
    lost = next(e for e in table.rows() if e.kind == "event" and e.body["type"] == "device_lost")
    decided = [r.body for r in table.rows() if r.kind == "decision" and r.seq > lost.seq]
    assert decided and all(d["rule_id"] == "C4" for d in decided), decided
    assert table.metric("tablectl_device_up", device="shuffler") == 0
    table.wait_notice(lambda n: "down: shuffler" in n, 2.0)
    table.sim("replug", "shuffler")
    table.until(lambda s: s["devices"]["shuffler"] == "up", timeout=5)
    assert table.metric("tablectl_device_up", device="shuffler") == 1
    events = [e["type"] for e in table.events() if e.get("device") == "shuffler"]
    assert events[-2:] == ["device_lost", "device_connected"] or "device_connected" in events[-3:]
    # the failed batch is shuffled again and dealing may go on
    table.sim("step", "shuffler", step="clear_fault")
    assert table.sim("shuffle") == "ready"
    table.until(lambda s: s["decks"]["A"]["state"] == "shuffled")
    assert table.stop() == 0


def test_a_device_absent_at_start_does_not_hold_ready_back(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.sim("unplug", "shoe")
    table.start("--device-wait", "0.5")
    # READY with the shoe down: the shoe stays unplugged until after READY, so READY came
    # from the wait's end, not from the shoe (held back for ever, table.start times out)
    ready = next(n for n in table.notices if "READY=1" in n)
    assert "down: shoe" in ready
    # before READY, systemd was told what the start waits for, and for how long
    waiting = [n for n in table.notices[: table.notices.index(ready)] if "waiting for" in n]
    assert waiting, table.notices
    assert "STATUS=waiting for shoe to handshake (at most" in waiting[-1]
    assert "shuffler" not in waiting[-1]  # up: no longer waited for
    assert re.search(r"EXTEND_TIMEOUT_USEC=\d{8}", waiting[-1]), waiting[-1]
    assert table.metric("tablectl_device_up", device="shoe") == 0
    assert table.metric("tablectl_device_up", device="shuffler") == 1
    table.sim("replug", "shoe")
    table.until(lambda s: s["devices"]["shoe"] == "up", timeout=5)
    assert table.stop() == 0


def test_garbled_configuration_is_a_clear_error_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[table]\nid = "t1"\ngame = "baccarat"\n[metrics]\nlisten = "nowhere"\n')
    result = subprocess.run(
        tablectl("run", "--config", str(bad)), cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert f"{bad}: table.game: 'baccarat' is not allowed" in result.stderr
    assert f"{bad}: metrics.listen:" in result.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("[table\nid = ")
    result = subprocess.run(
        tablectl("run", "--config", str(broken)), cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert f"{broken}: not valid TOML" in result.stderr
    missing = subprocess.run(
        tablectl("run", "--config", str(tmp_path / "absent.toml")), cwd=ROOT, capture_output=True
    )
    assert missing.returncode == 2


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="needs a python3 that nobody can run")
def test_a_stranger_on_the_operator_socket_is_refused(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    assert SYSTEM_PYTHON is not None

    def as_nobody() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                SYSTEM_PYTHON,
                "-m",
                "tablectl.controller",
                "op",
                "--socket",
                str(table.socket_path),
                "dealer_changed",
            ],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT / ".src"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
        )

    # the socket's mode (0660, group root) keeps nobody out ...
    result = as_nobody()
    assert result.returncode == 2 and "Permission denied" in result.stderr, result.stderr
    # ... and with the file lock open, the peer-credential check still refuses
    table.socket_path.chmod(0o666)
    result = as_nobody()
    assert result.returncode == 1, result.stderr
    assert "refused" in result.stderr and "not in the operator group 'root'" in result.stderr
    assert not any(e["type"] == "dealer_changed" for e in table.events())
    assert '"operator_refused"' in table.log()
    # root (the operator) is served
    assert table.op("dealer_changed") == []
    assert table.stop() == 0


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed")
def test_promtool_checks_the_live_metrics_endpoint(make_table: Any) -> None:
    table = make_table("five_card_hilo")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    table.sim("call", "shoe", method="dispense")
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 47)
    text = table.metrics()
    for name in (
        "tablectl_rounds_total",
        "tablectl_decisions_total",
        "tablectl_device_up",
        "tablectl_device_faults_total",
        "tablectl_rounds_since_stub_counted",
        "tablectl_event_processing_seconds_bucket",
        "tablectl_journal_write_seconds_bucket",
        "tablectl_build_info",
    ):
        assert name in text, name
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert table.stop() == 0


def test_kill_9_mid_round_of_three_card_21_resumes_the_round(make_table: Any) -> None:
    """X1: Three Card 21's cards are face up, so the engine lets the round resume."""
    table = make_table("three_card_21")
    table.start()
    table.op("reader_inspected")  # by: the socket's caller (root)
    table.sim("shuffle")
    table.sim("to_shoe")
    table.sim("call", "shoe", method="draw")  # G2: the burn card
    table.op("bets_closed", positions=[1])
    for _ in range(3):
        table.sim("call", "shoe", method="draw")
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 6 * 52 - 4)
    state = table.status()["state"]
    before = len(table.rows())
    table.kill9()
    table.start()
    restart_rows = table.rows()[before:]
    decided = [
        (r.body["decision"], r.body["rule_id"]) for r in restart_rows if r.kind == "decision"
    ]
    assert decided[0] == ("continue_play", "X1"), decided
    assert ("void_round", "X1") not in decided
    status = table.status()
    assert status["round"] == 1 and status["state"] == state
    assert status["interlocks"]["shoe_locked"] == []
    # the deal goes on where it stopped
    for _ in range(2):
        assert table.sim("call", "shoe", method="draw") is not None
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 6 * 52 - 6)
    assert "rejected" not in {d["decision"] for d in table.op("deal_completed")}
    assert table.stop() == 0


def test_a_busy_metrics_port_or_a_foreign_journal_fail_the_start_clearly(tmp_path: Path) -> None:
    import socket

    from tests.e2e.tables import table_toml

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    config = tmp_path / "t.toml"
    config.write_text(table_toml("heads_up_holdem", tmp_path, {}, metrics_port=port))
    result = subprocess.run(
        [*tablectl("run", "--config", str(config)), "--log-format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    busy.close()
    assert result.returncode == 2  # refused by the preflight, before the journal is opened
    assert f"{config}: metrics.listen: cannot bind 127.0.0.1:{port}" in result.stderr
    assert not (tmp_path / "journal.sqlite").exists()
    # a journal written for a heads_up_holdem table; the same path configured for another game
    from tablectl.controller.common.config import load_config
    from tablectl.controller.record.journal import Journal

    with Journal(tmp_path / "journal.sqlite") as journal:
        journal.append("table", load_config(config).table_dict(), durable=True)
    other = tmp_path / "other.toml"
    other.write_text(table_toml("asia_poker", tmp_path, {}, metrics_port=0))
    result = subprocess.run(
        [*tablectl("run", "--config", str(other)), "--log-format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "archive the journal and configure a new path" in result.stderr


def test_sighup_neither_ends_the_daemon_nor_applies_the_file_but_says_what_differs(
    make_table: Any,
) -> None:
    """SIGHUP would end the process (and systemd takes that for a clean exit: no restart)."""
    table = make_table("heads_up_holdem")
    table.start()
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    text = table.config_path.read_text()
    table.config_path.write_text(text.replace('log_level = "info"', 'log_level = "debug"'))
    assert text != table.config_path.read_text()
    table.daemon.send_signal(signal.SIGHUP)

    def said(kind: str) -> dict[str, Any]:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for line in table.log().splitlines():
                if kind in line:
                    return json.loads(line)
            time.sleep(0.05)
        raise AssertionError(f"no {kind} in the log: {table.log()[-2000:]}")

    first = said("signal_hup_ignored")
    assert first["changed"] == ["log_level"] and "restart" in first["reason"]
    assert table.daemon.poll() is None
    status = table.status()  # the round goes on where it was, with the running configuration
    assert status["state"] == "dealing" and status["round"] == 1
    # a file that would refuse the restart is named, still without effect
    table.config_path.write_text("[table]\nid = 7\n")
    table.daemon.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and table.log().count("signal_hup_ignored") < 2:
        time.sleep(0.05)
    second = json.loads(
        [line for line in table.log().splitlines() if "signal_hup_ignored" in line][-1]
    )
    assert any("table.id" in problem for problem in second["problems"]), second
    assert table.daemon.poll() is None
    assert table.stop() == 0
