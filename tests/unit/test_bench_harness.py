"""The bench harness's bookkeeping (no timing): ratios printed with their floors, sections
merged without erasing another's keys, latency ratios computed from the same samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench import harness, latency


def _section(name: str, results: dict[str, float]) -> harness.Section:
    return harness.Section(name, name, lambda run: harness.Part(dict(results), {"n": 1}, [name]))


def test_only_merges_its_keys_into_the_results_on_disk(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "results.json").write_text(
        json.dumps({"ready_ms_by_history": {"1000": 200}, "e2e_median_vs_floors": 9.0})
    )
    monkeypatch.setattr(
        harness,
        "SECTIONS",
        [
            _section("latency", {"e2e_median_vs_floors": 1.1}),
            _section("other", {"never": 1}),
        ],
    )
    results = harness.run(False, tmp_path / "l.png", tmp_path, only=["latency"])
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk == results
    assert on_disk["ready_ms_by_history"] == {"1000": 200}  # another part's key stays
    assert on_disk["e2e_median_vs_floors"] == 1.1
    assert "never" not in on_disk
    details = json.loads((tmp_path / "details.json").read_text())
    assert details["latency"] == {"n": 1} and "machine" in details


def test_a_full_run_starts_from_nothing(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"stale": 1}))
    monkeypatch.setattr(harness, "SECTIONS", [_section("a", {"x": 1})])
    assert harness.run(False, tmp_path / "l.png", tmp_path) == {"x": 1}


def test_report_prints_each_goal_with_its_floors_and_verdict() -> None:
    results = {
        "e2e_median_vs_floors": 1.3,
        "e2e_median_us": 390.0,
        "floor_pty_median_us": 70.0,
        "floor_commit_median_us": 230.0,
        "events_vs_group_commit": 0.6,
        "events_per_second": 60_000,
        "floor_group_commit_rows_per_second": 100_000,
        "rounds_per_second": 3000,
    }
    text = harness.report(results, {"cpu": "x"})
    median = next(line for line in text.splitlines() if "e2e_median_vs_floors" in line)
    assert "MISSED" in median and "<= 1.25" in median
    assert "floor_pty_median_us 70.0" in median and "floor_commit_median_us 230.0" in median
    # retired as a goal (a whole event against one raw row): information, not a verdict
    events = next(line for line in text.splitlines() if "events_vs_group_commit" in line)
    assert "met" not in events and "MISSED" not in events
    assert "rounds_per_second 3000" in text  # information, no goal
    assert "e2e_p99_vs_floors" not in text  # not measured in this run: not reported


def test_latency_ratios_are_of_the_same_runs_samples() -> None:
    e2e = [300e-6] * 99 + [900e-6]
    pty = [60e-6] * 99 + [200e-6]
    commit = [180e-6] * 99 + [400e-6]
    figures = latency.summarize(e2e, pty, commit)
    assert figures["floors_median_us"] == pytest.approx(240.0)
    assert figures["e2e_median_vs_floors"] == pytest.approx(1.25)
    assert figures["floors_p99_us"] == pytest.approx(600.0)
    assert figures["e2e_p99_vs_floors"] == pytest.approx(1.5)
    assert figures["overhead_median_us"] == pytest.approx(60.0)
    assert figures["e2e_median_vs_wire"] == pytest.approx(300 / figures["wire_time_us"], 1e-3)
