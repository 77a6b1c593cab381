"""A sealed journal built directly (journal + sealer, no daemon), and an intruder's tools."""

from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.record.journal import (
    GENESIS_HASH,
    Journal,
    canonical_json,
    live_segments,
    row_hash,
    write_head_file,
)
from tablectl.controller.record.merkle import CompactTree, leaf_hash, stored_index
from tablectl.controller.record.sealing import (
    Sealer,
    VerificationKey,
    read_key_file,
    seal_mac,
    setup_keys,
)

TABLE = {"type": "table", "game": "five_card_hilo", "options": {}}
EPOCH = 60
KEYS_MADE = 1_790_000_000  # a fixed key start (2026-09-21T...Z) so the epochs are known


@dataclass
class Sealed:
    path: Path
    key_path: Path
    verification_key: VerificationKey
    seal_seqs: list[int]
    seal_times: list[datetime.datetime]


def at(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(KEYS_MADE + seconds + 0.25, datetime.UTC)


class EpochClock:
    """The journal's row stamps at chosen times after KEYS_MADE (a journal built directly
    stamps its rows inside the epochs its seals name, as the daemon's would be): each call
    one millisecond after the last."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds

    def set(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> str:
        self.seconds += 0.001
        return at(self.seconds).isoformat(timespec="microseconds")


def stamp_rows(journal: Journal, clock: EpochClock) -> None:
    journal._utc_now = clock  # type: ignore[assignment]


def build_sealed(directory: Path, *, epochs: int = 4, rows: int = 6, unsealed: int = 3) -> Sealed:
    """`epochs` epochs of `rows` rows, each epoch sealed at its end, then `unsealed` rows."""
    key_path = directory / "sealing-key"
    key = setup_keys(key_path, interval=EPOCH, now=KEYS_MADE)
    sealer = Sealer(key_path)
    path = directory / "journal.sqlite"
    seal_seqs: list[int] = []
    seal_times: list[datetime.datetime] = []
    clock = EpochClock(1.0)
    with Journal(path) as journal:
        stamp_rows(journal, clock)
        journal.append("table", TABLE)
        for epoch in range(epochs):
            clock.set(epoch * EPOCH + 2)
            for index in range(rows):
                journal.append("event", {"type": "card_drawn", "n": index, "epoch": epoch})
            now = at((epoch + 1) * EPOCH + 1)
            clock.set((epoch + 1) * EPOCH + 1)
            assert sealer.due(now)
            body = sealer.seal_body(journal.last_seq, journal.last_hash, now)
            seal_seqs.append(journal.append("seal", body, durable=True))
            seal_times.append(now)
            sealer.sealed(body, now)
        for index in range(unsealed):
            journal.append("event", {"type": "card_drawn", "n": index, "late": True})
    return Sealed(path, key_path, key, seal_seqs, seal_times)


Row = list[object]  # seq, kind, round, recorded_at, body, prev_hash, hash


def read_all(path: Path) -> list[Row]:
    db = sqlite3.connect(path)
    try:
        return [
            list(r)
            for r in db.execute(
                "SELECT seq, kind, round, recorded_at, body, prev_hash, hash FROM journal"
                " ORDER BY seq"
            )
        ]
    finally:
        db.close()


def write_all(path: Path, rows: list[Row], *, log_too: bool = True) -> None:
    """Replace every row, as an intruder with the sqlite3 shell would (triggers dropped);
    with `log_too` the Merkle log's nodes are recomputed from the new rows as well (a
    careful intruder: `journal verify` recomputes them, so a rewrite that leaves them shows)."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS journal_no_update")
    db.execute("DROP TRIGGER IF EXISTS journal_no_delete")
    db.execute("DELETE FROM journal")
    db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    if log_too:
        rewrite_log(db, rows)
    db.commit()
    db.close()


def rewrite_log(db: sqlite3.Connection, rows: list[Row]) -> None:
    """The segment's `merkle` table recomputed from `rows` (its copied frontier kept)."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'merkle'").fetchone():
        return  # a format-1 journal
    first = int(rows[0][0]) if rows else 1
    bound = stored_index(0, first - 1) if first > 1 else 0
    kept = dict(db.execute("SELECT idx, hash FROM merkle WHERE idx < ?", (bound,)))
    tree = (
        CompactTree.at(first - 1, lambda level, index: kept[stored_index(level, index)])
        if first > 1
        else CompactTree()
    )
    nodes = [
        (stored_index(level, index), digest)
        for row in rows
        for level, index, digest in tree.append(leaf_hash(bytes.fromhex(str(row[6]))))
        if level > 0
    ]
    db.execute("DROP TRIGGER IF EXISTS merkle_no_delete")
    db.execute("DELETE FROM merkle WHERE idx >= ?", (bound,))
    db.executemany("INSERT INTO merkle (idx, hash) VALUES (?, ?)", nodes)


def rehash(rows: list[Row], *, renumber: bool = True, reseal: bytes | None = None) -> list[Row]:
    """A consistent rewrite: renumber from the first row's seq, recompute every hash; with
    `reseal` (a stolen key), every seal's head and MAC are recomputed under that key too."""
    prev = GENESIS_HASH if rows and rows[0][0] == 1 else str(rows[0][5])
    first = int(rows[0][0])  # type: ignore[call-overload]
    out: list[Row] = []
    for index, row in enumerate(rows):
        seq = first + index if renumber else int(row[0])  # type: ignore[call-overload]
        kind, rnd, when, body = row[1], row[2], row[3], str(row[4])
        if kind == "seal" and reseal is not None:
            fields = json.loads(body)
            fields["last_seq"], fields["head"] = seq - 1, prev
            fields["mac"] = seal_mac(reseal, fields)
            body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        digest = row_hash(prev, seq, str(kind), rnd, str(when), body)  # type: ignore[arg-type]
        out.append([seq, kind, rnd, when, body, prev, digest])
        prev = digest
    return out


def edit_body(rows: list[Row], seq: int, change: Callable[[dict[str, object]], None]) -> None:
    for row in rows:
        if row[0] == seq:
            body = json.loads(str(row[4]))
            change(body)
            row[4] = json.dumps(body, sort_keys=True, separators=(",", ":"))
            return
    raise AssertionError(f"no row {seq}")


def stolen_key(key_path: Path) -> bytes:
    """What an intruder on the table PC finds now: the current epoch's key only."""
    return read_key_file(key_path).key


def forge_one_first_seal(state: Path, *, card_row: int = 101) -> tuple[int, int, int]:
    """Issue 30's forgery, as an intruder with root on the table PC does it with the files:
    every segment merged into the live file, every seal row dropped, a card changed in row
    `card_row` (or the first card row after it; the last one of a shorter journal), the rows
    renumbered and rehashed with their original `recorded_at`, one seal appended under the
    key stolen from the key file (its current epoch, no predecessor), the head file and the
    key file updated to match. Returns
    (the changed row, the forged seal's row, its epoch)."""
    live = state / "journal.sqlite"
    segments = live_segments(live)
    rows = [row for segment in segments for row in read_all(segment)]
    rows.sort(key=lambda r: int(str(r[0])))
    kept = [list(r) for r in rows if r[1] not in ("seal", "segment")]
    cards = [i for i, row in enumerate(kept) if row[1] == "event" and '"card":"' in str(row[4])]
    changed = next((i for i in cards if i + 1 >= card_row), cards[-1])  # a short journal: its last
    body = json.loads(str(kept[changed][4]))
    body["card"] = "As" if body["card"] != "As" else "Kd"
    kept[changed][4] = canonical_json(body)
    prev = GENESIS_HASH
    forged: list[Row] = []
    for index, row in enumerate(kept, start=1):
        digest = row_hash(prev, index, str(row[1]), row[2], str(row[3]), str(row[4]))  # type: ignore[arg-type]
        forged.append([index, row[1], row[2], row[3], row[4], prev, digest])
        prev = digest
    key_path = state / "sealing-key"
    stolen = Sealer(key_path)  # the current epoch's key, as the table PC holds it
    stolen.last_sealed_epoch = None  # a first seal: no predecessor to answer for
    now = datetime.datetime.now(datetime.UTC)
    seal_body = stolen.seal_body(len(forged), prev, now)
    seal_seq = len(forged) + 1
    text = canonical_json(seal_body)
    stamp = now.isoformat(timespec="microseconds")
    digest = row_hash(prev, seal_seq, "seal", forged[-1][2], stamp, text)  # type: ignore[arg-type]
    forged.append([seal_seq, "seal", forged[-1][2], stamp, text, prev, digest])
    for segment in segments:
        if segment != live:
            segment.chmod(0o600)
            segment.unlink()
    write_all(live, forged)
    write_head_file(live, seal_seq, digest)
    stolen.sealed(seal_body, now)  # the key file evolved past the forged seal, as a daemon's
    return changed + 1, seal_seq, int(seal_body["epoch"])
