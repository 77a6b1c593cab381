"""The floor report's page as a browser draws it: headless Chromium at 1,280 px.

The page is written by `write_html` from a report of three tables (no database needed: the
report's figures are its input here; tests/floor/test_floor_commands.py builds one from a
real floor store), then loaded in Debian's Chromium, which runs a script measuring the page
and takes a screenshot:

- the per-table table fits 1,280 px (it ran off the right edge: a horizontal scroll);
- every y-axis tick is a whole number, each once (a peak of 2 read "0, 0, 1, 2, 2");
- every time carries its zone (a floor's times, read elsewhere or after a clock change).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.floor.report import whole_ticks

WIDTH = 1280
MAKE_PAGE = """
import collections, datetime, sys
from pathlib import Path
from tablectl.controller.floor.report import FloorReport, TableDay, write_html
tables = []
for number, (table_id, game) in enumerate(
    [("t-3c21", "three_card_21"), ("t-huh", "heads_up_holdem"), ("t-hilo", "five_card_hilo")]
):
    day = TableDay(table_id, game)
    day.counts.update(rounds=30 + number, voids=2 - number, misdeals=1, deck_removals=number,
                      device_faults=3, stub_counts=6)
    day.decisions.update({"C5": 2, "S1": 6, "G2": 30})
    day.rule_names.update({"C5": "13:69F-2C.14(e)", "S1": "13:69E-1.18(j)", "G2": "13:69F-2C.8"})
    day.rounds_by_hour.update({14: 10, 15: 12, 16: 8 + number})
    day.voided_rounds = [3, 9][: 2 - number]
    day.first_event = "2026-11-23T14:00:01.123456+00:00"
    day.last_event = "2026-11-23T16:59:58.654321+00:00"
    tables.append(day)
report = FloorReport(datetime.date(2026, 11, 23), "2026-11-24T06:00:00+00:00", tables)
write_html(report, Path(sys.argv[1]))
"""
MEASURE = """
<script>
window.addEventListener("load", () => {
  const tables = [...document.querySelectorAll("table")];
  const perTable = tables.find(t => t.previousElementSibling &&
                                    t.previousElementSibling.textContent === "Per table");
  const ticks = [...document.querySelectorAll("svg")].map(svg =>
    [...svg.querySelectorAll("text[text-anchor=end]")].map(t => t.textContent));
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    perTableRight: perTable.getBoundingClientRect().right,
    scrollWidth: document.documentElement.scrollWidth,
    ticks: ticks,
    times: [...perTable.querySelectorAll("td.text")].map(td => td.textContent),
  });
  document.body.appendChild(out);
});
</script>
"""


def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.skip("chromium is not installed")
    return path


def browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", f"--user-data-dir={profile}",
         f"--window-size={WIDTH},2400", "--hide-scrollbars", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_whole_ticks_are_whole_and_each_once() -> None:
    for peak in (1, 2, 3, 5, 7, 12, 37, 120, 999):
        ticks = whole_ticks(peak)
        assert ticks[0] == 0 and ticks[-1] >= peak and len(ticks) <= 5
        assert ticks == sorted(set(ticks)) and all(isinstance(t, int) for t in ticks)


@pytest.mark.long  # ~25 s: Chromium started twice
def test_the_report_page_renders_in_chromium_at_1280_px(tmp_path: Path) -> None:
    page = tmp_path / "floor-report.html"
    subprocess.run(
        [sys.executable, "-c", MAKE_PAGE, str(page)],
        check=True,
        timeout=60,
        env={"TZ": "America/New_York", "PATH": "/usr/bin:/bin"},
    )
    measured_page = tmp_path / "measured.html"
    measured_page.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = browse(measured_page, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, dom.stdout[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"'))
    assert measured["perTableRight"] <= WIDTH, measured
    assert measured["scrollWidth"] <= WIDTH, measured
    assert len(measured["ticks"]) == 3  # rounds, exceptions, rounds per hour
    for ticks in measured["ticks"]:
        assert ticks and all(re.fullmatch(r"\d+", tick) for tick in ticks), ticks
        assert len(set(ticks)) == len(ticks), ticks
    times = [cell for cell in measured["times"] if re.match(r"\d{4}-", cell)]
    assert len(times) == 6, measured["times"]  # first and last event of each table
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d EST", time) for time in times), times
    assert "(local time, EST)" in page.read_text()

    shot = tmp_path / "floor-report.png"
    taken = browse(page, tmp_path / "profile2", f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (WIDTH, 2400)
    assert len(png) > 20_000  # drawn: tables, three charts (a blank page is a few KiB)
