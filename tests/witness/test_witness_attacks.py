"""Issue 30's insider, done for real on a journal written as the service writes it, with a
witness outside the box (a `WitnessHTTPServer` of its own state, port from the kernel): the
daemon (`tablectl run`) cosigned by it for a while, then the files edited with root and the
table's keys (they are in the directory), then the start. Each recipe passed every check on
the main branch before the witness (the daemon started); now the start is refused (exit 2)
by the checkpoint the witness returns, naming the first row that differs.

Which check catches what (docs/journal.md, the threat model): every recipe here is caught by the
daemon's start, from the checkpoint the witness returns (whatever the box still holds); the
witness itself refuses any later checkpoint of the forged history (test_witness_client.py,
test_witness_server.py), and `journal verify --witness-key` refuses it offline, given the
checkpoint the witness returns (the last test here).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import load_config
from tablectl.controller.record.checkpoints import checkpoint_file, identity_key_path
from tablectl.controller.record.journal import Journal, read_rows
from tablectl.controller.record.note import ALG_COSIGNATURE_V1, IdentityKey, load_identity_key
from tablectl.controller.record.witness_state import WitnessState
from tablectl.controller.record.witnessed import WitnessedStore
from tablectl.controller.service.service import TableService
from tablectl.controller.service.witness_server import WitnessHTTPServer
from tests.journal.crashing import TABLECTL, setup_keys
from tests.journal.history import Started, build_history, start_daemon, write_config
from tests.witness import insider

#: minutes under load: make test-long
pytestmark = pytest.mark.long

ROUNDS = 40


@dataclass
class Table:
    config: Path
    live: Path
    origin: str
    state: WitnessState
    server: WitnessHTTPServer
    table_vkey: str
    witness_vkey: str

    def cosigned_size(self) -> int:
        latest = self.state.latest(self.origin)
        return latest.size if latest is not None else 0


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Table]:
    config = write_config(tmp_path / "table", checkpoint_rounds=10)
    setup_keys(config)
    table_key = load_identity_key(identity_key_path(config.parent / "sealing-key"))
    witness_key = IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1)
    state = WitnessState(tmp_path / "witness", {table_key.name: table_key.verifier}, witness_key)
    server = WitnessHTTPServer(state, "127.0.0.1", 0)
    server.start()
    config.write_text(
        config.read_text()
        + f'\n[witness]\nwitnesses = [{{ url = "http://127.0.0.1:{server.port}", '
        f'key = "{witness_key.vkey}" }}]\ntimeout = 5\n'
    )
    build_history(config, ROUNDS)
    try:
        yield Table(
            config,
            config.parent / "journal.sqlite",
            table_key.name,
            state,
            server,
            table_key.vkey,
            witness_key.vkey,
        )
    finally:
        server.close()
        state.close()


def ready(table: Table) -> Started:
    started = start_daemon(table.config)
    assert started.ready_seconds is not None, started.stderr()[-3000:]
    return started


def cycle(table: Table) -> int:
    """Start the daemon, wait until the witness cosigned the newest checkpoint the daemon
    holds (signed at its last stop), stop it (it signs again): the witness's size."""
    signed = checkpoint_file(table.live)
    before = int(signed.read_text().split("\n")[1]) if signed.exists() else 0
    started = ready(table)
    deadline = time.monotonic() + 60
    while table.cosigned_size() < before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.stop() == 0
    return table.cosigned_size()


def witnessed(table: Table, cycles: int = 3) -> int:
    """The history played, then the daemon run and stopped `cycles` times: the witness has
    cosigned; the size it holds."""
    sizes = [cycle(table) for _ in range(cycles)]
    assert sizes[-1] > 0 and sizes == sorted(sizes), sizes
    return sizes[-1]


def refused(table: Table) -> dict[str, Any]:
    """The start after the forgery: exit 2, and the log line that says why."""
    started = start_daemon(table.config)
    assert started.ready_seconds is None, "the daemon started on the forged journal"
    assert started.stop() == 2
    log = [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]
    damaged = [entry for entry in log if entry["event"] == "journal_damaged"]
    assert damaged, log[-5:]
    return damaged[0]


def test_an_older_copy_of_the_whole_directory_put_back(table: Table, tmp_path: Path) -> None:
    cycle(table)
    copy = tmp_path / "copy"
    shutil.copytree(table.config.parent, copy, ignore=shutil.ignore_patterns("*.sock"))
    rows_then = insider.row_count(table.live)
    cosigned = witnessed(table)
    assert cosigned > rows_then
    shutil.rmtree(table.config.parent)
    shutil.copytree(copy, table.config.parent)  # the older copy, keys and all
    damage = refused(table)
    assert f"the journal holds {rows_then} rows" in damage["error"]
    assert f"cosigned a tree of {cosigned} rows" in damage["error"]
    assert damage["first_bad_seq"] == rows_then + 1


def test_a_cut_at_a_seal_with_the_rows_after_it_restamped(table: Table) -> None:
    cosigned = witnessed(table)
    cut = insider.last_seq_of_kind(table.live, "seal", cosigned - 1)
    removed = insider.cut_after(table.live, cut)
    insider.forget_anchors(table.live)
    insider.restamp(table.live, removed + removed[-20:])  # as many rows again, and more
    assert insider.row_count(table.live) >= cosigned
    damage = refused(table)
    assert "the history was rewritten" in damage["error"]
    assert damage["first_bad_seq"] == 1
    assert f"one of rows 1-{cosigned}" in damage["error"]


def test_a_whole_journal_replaced_from_row_1(table: Table, tmp_path: Path) -> None:
    cosigned = witnessed(table)
    other = write_config(tmp_path / "forger", checkpoint_rounds=10)
    build_history(other, ROUNDS + 20, seed=99)  # every row stamped now, fresh nonces
    insider.forget_anchors(table.live)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{table.live}{suffix}").unlink(missing_ok=True)
    shutil.copy(other.parent / "journal.sqlite", table.live)
    assert insider.row_count(table.live) > cosigned
    damage = refused(table)
    assert "the history was rewritten" in damage["error"]
    assert damage["first_bad_seq"] == 1


def test_the_head_file_deleted_and_the_tail_cut(table: Table) -> None:
    cosigned = witnessed(table)
    keep = cosigned - 25
    insider.cut_after(table.live, keep)
    insider.forget_anchors(table.live)
    damage = refused(table)
    assert f"the journal holds {keep} rows" in damage["error"]
    assert damage["first_bad_seq"] == keep + 1
    # started anyway on purpose: the witness refuses the journal's checkpoint, and the daemon
    # journals it (a witness_refused note) and raises the critical alarm
    started = start_daemon(table.config, extra=("--accept-damaged-journal",))
    assert started.ready_seconds is not None, started.stderr()[-3000:]
    deadline = time.monotonic() + 60
    notes: list[dict[str, object]] = []
    while not notes and time.monotonic() < deadline:
        notes = [
            row.body
            for row in read_rows(table.live)
            if row.kind == "note" and row.body.get("type") == "witness_refused"
        ]
        time.sleep(0.1)
    assert started.stop() == 0
    assert notes, "no witness_refused note"
    assert notes[0]["witness"] == "regulator.example/w1"
    assert "rows were cut" in str(notes[0]["reason"])
    log = [json.loads(line) for line in started.stderr().splitlines() if line.startswith("{")]
    assert any(e["event"] == "witness_refused" and e["level"] == "critical" for e in log)


def test_an_honest_journal_starts_and_the_witness_goes_on(table: Table) -> None:
    first = witnessed(table, cycles=2)
    started = ready(table)
    assert started.stop() == 0
    assert table.cosigned_size() > first
    assert table.state.refusals() == []


def verify(table: Table, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *TABLECTL,
            "journal",
            "verify",
            str(table.config.parent),
            "--witness-key",
            table.witness_vkey,
            "--table-key",
            table.table_vkey,
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_journal_verify_with_the_witness_key(table: Table, tmp_path: Path) -> None:
    cosigned = witnessed(table)
    done = verify(table)
    assert done.returncode == 0, done.stderr
    assert f"witnessed: rows 1-{cosigned} are the rows regulator.example/w1 cosigned" in done.stdout
    rows = insider.row_count(table.live)
    assert f"rows {cosigned + 1}-{rows} are not witnessed yet" in done.stdout
    # the journal replaced and every anchor on the box removed: nothing vouches for it ...
    other = write_config(tmp_path / "forger", checkpoint_rounds=10)
    build_history(other, ROUNDS + 20, seed=7)
    insider.forget_anchors(table.live)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{table.live}{suffix}").unlink(missing_ok=True)
    shutil.copy(other.parent / "journal.sqlite", table.live)
    done = verify(table)
    assert done.returncode == 1
    assert "NOT WITNESSED: no checkpoint cosigned by regulator.example/w1 was found" in done.stderr
    # ... and the checkpoint the witness holds, fetched by the regulator, names the rewrite
    latest = table.state.latest(table.origin)
    assert latest is not None
    fetched = tmp_path / "fetched.checkpoint"
    fetched.write_text(latest.checkpoint)
    done = verify(table, "--cosigned", str(fetched))
    assert done.returncode == 1
    assert "the history was rewritten" in done.stderr


def roll_over(table: Table) -> None:
    """The table service's own roll-over (yesterday's segment closed, today's begun)."""

    async def roll() -> None:
        config = load_config(table.config)
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        today = datetime.date.today()
        service.roll_segment(today, (today - datetime.timedelta(days=1)).isoformat())
        service.close()

    asyncio.run(roll())


def test_the_live_segment_replaced(table: Table) -> None:
    roll_over(table)
    closed = sorted(table.config.parent.glob("journal-*.sqlite"))
    assert len(closed) == 1
    cosigned = witnessed(table)
    first_live = insider.first_seq(table.live)
    assert first_live < cosigned
    # the live segment's rows after its opening three (segment, table, checkpoint) written
    # again, re-stamped; the closed segment and its link untouched
    removed = insider.cut_after(table.live, first_live + 2)
    insider.forget_anchors(table.live)
    insider.restamp(table.live, removed + removed[-10:])
    damage = refused(table)
    assert "the history was rewritten" in damage["error"]
    assert damage["first_bad_seq"] == 1


@pytest.mark.long  # five daemon runs before the forgery: make test-long
def test_the_first_row_that_differs_narrowed_by_the_cosigned_history(table: Table) -> None:
    """The same cut-and-re-stamp, by an insider who removed the newest cosignatures held but
    not the witnesses' history beside them: the start names the first row that differs to
    within the two cosigned checkpoints around it."""
    cosigned = witnessed(table, cycles=5)
    store = WitnessedStore(table.live)
    sizes = [size for size, _ in store.history("regulator.example/w1")]
    assert len(sizes) >= 4, sizes
    cut = insider.last_seq_of_kind(table.live, "seal", sizes[-2] - 1)
    removed = insider.cut_after(table.live, cut)
    insider.head_file_and_checkpoint_removed(table.live)
    for newest in store.directory.glob("*.checkpoint"):
        newest.unlink()
    insider.restamp(table.live, removed + removed[-20:])
    damage = refused(table)
    before = max([s for s in sizes if s <= cut], default=0)
    after = min(s for s in [*sizes, cosigned] if s > cut)
    assert before > 0
    assert damage["first_bad_seq"] == before + 1
    assert f"the first row that differs is one of rows {before + 1}-{after}" in damage["error"]
