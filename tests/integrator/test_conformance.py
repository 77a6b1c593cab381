"""The conformance kit passes the reference drivers and the example vendor driver, and fails
a broken driver with the rows that say what is broken (tablectl conformance, pytest plugin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tablectl.simulators.conformance import conformance
from tablectl.simulators.conformance.kit import FAIL, PASS, event_problems

# Every check of the kit against every reference driver and the example, each over ptys and
# a real cable pull: about a minute (make test-long; CI runs it).
pytestmark = pytest.mark.long

BROKEN = "tests.integrator.broken_driver:CardLeakingShoe"
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def rows(report):
    return {row.check: row for row in report.rows}


@pytest.mark.parametrize("kind", ["shuffler", "shoe", "hole_card_reader", "discard_rack"])
def test_every_reference_driver_passes(kind):
    report = conformance(kind, "reference")
    assert report.passed, report.markdown()
    checks = rows(report)
    for check in (
        "identity at handshake",
        "allow-list refusal",
        "garbage input",
        "truncated input",
        "response time",
        "unplug and replug",
        "every event's fields",
        "no card in any log line",
    ):
        assert checks[check].result == PASS, report.markdown()
    assert report.identity is not None and report.identity["kind"] == kind


def test_the_example_vendor_shoe_passes():
    report = conformance("shoe", "acme-cs9")
    assert report.passed, report.markdown()
    assert report.identity["model"] == "ACME CS-9"
    assert "9600 8E1" in report.device
    assert {r.check for r in report.rows} >= {"event: card_drawn", "fault: shoe_fault jam"}


def test_a_broken_driver_fails_with_a_clear_row_for_each_fault():
    report = conformance("shoe", BROKEN, simulator="reference")
    assert not report.passed
    failed = {row.check: row.detail for row in report.failed()}
    assert set(failed) == {"no card in any log line", "fault: shoe_fault jam"}, report.markdown()
    assert "name a card (rule H7): card_read" in failed["no card in any log line"]
    assert "no shoe_fault within" in failed["fault: shoe_fault jam"]
    table = report.markdown()
    assert "| no card in any log line | FAIL |" in table
    assert "result: **FAIL** (14 passed, 2 failed, 0 skipped)" in table


def test_the_cli_prints_the_table_and_exits_1_on_a_failure(tmp_path):
    out = tmp_path / "report.json"
    broken = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "conformance", "shoe", "--driver", BROKEN,
         "--simulator", "reference", "--format", "json", "--output", str(out)],
        capture_output=True, text=True, env=ENV, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert broken.returncode == 1, broken.stderr
    report = json.loads(out.read_text())
    assert report["passed"] is False
    assert [r["check"] for r in report["rows"] if r["result"] == FAIL] == [
        "fault: shoe_fault jam",
        "no card in any log line",
    ]
    good = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "conformance", "discard_rack",
         "--driver", "reference"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert good.returncode == 0, good.stdout + good.stderr
    # a rack reports its faults too (rack_fault, issue 24): the kit checks it like the others'
    assert "| fault: rack_fault | PASS |" in good.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "conformance", "shoe", "--driver", "nope"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "no shoe driver named 'nope'" in missing.stderr


def test_the_pytest_plugin_runs_the_kit_and_writes_the_report(tmp_path):
    """The example's own test (what a vendor writes) passes; the broken driver's fails."""
    shutil.copy(ROOT / "examples" / "vendor-shoe" / "tests" / "test_conformance.py", tmp_path)
    (tmp_path / "test_broken.py").write_text(
        textwrap.dedent(
            f"""
            def test_broken(tablectl_conformance):
                report = tablectl_conformance("shoe", "{BROKEN}", simulator="reference")
                assert report.passed, report.markdown()
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path),
         "--tablectl-conformance-report", str(tmp_path / "reports")],
        capture_output=True, text=True, env=ENV, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert "FAILED test_broken.py::test_broken" in result.stdout
    assert "tablectl conformance: shoe acme-cs9" in result.stdout
    assert "| no card in any log line | FAIL |" in result.stdout
    assert (tmp_path / "reports" / "shoe-acme-cs9.md").read_text().count("| PASS |") == 16


def test_the_event_contract_names_what_is_wrong():
    ok = {"type": "card_drawn", "card": "As", "face_up": False, "device": "s", "kind": "shoe"}
    assert event_problems("shoe", ok) == []
    assert event_problems("shoe", {**ok, "card": "A♠"}) == [
        "card_drawn: field 'card' has a value of the wrong form"
    ]
    assert event_problems("shoe", {**ok, "extra": 1}) == [
        "card_drawn: field 'extra' is not in the event's contract"
    ]
    assert event_problems("shoe", {**ok, "type": "reader_result"}) == [
        "'reader_result' is not an event of a shoe"
    ]


def test_the_kits_contract_is_the_event_languages_own():
    """What the engine takes passes the kit: a documented optional field, an absent default;
    what it refuses fails it; a driver's own cards come canonical."""
    drawn = {"type": "card_drawn", "card": "As", "device": "s", "kind": "shoe"}
    assert event_problems("shoe", drawn) == []  # face_up may be left out (false)
    assert event_problems("shoe", {**drawn, "deck": "B"}) == []  # the back colour (C8)
    assert event_problems("shoe", {**drawn, "card": "10h"}) == [
        "card_drawn: field 'card' has a value of the wrong form"
    ]
    loaded = {"type": "shoe_loaded", "deck": "Z", "device": "s", "kind": "shoe"}
    assert event_problems("shoe", loaded) == [
        "shoe_loaded: field 'deck' has a value of the wrong form"
    ]
    rack = {"type": "rack_level", "cards": 3, "device": "r", "kind": "discard_rack"}
    assert event_problems("discard_rack", rack) == []
    fault = {"type": "rack_fault", "fault": "undecodable_frame", "device": "r"}
    assert event_problems("discard_rack", {**fault, "kind": "discard_rack"}) == []
    # another kind's fault is not a rack's
    shoe_fault = {**fault, "type": "shoe_fault", "kind": "discard_rack"}
    assert event_problems("discard_rack", shoe_fault) == [
        "'shoe_fault' is not an event of a discard_rack"
    ]


def test_a_device_on_a_port_is_checked_through_the_relay_without_its_hands():
    """--port: the kit relays the device (here a simulator in another process, on its own
    pty) and runs every check that needs no hands at the device; the others are skipped."""
    sim = subprocess.Popen(
        [sys.executable, "-m", "tablectl.controller", "sim", "shoe", "--driver", "acme-cs9"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        port = json.loads(sim.stdout.readline())["port"]
        run = subprocess.run(
            [sys.executable, "-m", "tablectl.controller", "conformance", "shoe", "--driver",
             "acme-cs9", "--port", port, "--format", "json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    results = {row["check"]: row["result"] for row in report["rows"]}
    assert results["event: card_drawn"] == "SKIP"
    assert results["unplug and replug"] == results["truncated input"] == PASS
    assert report["identity"]["model"] == "ACME CS-9"
