"""The benchmark harness (`make bench`): DESIGN.md's performance goals as ratios to floors.

Absolute figures on a shared VM move 2-3x from run to run; what the goals state is how far the
daemon is from the costs it cannot avoid, each measured in this run on this machine:

    e2e_median_vs_floors    one event, frame on a pty -> the daemon done with it (durable),
                            median / (pty floor median + durable-commit floor median)  <= 1.25
    e2e_p99_vs_floors       the same at p99 / (pty floor p99 + durable-commit floor p99) <= 2
    engine_vs_bare_trigger  the engine's median cost per event / one bare `transitions`
                            trigger                                                    <= 1
    events_vs_group_commit  (retired as a goal: it compared a whole event with one raw row;
                            still printed, with its floor, as information)
    ready_ms, idle_rss_mib  process start -> READY (<= 300 ms); idle RSS (<= 40 MiB)
    verify_vs_hash_floor    the journal's background verifier, rows per second / a bare
                            SHA-256 walk of the same rows (row_hash, compared)         >= 0.5
                            (with verify_year_seconds: 365 segments of ~8 MB, scaled
                            from the child process walking 30 of them)
    ready_ms_busy_day       process start -> READY on one live segment of a busy gaming
                            day (2,400 rounds, ~74,000 rows: past the start's verification
                            bound); a figure (tests/bench/upkeep.py)
    rollover_delay_seconds_nonstop_dealing
                            06:00 -> the new segment's first row, the demo dealing
                            non-stop under libfaketime                                  <= 5
    event_p999_during_upkeep_vs_floors
                            an event's p99.9 while the roll-over (seal, switch of files,
                            checkpoint row), retention of a busy day's segment (verify,
                            copy, compare, remove) and the background walk run / the same
                            event's p99.9 with no upkeep running, same run              <= 2

`.bench/results.json` holds each ratio with its floors beside it (`floor_*` keys) and the
figures of information (wire time, rounds and events per second); `.bench/details.json`
everything behind them; `.bench/latency.png` the end-to-end distribution (matplotlib, the
`bench` extra). Nothing here is asserted: timings are figures, never tests.

The harness is a list of sections (SECTIONS). A section is a function taking the `Run` and
returning a `Part` (its keys for results.json, its details, its report lines); its goals go
in GOALS. To add one, write the function in its own module and add one line to SECTIONS.
`--only NAME` runs some sections and merges their keys into the results already on disk, so
one section's figures never erase another's.

    python -m tests.bench.harness [--quick] [--only NAME[,NAME]] [--png PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from tablectl.controller.common.logs import configure_logging
from tests.bench import (
    device_latency,
    engine,
    floor,
    floor_failover,
    floor_report_day,
    floor_scale,
    floor_shuffle_month,
    history,
    latency,
    merkle,
    ready,
    service,
    shuffle,
    upkeep,
    verifier,
    witness,
)


@dataclass(frozen=True)
class Goal:
    """A figure's goal; `floors` are the results.json keys it is measured against."""

    sense: str  # "<=" or ">="
    bound: float
    floors: tuple[str, ...] = ()

    def met(self, value: float) -> bool:
        return value <= self.bound if self.sense == "<=" else value >= self.bound


GOALS: dict[str, Goal] = {
    "e2e_median_vs_floors": Goal(
        "<=", 1.25, ("e2e_median_us", "floor_pty_median_us", "floor_commit_median_us")
    ),
    "e2e_p99_vs_floors": Goal("<=", 2, ("e2e_p99_us", "floor_pty_p99_us", "floor_commit_p99_us")),
    "engine_vs_bare_trigger": Goal("<=", 1, ("engine_event_ns", "floor_bare_trigger_ns")),
    "ready_ms": Goal("<=", 300),
    "idle_rss_mib": Goal("<=", 40),
    "rollover_delay_seconds_nonstop_dealing": Goal("<=", 5),
    "event_p999_during_upkeep_vs_floors": Goal(
        "<=", 2, ("event_p999_during_upkeep_us", "floor_event_p999_no_upkeep_us")
    ),
    "ready_largest_vs_smallest_history": Goal("<=", 1.5, ("ready_ms_by_history",)),
    "verify_vs_hash_floor": Goal(
        ">=", 0.5, ("verify_rows_per_second", "floor_hash_rows_per_second")
    ),
    **{key: Goal(sense, bound) for key, (sense, bound) in floor.GOALS.items()},
    # shuffle integrity (docs/shuffle-integrity.md): every fault mode found within its goal in
    # every trial; false alarms below one a table-year (the bound, and the honest rounds run)
    "shuffle_detection_within_goal": Goal(">=", 1.0),
    "shuffle_false_alarms_bound_per_table_year": Goal("<=", 1.0, ("shuffle_honest_rounds",)),
    **{key: Goal(sense, bound) for key, (sense, bound) in floor_scale.GOALS.items()},
    # issue 31.6: a real day's report (its section says whether the day run was real-sized)
    "floor_report_seconds_real_day": Goal("<=", 60),
    # the witnessed log (issue 30, tests/bench/witness.py)
    "merkle_e2e_p99_on_vs_off": Goal(
        "<=", 1.05, ("witness_e2e_on_p99_us", "witness_e2e_off_p99_us")
    ),
    "witness_cosign_vs_floor": Goal(
        ">=", 0.5, ("witness_cosigns_per_second", "floor_cosign_checks_per_second")
    ),
    **{key: Goal(sense, bound) for key, (sense, bound) in floor_failover.GOALS.items()},
    # the witnessed Merkle log (tests/bench/merkle.py): a round's proof from a year's log
    "prove_year_ms": Goal("<=", 50),
    "proof_verify_ms": Goal("<=", 10),
}


@dataclass
class Run:
    """What every section is given: the run's scale and where its files go."""

    quick: bool
    out: Path
    png: Path

    def scaled(self, full: int, least: int = 10) -> int:
        """A sample count: `full`, or a tenth of it (at least `least`) with --quick."""
        return max(least, full // 10) if self.quick else full


@dataclass
class Part:
    """One section's figures: keys for results.json, its details, lines for the report."""

    results: dict[str, Any]
    details: Any
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    measure: Callable[[Run], Part]


# -- the sections -------------------------------------------------------------------------------


def latency_section(run: Run) -> Part:
    figures = asyncio.run(latency.measure(samples=run.scaled(2000, 200)))
    samples = figures.pop("latencies_us")
    (run.out / "e2e_latencies_us.json").write_text(json.dumps(samples) + "\n")
    note = plot(samples, figures, run.png)
    e2e, pty, commit = figures["e2e"], figures["pty_floor"], figures["commit_floor"]
    results = {
        "e2e_median_vs_floors": figures["e2e_median_vs_floors"],
        "e2e_p99_vs_floors": figures["e2e_p99_vs_floors"],
        "e2e_median_us": e2e["median_us"],
        "e2e_p99_us": e2e["p99_us"],
        "floor_pty_median_us": pty["median_us"],
        "floor_pty_p99_us": pty["p99_us"],
        "floor_commit_median_us": commit["median_us"],
        "floor_commit_p99_us": commit["p99_us"],
        "e2e_median_vs_wire": figures["e2e_median_vs_wire"],
        "e2e_p99_vs_wire": figures["e2e_p99_vs_wire"],
    }
    lines = [
        f"end to end (daemon, {figures['samples']} samples): median {e2e['median_us']} µs, "
        f"p99 {e2e['p99_us']} µs; {figures['overhead_median_us']} µs median above the floors",
        f"  pty frame -> driver event:  median {pty['median_us']} µs, p99 {pty['p99_us']} µs",
        f"  one durable SQLite commit:  median {commit['median_us']} µs, p99 {commit['p99_us']} µs",
        f"  (the journal's own commit inside the e2e samples: median "
        f"{figures['e2e_journal_commit']['median_us']} µs, p99 "
        f"{figures['e2e_journal_commit']['p99_us']} µs)",
        "  the e2e samples cut in stages (medians, µs): "
        + ", ".join(f"{k} {v}" for k, v in figures["e2e_stages_median_us"].items()),
        f"  information: the {figures['frame_bytes']}-byte frame's wire time at 115200 baud is "
        f"{figures['wire_time_us']} µs: e2e median {figures['e2e_median_vs_wire']}x, "
        f"p99 {figures['e2e_p99_vs_wire']}x of it",
        note or f"  latency distribution: {run.png}",
    ]
    return Part(results, figures, lines)


def engine_section(run: Run) -> Part:
    figures = engine.measure()
    results = {
        "engine_vs_bare_trigger": figures["engine_vs_bare_trigger"],
        "engine_event_ns": figures["engine_event_ns"],
        "floor_bare_trigger_ns": figures["bare_trigger_ns"],
    }
    return Part(results, figures, [engine.report(figures)])


def throughput_section(run: Run) -> Part:
    figures = asyncio.run(
        service.throughput(rounds=run.scaled(600, 30), rows=run.scaled(100_000, 5_000))
    )
    results = {
        "events_vs_group_commit": figures["events_vs_group_commit"],
        "events_per_second": figures["events_per_second"],
        "floor_group_commit_rows_per_second": figures["group_commit_rows_per_second"],
        "rows_per_event": figures["rows_per_event"],
    }
    lines = [
        f"events into the service (group commit): {figures['events_per_second']}/s, "
        f"{figures['rows_per_event']} journal rows per event; the journal alone "
        f"{figures['group_commit_rows_per_second']} rows/s (medians of "
        f"{len(figures['repeats'])} alternating repeats)"
    ]
    return Part(results, figures, lines)


def rounds_section(run: Run) -> Part:
    figures = rounds_per_second(run.scaled(22_000, 1_000))
    return Part(
        {"rounds_per_second": figures["rounds_per_second"]},
        figures,
        [f"rounds in-process (soak's engine path): {figures['rounds_per_second']}/s"],
    )


def ready_section(run: Run) -> Part:
    figures = ready.measure(repeats=3 if run.quick else 7)
    results = {"ready_ms": figures["ready_ms"], "idle_rss_mib": figures["idle_rss_mib"]}
    return Part(results, figures, [f"ready: {figures['measured']}: {figures['ready_ms_all']} ms"])


def device_section(run: Run) -> Part:
    """The device layer, the journal and the service on their own (details only)."""
    details = {
        "driver_event_latency": asyncio.run(
            device_latency.driver_event_latency(run.scaled(3000, 100))
        ),
        "inprocess_device_events": asyncio.run(
            device_latency.inprocess_events_per_second(run.scaled(30_000, 1000))
        ),
        "transport_latency": asyncio.run(device_latency.transport_latency(run.scaled(2000, 100))),
        "service_latency": asyncio.run(service.service_latency(run.scaled(100, 10))),
    }
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        details["journal"] = service.journal_figures(Path(tmp))
    return Part({}, details, [f"journal: {details['journal']}"])


def history_section(run: Run) -> Part:
    """Start to READY and peak RSS on 1k, 10k and 100k rounds of history (tests/bench/history.py):
    flat, not linear, because a start replays only from the last checkpoint."""
    details: dict[str, Any] = {}
    results = history.measure(details, run.quick)  # ready_ms_by_history, rss_mib_by_history
    ready_ms = results["ready_ms_by_history"]
    sizes = sorted(ready_ms, key=int)
    ratio = round(ready_ms[sizes[-1]] / ready_ms[sizes[0]], 2) if ready_ms[sizes[0]] else None
    results["ready_largest_vs_smallest_history"] = ratio
    return Part(results, details, [f"history: {results}"])


def floor_section(run: Run) -> Part:
    """The floor store: twenty tables shipping to one PostgreSQL (tests/bench/floor.py)."""
    figures = floor.measure(run.quick)
    results = {key: figures[key] for key in floor.RESULT_KEYS}
    return Part(results, figures, [f"floor store: {results}"])


def shuffle_section(run: Run) -> Part:
    """Shuffle integrity: false alarms over 1.2 M honest rounds, rounds to find each fault."""
    figures = shuffle.measure(
        run.scaled(1_200_000, 40_000), run.scaled(100, 20), run.out / "shuffle-integrity.png"
    )
    results = figures["results"]
    return Part(results, figures["details"], [f"shuffle integrity: {results}"])


def verifier_section(run: Run) -> Part:
    """The background verifier against a bare hash walk; a year of segments (bench/verifier)."""
    figures = verifier.measure(run.quick)
    results = {key: figures[key] for key in verifier.RESULT_KEYS}
    lines = [
        f"background verifier: {figures['verify_rows_per_second']} rows/s, a bare SHA-256 walk "
        f"of the same rows {figures['floor_hash_rows_per_second']} rows/s "
        f"(ratio {figures['verify_vs_hash_floor']}); the child process walked "
        f"{figures['segments']} segments ({figures['rows']} rows, {figures['bytes']} bytes) in "
        f"{figures['child_seconds']} s: a year of segments ~{figures['verify_year_seconds']} s"
    ]
    return Part(results, figures, lines)


def merkle_section(run: Run) -> Part:
    """A round's proof from a year-sized journal and its offline check (bench/merkle)."""
    figures = merkle.measure(run.quick)
    results = {key: figures[key] for key in ("prove_year_ms", "proof_verify_ms")}
    lines = [
        f"journal prove on {figures['merkle_log_days']} days ({figures['merkle_log_rows']:,} "
        f"rows, {figures['merkle_log_bytes']:,} bytes, written in "
        f"{figures['merkle_log_build_seconds']} s): median {figures['prove_year_ms']} ms "
        f"(p90 {figures['prove_year_p90_ms']}); proof verify median "
        f"{figures['proof_verify_ms']} ms (p90 {figures['proof_verify_p90_ms']}); a bundle "
        f"{figures['proof_bundle_bytes']:,} bytes; {figures['samples']} rounds"
    ]
    return Part(results, figures, lines)


def floor_scale_section(run: Run) -> Part:
    """The floor at casino scale: 400 tables, 1x and 10x rows (tests/bench/floor_scale.py)."""
    figures = floor_scale.measure(run.quick)
    figures.update(floor_scale.server_ingest())  # its own throwaway server, after the first
    results = {key: figures[key] for key in floor_scale.RESULT_KEYS}
    ingest, lookups, verify = figures["ingest"], figures["lookups"], figures["verify"]
    floors = (
        f"ingest {ingest['shipper_rows_per_second']:,} vs COPY {ingest['copy_rows_per_second']:,}"
        f" rows/s ({ingest['rows']:,} rows, 400 connected shippers; the floor side alone "
        f"{figures['server_ingest']['seconds']} s vs COPY "
        f"{figures['server_ingest']['copy_seconds']} s); lookups p99 round "
        f"{lookups['at_1x']['round_p99_ms']} -> {lookups['at_10x']['round_p99_ms']} ms, minute "
        f"{lookups['at_1x']['minute_p99_ms']} -> {lookups['at_10x']['minute_p99_ms']} ms at "
        f"{lookups['rows_1x']:,} -> {lookups['rows_10x']:,} rows; report read "
        f"{figures['report']['rows_read']:,} rows ({figures['report']['rows_in_the_days_window']:,}"
        f" in the day's window); verify {verify['verify_rows_per_second']:,} vs hash walk "
        f"{verify['hash_floor_rows_per_second']:,} rows/s; catch-up of "
        f"{figures['outage']['rows']:,} rows with 400 logins"
    )
    return Part(results, figures, [f"floor at scale: {results}", f"  floors: {floors}"])


def floor_report_day_section(run: Run) -> Part:
    """`floor report` of a real-sized day: 400 tables x 31,000 rows (12.4 M rows), from the
    per-round summaries and replayed (--recompute) with a worker a CPU
    (tests/bench/floor_report_day.py); --quick: 700 rows a table."""
    figures = floor_report_day.measure(rows=700 if run.quick else 31_000)
    seconds = figures["floor_report_seconds_real_day"]
    # a smaller day's figure is not the goal's: named for what it is
    key = "floor_report_seconds_" + ("real_day" if figures["real_day"] else "small_day")
    results = {key: seconds}
    line = (
        f"  {figures['rows']:,} rows ({figures['tables']} tables x "
        f"{figures['rows_per_table']:,} rows; a real day: {figures['real_day']}): from summaries "
        f"{seconds} s, replayed (--recompute, {figures['recompute_workers']} workers) "
        f"{figures['floor_report_recompute_seconds']} s, reports equal "
        f"{figures['reports_equal']}, summaries that differ {figures['recompute_findings']}, "
        f"Q3 tested at {figures['seat_tested_tables']} tables; summaries "
        f"{figures['summaries_cpu_us_per_row']} us of CPU a row shipped"
    )
    return Part(results, figures, [f"floor report, a day: {results}", line])


def floor_shuffle_month_section(run: Run) -> Part:
    """`floor shuffle-check`'s fingerprint store over a month of 400 tables, at a fraction of
    each table-day (tests/bench/floor_shuffle_month.py); the year by arithmetic."""
    figures = floor_shuffle_month.measure(scale=0.001 if run.quick else 0.01)
    results = {key: figures[key] for key in floor_shuffle_month.RESULT_KEYS}
    line = (
        f"  {figures['runs']:,} runs ({figures['scale']} of a month of {figures['tables']} "
        f"busy tables): stored in {figures['store_seconds']} s, repeats found in "
        f"{figures['repeats_seconds']} s, planted repeats found exactly: "
        f"{figures['findings_as_planted']}, process max RSS growth "
        f"{figures['process_max_rss_growth_mb']} MB; full month "
        f"~{figures['full_month_hours_estimate']} h by arithmetic"
    )
    return Part(results, figures, [f"floor shuffle month: {results}", line])


def upkeep_section(run: Run) -> Part:
    busy = upkeep.ready_busy_day(repeats=1 if run.quick else 3)
    rolled = upkeep.rollover_delay(repeats=1 if run.quick else 3)
    results = {
        "ready_ms_busy_day": busy["ready_ms_busy_day"],
        "rollover_delay_seconds_nonstop_dealing": rolled["rollover_delay_seconds_nonstop_dealing"],
    }
    details = {"ready_busy_day": busy["details"], "rollover": rolled["details"]}
    return Part(results, details, [f"upkeep: {results}", f"  details: {details}"])


def upkeep_latency_section(run: Run) -> Part:
    figures = upkeep.event_p999_during_upkeep(
        floor_events=run.scaled(1500, 300), rounds=run.scaled(upkeep.BUSY_DAY_ROUNDS, 240)
    )
    details = figures.pop("details")
    line = (
        f"  during upkeep {details['during_upkeep']}; no upkeep {details['floor_no_upkeep']}; "
        f"upkeep {details['upkeep_seconds']} s, busy segment retired "
        f"{details['busy_segment_retired']}, walk finished {details['walk_finished']}"
    )
    return Part(figures, details, [f"upkeep latency: {figures}", line])


def witness_section(run: Run) -> Part:
    figures = witness.measure(run.quick)
    e2e, cosign = figures["e2e"], figures["cosign"]
    results = {
        "merkle_e2e_p99_on_vs_off": e2e["merkle_e2e_p99_on_vs_off"],
        "witness_e2e_on_p99_us": e2e["on"]["p99_us"],
        "witness_e2e_off_p99_us": e2e["off"]["p99_us"],
        "merkle_e2e_median_on_vs_off": e2e["merkle_e2e_median_on_vs_off"],
        "witness_cosign_vs_floor": cosign["witness_cosign_vs_floor"],
        "witness_cosigns_per_second": cosign["witness_cosigns_per_second"],
        "floor_cosign_checks_per_second": cosign["floor_checks_per_second"],
        "witness_inprocess_vs_floor": cosign["witness_inprocess_vs_floor"],
    }
    lines = [
        f"an event with checkpoints signed and witnessed vs without ({e2e['samples']} samples "
        f"each, taking turns): p99 {e2e['on']['p99_us']} vs {e2e['off']['p99_us']} µs "
        f"({e2e['merkle_e2e_p99_on_vs_off']}x), median {e2e['on']['median_us']} vs "
        f"{e2e['off']['median_us']} µs; {e2e['rounds']} rounds, the witness cosigned "
        f"{e2e['cosigned_size']} rows",
        f"a witness cosigning {cosign['tables']} tables' checkpoints ({cosign['clients']} "
        f"clients at once, keep-alive): {cosign['witness_cosigns_per_second']}/s vs the bare "
        f"check (signature + consistency proof) {cosign['floor_checks_per_second']}/s: "
        f"{cosign['witness_cosign_vs_floor']}x (in process, no HTTP: "
        f"{cosign['witness_inprocess_vs_floor']}x)",
    ]
    return Part(results, figures, lines)


def floor_failover_section(run: Run) -> Part:
    """The replicated floor failing over under 400 tables (tests/bench/floor_failover.py)."""
    figures = floor_failover.measure(40 if run.quick else floor_failover.TABLES)
    results = {key: figures[key] for key in floor_failover.RESULT_KEYS}
    line = (
        f"  {figures['tables']} tables, {figures['batches_in_flight_at_kill']} batches in flight "
        f"at the kill of {figures['killed']}'s postmaster; {figures['promoted']} promoted after "
        f"{figures['promoted_seconds']} s, first table reconnected after "
        f"{figures['first_reconnect_seconds']} s; {figures['rows_acknowledged_before_kill']:,} "
        f"rows acknowledged before the kill, {figures['rows_total']:,} on the new primary, "
        f"{figures['tables_not_identical']} tables not identical to their journals"
    )
    return Part(results, figures, [f"floor failover: {results}", line])


SECTIONS: list[Section] = [
    Section("latency", "one event through the daemon, pty and commit floors", latency_section),
    Section("engine", "engine vs bare transitions trigger", engine_section),
    Section("throughput", "events/s vs the journal's group-commit rows/s", throughput_section),
    Section("rounds", "rounds per second (in-process)", rounds_section),
    Section("ready", "start to READY, idle RSS", ready_section),
    Section("device", "device layer, journal, service", device_section),
    Section("floor", "floor store: twenty tables shipping to PostgreSQL", floor_section),
    Section(
        "witness",
        "the witnessed log: an event's p99 on vs off, a witness cosigning 400 tables",
        witness_section,
    ),
    Section("shuffle", "shuffle integrity: false alarms, rounds to detection", shuffle_section),
    Section(
        "floor_scale",
        "floor at casino scale: 400 tables, 1x/10x rows, report, verify, catch-up",
        floor_scale_section,
    ),
    Section(
        "floor_report_day",
        "floor report of a real-sized day (400 tables x 1,000 rounds), 1 worker and a CPU each",
        floor_report_day_section,
    ),
    Section(
        "floor_shuffle_month",
        "floor shuffle-check: a month of 400 tables' run fingerprints in PostgreSQL, the year",
        floor_shuffle_month_section,
    ),
    Section(
        "floor_failover",
        "replicated floor (Patroni, etcd, sync standby): kill -9 the primary under 400 tables",
        floor_failover_section,
    ),
    Section(
        "history", "READY and RSS against history size (1k, 10k, 100k rounds)", history_section
    ),
    Section("verifier", "the journal's background verifier vs a bare hash walk", verifier_section),
    Section(
        "merkle", "a round's proof from a year's Merkle log, its offline check", merkle_section
    ),
    Section(
        "upkeep",
        "READY on a busy day's live segment; the roll-over's delay under non-stop dealing",
        upkeep_section,
    ),
    Section(
        "upkeep_latency",
        "an event's p99.9 while the roll-over, retention, a seal, a checkpoint and the walk run",
        upkeep_latency_section,
    ),
]


# -- the run ------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def rounds_per_second(rounds: int) -> dict[str, Any]:
    """The soak's engine path in this one process: legal rounds with 2% faults, every
    invariant checked after every round, over every game x dealing method."""
    from tests.soak.faults import TABLES
    from tests.soak.soak import soak_engine

    per_table = max(1, rounds // len(TABLES))
    started = time.perf_counter()
    played = failures = 0
    for index, (game, options) in enumerate(TABLES):
        summary = soak_engine(game, options, per_table, 0.02, seed=100 + index)
        played += summary.rounds
        failures += summary.failure_count
    seconds = time.perf_counter() - started
    return {
        "rounds": played,
        "seconds": round(seconds, 3),
        "rounds_per_second": round(played / seconds),
        "invariant_failures": failures,
    }


def plot(latencies_us: list[float], figures: dict[str, Any], path: Path) -> str | None:
    """Histogram and CDF of the end-to-end latency with the floors and goals; None if drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "  matplotlib missing (pip install -e '.[bench]'): no plot"
    ordered = sorted(latencies_us)
    median = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    floors_median, floors_p99 = figures["floors_median_us"], figures["floors_p99_us"]
    figure, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4))
    top = max(2 * p99, 2.2 * floors_p99)
    beyond = sum(1 for x in ordered if x > top)
    hist.hist(ordered, bins=80, range=(0, top), color="#4477aa")
    if beyond:
        hist.set_title(
            f"{beyond} slower samples (max {ordered[-1]:.0f} µs) off the right", fontsize=8
        )
    cdf.plot(ordered, [i / len(ordered) for i in range(1, len(ordered) + 1)], color="#4477aa")
    for axis in (hist, cdf):
        axis.axvline(median, color="#228833", linestyle="-", label=f"median {median:.0f} µs")
        axis.axvline(p99, color="#ee6677", linestyle="-", label=f"p99 {p99:.0f} µs")
        axis.axvline(
            floors_median, color="#999933", linestyle="--", label=f"floors {floors_median:.0f}"
        )
        axis.axvline(
            1.25 * floors_median,
            color="#228833",
            linestyle=":",
            label=f"goal median ≤ {1.25 * floors_median:.0f}",
        )
        axis.axvline(
            2 * floors_p99, color="#ee6677", linestyle=":", label=f"goal p99 ≤ {2 * floors_p99:.0f}"
        )
        axis.set_xlabel("µs from the frame on the pty to the daemon done (fsync'd)")
    hist.set_ylabel("events")
    cdf.set_ylabel("fraction of events")
    cdf.set_xscale("log")
    cdf.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    hist.legend(fontsize=8)
    figure.suptitle(
        f"One card_drawn frame end to end through the daemon ({len(ordered)} samples); floors: "
        f"pty {figures['pty_floor']['median_us']:.0f} + commit "
        f"{figures['commit_floor']['median_us']:.0f} µs (medians)"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return None


def _load(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def run(quick: bool, png: Path, out: Path, only: list[str] | None = None) -> dict[str, Any]:
    """Run the sections (all, or `only` those), merge into out/results.json; the results."""
    chosen = [s for s in SECTIONS if only is None or s.name in only]
    out.mkdir(parents=True, exist_ok=True)
    # Logs rendered as the daemon's are (JSON lines, info and up, card fields stripped).
    logging_before = structlog.get_config()
    context = Run(quick, out, png)
    results = _load(out / "results.json") if only else {}
    details = _load(out / "details.json") if only else {}
    details["machine"] = machine()
    details["quick"] = quick
    lines: list[str] = []
    try:
        with (out / "bench.log").open("w") as log_file:
            configure_logging("info", mode="json", stream=log_file)
            for section in chosen:
                print(f"{section.name}: {section.title} ...", flush=True)
                part = section.measure(context)
                results.update(part.results)
                details[section.name] = part.details
                lines += part.lines
    finally:
        structlog.configure(**logging_before)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "details.json").write_text(json.dumps(details, indent=2) + "\n")
    print()
    print(report(results, details["machine"]))
    print()
    print("\n".join(lines))
    print(f"\nfigures: {out / 'results.json'}, details: {out / 'details.json'}")
    return results


def report(results: dict[str, Any], machine_: dict[str, Any]) -> str:
    """Each goal with its value and its floors, then the other figures of results.json."""
    lines = [f"machine: {machine_}", ""]
    for key, goal in GOALS.items():
        if key not in results:
            continue
        value = results[key]
        floors = ", ".join(f"{name} {results.get(name)}" for name in goal.floors)
        lines.append(
            f"  {key:<24} {value:>10}   goal {goal.sense} {goal.bound:<5} "
            f"{'met   ' if goal.met(value) else 'MISSED'}  {floors}"
        )
    shown = set(GOALS) | {name for goal in GOALS.values() for name in goal.floors}
    others = [f"{key} {value}" for key, value in results.items() if key not in shown]
    if others:
        lines.append("  information: " + "; ".join(others))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.harness", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the samples (smoke)")
    parser.add_argument("--out", type=Path, default=Path(".bench"))
    parser.add_argument("--png", type=Path, help="the latency plot (default: OUT/latency.png)")
    parser.add_argument(
        "--only",
        help="comma-separated sections to run, merged into the results on disk: "
        + ", ".join(s.name for s in SECTIONS),
    )
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    unknown = set(only or ()) - {s.name for s in SECTIONS}
    if unknown:
        parser.error(f"no such section: {', '.join(sorted(unknown))}")
    run(args.quick, args.png or args.out / "latency.png", args.out, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
