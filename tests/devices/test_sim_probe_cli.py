"""`tablectl sim` and `tablectl probe` as processes, over a real pty."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tablectl.controller.commands import cli

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def start_sim(*args: str) -> tuple[subprocess.Popen[str], dict]:
    proc = subprocess.Popen(
        [*TABLECTL, "sim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"sim printed nothing: {proc.stderr.read() if proc.stderr else ''}"
    return proc, json.loads(line)


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=10)


@pytest.fixture
def shoe_sim() -> Iterator[dict]:
    proc, hello = start_sim("shoe", "--seed", "3")
    try:
        yield hello
    finally:
        assert stop(proc) == 0


def test_sim_prints_its_pty_and_probe_reads_the_identity(shoe_sim, capsys):
    assert shoe_sim["kind"] == "shoe" and shoe_sim["port"].startswith("/dev/pts/")
    assert cli.main(["probe", "shoe", "--port", shoe_sim["port"]]) == 0
    identity = json.loads(capsys.readouterr().out)
    assert identity["kind"] == "shoe"
    assert identity["serial"] == "SIM-SHOE-0003"
    assert set(identity) == {"kind", "model", "serial", "firmware", "firmware_sha256"}
    assert len(identity["firmware_sha256"]) == 64


def test_probing_twice_opens_two_sessions(shoe_sim, capsys):
    for _ in range(2):
        assert cli.main(["probe", "shoe", "--port", shoe_sim["port"]]) == 0
        assert json.loads(capsys.readouterr().out)["serial"] == "SIM-SHOE-0003"


def test_probe_as_a_process(shoe_sim):
    done = subprocess.run(
        [*TABLECTL, "probe", "shoe", "--port", shoe_sim["port"]],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == "SIM-SHOE 8"


def test_probe_refuses_the_wrong_kind(shoe_sim, capsys):
    assert cli.main(["probe", "shuffler", "--port", shoe_sim["port"], "--timeout", "1"]) == 1
    assert "device is a shoe, expected a shuffler" in capsys.readouterr().err


def test_probe_exits_1_when_nothing_answers(capsys):
    master, slave = os.openpty()
    try:
        path = os.ttyname(slave)
        started = time.monotonic()
        assert cli.main(["probe", "shoe", "--port", path, "--timeout", "0.5"]) == 1
        assert time.monotonic() - started < 5
        assert f"no shoe answered on {path} within 0.5s" in capsys.readouterr().err
    finally:
        os.close(master)
        os.close(slave)


def test_probe_names_a_missing_port(capsys):
    assert cli.main(["probe", "shoe", "--port", "/dev/nonexistent-tty", "--timeout", "0.3"]) == 1
    err = capsys.readouterr().err
    assert "no shoe answered on /dev/nonexistent-tty" in err
    assert "No such file or directory" in err


def test_sim_over_usb_prints_the_reference_ids():
    proc, hello = start_sim("hole_card_reader", "--transport", "usb", "--seed", "9")
    try:
        assert hello == {
            "kind": "hole_card_reader",
            "port": {
                "vendor_id": "0x1209",
                "product_id": "0x7a03",
                "serial": "SIM-HOLE_CARD_READER-0009",
            },
        }
    finally:
        assert stop(proc) == 0


def test_sim_refuses_a_bad_scenario_naming_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"at": 0, "step": "draw"}\n{"at": 1, "step": "explode"}\n')
    done = subprocess.run(
        [*TABLECTL, "sim", "shoe", "--scenario", str(bad)],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2
    assert f"{bad}:2: unknown step 'explode' for shoe" in done.stderr


def test_sim_runs_a_scenario_that_pulls_the_cable(tmp_path, capsys):
    scenario = tmp_path / "unplug.jsonl"
    scenario.write_text('{"at": 0.0, "step": "disconnect"}\n')
    proc, hello = start_sim("discard_rack", "--scenario", str(scenario))
    try:
        time.sleep(0.3)
        assert cli.main(["probe", "discard_rack", "--port", hello["port"], "--timeout", "0.5"]) == 1
        # Like a real unplug, the freed pty number may be taken at once by another process's
        # pty (another simulator): what matters is that the rack no longer answers there.
        err = capsys.readouterr().err
        assert "no discard_rack answered" in err or "expected a discard_rack" in err, err
    finally:
        assert stop(proc) == 0


def test_sim_announces_the_new_pty_after_a_scenario_replug(tmp_path, capsys):
    scenario = tmp_path / "replug.jsonl"
    scenario.write_text('{"at": 0.1, "step": "disconnect"}\n{"at": 0.2, "step": "reconnect"}\n')
    proc, first = start_sim("shuffler", "--seed", "4", "--scenario", str(scenario))
    try:
        assert proc.stdout is not None
        again = json.loads(proc.stdout.readline())
        assert again["kind"] == "shuffler" and again["replugged"] is True
        assert "replugged" not in first
        assert cli.main(["probe", "shuffler", "--port", again["port"]]) == 0
        assert json.loads(capsys.readouterr().out)["serial"] == "SIM-SHUFFLER-0004"
    finally:
        assert stop(proc) == 0
