"""A complete release: built, checked by twine, installed from the wheel into a fresh venv
outside the repository, and the example vendor's shoe configured and dealt from there."""

from __future__ import annotations

import grp
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tablectl.controller import __version__

from .conftest import ROOT

# A fresh venv, a build and an install: minutes, not seconds (make test-long; CI runs it).
pytestmark = [pytest.mark.slow, pytest.mark.long]

SHIPPED = (
    "config/three_card_21.toml",
    "config/five_card_hilo.toml",
    "config/heads_up_holdem.toml",
    "config/asia_poker.toml",
    "config/prometheus/alerts.yml",
    "config/grafana/tablectl.json",
    "systemd/tablectl@.service",
    "systemd/70-tablectl.rules",
    "systemd/tablectl.sysusers",
    "systemd/tablectl.tmpfiles",
    "docs/operations.md",
    "README.md",  # share/README.md: the documented place for files that ship
)


def test_build_and_twine_are_clean_without_deprecation_warnings(release):
    assert not re.search(r"deprecat|BuildBackendWarning", release.build_log, re.IGNORECASE), (
        release.build_log
    )
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(release.sdist),
         str(release.wheel)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2


def test_one_version_source_everywhere(release):
    assert release.wheel.name == f"tablectl-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(release.wheel) as wheel:
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(metadata).decode()
    assert f"\nVersion: {__version__}\n" in text
    assert "\nLicense-Expression: Apache-2.0\n" in text
    assert "\nLicense-File: LICENSE\n" in text
    assert "version" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = release.run("tablectl", "--version")
    assert installed.stdout.strip() == f"tablectl {__version__}"


def test_the_sdist_and_the_wheel_carry_the_shipped_files(release):
    with tarfile.open(release.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for path in ("LICENSE", "examples/vendor-shoe/pyproject.toml", "share/README.md"):
        assert path in names
    for path in SHIPPED:
        assert (f"share/{path}" if path == "README.md" else path) in names
    wheel = set(zipfile.ZipFile(release.wheel).namelist())
    for path in SHIPPED:
        assert f"tablectl/share/{path}" in wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel)


def test_installed_from_the_wheel_outside_the_repository(release):
    where = release.run("python", "-c", "import tablectl.controller as c; print(c.__file__)")
    assert str(release.venv) in where.stdout and str(ROOT) not in where.stdout, where
    for path in SHIPPED:
        head, _, rest = path.partition("/") if "/" in path else ("", "", path)
        located = release.run("tablectl", "example-config", "--path", head)
        assert located.returncode == 0, located.stderr
        assert located.stdout.startswith(str(release.venv)), located.stdout
        assert (Path(located.stdout.strip()) / rest).is_file(), path
    example = release.run("tablectl", "example-config", "five_card_hilo")
    assert example.returncode == 0
    assert example.stdout == (ROOT / "config" / "five_card_hilo.toml").read_text()
    (release.home / "hilo01.toml").write_text(example.stdout)
    checked = release.run("tablectl", "check-config", "--file-only", "hilo01.toml")
    assert checked.returncode == 0, checked.stderr
    assert "OK: table hilo01, game five_card_hilo" in checked.stdout


VENDOR_TABLE = """
[table]
id = "hilo07"
game = "five_card_hilo"
[table.options]
dealing = "manual_shoe"
shuffler = "counting"
[devices.shoe]
kind = "shoe"
driver = "acme-cs9"
allowed_serials = ["CS9-000123"]
allowed_firmware_sha256 = ["{sha}"]
[devices.shoe.transport]
type = "serial"
port = "/dev/tablectl/shoe-CS9-000123"
baudrate = 9600
bytesize = 8
parity = "E"
stopbits = 1
command_timeout = 1.5
[journal]
path = "{home}/hilo07/journal.sqlite"
sealing = "off"
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{home}/hilo07/operator.sock"
group = "{group}"
supervisor_group = "{group}"
[devices.shoe.settings]
{settings}
"""


def test_a_table_configured_with_the_vendor_driver_is_checked_by_its_schema(release):
    where = {"home": release.home, "group": grp.getgrgid(os.getgid()).gr_name, "sha": "a" * 64}
    good = VENDOR_TABLE.format(settings="status_poll_seconds = 1.0", **where)
    (release.home / "hilo07.toml").write_text(good)
    ok = release.run("tablectl", "check-config", "hilo07.toml")
    assert ok.returncode == 0, ok.stderr
    assert "shoe (shoe, acme-cs9, serial)" in ok.stdout
    bad = VENDOR_TABLE.format(settings='status_poll_seconds = 0.01\ncolour = "red"', **where)
    (release.home / "bad.toml").write_text(bad)
    refused = release.run("tablectl", "check-config", "bad.toml")
    assert refused.returncode == 1
    assert (
        "bad.toml: devices.shoe.settings.colour: unknown setting for this driver; allowed: "
        "command_tries, status_poll_seconds"
    ) in refused.stderr
    assert (
        "bad.toml: devices.shoe.settings.status_poll_seconds: 0.01 is less than the minimum of 0.2"
    ) in refused.stderr


def test_the_conformance_kit_passes_the_vendor_driver_installed_from_wheels(release):
    run = release.run("tablectl", "conformance", "shoe", "--driver", "acme-cs9", timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "result: **PASS** (16 passed, 0 failed, 0 skipped)" in run.stdout


def test_done_when_the_demo_deals_rounds_from_the_vendor_shoe_on_its_simulator(release):
    state = release.home / "demo"
    run = release.run(
        "tablectl", "demo", "--game", "five_card_hilo", "--driver", "shoe=acme-cs9",
        "--rounds", "3", "--seed", "7", "--metrics-listen", "127.0.0.1:0",
        "--state-dir", str(state), timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    rounds = [line for line in run.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == 3 and all(" completed " in line for line in rounds), run.stdout
    # the journal names the vendor's device: it, not the reference shoe, dealt the cards
    with sqlite3.connect(state / "journal.sqlite") as journal:
        rows = [" ".join(map(str, row)) for row in journal.execute("SELECT * FROM journal")]
    assert any("ACME CS-9" in row for row in rows)
    assert sum('"card_drawn"' in row for row in rows) >= 15
    verify = release.run("tablectl", "journal", "verify", str(state / "journal.sqlite"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
