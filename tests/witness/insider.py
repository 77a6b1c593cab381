"""What an insider with root on the table PC does to the journal, done for real: sqlite3 on
the files (the append-only triggers dropped), the head file and the Merkle log's nodes
removed (the journal rebuilds its log from the rows it finds), rows appended again with the
project's own Journal class (fresh stamps, fresh nonces, a consistent chain and tree)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tablectl.controller.record.checkpoints import checkpoint_file
from tablectl.controller.record.journal import NONCE_KEY, Journal, head_file
from tablectl.controller.record.witnessed import witnessed_dir


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    for trigger in (
        "journal_no_update",
        "journal_no_delete",
        "merkle_no_update",
        "merkle_no_delete",
    ):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return db


def forget_anchors(live: Path) -> None:
    """Remove what the box holds that speaks of the real history: the head file, the newest
    signed checkpoint, the cosignatures kept beside the journal."""
    head_file_and_checkpoint_removed(live)
    shutil.rmtree(witnessed_dir(live), ignore_errors=True)


def head_file_and_checkpoint_removed(live: Path) -> None:
    head_file(live).unlink(missing_ok=True)
    checkpoint_file(live).unlink(missing_ok=True)


def cut_after(live: Path, seq: int) -> list[tuple[str, dict[str, object], int | None]]:
    """Delete every row after `seq` (and the whole Merkle log, rebuilt at the next open);
    the rows removed, as (kind, body without its nonce, round)."""
    db = _open(live)
    try:
        removed = [
            (kind, {k: v for k, v in json.loads(body).items() if k != NONCE_KEY}, rnd)
            for kind, body, rnd in db.execute(
                "SELECT kind, body, round FROM journal WHERE seq > ? ORDER BY seq", (seq,)
            )
        ]
        db.execute("DELETE FROM journal WHERE seq > ?", (seq,))
        db.execute("DELETE FROM merkle")
        db.execute("VACUUM")
    finally:
        db.close()
    return removed


def restamp(live: Path, rows: list[tuple[str, dict[str, object], int | None]]) -> None:
    """Append `rows` again through the journal's own code: stamped now (the insider's
    epoch), each with a new nonce, the chain and the Merkle log consistent. Seals are left
    out (a seal the insider makes with the stolen key is the seals' business, not this)."""
    with Journal(live) as journal:
        for kind, body, round_number in rows:
            if kind != "seal":
                journal.append(kind, body, round_number=round_number)


def last_seq_of_kind(live: Path, kind: str, at_most: int) -> int:
    db = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT max(seq) FROM journal WHERE kind = ? AND seq <= ?", (kind, at_most)
        ).fetchone()
    finally:
        db.close()
    assert row and row[0], f"no {kind} row up to {at_most}"
    return int(row[0])


def row_count(live: Path) -> int:
    db = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT max(seq) FROM journal").fetchone()[0])
    finally:
        db.close()


def first_seq(live: Path) -> int:
    db = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT min(seq) FROM journal").fetchone()[0])
    finally:
        db.close()
