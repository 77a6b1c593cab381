"""The benchmark harness (`make bench`): every figure of DESIGN.md's goals in one run.

Writes ``.bench/results.json`` with exactly the keys of issue 5, each a ratio or a rate
measured in this run on this machine:

    engine_vs_bare_trigger   engine median cost per event / one bare `transitions` trigger
    e2e_median_vs_wire       frame on a pty -> decision journaled durably, / wire time
    e2e_p99_vs_wire          the same, 99th percentile
    events_per_second        sustained, into one TableService with durable group commit
    rounds_per_second        complete simulated rounds in-process (the soak's engine path)
    ready_ms                 process start -> READY (sd_notify)
    idle_rss_mib             resident memory of the idle process with one table

``.bench/details.json`` holds everything behind them (per table, per transport, the machine)
and ``.bench/latency.png`` the end-to-end latency distribution (with matplotlib, the `bench`
extra; ``--png`` to put it elsewhere, e.g. docs/performance-latency.png). Nothing here is
asserted: timings are figures, never tests.

    python -m tests.bench.harness [--quick] [--png PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from tests.bench import device_latency, engine, floor, history, ready, service

RESULT_KEYS = (
    "engine_vs_bare_trigger",
    "e2e_median_vs_wire",
    "e2e_p99_vs_wire",
    "events_per_second",
    "rounds_per_second",
    "ready_ms",
    "idle_rss_mib",
    *floor.RESULT_KEYS,
)
GOALS = {
    "engine_vs_bare_trigger": ("<=", 3),
    "e2e_median_vs_wire": ("<=", 0.2),
    "e2e_p99_vs_wire": ("<=", 1),
    "events_per_second": (">=", 20_000),
    "rounds_per_second": (">=", 1_000),
    "ready_ms": ("<=", 300),
    "idle_rss_mib": ("<=", 40),
    **floor.GOALS,
}


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


def plot(latencies_us: list[float], wire_us: float, path: Path) -> str | None:
    """Histogram and CDF of the end-to-end latency with the goals marked; None if no plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib missing (pip install -e '.[bench]'): no plot"
    ordered = sorted(latencies_us)
    median = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    figure, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4))
    top = max(2 * p99, 1.2 * wire_us)
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
            0.2 * wire_us,
            color="#228833",
            linestyle=":",
            label=f"goal median ≤ {0.2 * wire_us:.0f}",
        )
        axis.axvline(wire_us, color="#ee6677", linestyle=":", label=f"goal p99 ≤ {wire_us:.0f}")
        axis.set_xlabel("µs from the device's write to the decision journaled (fsync)")
    hist.set_ylabel("events")
    cdf.set_ylabel("fraction of events")
    cdf.set_xscale("log")
    cdf.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    hist.legend(fontsize=8)
    figure.suptitle(
        f"One card_drawn frame end to end over a pty ({len(ordered)} samples; "
        f"wire time at 115200 baud {wire_us:.0f} µs)"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return None


def run(quick: bool, png: Path, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "bench.log").open("w") as log_file:
        # logs rendered as the daemon's are (JSON lines, info and up), into a file
        structlog.configure(
            processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
            logger_factory=structlog.PrintLoggerFactory(log_file),
        )
        return _run(quick, png, out)


def _run(quick: bool, png: Path, out: Path) -> dict[str, Any]:
    details: dict[str, Any] = {"machine": machine(), "quick": quick}
    scale = 0.1 if quick else 1.0

    print("engine vs bare transitions trigger ...", flush=True)
    details["engine"] = engine.measure()
    print("end to end: pty frame -> decision journaled durably ...", flush=True)
    e2e = asyncio.run(service.end_to_end(samples=int(2000 * scale) or 100))
    latencies = e2e.pop("latencies_us")
    details["end_to_end"] = e2e
    print("events per second (durable group commit) ...", flush=True)
    details["events_per_second"] = asyncio.run(service.events_per_second(int(600 * scale) or 20))
    print("rounds per second (in-process) ...", flush=True)
    details["rounds_per_second"] = rounds_per_second(int(22_000 * scale))
    print("start to READY, idle RSS ...", flush=True)
    details["ready"] = ready.measure(repeats=3 if quick else 7)
    print("device layer, journal, service ...", flush=True)
    details["driver_event_latency"] = asyncio.run(
        device_latency.driver_event_latency(int(3000 * scale) or 100)
    )
    details["inprocess_device_events"] = asyncio.run(
        device_latency.inprocess_events_per_second(int(30_000 * scale))
    )
    details["transport_latency"] = asyncio.run(device_latency.transport_latency(int(2000 * scale)))
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        details["journal"] = service.journal_figures(Path(tmp))
    details["service_latency"] = asyncio.run(service.service_latency(int(100 * scale) or 10))

    print("floor store: twenty tables shipping to PostgreSQL ...", flush=True)
    details["floor"] = floor.measure(quick)

    results = {
        "engine_vs_bare_trigger": details["engine"]["engine_vs_bare_trigger"],
        "e2e_median_vs_wire": e2e["median_vs_wire"],
        "e2e_p99_vs_wire": e2e["p99_vs_wire"],
        "events_per_second": details["events_per_second"]["events_per_second"],
        "rounds_per_second": details["rounds_per_second"]["rounds_per_second"],
        "ready_ms": details["ready"]["ready_ms"],
        "idle_rss_mib": details["ready"]["idle_rss_mib"],
        **{key: details["floor"][key] for key in floor.RESULT_KEYS},
    }
    assert tuple(results) == RESULT_KEYS
    print("READY and RSS against history size (1k, 10k, 100k rounds) ...", flush=True)
    results.update(history.measure(details, quick))  # ready_ms_by_history, rss_mib_by_history
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "details.json").write_text(json.dumps(details, indent=2) + "\n")
    (out / "e2e_latencies_us.json").write_text(json.dumps(latencies) + "\n")
    note = plot(latencies, e2e["wire_time_us"], png)
    print()
    print(report(results, details))
    print(note or f"\nlatency distribution: {png}")
    print(f"figures: {out / 'results.json'}, details: {out / 'details.json'}")
    return results


def report(results: dict[str, Any], details: dict[str, Any]) -> str:
    lines = [f"machine: {details['machine']}", ""]
    for key in RESULT_KEYS:
        sense, goal = GOALS[key]
        value = results[key]
        met = value <= goal if sense == "<=" else value >= goal
        lines.append(
            f"  {key:<24} {value:>12}   goal {sense} {goal:<7} {'met' if met else 'MISSED'}"
        )
    lines.append("")
    lines.append(engine.report(details["engine"]))
    e2e = details["end_to_end"]
    lines.append(
        f"end to end: median {e2e['median_us']} µs, p99 {e2e['p99_us']} µs; wire time of the "
        f"{e2e['frame_bytes']}-byte frame {e2e['wire_time_us']} µs ({e2e['samples']} samples)"
    )
    drv = details["driver_event_latency"]
    lines.append(
        f"pty frame -> driver event only: median {drv['median_us']} µs "
        f"({drv['median_vs_wire']}x wire), p99 {drv['p99_us']} µs ({drv['p99_vs_wire']}x wire)"
    )
    lines.append(f"ready: {details['ready']['measured']}: {details['ready']['ready_ms_all']} ms")
    lines.append(f"journal: {details['journal']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.harness", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the samples (smoke)")
    parser.add_argument("--out", type=Path, default=Path(".bench"))
    parser.add_argument("--png", type=Path, default=Path(".bench/latency.png"))
    args = parser.parse_args(argv)
    run(args.quick, args.png, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
