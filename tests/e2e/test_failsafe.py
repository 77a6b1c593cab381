"""Fail safe (issue 9) through the daemon as a process on simulated hardware.

One daemon per table (the lock, exclusive serial ports, a live socket never taken over); the
record failing on a real full filesystem (dealing stops, devices locked, alarm, metric,
STATUS=, non-zero exit; the restart agrees with the journal); refused starts through both
check-config and run; bounded stops; an undecodable card frame; a device unplugged mid-round.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.service.operator_client import request
from tablectl.drivers.protocol.messages import Msg
from tests.e2e.conftest import ROOT, Table, tablectl
from tests.e2e.tables import table_toml
from tests.e2e.test_daemon_faults import Subscriber
from tests.tools.smallfs import fill, small_filesystem


def run_command(*args: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    started = time.monotonic()
    result = subprocess.run(
        [*tablectl(*args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return result, time.monotonic() - started


def wait_log(table: Table, text: str, count: int = 1, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while table.log().count(text) < count:
        assert time.monotonic() < deadline, table.log()
        time.sleep(0.02)


def shoe_locked(table: Table, locked: bool, timeout: float = 5.0) -> None:
    """Wait until the simulated shoe is (un)locked: the command goes out asynchronously."""
    deadline = time.monotonic() + timeout
    while table.sim("get", "shoe", attr="locked") is not locked:
        assert time.monotonic() < deadline, f"the shoe's lock is not {locked}"
        time.sleep(0.05)


def card_free(text: str, cards: list[str]) -> None:
    for card in cards:
        assert f"'{card}'" not in text and f'"{card}"' not in text, card
        # as hex, standalone (a hash in the log may hold the same digits inside it)
        assert not re.search(rf"(?<![0-9a-f]){card.encode().hex()}(?![0-9a-f])", text), card


# -- one daemon per table ---------------------------------------------------------------------


def test_a_second_daemon_on_the_table_exits_2_at_once_and_the_first_keeps_serving(
    make_table: Any,
) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    assert table.daemon is not None
    holder = table.daemon.pid
    table.until(lambda s: set(s["devices"].values()) == {"up"}, what="devices up")
    time.sleep(0.5)  # the devices' first status reports, journaled as notes
    rows_before = [(r.seq, r.hash) for r in table.rows()]
    second, seconds = run_command("run", "--config", str(table.config_path), "--log-format", "json")
    assert second.returncode == 2, second.stderr
    assert seconds < 2.0, seconds  # measured ~0.3 s: it stops before the daemon's imports
    assert f"{table.journal}.lock" in second.stderr and f"PID {holder}" in second.stderr
    # check-config beside the running table: its port and socket are its own, not problems
    checked, _ = run_command("check-config", str(table.config_path))
    assert checked.returncode == 0, checked.stderr
    assert f"this table is running (PID {holder} holds" in checked.stderr
    # the first: its journal, socket, ports untouched; it still answers and decides
    assert [(r.seq, r.hash) for r in table.rows()] == rows_before
    assert table.socket_path.is_socket()
    assert set(table.status()["devices"].values()) == {"up"}
    assert table.op("dealer_changed") == []
    assert table.stop() == 0


def test_a_copied_configuration_never_takes_the_socket_or_the_serial_ports(
    make_table: Any, tmp_path: Path
) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    # another journal, same operator socket: refused by the preflight, the socket untouched
    text = table.config_path.read_text()
    copy = tmp_path / "copy.toml"
    # (its metrics port is the kernel's: 127.0.0.1:0 in the configuration)
    copy.write_text(text.replace(str(table.journal), str(tmp_path / "journal.sqlite")))
    result, _ = run_command("run", "--config", str(copy))
    assert result.returncode == 2
    assert f"{table.socket_path}: another process accepts connections on it" in result.stderr
    assert not (tmp_path / "journal.sqlite").exists()
    assert table.status()["table"] == "e2e"  # the first still answers on its socket
    # its own journal and socket, the same serial ports: they are opened exclusively, so the
    # copy never talks to the first daemon's devices
    copy.write_text(copy.read_text().replace(str(table.socket_path), str(tmp_path / "copy.sock")))
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    with open(tmp_path / "copy.log", "wb") as log:
        intruder = subprocess.Popen(
            [*tablectl("run", "--config", str(copy)), "--log-format", "json", "--device-wait", "1"],
            cwd=ROOT,
            env=env,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 15
        while '"ready"' not in (tmp_path / "copy.log").read_text():
            assert time.monotonic() < deadline, (tmp_path / "copy.log").read_text()
            assert intruder.poll() is None, (tmp_path / "copy.log").read_text()
            time.sleep(0.05)
        copy_status = request(tmp_path / "copy.sock", {"type": "status"})["status"]
        assert set(copy_status["devices"].values()) == {"down"}
        assert "exclusive" in (tmp_path / "copy.log").read_text().lower()
        # the first still deals with its devices: each step waited for before the next (the
        # daemon acts on the devices asynchronously: a draw sent before the unlock is refused)
        table.sim("shuffle")
        table.until(lambda s: s["decks"]["A"]["state"] == "shuffled", 15, "deck A shuffled")
        table.sim("to_shoe")
        table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 52, 15, "deck A in the shoe")
        table.op("bets_closed", positions=[1])
        shoe_locked(table, False, timeout=15)
        table.sim("call", "shoe", method="draw")
        table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 51, 15, "a card drawn")
        assert set(table.status()["devices"].values()) == {"up"}
    finally:
        intruder.send_signal(signal.SIGTERM)
        assert intruder.wait(10) == 0
    assert table.stop() == 0


def test_kill_9_leaves_no_lock_behind(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    table.kill9()
    lock = Path(f"{table.journal}.lock")
    assert lock.exists()  # the file stays; the kernel's lock went with the process
    table.start()
    assert set(table.status()["devices"].values()) == {"up"}
    assert table.stop() == 0


# -- refused starts: check-config and run find the same problems, all at once -----------------


def _config(tmp_path: Path, **overrides: Any) -> Path:
    devices = {
        "shoe": {
            "kind": "shoe",
            "port": str(tmp_path / "no-such-port"),
            "serial": "S1",
            "firmware_sha256": "0" * 64,
        }
    }
    text = table_toml(
        "heads_up_holdem",
        tmp_path,
        devices,
        metrics_port=overrides.get("port", 0),
        group=overrides.get("group", "root"),
    )
    if "driver" in overrides:
        text = text.replace('driver = "reference"', f'driver = "{overrides["driver"]}"')
    if "journal" in overrides:
        text = text.replace(str(tmp_path / "journal.sqlite"), str(overrides["journal"]))
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def _refused_by_both(config: Path, *expected: str) -> None:
    checked, _ = run_command("check-config", str(config))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    started, seconds = run_command("run", "--config", str(config), "--log-format", "json")
    assert started.returncode == 2, started.stderr
    assert seconds < 5.0, seconds
    for message in expected:
        assert message in checked.stderr, (message, checked.stderr)
        assert message in started.stderr, (message, started.stderr)
    # the same problems, the same words
    problems = [line for line in checked.stderr.splitlines() if line.startswith(str(config))]
    for line in problems[:-1]:
        assert line in started.stderr, line


def test_each_refused_start_is_found_by_check_config_and_refused_by_run(tmp_path: Path) -> None:
    # a missing group
    config = _config(tmp_path, group="tablectl-no-such-group")
    _refused_by_both(config, "operator.group: group 'tablectl-no-such-group' does not exist")
    assert not (tmp_path / "journal.sqlite").exists()
    assert not (tmp_path / "operator.sock").exists()
    # a missing supervisor group: refused before the journal is opened, not after the replay
    config = _config(tmp_path)
    config.write_text(
        config.read_text().replace(
            'supervisor_group = "root"', 'supervisor_group = "tablectl-no-such-sup"'
        )
    )
    _refused_by_both(
        config, "operator.supervisor_group: group 'tablectl-no-such-sup' does not exist"
    )
    assert not (tmp_path / "journal.sqlite").exists()
    # a busy metrics port
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = _config(tmp_path, port=port)
        _refused_by_both(config, f"metrics.listen: cannot bind 127.0.0.1:{port}")
    # a driver nobody registered
    _refused_by_both(_config(tmp_path, driver="acme"), "devices.shoe.driver:")
    # a journal directory that cannot be created (a file is in the way)
    (tmp_path / "a-file").write_text("")
    _refused_by_both(
        _config(tmp_path, journal=tmp_path / "a-file" / "journal.sqlite"),
        "journal.path:",
    )
    # all of them at once: every problem reported in one pass
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = _config(tmp_path, port=port, group="tablectl-no-such-group", driver="acme")
        _refused_by_both(
            config,
            "operator.group:",
            f"metrics.listen: cannot bind 127.0.0.1:{port}",
            "devices.shoe.driver:",
            "warning: ",  # the absent serial port: a warning, not a refusal
        )
    assert not (tmp_path / "journal.sqlite").exists()


def test_a_start_with_little_free_space_is_refused_and_fills_nothing(tmp_path: Path) -> None:
    with small_filesystem(48) as mount:  # below the 64 MiB the journal needs to start
        config = _config(tmp_path, journal=mount / "journal.sqlite")
        _refused_by_both(config, "journal.path: only", "MiB free under")
        # nothing prepared: no journal, no -wal; at most run's lock file
        assert {p.name for p in mount.iterdir()} <= {"journal.sqlite.lock"}


def test_sigterm_ends_a_start_in_a_device_handshake_within_2_s(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.sim("wire", "shoe", method="slow", args=[30])  # the shoe answers HELLO 30 s late
    env = {**os.environ, "NOTIFY_SOCKET": str(table.notify_path)}
    for attempt in range(3):
        with open(table.stderr_path, "ab") as stderr:
            daemon = subprocess.Popen(
                [*tablectl("run", "--config", str(table.config_path)), "--log-format", "json"],
                cwd=ROOT,
                env=env,
                stderr=stderr,
            )
        wait_log(table, '"operator_listening"', count=attempt + 1)
        # started: its shoe driver waits for the handshake answer (STATUS= says so)
        deadline = time.monotonic() + 15
        while not any("waiting for" in n and "shoe" in n for n in table.drain_notices()):
            assert time.monotonic() < deadline and daemon.poll() is None, table.log()
            time.sleep(0.02)
        daemon.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert daemon.wait(10) == 0
        assert time.monotonic() - sent < 2.0, table.log()


# -- the record fails: a real full filesystem mid-round ---------------------------------------


@pytest.mark.long  # make test stays under 10 minutes
def test_a_full_disk_mid_round_stops_dealing_and_the_restart_agrees(make_table: Any) -> None:
    table: Table = make_table("heads_up_holdem")
    with small_filesystem(80) as mount:
        journal = mount / "journal.sqlite"
        table.config_path.write_text(
            table.config_path.read_text().replace(str(table.journal), str(journal))
        )
        table.journal = journal
        table.start("--fail-stop-linger", "3")
        subscriber = Subscriber(table)
        table.sim("shuffle")
        table.sim("to_shoe")
        table.op("bets_closed", positions=[1, 2])
        table.sim("call", "shoe", method="draw")
        table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 51, what="a card drawn")
        assert table.metric("tablectl_journal_free_bytes") > 0
        assert table.metric("tablectl_journal_size_bytes") > 0
        assert table.metric("tablectl_journal_bytes_per_round") > 0  # measured at round 1
        assert '"journal_space_low"' in table.log()  # 80 MiB is under the 512 MiB warning
        filler = fill(mount)  # the disk is full now
        acknowledged = 0
        refused: dict[str, Any] | None = None
        for _ in range(5000):  # SQLite writes into its preallocated -wal until it must grow
            reply = request(table.socket_path, {"type": "dealer_changed"})
            if reply.get("reply") != "decisions":
                refused = reply
                break
            acknowledged += 1
        assert refused is not None and "dealing stopped" in refused["error"], refused
        alarm = subscriber.until(lambda m: m.get("alarm") == "dealing_stopped")
        assert "journal write failed" in alarm["reason"]
        status = table.status()
        assert status["dealing"] == "stopped"
        assert "journal write failed" in status["dealing_stopped"]["reason"]
        assert "journal_write_failed" in status["interlocks"]["shoe_locked"]
        shoe_locked(table, True)  # told with a command that needs no journal
        assert table.metric("tablectl_journal_write_errors_total") == 1
        assert table.metric("tablectl_dealing_stopped", reason="journal_write_failed") == 1
        table.wait_notice(lambda n: "STATUS=STOPPED DEALING" in n)
        # a card drawn now is refused by the locked shoe itself
        assert table.sim("call", "shoe", method="draw") is None
        assert table.daemon is not None
        assert table.daemon.wait(10) == 3  # after the linger: systemd restarts it
        table.daemon = None
        subscriber.close()
        # restarted while the disk is still full: refused with a clear message, exit 2
        result, seconds = run_command("run", "--config", str(table.config_path))
        assert result.returncode == 2 and "MiB free under" in result.stderr, result.stderr
        assert seconds < 5.0
        # space comes back: the restart replays the journal; nothing acknowledged is lost
        filler.unlink()
        table.start()
        assert verify_journal(journal).ok
        rows = list(read_rows(journal))
        assert sum(1 for r in rows if r.body.get("type") == "dealer_changed") == acknowledged
        # the journal and the devices agree: the replay voids the round left open (X1), a
        # journaled decision, so the shoe is locked for it (and for nothing the journal lacks)
        restarted = max(r.seq for r in rows if r.body.get("type") == "controller_restarted")
        decided = [r.body["decision"] for r in rows if r.kind == "decision" and r.seq > restarted]
        assert "void_round" in decided, decided
        status = table.status()
        assert status["dealing"] == "allowed"
        assert status["interlocks"]["shoe_locked"] == ["round_void"]
        shoe_locked(table, True)
        assert table.stop() == 0


# -- device faults are never silent -----------------------------------------------------------


@pytest.mark.long  # make test stays under 10 minutes
def test_an_undecodable_card_frame_voids_the_round_alarms_and_logs_no_card(
    make_table: Any,
) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    subscriber = Subscriber(table)
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    spelled = ["AH", "kd", "jk", "Ts", "10"]
    for card in spelled:  # "Ts" is fine: it is not sent; the others are malformed
        if card == "Ts":
            continue
        table.sim("frame", "shoe", msg=int(Msg.CARD_DRAWN), hex=(card.encode() + b"\x00").hex())
    alarm = subscriber.until(lambda m: m.get("alarm") == "device_fault")
    assert alarm["device"] == "shoe" and alarm["fault"] == "undecodable_frame"
    # repeats of the same cause are coalesced: one summary with the count follows
    summary = subscriber.until(lambda m: m.get("alarm") == "repeated")
    assert summary["of"] == "device_fault" and summary["count"] == 3
    status = table.until(
        lambda s: "round_void" in s["interlocks"]["shoe_locked"], what="the shoe held"
    )
    assert status["device_faults"].get("shoe") == "undecodable_frame"
    shoe_locked(table, True)
    # X2: the engine's decisions, journaled with their rule, hold the shoe (the first frame
    # voids the round; the repeats in the void round decide nothing more)
    decided = [
        (r.body["decision"], r.body["rule_id"]) for r in table.rows() if r.kind == "decision"
    ]
    assert decided.count(("void_round", "X2")) == 1, decided
    assert ("reshuffle", "X2") in decided, decided
    faults = [
        e for e in table.events() if e["type"] == "shoe_fault" and e["fault"] == "undecodable_frame"
    ]
    assert len(faults) == 4
    assert table.metric("tablectl_device_faults_total", fault="undecodable_frame") == 4
    subscriber.close()
    assert table.stop() == 0
    log = table.log()
    assert "bad_payload" in log
    card_free(log, ["AH", "kd", "jk", "10"])


def test_a_device_unplugged_mid_round_alarms_at_once(make_table: Any) -> None:
    table = make_table("heads_up_holdem")
    table.start()
    subscriber = Subscriber(table)
    table.sim("shuffle")
    table.sim("to_shoe")
    table.op("bets_closed", positions=[1])
    table.sim("call", "shoe", method="draw")
    table.until(lambda s: s["decks"]["A"]["cards_in_shoe"] == 51, what="a card drawn")
    unplugged = time.monotonic()
    table.sim("unplug", "shoe")
    alarm = subscriber.until(lambda m: m.get("alarm") == "device_lost")
    assert time.monotonic() - unplugged < 2.0
    assert alarm["device"] == "shoe"
    assert table.status()["devices"]["shoe"] == "down"
    subscriber.close()
    assert table.stop() == 0


def test_a_second_demo_on_a_state_dir_is_refused_before_touching_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    demo = [*tablectl("demo", "--state-dir", str(tmp_path), "--metrics-listen", "127.0.0.1:0")]
    first = subprocess.Popen(
        [*demo, "--seed", "1"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None
        deadline = time.monotonic() + 20
        while "ready in" not in first.stdout.readline():
            assert time.monotonic() < deadline and first.poll() is None
        links = sorted(p.name for p in (tmp_path / "dev").iterdir())
        targets = {p.name: os.readlink(p) for p in (tmp_path / "dev").iterdir()}
        # refused at once, not after waiting for the lock or its devices: within a few
        # seconds of what a command that does nothing takes on this machine now
        _, nothing = run_command("--version")
        second, seconds = run_command(
            "demo", "--state-dir", str(tmp_path), "--rounds", "1", "--metrics-listen", "127.0.0.1:0"
        )
        assert second.returncode == 2, second.stderr
        assert f"already run by PID {first.pid}" in second.stderr
        assert seconds < 2 * nothing + 5.0, (seconds, nothing)
        # the first's device links are as they were, and it keeps dealing
        assert {p.name: os.readlink(p) for p in (tmp_path / "dev").iterdir()} == targets
        assert links
        before = sum(1 for r in read_rows(tmp_path / "journal.sqlite"))
        time.sleep(1.0)
        assert sum(1 for r in read_rows(tmp_path / "journal.sqlite")) > before
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(20) == 0
