"""One table's `tablectl demo` (the real daemon, its simulated devices, the automatic dealer),
with a record of what the daemon acknowledged kept off the filesystem under test.

    python -m tests.powercut.player --game GAME --state-dir DIR --acks FILE [--seed N]

is `tablectl demo --fast --state-dir DIR` (the demo's own code, `simulators.demo.play_demo`,
nothing of the daemon changed) with three seams a test needs, all outside the daemon:

- every event the daemon has handled (journaled and fsynced, its decisions acted on: its
  device commands sent, its operator reply about to go) is appended to FILE as the SHA-256 of
  its canonical JSON, the moment the service's observers hear of it, so the record holds no
  card (H7) yet names each event exactly. FILE lives on a real disk: a power cut of the
  journal's filesystem cannot touch it. An event the daemon acknowledged is in FILE unless the
  power went between the acknowledgement and the observer (microseconds);
- before each round, the daemon's device holds (`Daemon.interlocks`), the seq of the last row
  it journaled, and the simulated shoe's and shuffler's own lock state once the devices have
  settled (at most 2 s), appended to FILE: what "the devices' holds match the journal" is
  checked against;
- a line `ready` on stdout once the daemon is READY, and the demo's round lines.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tablectl.controller.common.logs import configure_logging
from tablectl.controller.record.journal import canonical_json
from tablectl.simulators import demo
from tablectl.simulators.autodealer import AutoDealer, EventFeed
from tablectl.simulators.harness import SimulatedTableHarness


def event_digest(event: Mapping[str, Any]) -> str:
    """The name of one event in the acknowledgement record: SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(dict(event)).encode()).hexdigest()


class Record:
    """FILE, appended a line at a time with one write(2) each (no buffer a kill could lose)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, entry: Mapping[str, Any]) -> None:
        os.write(self.fd, (json.dumps(entry, sort_keys=True) + "\n").encode())


RECORD: Record | None = None
SEEN: dict[str, Any] = {}


class RecordingFeed(EventFeed):
    def record(
        self, event: Mapping[str, Any], decisions: list[Any], seconds: float, source: str
    ) -> None:
        super().record(event, decisions, seconds, source)
        assert RECORD is not None
        RECORD.write({"ack": event_digest(event), "type": event.get("type"), "source": source})


class RecordingDealer(AutoDealer):
    async def play_round(self) -> Any:
        await record_holds()
        if SEEN.get("pause"):
            # a dealer's breath between rounds: the journal's upkeep (ticking every 0.5 s) may
            # only roll the segment over between rounds, and the demo's fast dealer leaves none
            await asyncio.sleep(SEEN["pause"])
        return await super().play_round()


async def record_holds() -> None:
    daemon = SEEN.get("daemon")
    harness: SimulatedTableHarness | None = SEEN.get("harness")
    if daemon is None or harness is None or RECORD is None:
        return
    table = harness.table

    def devices() -> dict[str, bool]:
        return {"shoe": bool(table.shoe.locked), "shuffler": bool(table.shuffler.locked)}

    def agree(holds: dict[str, list[str]], seen: dict[str, bool]) -> bool:
        return seen["shoe"] == bool(holds["shoe_locked"]) and (
            # a deck lock needs a deck in the shuffler: an empty one is never locked
            seen["shuffler"] == bool(holds["shuffler_deck_locked"]) or not seen["shuffler"]
        )

    deadline = time.monotonic() + 2.0
    while True:
        holds = daemon.interlocks.as_dict()
        seen = devices()
        if agree(holds, seen) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    RECORD.write(
        {
            "holds": holds,
            "devices": seen,
            "last_seq": daemon.service.journal.last_seq,
            "round": daemon.service.engine.round_number,
        }
    )


def main(argv: list[str] | None = None) -> int:
    global RECORD
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--acks", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default="0")
    parser.add_argument("--rounds", default=None)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between rounds")
    parser.add_argument(
        "--group-commit",
        action="store_true",
        help="the service's soak mode (rows flushed within milliseconds, not before each "
        "acknowledgement): only to show that the harness catches a lost acknowledged event",
    )
    parser.add_argument("--log", type=Path, required=True, help="the daemon's log (off the mount)")
    parser.add_argument(
        "--floor-dsn", default=None, help="the demo's --floor-dsn: ship the journal"
    )
    parser.add_argument("--floor-passfile", default=None, help="the demo's --floor-passfile")
    ours = parser.parse_args(argv)
    RECORD = Record(ours.acks)
    SEEN["pause"] = ours.pause
    log = open(ours.log, "a", encoding="utf-8")  # noqa: SIM115 (open while the demo runs)
    configure_logging("info", mode="json", stream=log)
    demo_parser = argparse.ArgumentParser()
    demo.add_arguments(demo_parser)
    demo_argv = ["--game", ours.game, "--state-dir", str(ours.state_dir), "--fast"]
    demo_argv += ["--seed", str(ours.seed), "--metrics-listen", "127.0.0.1:0"]
    demo_argv += ["--faults", ours.faults]
    if ours.rounds is not None:
        demo_argv += ["--rounds", ours.rounds]
    if ours.floor_dsn is not None:
        demo_argv += ["--floor-dsn", ours.floor_dsn]
    if ours.floor_passfile is not None:
        demo_argv += ["--floor-passfile", ours.floor_passfile]
    args = demo_parser.parse_args(demo_argv)

    demo.EventFeed = RecordingFeed  # type: ignore[misc]
    demo.AutoDealer = RecordingDealer  # type: ignore[misc]
    run_daemon = demo.run_daemon

    async def recording_run_daemon(config: Any, **options: Any) -> int:
        on_ready = options["on_ready"]

        def ready(daemon: Any) -> None:
            SEEN["daemon"] = daemon
            on_ready(daemon)
            print("ready", flush=True)

        options["on_ready"] = ready
        if ours.group_commit:
            options["group_commit"] = True
        return await run_daemon(config, **options)

    demo.run_daemon = recording_run_daemon  # type: ignore[assignment]

    def plugged(harness: SimulatedTableHarness) -> None:
        SEEN["harness"] = harness

    return asyncio.run(
        demo.play_demo(args, ours.seed, "127.0.0.1", 0, on_plugged=plugged, shuffle_seconds=0.005)
    )


if __name__ == "__main__":
    sys.exit(main())
