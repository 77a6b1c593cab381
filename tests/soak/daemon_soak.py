"""The daemon soak: rounds through ptys and the pyusb backend with the daemon running.

Each table (a game and one of its dealing methods) is `tablectl demo` itself
(`controller.demo.play_demo`: the simulated devices over real ptys and the simulated pyusb bus,
`run_daemon` with its journal, metrics endpoint and operator socket, the automatic dealer),
run in a fresh process so that its prometheus counters start at zero, with faults injected
by the dealer in about ``--fault-rate`` of the rounds. The soak only watches, through the
demo's two seams (`on_plugged`, `on_round`); it plays nothing itself.

After every round: the round ends in exactly one outcome (the engine's round number moved by
one; at most one void, never both a void and dead hands); a fault-free round draws no void,
removal, block, violation or rejection; every injected fault drew the decision its rule
requires (`simulators.autodealer.expected_decision`; a fault with no rule: the device was
lost and came back); nothing is decided twice (no decision repeated for one event, at most
one `void_round` per round and one `remove_deck` per deck); and no card that was face down
(still in the shoe or the shuffler) appears in the round's summary line or in any log line
the daemon wrote (checked as each line is written; the summary line shows no card at all).

At the end of each table: the journal verifies, and the counters scraped over HTTP from the
running daemon (`tablectl_rounds_total`, `tablectl_decisions_total`,
`tablectl_device_faults_total`) equal the counts taken from the journal's rows.

    python -m tests.soak.daemon_soak --rounds 10000 --fault-rate 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import multiprocessing
import re
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tablectl.controller.common.logs import configure_logging
from tablectl.controller.service.daemon import Daemon
from tablectl.simulators import demo
from tablectl.simulators.autodealer import (
    ILLEGAL_IN_A_LEGAL_ROUND,
    RoundReport,
    expected_decision,
)
from tablectl.simulators.harness import SimulatedTableHarness
from tests.soak.soak import _COMPARED, journal_counts

DEFAULT_ROUNDS = 10_000
DEFAULT_FAULT_RATE = 0.05
#: a soak need not wait for a realistic shuffle; the devices' protocol is unchanged
SOAK_SHUFFLE_SECONDS = 0.005
MAX_FAILURES_KEPT = 20

#: every game under every dealing method it allows (the demo's options otherwise)
TABLES: tuple[tuple[str, str], ...] = (
    ("three_card_21", "manual_shoe"),
    ("five_card_hilo", "manual_shoe"),
    ("five_card_hilo", "automated_shoe"),
    ("heads_up_holdem", "manual_shoe"),
    ("heads_up_holdem", "automated_shoe"),
    ("asia_poker", "manual_shoe"),
)

#: a card anywhere in a line, e.g. `Ah`, `10c`, `Td`, `JK` (the joker)
CARD_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[cdhs](?![A-Za-z0-9])|(?<![A-Za-z])JK\b")
Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class TableSummary:
    """What one table's soak saw; merged per game for the report."""

    rounds: int = 0
    completed: int = 0
    voided: int = 0
    hands_dead: int = 0
    voids: Counter[str] = field(default_factory=Counter)  # by rule id
    removals: Counter[str] = field(default_factory=Counter)  # by rule id
    injected: Counter[str] = field(default_factory=Counter)  # by fault
    caught: Counter[str] = field(default_factory=Counter)  # by fault
    log_lines: int = 0
    events: int = 0
    journals_verified: int = 0
    series_compared: int = 0
    mismatches: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    failure_count: int = 0

    def fail(self, line: str) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_FAILURES_KEPT:
            self.failures.append(line)

    def merge(self, other: TableSummary) -> None:
        for name in (
            "rounds",
            "completed",
            "voided",
            "hands_dead",
            "log_lines",
            "events",
            "journals_verified",
            "series_compared",
            "mismatches",
            "failure_count",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("voids", "removals", "injected", "caught"):
            getattr(self, name).update(getattr(other, name))
        self.seconds = max(self.seconds, other.seconds)
        self.failures += other.failures[: MAX_FAILURES_KEPT - len(self.failures)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "completed": self.completed,
            "voided": self.voided,
            "hands_dead": self.hands_dead,
            "voids_by_rule": dict(self.voids),
            "removals_by_rule": dict(self.removals),
            "injected": dict(self.injected),
            "caught": dict(self.caught),
            "events": self.events,
            "log_lines": self.log_lines,
            "journals_verified": self.journals_verified,
            "metric_series_compared": self.series_compared,
            "metric_mismatches": self.mismatches,
            "seconds": round(self.seconds, 2),
            "failure_count": self.failure_count,
            "first_failures": self.failures,
        }


class FaceDownWatch(io.TextIOBase):
    """A text stream for the daemon's logs that checks each line as it is written against the
    cards face down at that moment (in the simulated shoe or shuffler)."""

    def __init__(self, summary: TableSummary) -> None:
        self.summary = summary
        self.harness: SimulatedTableHarness | None = None
        self.where = "start"
        self._partial = ""

    def face_down(self) -> set[str]:
        if self.harness is None:
            return set()
        table = self.harness.table
        return set(table.shoe.cards) | set(table.shuffler.cards)

    def check_line(self, line: str, what: str) -> None:
        leaked = sorted(set(CARD_TOKEN.findall(line)) & self.face_down())
        if leaked:
            self.summary.fail(f"{self.where}: face-down card(s) {leaked} in {what}: {line!r}")

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self.summary.log_lines += 1
            self.check_line(line, "a log line")
        return len(text)


def scrape_counters(port: int) -> dict[Key, float]:
    """The compared counters, read over HTTP from the daemon's metrics endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _COMPARED:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


class RoundChecker:
    """The per-round invariants, fed by the demo's `on_round` seam."""

    def __init__(
        self, game: str, dealing: str, rounds: int, summary: TableSummary, watch: FaceDownWatch
    ) -> None:
        self.game = game
        self.dealing = dealing
        self.rounds = rounds
        self.summary = summary
        self.watch = watch
        self.stdout = io.StringIO()
        self.last_round_number: int | None = None
        self.scraped: dict[Key, float] | None = None

    async def __call__(self, report: RoundReport, daemon: Daemon) -> None:
        self.check(report, daemon.service.engine.round_number)
        if self.summary.rounds == self.rounds and daemon.port is not None:
            self.scraped = await asyncio.to_thread(scrape_counters, daemon.port)

    def check(self, report: RoundReport, round_number: int) -> None:
        s = self.summary
        s.rounds += 1
        where = f"{self.game}/{self.dealing} round {report.number} (#{s.rounds})"
        self.watch.where = where
        fail = s.fail
        decisions = report.decisions
        kinds = Counter(str(d.get("decision")) for d in decisions)
        s.events += len(report.handled)
        removed_decks: set[str] = set()  # a later deck may carry the same label
        # exactly one outcome
        if self.last_round_number is not None and round_number != self.last_round_number + 1:
            fail(
                f"{where}: the engine's round number went {self.last_round_number} -> "
                f"{round_number}, not one round"
            )
        self.last_round_number = round_number
        if kinds["void_round"] > 1:
            fail(f"{where}: {kinds['void_round']} void_round decisions in one round")
        if kinds["void_round"] and kinds["hands_dead"]:
            fail(f"{where}: both voided and hands dead")
        outcome = report.outcome
        if outcome == "voided":
            s.voided += 1
        elif outcome == "hands_dead":
            s.hands_dead += 1
        else:
            s.completed += 1
        for d in decisions:
            if d.get("decision") == "void_round":
                s.voids[str(d.get("rule_id"))] += 1
            if d.get("decision") == "remove_deck":
                s.removals[str(d.get("rule_id"))] += 1
                deck = str(d.get("deck"))
                if deck in removed_decks:
                    fail(f"{where}: deck {deck} removed twice")
                removed_decks.add(deck)
        # nothing decided twice for one event
        for handled in report.handled:
            seen = [json.dumps(d, sort_keys=True) for d in handled.decisions]
            for text, n in Counter(seen).items():
                if n > 1:
                    fail(f"{where}: {text} decided {n} times for one {handled.event.get('type')}")
        # faults and their rules
        if not report.faults:
            illegal = sorted(k for k in kinds if k in ILLEGAL_IN_A_LEGAL_ROUND)
            if illegal:
                fail(f"{where}: a fault-free round drew {illegal}: {decisions}")
        for fault in report.faults:
            s.injected[fault] += 1
            wanted = expected_decision(fault, self.dealing)
            if wanted is None:
                links = [str(h.event.get("type")) for h in report.handled]
                ok = "device_lost" in links and "device_connected" in links
                what = "device_lost then device_connected"
            else:
                ok = any((d.get("decision"), d.get("rule_id")) == wanted for d in decisions)
                what = f"{wanted[0]} ({wanted[1]})"
            if ok:
                s.caught[fault] += 1
            else:
                fail(f"{where}: fault {fault} did not draw {what}; drew {dict(kinds)}")
        # no face-down card in the summary line (it shows none at all) nor in the logs
        printed = self.stdout.getvalue()
        self.stdout.seek(0)
        self.stdout.truncate()
        for line in printed.splitlines():
            if line.startswith("round ") and CARD_TOKEN.search(line):
                fail(f"{where}: a card in the summary line: {line!r}")
            self.watch.check_line(line, "the demo's output")


def soak_table(
    game: str, dealing: str, rounds: int, fault_rate: float, seed: int, directory: Path
) -> TableSummary:
    """One table through the demo's daemon; the per-round and end checks. In-process."""
    from tablectl.controller.record.journal import verify_journal

    summary = TableSummary()
    watch = FaceDownWatch(summary)
    checker = RoundChecker(game, dealing, rounds, summary, watch)
    state_dir = directory / f"{game}-{dealing}"
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    argv = ["--game", game, "--rounds", str(rounds), "--seed", str(seed)]
    argv += ["--state-dir", str(state_dir), "--metrics-listen", "127.0.0.1:0"]
    argv += ["--faults", str(fault_rate), "--log-level", "info", "--fast"]
    if game in ("five_card_hilo", "heads_up_holdem"):
        argv += ["--dealing", dealing]
    args = parser.parse_args(argv)
    configure_logging("info", mode="json", stream=watch)

    def plugged(harness: SimulatedTableHarness) -> None:
        watch.harness = harness

    started = time.perf_counter()
    with contextlib.redirect_stdout(checker.stdout):
        status = asyncio.run(
            demo.play_demo(
                args,
                seed,
                "127.0.0.1",
                0,
                on_round=checker,
                on_plugged=plugged,
                shuffle_seconds=SOAK_SHUFFLE_SECONDS,
            )
        )
    summary.seconds = time.perf_counter() - started
    where = f"{game}/{dealing} seed={seed}"
    if status != 0:
        summary.fail(f"{where}: the demo exited {status}: {checker.stdout.getvalue()[-500:]!r}")
    if summary.rounds != rounds:
        summary.fail(f"{where}: {summary.rounds} of {rounds} rounds played")
    journal = state_dir / "journal.sqlite"
    result = verify_journal(journal)
    if result.ok:
        summary.journals_verified += 1
    else:
        summary.fail(f"{where}: journal {journal} does not verify: {result}")
    expected = journal_counts(journal, game)
    scraped = checker.scraped or {}
    if checker.scraped is None:
        summary.fail(f"{where}: the metrics endpoint was never scraped")
    for key in sorted(set(expected) | set(scraped)):
        summary.series_compared += 1
        if scraped.get(key, 0.0) != expected.get(key, 0):
            summary.mismatches += 1
            summary.fail(
                f"{where}: {key[0]}{dict(key[1])}: metrics {scraped.get(key, 0.0):g}, "
                f"journal {expected.get(key, 0)}"
            )
    return summary


def _table_job(job: tuple[str, str, int, float, int, str]) -> tuple[str, str, TableSummary]:
    game, dealing, rounds, fault_rate, seed, directory = job
    return game, dealing, soak_table(game, dealing, rounds, fault_rate, seed, Path(directory))


def split_rounds(rounds: int, tables: int = len(TABLES)) -> list[int]:
    """``rounds`` shared over the tables, the first ones taking the remainder."""
    share, extra = divmod(rounds, tables)
    return [share + (1 if i < extra else 0) for i in range(tables)]


def run_daemon_soak(
    rounds: int, fault_rate: float, seed: int, jobs: int, directory: Path
) -> dict[tuple[str, str], TableSummary]:
    """Every table in its own process (fresh metrics), ``jobs`` at a time."""
    work = [
        (game, dealing, n, fault_rate, seed + i, str(directory))
        for i, ((game, dealing), n) in enumerate(zip(TABLES, split_rounds(rounds), strict=True))
        if n > 0
    ]
    results: dict[tuple[str, str], TableSummary] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, max_tasks_per_child=1) as pool:
        for game, dealing, summary in pool.map(_table_job, work):
            results[(game, dealing)] = summary
    return results


def by_game(tables: Mapping[tuple[str, str], TableSummary]) -> dict[str, TableSummary]:
    games: dict[str, TableSummary] = {}
    for (game, _dealing), summary in sorted(tables.items()):
        games.setdefault(game, TableSummary()).merge(summary)
    return games


def table_text(games: Mapping[str, TableSummary]) -> str:
    head = (
        f"{'game':<16} {'rounds':>7} {'done':>7} {'void':>5} {'dead':>5} {'faults':>6} "
        f"{'caught':>6}  voids by rule / deck removals by rule / faults injected"
    )
    lines = [head, "-" * len(head)]
    for game, s in sorted(games.items()):
        voids = " ".join(f"{k}:{v}" for k, v in sorted(s.voids.items())) or "-"
        removals = " ".join(f"{k}:{v}" for k, v in sorted(s.removals.items())) or "-"
        faults = " ".join(f"{k}:{v}" for k, v in sorted(s.injected.items())) or "-"
        lines.append(
            f"{game:<16} {s.rounds:>7} {s.completed:>7} {s.voided:>5} {s.hands_dead:>5} "
            f"{sum(s.injected.values()):>6} {sum(s.caught.values()):>6}  "
            f"{voids} / {removals} / {faults}"
        )
    return "\n".join(lines)


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a share of rounds is between 0 and 1, got {value}")
    return value


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.daemon_soak", description=__doc__)
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds in all, over every table"
    )
    parser.add_argument(
        "--fault-rate", type=_rate, default=DEFAULT_FAULT_RATE, help="share of rounds faulted"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="tables soaked at once")
    parser.add_argument("--json", type=Path, default=Path(".bench/daemon_soak.json"))
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tablectl-daemon-soak-") as tmp:
        tables = run_daemon_soak(args.rounds, args.fault_rate, args.seed, args.jobs, Path(tmp))
    seconds = time.perf_counter() - started
    games = by_game(tables)
    total = sum(s.rounds for s in games.values())
    verified = sum(s.journals_verified for s in games.values())
    compared = sum(s.series_compared for s in games.values())
    mismatches = sum(s.mismatches for s in games.values())
    events = sum(s.events for s in games.values())
    log_lines = sum(s.log_lines for s in games.values())
    print(
        f"daemon path (ptys + pyusb, run_daemon, journal, metrics over HTTP): {total} rounds "
        f"in {seconds:.1f} s with {args.jobs} process(es), fault rate {args.fault_rate}; "
        f"{verified}/{len(tables)} journals verify, {compared} counter series scraped and "
        f"compared with the journals, {mismatches} mismatches; {events} events handled, "
        f"{log_lines} log lines checked for face-down cards",
        file=out,
    )
    print(table_text(games), file=out)
    report = {
        "rounds": total,
        "fault_rate": args.fault_rate,
        "seed": args.seed,
        "seconds": round(seconds, 2),
        "tables": {f"{g}/{d}": s.to_dict() for (g, d), s in tables.items()},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    failed = sum(s.failure_count for s in tables.values())
    if failed:
        print(f"\nDAEMON SOAK FAILED: {failed} invariant violation(s); first ones:", file=out)
        for summary in tables.values():
            for line in summary.failures:
                print(f"  {line}", file=out)
        return 1
    print(f"all invariants held; figures in {args.json}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
