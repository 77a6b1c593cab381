"""Segments by gaming day, retention and online backup, on a real service and real files.

The upkeep is stepped with explicit times (the daemon ticks it from its own clock; the
daemon-level roll-over is in test_daemon_journal.py).
"""

from __future__ import annotations

import asyncio
import datetime
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tablectl.controller.commands import cli
from tablectl.controller.common import metrics
from tablectl.controller.common.config import load_config
from tablectl.controller.record.journal import (
    Journal,
    backup_journal,
    read_rows,
    round_cards,
    verify_journal,
)
from tablectl.controller.record.journal_upkeep import JournalUpkeep, apply_retention
from tablectl.controller.record.sealing import Sealer, setup_keys
from tablectl.controller.service.service import TableService
from tests.journal.history import SAME_DISK_SAID, build_history, write_config

DAY_START = datetime.time(6, 0)


def moment(day: datetime.date, hour: int = 6, minute: int = 0) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(hour, minute, 5)).astimezone()


async def _service(config_path: Path) -> TableService:
    config = load_config(config_path)
    service = TableService(config, Journal(config.journal_path))
    await service.start()
    return service


def test_three_gaming_days_then_retention_archives_the_oldest(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    config_path = write_config(
        tmp_path / "t",
        journal_extra=f'retain_days = 1\narchive_dir = "{archive}"\n{SAME_DISK_SAID}',
    )
    build_history(config_path, 12)
    directory = config_path.parent
    first_day = datetime.date.today()

    setup_keys(directory / "sealing-key", interval=3600)  # retention retires sealed ones only

    async def scenario() -> list[int]:
        service = await _service(config_path)
        service.sealer = Sealer(directory / "sealing-key")
        upkeep = JournalUpkeep(service, asyncio.Lock())
        upkeep.segment_day = first_day
        rounds = [service.engine.round_number]
        for offset in (1, 2, 3):
            day = first_day + datetime.timedelta(days=offset)
            upkeep.step(moment(day, 5, 59))  # before 06:00: still the day before
            assert upkeep.segment_day == day - datetime.timedelta(days=1)
            upkeep.step(moment(day))
            assert upkeep.segment_day == day
            await service.handle_event({"type": "reader_inspected", "by": "floor"}, source="x")
            rounds.append(service.engine.round_number)
        service.close()
        return rounds

    asyncio.run(scenario())
    kept = sorted(p.name for p in directory.glob("journal-*.sqlite"))
    archived = sorted(p.name for p in archive.glob("*.sqlite"))
    # day 0 and day 1 are older than one gaming day before day 3: archived, not deleted
    assert len(archived) == 2 and archived[0].startswith(f"journal-{first_day.isoformat()}-")
    assert len(kept) == 1
    assert kept[0].startswith(f"journal-{(first_day + datetime.timedelta(days=2)).isoformat()}")
    # what is kept verifies on its own, from its first segment's link
    kept_verdict = verify_journal(directory)
    assert kept_verdict.ok and "earlier segments archived" in kept_verdict.message
    # the archive and what is kept verify together, links and all
    for name in [*kept, "journal.sqlite"]:
        (archive / name).write_bytes((directory / name).read_bytes())
    whole = verify_journal(archive)
    assert whole.ok and whole.first_seq == 1 and whole.last_seq == kept_verdict.last_seq
    # a segment missing in the middle is named
    (archive / archived[1]).unlink()
    broken = verify_journal(archive)
    assert broken.exit_code == 1 and "a segment between them is missing" in broken.message


def test_no_retention_keeps_every_segment(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    live.write_bytes(b"")
    old = tmp_path / "journal-2020-01-01-000000000001.sqlite"
    old.write_bytes(b"")
    assert apply_retention(live, datetime.date(2026, 1, 1), 0, None).retired == []
    # old by the clock, but the journal holds no later gaming day: kept
    outcome = apply_retention(live, datetime.date(2026, 1, 1), 30, None)
    assert outcome.retired == [] and "fewer than retain_days" in outcome.kept[0][1]
    assert old.exists() and live.exists()


def test_a_round_is_shown_from_the_segment_and_checkpoint_it_is_in(tmp_path: Path) -> None:
    """`journal show` replays from the checkpoint before the round, not from row 1."""
    config_path = write_config(tmp_path / "t", checkpoint_rounds=10)
    build_history(config_path, 25)
    journal = config_path.parent / "journal.sqlite"

    def no_fresh_engine(*_: object) -> None:
        raise AssertionError("round 23 must be rebuilt from the checkpoint at round 20")

    cards = round_cards(journal, 23, engine_factory=no_fresh_engine)  # type: ignore[arg-type]
    assert cards and all({"card", "to", "face_up"} <= set(card) for card in cards)
    drawn = [
        r.body["card"]
        for r in read_rows(journal)
        if r.kind == "event" and r.round == 23 and r.body.get("type") == "card_drawn"
    ]
    assert [card["card"] for card in cards] == drawn


def test_an_online_backup_while_rows_are_written_holds_every_committed_row(
    tmp_path: Path,
) -> None:
    """The writer appends and commits all along; each copy holds at least every row committed
    before it began, all of them the journal's own rows, and verifies."""
    config_path = write_config(tmp_path / "t")
    build_history(config_path, 40)
    live = config_path.parent / "journal.sqlite"
    stop = threading.Event()

    def write() -> None:
        with Journal(live) as journal:
            n = 0
            while not stop.is_set():
                journal.append("note", {"type": "device_report", "report": "status", "n": n})
                journal.flush()
                n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        copies = []
        for index in range(3):
            time.sleep(0.2)
            db = sqlite3.connect(live)
            committed = db.execute("SELECT max(seq) FROM journal").fetchone()[0]
            db.close()
            copied, result = backup_journal(live, tmp_path / f"copy{index}")
            assert result.ok, result.message
            assert result.last_seq >= committed
            copies.append((copied[-1], result))
    finally:
        stop.set()
        writer.join()
    final = {row.seq: row.hash for row in read_rows(live)}
    for copy, result in copies:
        rows = list(read_rows(copy))
        assert [r.seq for r in rows] == list(range(1, result.last_seq + 1))
        assert all(final[r.seq] == r.hash for r in rows)


def test_the_backup_command_prints_rows_head_and_last_seal(tmp_path: Path, capsys) -> None:
    config_path = write_config(tmp_path / "t")
    assert cli.main(["journal", "setup-keys", "--config", str(config_path)]) == 0
    build_history(config_path, 5)
    capsys.readouterr()

    async def seal() -> None:
        service = await _service(config_path)
        from tablectl.controller.record.sealing import Sealer

        service.sealer = Sealer(config_path.parent / "sealing-key")
        service.seal()
        service.close()

    asyncio.run(seal())
    dest = tmp_path / "backup"
    assert cli.main(["journal", "backup", str(dest), "--config", str(config_path)]) == 0
    out = capsys.readouterr().out
    last = list(read_rows(config_path.parent / "journal.sqlite"))[-1]
    assert f"rows 1-{last.seq}" in out and f"head {last.hash}" in out
    assert "sealed until" in out and "0 rows unsealed" in out
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "verify", str(dest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and f"head {last.hash}" in done.stdout


def test_a_backup_over_an_earlier_one_and_into_an_unwritable_place(tmp_path: Path, capsys) -> None:
    config_path = write_config(tmp_path / "t")
    build_history(config_path, 3)
    live = config_path.parent / "journal.sqlite"
    closed = config_path.parent / "journal-2026-01-01-000000000001.sqlite"
    closed.write_bytes(live.read_bytes())  # stands in for a closed segment
    dest = tmp_path / "b"
    for _ in range(2):  # the second copy replaces the first, read-only files and all
        copied, _result = backup_journal(live, dest)
        assert {p.name for p in copied} == {closed.name, live.name}
    blocked = tmp_path / "file"
    blocked.write_text("")
    code = cli.main(["journal", "backup", str(blocked / "x"), "--journal", str(live)])
    assert code == 2 and "Not a directory" in capsys.readouterr().err


def test_a_later_gaming_days_segment_exports_from_its_opening_checkpoint(tmp_path: Path) -> None:
    """`journal export` of the live file after a roll-over: its segment row, table row and
    checkpoint come first, and the device's fault words are masked (H7)."""
    from tablectl.controller.record.export import export_records

    config_path = write_config(tmp_path / "t")
    build_history(config_path, 4)
    journal = config_path.parent / "journal.sqlite"

    async def scenario() -> int:
        service = await _service(config_path)
        service.roll_segment(datetime.date(2026, 11, 21), "2026-11-20")
        fault = {"type": "shoe_fault", "fault": "misfeed at Ah", "device": "shoe"}
        await service.handle_event(fault)
        rounds = service.engine.round_number
        service.close()
        return rounds

    rounds = asyncio.run(scenario())
    assert next(read_rows(journal)).kind == "segment"
    records = list(export_records(journal))
    faults = [r for r in records if r["record"] == "device_fault"]
    assert [(r["round"], r["device"], r["fault"]) for r in faults] == [
        (rounds, "shoe", "misfeed at [card]")
    ]


def _bytes_per_round() -> float | None:
    return REGISTRY.get_sample_value("tablectl_journal_bytes_per_round")


def test_bytes_per_round_measures_the_live_segment_after_a_roll_over(tmp_path: Path) -> None:
    """The real daemon (run_daemon, in-process) on 200 rounds of a first gaming day: its clock
    crosses into the next day, the upkeep rolls the segment over, 30 rounds are played. The
    gauge is the live segment's size over those 30 rounds, not over all 230; with no round in
    the new segment yet it keeps the last figure; a restart in the middle of the day (from a
    later checkpoint than the segment's opening one) measures the same."""
    from tablectl.controller.engine.table import TableSpec
    from tablectl.controller.service.daemon import Daemon, run_daemon
    from tablectl.simulators.roundgen import legal_stream

    config_path = write_config(tmp_path / "t", checkpoint_rounds=10)
    build_history(config_path, 200, seed=3)
    config = load_config(config_path)
    spec = TableSpec.from_dict(config.table_dict())
    # the next 30 rounds: the history's generator continued, as build_history continues it
    generator = random.Random(3)
    legal_stream(spec, generator, 200)
    events = legal_stream(spec, generator, 30)

    async def run(then: Any) -> None:
        stop = asyncio.Event()
        ready: list[Daemon] = []
        task = asyncio.get_running_loop().create_task(
            run_daemon(config, stop=stop, on_ready=ready.append, handle_signals=False)
        )
        deadline = time.monotonic() + 20
        while not ready:
            assert time.monotonic() < deadline and not task.done(), "the daemon never became ready"
            await asyncio.sleep(0.01)
        try:
            await then(ready[0])
        finally:
            stop.set()
            assert await task == 0

    async def roll_then_play(daemon: Daemon) -> None:
        service = daemon.service
        assert service.engine.round_number == 200
        day_one = _bytes_per_round()
        assert day_one == pytest.approx(service.journal.logical_size() / 200)
        upkeep = daemon.upkeep
        assert upkeep is not None
        tomorrow = upkeep.segment_day + datetime.timedelta(days=1)
        upkeep.clock = lambda: moment(tomorrow)  # the daemon's clock crosses 06:00
        deadline = time.monotonic() + 10
        while upkeep.segment_day != tomorrow:
            assert time.monotonic() < deadline, "no roll-over"
            await asyncio.sleep(0.05)
        assert next(read_rows(service.journal.path)).kind == "segment"
        daemon.update_health()
        assert _bytes_per_round() == day_one  # no round in the segment yet: the last figure
        assert service.segment_rounds == 0
        async with upkeep.lock:
            for event in events:
                decisions = await service.handle_event(event)
                assert not any(d.get("decision") == "rejected" for d in decisions), event
        assert service.engine.round_number == 230
        daemon.update_health()
        size = service.journal.logical_size()
        assert _bytes_per_round() == pytest.approx(size / 30)
        assert _bytes_per_round() > 5 * size / 230
        assert service.segment_rounds == 30

    asyncio.run(run(roll_then_play))
    metrics.JOURNAL_BYTES_PER_ROUND.set(0)  # as a new process starts

    async def restarted(daemon: Daemon) -> None:
        service = daemon.service
        last = service.journal.last_of_kind("checkpoint")
        assert last is not None and last.round == 230  # restored from the day's last one
        size = service.journal.logical_size()
        assert _bytes_per_round() == pytest.approx(size / 30)
        assert service.segment_rounds == 30

    asyncio.run(run(restarted))
