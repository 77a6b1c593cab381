"""The soak run: many simulated rounds of every game x dealing method, with device faults.

Two paths, both checked after every round:
- **engine** (the bulk, default 1,000,000 rounds): the bare round engine, fed legal rounds
  from tablectl.simulators.roundgen with faults from tests/soak/faults.py injected at a configurable
  rate, spread over worker processes. Fast: no journal, no metrics.
- **service** (a subset, default 10,000 rounds): the same rounds through the real
  TableService with an on-disk SQLite journal (group commit) and the real prometheus
  counters; at the end of every table session the journal must verify and the metrics'
  counters must equal what the journal holds.

Invariants after every round (issue 5): the card ledger of every deck conserves every card;
the round ends in exactly one outcome (settled, void, or never dealt because its deck was
removed first) and a fault-free round is settled with no void, removal, block, violation or
rejection; every injected fault produced the decision its rule requires, from the fault's
own events; nothing is decided twice (no decision repeated for one event, at most one
`void_round` per round and one `remove_deck` per deck).

A faulted round ends its table session: what follows a removed deck or a void is the
operators' recovery (new cards, a supervisor), which the legal-round generator does not
play, so the next session starts a fresh engine (and, on the service path, a fresh journal).

    python -m tests.soak.soak --rounds 1000000 --fault-rate 0.02 --service-rounds 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.ledger import LedgerError
from tablectl.controller.engine.table import TableSpec
from tablectl.simulators.roundgen import legal_stream
from tests.soak.faults import (
    FAULTS,
    TABLES,
    Event,
    FaultKind,
    dealt_cards,
    inject,
    split_rounds,
    table_label,
)

DEFAULT_ROUNDS = 1_000_000
DEFAULT_SERVICE_ROUNDS = 10_000
DEFAULT_FAULT_RATE = 0.02
MAX_SESSION_ROUNDS = 200
MAX_FAILURES_KEPT = 20
# Decisions a fault-free legal round must never draw (simulators/roundgen.py's promise).
NEVER_IN_A_LEGAL_ROUND = frozenset(
    {"void_round", "void_hand", "remove_deck", "deal_blocked", "procedure_violation", "rejected"}
)


@dataclass
class Summary:
    """Counts for one table (or, merged, one game)."""

    rounds: int = 0
    settled: int = 0
    undealt: int = 0
    voids: Counter[str] = field(default_factory=Counter)  # by rule id
    removals: Counter[str] = field(default_factory=Counter)  # by rule id
    injected: Counter[str] = field(default_factory=Counter)  # by fault
    caught: Counter[str] = field(default_factory=Counter)  # by fault
    events: int = 0
    failures: list[str] = field(default_factory=list)
    failure_count: int = 0

    def merge(self, other: Summary) -> None:
        self.rounds += other.rounds
        self.settled += other.settled
        self.undealt += other.undealt
        self.events += other.events
        for mine, theirs in (
            (self.voids, other.voids),
            (self.removals, other.removals),
            (self.injected, other.injected),
            (self.caught, other.caught),
        ):
            mine.update(theirs)
        self.failure_count += other.failure_count
        self.failures.extend(other.failures[: MAX_FAILURES_KEPT - len(self.failures)])

    def fail(self, message: str) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_FAILURES_KEPT:
            self.failures.append(message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "settled": self.settled,
            "undealt": self.undealt,
            "voids": dict(sorted(self.voids.items())),
            "removals": dict(sorted(self.removals.items())),
            "faults_injected": sum(self.injected.values()),
            "faults_caught": sum(self.caught.values()),
            "injected": dict(sorted(self.injected.items())),
            "events": self.events,
            "failures": self.failure_count,
            "first_failures": self.failures,
        }


@dataclass
class PlannedRound:
    events: list[Event]
    fault: FaultKind | None = None
    phase: str | None = None
    fault_at: tuple[int, ...] = ()
    expected: tuple[tuple[str, str], ...] = ()


def plan_session(
    spec: TableSpec, rng: random.Random, rounds: int, fault: bool
) -> list[PlannedRound]:
    """``rounds`` legal rounds; when ``fault``, the last one carries a fault at some phase."""
    stream = legal_stream(spec, rng, rounds)
    planned = [PlannedRound(events) for events in split_rounds(stream)]
    if not fault:
        return planned
    spent: Counter[str] = Counter()
    for round_ in planned[:-1]:
        if any(e["type"] == "shoe_loaded" for e in round_.events):
            spent = Counter()
        spent += dealt_cards(round_.events)
    last = planned[-1]
    if spec.game != "three_card_21" or any(e["type"] == "shoe_loaded" for e in last.events):
        spent = Counter()
    choices = [(f, p) for f in FAULTS if f.applies(spec) for p in f.phases]
    rng.shuffle(choices)
    for kind, phase in choices:
        injection = inject(spec, kind, phase, last.events, spent, rng)
        if injection is not None:
            planned[-1] = PlannedRound(
                injection.events, kind, phase, injection.fault_at, injection.expected
            )
            break
    return planned


def check_round(
    engine: Any,
    planned: PlannedRound,
    decisions: list[list[dict[str, Any]]],
    summary: Summary,
    where: str,
) -> None:
    """Every invariant of issue 5 for one round that has just been played."""
    summary.rounds += 1
    for name, deck in engine.decks.items():
        try:
            deck.ledger.check()
        except LedgerError as error:
            summary.fail(f"{where}: ledger of deck {name}: {error}")
    flat = [d for per_event in decisions for d in per_event]
    for index, per_event in enumerate(decisions):
        pairs = [(d["decision"], d["rule_id"]) for d in per_event]
        repeated = [pair for pair, n in Counter(pairs).items() if n > 1]
        if repeated:
            summary.fail(f"{where}: event {index} decided {repeated} twice")
    voids = [d for d in flat if d["decision"] == "void_round"]
    removals = Counter(str(d.get("deck", "A")) for d in flat if d["decision"] == "remove_deck")
    if len(voids) > 1:
        summary.fail(f"{where}: {len(voids)} void_round decisions in one round")
    if any(n > 1 for n in removals.values()):
        summary.fail(f"{where}: a deck removed twice in one round: {dict(removals)}")
    collected = sum(1 for e in planned.events if e["type"] == "hands_collected")
    if collected != 1:
        summary.fail(f"{where}: the round ended {collected} times")
    for decision in voids:
        summary.voids[decision["rule_id"]] += 1
    for decision in flat:
        if decision["decision"] == "remove_deck":
            summary.removals[decision["rule_id"]] += 1
    if voids:
        outcome = "void"
    elif removals:
        outcome = "undealt"
        summary.undealt += 1
    else:
        outcome = "settled"
        summary.settled += 1
    if planned.fault is None:
        bad = sorted({d["decision"] for d in flat} & NEVER_IN_A_LEGAL_ROUND)
        if bad or outcome != "settled":
            summary.fail(f"{where}: a fault-free round drew {bad} ({outcome})")
        return
    name = planned.fault.name
    summary.injected[name] += 1
    made = {(d["decision"], d["rule_id"]) for i in planned.fault_at for d in decisions[i]}
    missing = [pair for pair in planned.expected if pair not in made]
    if missing:
        summary.fail(
            f"{where}: fault {name} at {planned.phase} did not produce {missing} "
            f"(it produced {sorted(made)})"
        )
    else:
        summary.caught[name] += 1


# -- the engine path -------------------------------------------------------------------------


def session_lengths(
    rng: random.Random, rounds: int, fault_rate: float
) -> Iterable[tuple[int, bool]]:
    """Session lengths whose last round is faulted with probability ``fault_rate`` per round."""
    done = 0
    while done < rounds:
        length, faulted = 1, False
        while True:
            if rng.random() < fault_rate:
                faulted = True
                break
            if length >= MAX_SESSION_ROUNDS or done + length >= rounds:
                break
            length += 1
        length = min(length, rounds - done)
        yield length, faulted
        done += length


def soak_engine(
    game: str, options: dict[str, Any], rounds: int, fault_rate: float, seed: int
) -> Summary:
    """``rounds`` rounds of one table through the bare engine; returns its summary."""
    spec = TableSpec.from_dict({"game": game, "options": options})
    rng = random.Random(seed)
    summary = Summary()
    label = table_label(game, options)
    for session, (length, faulted) in enumerate(session_lengths(rng, rounds, fault_rate)):
        engine = Engine(spec, random_source=random.Random(rng.random()).randrange)
        at = 0
        for number, planned in enumerate(plan_session(spec, rng, length, faulted), start=1):
            per_event = []
            for event in planned.events:
                at += 1
                per_event.append([d.to_dict() for d in engine.handle(event, at)])
            summary.events += len(planned.events)
            where = f"{label} seed={seed} session={session} round={number}"
            check_round(engine, planned, per_event, summary, where)
    return summary


def _engine_job(job: tuple[str, dict[str, Any], int, float, int]) -> tuple[str, Summary]:
    game, options, rounds, rate, seed = job
    return game, soak_engine(game, options, rounds, rate, seed)


def run_engine_soak(
    rounds: int, fault_rate: float, seed: int, jobs: int, chunk: int = 20_000
) -> tuple[dict[str, Summary], float]:
    """The bulk soak over every table, in ``jobs`` processes; per-game summaries, seconds."""
    work: list[tuple[str, dict[str, Any], int, float, int]] = []
    per_table = [rounds // len(TABLES)] * len(TABLES)
    for index in range(rounds - sum(per_table)):
        per_table[index] += 1
    for (game, options), count in zip(TABLES, per_table, strict=True):
        for start in range(0, count, chunk):
            work.append((game, options, min(chunk, count - start), fault_rate, seed + len(work)))
    started = time.perf_counter()
    games: dict[str, Summary] = {}
    if jobs <= 1:
        results = map(_engine_job, work)
        for game, summary in results:
            games.setdefault(game, Summary()).merge(summary)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for game, summary in pool.map(_engine_job, work):
                games.setdefault(game, Summary()).merge(summary)
    return games, time.perf_counter() - started


# -- the service path ------------------------------------------------------------------------


def metric_samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every counter sample of the process's prometheus registry, by name and labels."""
    from prometheus_client import REGISTRY

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in REGISTRY.collect():
        if family.type != "counter":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def journal_counts(path: Path, game: str) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    """What the metrics must say, counted independently from the journal's rows."""
    from tablectl.controller.common import metrics
    from tablectl.controller.record.journal import read_rows

    counts: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    voided: set[int] = set()
    ended: set[int] = set()
    pending_collect: int | None = None
    for row in read_rows(path):
        if row.kind == "event":
            pending_collect = None
            kind = row.body.get("type")
            if kind in ("shuffler_fault", "shoe_fault", "reader_fault"):
                device = metrics.label_value(row.body.get("device") or kind.split("_")[0])
                fault = metrics.label_value(row.body.get("fault"))
                counts[
                    ("tablectl_device_faults_total", (("device", device), ("fault", fault)))
                ] += 1
            if kind == "hands_collected" and (row.round or 0) >= 1:
                pending_collect = row.round or 0
                ended.add(row.round or 0)
        elif row.kind == "decision":
            decision = row.body
            labels = (
                ("decision", metrics.label_value(decision.get("decision"))),
                ("rule_id", metrics.rule_id_label(decision.get("rule_id"))),
            )
            counts[("tablectl_decisions_total", labels)] += 1
            if decision.get("decision") == "void_round":
                voided.add(row.round or 0)
            if decision.get("decision") == "rejected" and pending_collect is not None:
                ended.discard(pending_collect)
    for number in ended:
        outcome = "voided" if number in voided else "completed"
        counts[("tablectl_rounds_total", (("game", game), ("outcome", outcome)))] += 1
    return counts


async def _service_session(
    spec: TableSpec,
    game: str,
    options: dict[str, Any],
    planned_rounds: list[PlannedRound],
    journal_path: Path,
    summary: Summary,
    where: str,
    seed: float,
) -> None:
    from tablectl.controller.common.config import parse_config
    from tablectl.controller.record.journal import Journal
    from tablectl.controller.service.service import TableService

    config = parse_config(
        {
            "table": {"id": "soak", "game": game, "options": options},
            "journal": {"path": str(journal_path)},
        },
        "soak.toml",
    )
    service = TableService(
        config,
        Journal(journal_path),
        random_source=random.Random(seed).randrange,
        group_commit=True,
    )
    await service.start()
    try:
        for number, planned in enumerate(planned_rounds, start=1):
            per_event = [await service.handle_event(event) for event in planned.events]
            summary.events += len(planned.events)
            check_round(service.engine, planned, per_event, summary, f"{where} round={number}")
    finally:
        service.close()


def soak_service(
    rounds: int, fault_rate: float, seed: int, directory: Path
) -> tuple[dict[str, Summary], dict[str, Any]]:
    """Rounds of every table through TableService + journal + metrics; the end checks."""
    from tablectl.controller.record.journal import verify_journal

    rng = random.Random(seed)
    games: dict[str, Summary] = {}
    before = metric_samples()
    expected: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    journals = verified = 0
    started = time.perf_counter()
    per_table = max(1, rounds // len(TABLES))
    for game, options in TABLES:
        spec = TableSpec.from_dict({"game": game, "options": options})
        summary = games.setdefault(game, Summary())
        label = table_label(game, options)
        for session, (length, faulted) in enumerate(session_lengths(rng, per_table, fault_rate)):
            path = directory / f"{label.replace(',', '_').replace('=', '-')}-{session}.sqlite"
            planned = plan_session(spec, rng, length, faulted)
            where = f"service {label} seed={seed} session={session}"
            asyncio.run(
                _service_session(spec, game, options, planned, path, summary, where, rng.random())
            )
            journals += 1
            result = verify_journal(path)
            if result.ok:
                verified += 1
            else:
                summary.fail(f"{where}: journal {path} does not verify: {result}")
            expected.update(journal_counts(path, game))
            path.unlink()
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    seconds = time.perf_counter() - started
    after = metric_samples()
    mismatches = []
    for key in sorted(set(expected) | {k for k in after if k[0] in _COMPARED}):
        if key[0] not in _COMPARED:
            continue
        delta = after.get(key, 0.0) - before.get(key, 0.0)
        if delta != expected.get(key, 0):
            mismatches.append(f"{key[0]}{dict(key[1])}: metrics {delta:g}, journal {expected[key]}")
    if mismatches:
        games.setdefault("metrics", Summary())
        for line in mismatches:
            games["metrics"].fail(f"metrics != journal: {line}")
    checks = {
        "journals": journals,
        "journals_verified": verified,
        "metric_series_compared": len(expected),
        "metric_mismatches": len(mismatches),
        "seconds": round(seconds, 2),
    }
    return games, checks


_COMPARED = ("tablectl_decisions_total", "tablectl_rounds_total", "tablectl_device_faults_total")


# -- the report ------------------------------------------------------------------------------


def table_text(games: Mapping[str, Summary]) -> str:
    head = (
        f"{'game':<16} {'rounds':>9} {'settled':>9} {'void':>7} {'undealt':>7} "
        f"{'faults':>7} {'caught':>7}  voids by rule / deck removals by rule"
    )
    lines = [head, "-" * len(head)]
    for game, s in sorted(games.items()):
        voids = " ".join(f"{k}:{v}" for k, v in sorted(s.voids.items())) or "-"
        removals = " ".join(f"{k}:{v}" for k, v in sorted(s.removals.items())) or "-"
        lines.append(
            f"{game:<16} {s.rounds:>9} {s.settled:>9} {sum(s.voids.values()):>7} "
            f"{s.undealt:>7} {sum(s.injected.values()):>7} {sum(s.caught.values()):>7}  "
            f"{voids} / {removals}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.soak", description=__doc__)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="engine-path rounds")
    parser.add_argument(
        "--service-rounds",
        type=int,
        default=DEFAULT_SERVICE_ROUNDS,
        help="rounds through TableService + journal + metrics (0: none)",
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=DEFAULT_FAULT_RATE,
        help="probability that a round carries a device fault",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, default=Path(".bench/soak.json"))
    args = parser.parse_args(argv)
    if not 0 <= args.fault_rate <= 1:
        parser.error(f"--fault-rate must be between 0 and 1, got {args.fault_rate}")
    if args.rounds < 0 or args.service_rounds < 0:
        parser.error("--rounds and --service-rounds must be 0 or more")

    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    report: dict[str, Any] = {"fault_rate": args.fault_rate, "seed": args.seed}
    failed = 0
    if args.rounds:
        games, seconds = run_engine_soak(args.rounds, args.fault_rate, args.seed, args.jobs)
        total = sum(s.rounds for s in games.values())
        print(
            f"engine path: {total} rounds in {seconds:.1f} s with {args.jobs} process(es) "
            f"({total / seconds:.0f} rounds/s)"
        )
        print(table_text(games))
        report["engine"] = {
            "seconds": round(seconds, 2),
            "jobs": args.jobs,
            "games": {g: s.to_dict() for g, s in games.items()},
        }
        failed += sum(s.failure_count for s in games.values())
    if args.service_rounds:
        with tempfile.TemporaryDirectory(prefix="tablectl-soak-") as tmp:
            games, checks = soak_service(args.service_rounds, args.fault_rate, args.seed, Path(tmp))
        print(
            f"\nservice path (TableService + SQLite journal + prometheus counters): "
            f"{checks['journals_verified']}/{checks['journals']} journals verify, "
            f"{checks['metric_series_compared']} counter series compared with the journals, "
            f"{checks['metric_mismatches']} mismatches, {checks['seconds']} s"
        )
        print(table_text({g: s for g, s in games.items() if g != "metrics"}))
        report["service"] = {"checks": checks, "games": {g: s.to_dict() for g, s in games.items()}}
        failed += sum(s.failure_count for s in games.values())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    if failed:
        print(f"\nSOAK FAILED: {failed} invariant violation(s); first ones:", file=sys.stderr)
        for part in ("engine", "service"):
            for summary in report.get(part, {}).get("games", {}).values():
                for line in summary["first_failures"]:
                    print(f"  {line}", file=sys.stderr)
        return 1
    print(f"\nall invariants held; figures in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
