"""Divergence is an alarm (issue 31): a table whose journal no longer matches the floor's copy
raises a critical alarm and journals a `divergence` note, at start and while running, and by
default deals no more (shoe and shuffler held, no round opened) until a supervisor sends
`floor_divergence_acknowledged` through the operator socket; `[floor] on_divergence = "keep
dealing"` alarms and deals on.

Real daemons (`tablectl run`) on real journals, a real PostgreSQL, the real shipper. Before
issue 31 each case was a `floor_ship_failed` warning and the table dealt on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common.config import DIVERGENCE_KEEP
from tablectl.controller.record.journal import read_rows, row_hash, write_head_file
from tests.floor.floorkit import FloorDb, local_rows, rewrite_journal, unique_table_id, wait_for
from tests.journal.crashing import log_of, run
from tests.journal.history import build_history, start_daemon, write_config
from tests.journal.test_clock_steps import _Subscriber


def _floor_table(tmp_path: Path, floor_db: FloorDb, words: str | None = None) -> Path:
    config = write_config(tmp_path / "t")
    table_id = unique_table_id()
    floor_db.provision(table_id)
    text = config.read_text().replace('id = "history"', f'id = "{table_id}"')
    text += f'[floor]\ndsn = "{floor_db.config(table_id).dsn}"\npassfile = "{floor_db.passfile}"\n'
    if words is not None:
        text += f'on_divergence = "{words}"\n'
    config.write_text(text)
    build_history(config, 3)
    return config


def _table_id(config: Path) -> str:
    return next(
        line.split('"')[1] for line in config.read_text().splitlines() if line.startswith("id =")
    )


def _ship_everything(config: Path, floor_db: FloorDb) -> None:
    """A daemon's run: it ships its journal (its own restart rows too), then stops."""
    table_id, journal = _table_id(config), config.parent / "journal.sqlite"
    started = start_daemon(config, timeout=30)
    try:
        wait_for(
            lambda: len(floor_db.floor_rows(table_id)) == len(local_rows(journal)),
            30,
            "the journal shipped",
        )
    finally:
        assert started.stop() == 0


def _snapshot(journal: Path, where: Path) -> None:
    where.mkdir()
    for path in journal.parent.glob(f"{journal.name}*"):
        shutil.copy2(path, where / path.name)


def _roll_back(journal: Path, snapshot: Path) -> None:
    """What an insider does: the journal and its head file put back as they were."""
    for path in journal.parent.glob(f"{journal.name}*"):
        path.unlink()
    for path in snapshot.iterdir():
        shutil.copy2(path, journal.parent / path.name)


def _notes(journal: Path, kind: str) -> list[dict[str, Any]]:
    return [r.body for r in read_rows(journal) if r.kind == "note" and r.body.get("type") == kind]


def _status(config: Path) -> dict[str, Any]:
    """`tablectl status --json` (its exit status says whether all is well: here it is not)."""
    shown = run("status", "--socket", str(config.parent / "op.sock"), "--json")
    status: dict[str, Any] = json.loads(shown.stdout)
    return status


def _held(config: Path) -> bool:
    return "floor_divergence" in _status(config)


def _op(config: Path, *event: str) -> Any:
    return run("op", "--socket", str(config.parent / "op.sock"), *event)


@pytest.mark.long
def test_a_rolled_back_journal_stops_dealing_until_a_supervisor_acknowledges(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    config = _floor_table(tmp_path, floor_db)
    journal = config.parent / "journal.sqlite"
    _snapshot(journal, tmp_path / "before")
    _ship_everything(config, floor_db)
    _roll_back(journal, tmp_path / "before")
    started = start_daemon(config, timeout=30)
    try:
        wait_for(lambda: _held(config), 30, "the divergence to hold dealing")
        status = _status(config)
        assert "cut" in status["floor_divergence"]["reason"]
        assert "floor_diverged" in status["interlocks"]["shoe_locked"]
        assert "floor_diverged" in status["interlocks"]["shuffler_deck_locked"]
        assert status["floor"]["state"] == "diverged"
        refused = _op(config, "bets_closed", "--positions", "1,2,3")
        assert refused.returncode != 0
        assert "dealing held" in refused.stdout + refused.stderr
        acked = _op(config, "floor_divergence_acknowledged")
        assert acked.returncode == 0, acked.stdout + acked.stderr
        status = _status(config)
        assert "floor_divergence" not in status
        assert "floor_diverged" not in status["interlocks"]["shoe_locked"]
        again = _op(config, "floor_divergence_acknowledged")
        assert (
            again.returncode != 0 and "no divergence holds dealing" in again.stdout + again.stderr
        )
        dealt = _op(config, "bets_closed", "--positions", "1,2,3")
        assert "dealing held" not in dealt.stdout + dealt.stderr
    finally:
        assert started.stop() == 0
    assert any(
        e["event"] == "floor_divergence" and e["level"] == "critical" for e in log_of(started)
    )
    (note,) = _notes(journal, "divergence")
    assert "held until a supervisor" in note["dealing"]
    (acknowledged,) = _notes(journal, "divergence_acknowledged")
    assert acknowledged["caller"]["role"] == "supervisor"


@pytest.mark.long
def test_a_rewritten_row_diverges_at_start(floor_db: FloorDb, tmp_path: Path) -> None:
    config = _floor_table(tmp_path, floor_db)
    journal = config.parent / "journal.sqlite"
    _ship_everything(config, floor_db)
    rows = local_rows(journal)
    rewrite_journal(journal, rows[len(rows) // 2][0], '{"type":"rewritten"}')
    last = local_rows(journal)[-1]
    write_head_file(journal, last[0], last[6])  # the insider keeps the head file in step
    started = start_daemon(config, timeout=30)
    try:
        wait_for(lambda: _held(config), 30, "the divergence to hold dealing")
        assert "rewritten" in _status(config)["floor_divergence"]["reason"]
    finally:
        assert started.stop() == 0
    assert len(_notes(journal, "divergence")) == 1


@pytest.mark.long
def test_a_divergence_while_running_alarms_and_keep_dealing_deals_on(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """A clone of the table shipping as its login puts another row at the floor's head while
    the daemon runs: its next batch is refused, the alarm reaches a subscribed terminal. With
    on_divergence = "keep dealing" nothing is held."""
    config = _floor_table(tmp_path, floor_db, DIVERGENCE_KEEP)
    journal = config.parent / "journal.sqlite"
    table_id = _table_id(config)
    started = start_daemon(config, timeout=30)
    subscriber = _Subscriber(config.parent / "op.sock")
    try:
        wait_for(
            lambda: len(floor_db.floor_rows(table_id)) == len(local_rows(journal)),
            30,
            "the journal shipped",
        )
        head = floor_db.floor_rows(table_id)[-1]
        seq, at, body = head[0] + 1, head[3], '{"type":"from_a_clone"}'
        with floor_db.as_writer(table_id) as conn:
            conn.execute(
                "INSERT INTO floor.journal_rows (table_id, seq, kind, round, recorded_at, body,"
                " prev_hash, hash) VALUES (%s, %s, 'note', NULL, %s, %s, %s, %s)",
                (table_id, seq, at, body, head[6], row_hash(head[6], seq, "note", None, at, body)),
            )
        # the table's next row (a supervisor's note) goes to the floor and is refused
        _op(config, "supervisor_ack")
        alarm = subscriber.until(lambda m: m.get("alarm") == "floor_diverged")
        assert alarm["severity"] == "critical" and "goes on" in alarm["dealing"]
        status = _status(config)
        assert "floor_divergence" not in status
        assert "floor_diverged" not in status["interlocks"]["shoe_locked"]
    finally:
        subscriber.close()
        assert started.stop() == 0
    (note,) = _notes(journal, "divergence")
    assert "keep dealing" in note["dealing"]
