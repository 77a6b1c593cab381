"""The journal's history checked, at start and in the background (docs/journal.md).

At start (`check_segment_links`, called by the start check) each closed segment is held to the
next one's opening `segment` row: its last row's seq and hash, its file name, and its row count
(a closed file holds every seq from its first to its last). That reads two rows and a count per
file, so it stays quick for a year of segments, and it finds a segment missing in the middle,
a closed file cut or rewritten at its end, and rows deleted inside one.

After READY the daemon starts a `BackgroundVerifier`: a child process (`python -m
tablectl.controller.record.journal_verifier`) at the lowest CPU priority (SCHED_IDLE, nice 19) walks
every closed segment and the live one up to the row the daemon had written at READY, end to
end, with the same `ChainWalk` as `journal verify`, one row in memory at a time, and prints its
progress and verdict as JSON lines. A process and not a thread: the walk is pure Python hashing
that holds the GIL, and a thread would take the interpreter from the event loop for up to the
switch interval (5 ms) at a time; a child at SCHED_IDLE takes only CPU nobody else wants, and
the daemon only reads its lines. Damage found there is the daemon's to report: a critical
alarm, `tablectl_journal_background_damage`, a `journal_damage_found` note in the journal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.common import metrics
from tablectl.controller.common.logs import get_logger
from tablectl.controller.record.journal import (
    ChainWalk,
    JournalError,
    _connect_read_only,
    _original_finder,
    _Tampered,
    live_segments,
)

#: Rows between two progress lines of the background walk.
PROGRESS_ROWS = 20_000
#: Seconds between two background walks while the daemon runs (one after every READY).
DEFAULT_WALK_INTERVAL = 6 * 3600
#: Seconds after READY before the first walk: the start's own burst (devices handshaking,
#: the first events) is over before a child interpreter starts beside it.
DEFAULT_WALK_DELAY = 3.0


@dataclass(frozen=True)
class SegmentEnds:
    """What the start check reads of one segment file: its ends, its count, its first row."""

    path: Path
    first_seq: int
    last_seq: int
    last_hash: str
    count: int
    first_kind: str
    first_body: str
    first_prev_hash: str


def segment_ends(path: Path, *, counted: bool = True) -> SegmentEnds | None:
    """The ends of one segment file (None when it holds no row); JournalError if unreadable."""
    db = _connect_read_only(path)
    try:
        first = db.execute(
            "SELECT seq, kind, body, prev_hash FROM journal ORDER BY seq LIMIT 1"
        ).fetchone()
        last = db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        # a closed file's count (a scan of its table: ~8 MB); the live one's is not needed
        # (the start walks its chain, where a deleted row is a gap)
        count = -1 if not counted else int(db.execute("SELECT count(*) FROM journal").fetchone()[0])
    except sqlite3.Error as error:
        raise JournalError(f"{path}: cannot read the segment: {error}") from error
    finally:
        db.close()
    if first is None or last is None:
        return None
    return SegmentEnds(
        path, int(first[0]), int(last[0]), str(last[1]), int(count), *map(str, first[1:])
    )


def check_segment_links(live: Path) -> tuple[str, int | None] | None:
    """The closed segments beside `live` held to each other and to `live`: None when every
    link holds, else (what is wrong, the first row to look at).

    Segments retired by retention are before the oldest file kept: the oldest file's own
    link is not checked (its predecessor is archived or gone on purpose).
    """
    ends: list[SegmentEnds] = []
    for path in live_segments(live):
        try:
            found = segment_ends(path, counted=path != live)
        except JournalError as error:
            return str(error), None
        if found is not None:
            ends.append(found)
        elif path != live:
            # a roll-over closes a segment only after rows (and its WAL copied into it): an
            # empty closed file lost them (a WAL deleted before its checkpoint did that once)
            return (
                f"{path.name} is a closed segment that holds no rows: its rows were lost or "
                "deleted (a closed segment always ends where the next one's segment row says)",
                None,
            )
    ends.sort(key=lambda e: e.first_seq)
    for index, segment in enumerate(ends):
        expected = segment.last_seq - segment.first_seq + 1
        if segment.count >= 0 and segment.count != expected:
            return (
                f"{segment.path.name} holds {segment.count} rows but numbers them "
                f"{segment.first_seq}-{segment.last_seq} ({expected}): rows were deleted or "
                "added in it",
                segment.first_seq,
            )
        if index == 0:
            continue
        before = ends[index - 1]
        problem = _link_problem(before, segment)
        if problem is not None:
            return problem
    return None


def _link_problem(before: SegmentEnds, segment: SegmentEnds) -> tuple[str, int | None] | None:
    """`segment` opens with a `segment` row naming `before`'s file, last seq and head."""
    name = segment.path.name
    if segment.first_kind != "segment":
        return (
            f"{name} starts at row {segment.first_seq} with a {segment.first_kind} row, not "
            f"the segment row that names {before.path.name}: rows were cut from its start",
            segment.first_seq,
        )
    try:
        previous = json.loads(segment.first_body)["previous"]
        named = (str(previous["file"]), int(previous["last_seq"]), str(previous["head"]))
    except (ValueError, KeyError, TypeError):
        return f"{name}: row {segment.first_seq}, its segment row, is malformed", segment.first_seq
    file, last_seq, head = named
    if last_seq != before.last_seq or file != before.path.name:
        return (
            f"{name} opens at row {segment.first_seq} after {file} ending at row {last_seq}, "
            f"but the segment before it here is {before.path.name} ending at row "
            f"{before.last_seq}: a segment between them is missing (rows "
            f"{before.last_seq + 1}-{last_seq})"
            if last_seq > before.last_seq
            else f"{name} opens at row {segment.first_seq} after {file} ending at row "
            f"{last_seq}, but {before.path.name} ends at row {before.last_seq}: the segments "
            "do not join",
            before.last_seq + 1 if last_seq > before.last_seq else segment.first_seq,
        )
    if head != before.last_hash or segment.first_prev_hash != before.last_hash:
        return (
            f"{before.path.name}'s last row {before.last_seq} is not the row {name} was "
            f"linked to (its hash differs from the head row {segment.first_seq} names): "
            f"{before.path.name} was rewritten",
            before.last_seq,
        )
    if segment.first_seq != before.last_seq + 1:
        return (
            f"{name} opens at row {segment.first_seq}, not {before.last_seq + 1}",
            segment.first_seq,
        )
    return None


# --- the background walk (the child process) --------------------------------------------------


def walk(live: Path, until_seq: int, progress: Callable[[int, int], None]) -> dict[str, Any]:
    """Every segment beside `live`, oldest first, and `live` itself up to row `until_seq`,
    through one ChainWalk (links across files included); the verdict as a dict."""
    started = time.monotonic()
    chain = ChainWalk()
    files = sorted(
        live_segments(live), key=lambda p: (0, _first_seq_or_zero(p)) if p != live else (1, 0)
    )
    current = ""
    try:
        for path in files:
            current = path.name
            db = _connect_read_only(path)
            try:
                original = _original_finder(db)  # names where a moved row came from
                for raw in _rows(db, until_seq if path == live else None):
                    chain.feed(raw, original)
                    if chain.count % PROGRESS_ROWS == 0:
                        progress(raw[0], chain.count)
            finally:
                db.close()
    except _Tampered as tampered:
        return _verdict(chain, False, f"{current}: {tampered.message}", tampered.seq, started)
    except (JournalError, sqlite3.Error, ValueError) as error:
        where = chain.expected_seq
        return _verdict(
            chain, False, f"{current} is damaged at row {where}: {error}", where, started
        )
    return _verdict(chain, True, f"intact: {chain.count} rows", None, started)


def _verdict(
    chain: ChainWalk, ok: bool, message: str, bad: int | None, started: float
) -> dict[str, Any]:
    return {
        "ok": ok,
        "message": message,
        "first_bad_seq": bad,
        "rows": chain.count,
        "last_seq": (chain.expected_seq or 1) - 1,
        "seconds": round(time.monotonic() - started, 3),
    }


def _first_seq_or_zero(path: Path) -> int:
    try:
        found = segment_ends(path, counted=False)
    except JournalError:
        return 0
    return found.first_seq if found is not None else 0


def _rows(db: sqlite3.Connection, until_seq: int | None) -> Iterator[tuple[Any, ...]]:
    """The rows of one file in physical order (as `verify` reads them), a batch at a time."""
    cursor = db.execute(
        "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
        + (" WHERE seq <= ?" if until_seq is not None else "")
        + " ORDER BY rowid",
        (until_seq,) if until_seq is not None else (),
    )
    while batch := cursor.fetchmany(512):
        yield from batch


def lowest_priority() -> None:
    """This process takes only CPU nobody else wants (SCHED_IDLE; else nice 19)."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    with contextlib.suppress(OSError):
        os.nice(19)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tablectl.controller.record.journal_verifier",
        description="walk a table's journal segments end to end (the daemon's background check)",
    )
    parser.add_argument("live", type=Path, help="the live journal file")
    parser.add_argument("--until", type=int, required=True, help="the last row of the live file")
    args = parser.parse_args(argv)
    lowest_priority()
    parent = os.getppid()

    def progress(seq: int, rows: int) -> None:
        if os.getppid() != parent:  # the daemon is gone (a kill -9): no one reads this walk
            sys.exit(3)
        print(json.dumps({"progress": seq, "rows": rows}), flush=True)

    verdict = walk(args.live, args.until, progress)
    print(json.dumps({"verdict": verdict}), flush=True)
    return 0 if verdict["ok"] else 1


# --- the daemon's side ------------------------------------------------------------------------

DamageHandler = Callable[[dict[str, Any]], Awaitable[None]]
#: Not passed to the daemon's children (the walk, retention): they are not systemd's and must
#: not speak on its notify socket or take its sockets.
CHILD_HIDDEN_VARIABLES = (
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
)


class BackgroundVerifier:
    """Runs the walk in a child process after READY and every `interval` seconds after."""

    def __init__(
        self,
        live: Path,
        last_seq: Callable[[], int],
        on_damage: DamageHandler,
        *,
        interval: float = DEFAULT_WALK_INTERVAL,
        delay: float = DEFAULT_WALK_DELAY,
        table: str = "",
    ) -> None:
        self.live = live
        self.last_seq = last_seq
        self.on_damage = on_damage
        self.interval = interval
        self.delay = delay
        self.damage: dict[str, Any] | None = None
        self.last_verdict: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._log = get_logger("journal", table=table)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="journal:background-verifier"
        )

    async def stop(self) -> None:
        """Cancel the walk and kill its child; bounded (a child at SCHED_IDLE on a busy
        machine may take a moment to be reaped: the stop never waits on it long)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._kill()

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def _run(self) -> None:
        await asyncio.sleep(self.delay)
        while True:
            try:
                await self.walk_once()
            except (OSError, ValueError) as error:
                self._log.error("journal_background_verify_failed", error=str(error))
            await asyncio.sleep(self.interval)

    async def walk_once(self) -> dict[str, Any] | None:
        """One walk to the row written now; its verdict (None if the child said none)."""
        until = self.last_seq()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tablectl.controller.record.journal_verifier",
            str(self.live),
            "--until",
            str(until),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
            # not systemd's child: it must not speak on the daemon's notify socket
            env={k: v for k, v in os.environ.items() if k not in CHILD_HIDDEN_VARIABLES},
        )
        self._process = process
        assert process.stdout is not None
        verdict: dict[str, Any] | None = None
        self._log.info("journal_background_verify_started", until_seq=until, pid=process.pid)
        try:
            async for line in process.stdout:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if "progress" in message:
                    metrics.JOURNAL_BACKGROUND_VERIFIED_SEQ.set(int(message["progress"]))
                elif "verdict" in message:
                    verdict = dict(message["verdict"])
            await process.wait()
        finally:
            self._kill()  # cancelled (a stop): the child goes with the walk
        if verdict is None:
            self._log.error("journal_background_verify_failed", exit_code=process.returncode)
            return None
        self.last_verdict = verdict
        metrics.JOURNAL_BACKGROUND_VERIFIED_SEQ.set(int(verdict["last_seq"]))
        metrics.JOURNAL_BACKGROUND_LAST_RUN.set(time.time())
        if verdict["ok"]:
            self._log.info(
                "journal_background_verified",
                rows=verdict["rows"],
                last_seq=verdict["last_seq"],
                seconds=verdict["seconds"],
            )
            return verdict
        metrics.JOURNAL_BACKGROUND_DAMAGE.set(1)
        self._log.critical(
            "journal_damage_found",
            error=verdict["message"],
            first_bad_seq=verdict["first_bad_seq"],
        )
        if self.damage is None:  # told once per run: the note and the alarm are not repeated
            self.damage = verdict
            await self.on_damage(verdict)
        return verdict


if __name__ == "__main__":
    sys.exit(main())
