"""The journal's rows as the leaves of its Merkle log (controller/record/journal.py,
merkle_log.py): the same tree as recomputed from the rows, across segments and reopenings,
after retention retired the first segments, for a journal written before the log; every row
hidden by its nonce."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tablectl.controller.record import merkle
from tablectl.controller.record.journal import (
    Journal,
    closed_segment_name,
    live_segments,
    read_rows,
    verify_journal,
)
from tablectl.controller.record.merkle_log import MerkleLog


def all_rows(live: Path) -> list[tuple[int, str]]:
    rows: list[tuple[int, str]] = []
    for path in live_segments(live):
        db = sqlite3.connect(path)
        rows += db.execute("SELECT seq, hash FROM journal ORDER BY seq").fetchall()
        db.close()
    return sorted(rows)


def leaves_of(live: Path) -> list[bytes]:
    return [merkle.leaf_hash(bytes.fromhex(h)) for _, h in all_rows(live)]


def write_segments(live: Path, days: int, rows_a_day: int) -> Journal:
    journal = Journal(live)
    for day in range(days):
        for i in range(rows_a_day):
            journal.append("event", {"type": "card", "card": "As", "i": i}, round_number=day + 1)
        if day < days - 1:
            journal.flush()
            first = journal.first_row()
            assert first is not None
            closed = closed_segment_name(live, f"2026-11-{day + 1:02d}", first.seq)
            journal.roll_over(closed, {"gaming_day": f"2026-11-{day + 2:02d}"})
    journal.flush()
    return journal


def test_the_log_is_the_rows_across_segments_and_reopenings(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    journal = write_segments(live, 4, 37)
    leaves = leaves_of(live)
    assert journal.tree.size == len(leaves) == journal.last_seq
    assert journal.tree.root() == merkle.root_of(leaves)
    journal.close()
    again = Journal(live)  # the frontier read back from the live segment alone
    assert again.tree.root() == merkle.root_of(leaves)
    again.append("note", {"type": "x"})
    again.close()
    leaves = leaves_of(live)
    with MerkleLog(live) as log:
        size = log.size()
        assert size == len(leaves)
        root = log.root(size)
        assert root == merkle.root_of(leaves)
        for seq in (1, 2, 37, 38, 39, 100, size):
            proof = log.inclusion_proof(seq, size)
            assert merkle.verify_inclusion(leaves[seq - 1], seq - 1, size, proof, root)
        for old in (1, 5, 38, 77, size - 1):
            proof = log.consistency_proof(old, size)
            assert merkle.verify_consistency(old, size, merkle.root_of(leaves[:old]), root, proof)
    assert verify_journal(tmp_path).ok


def test_retired_segments_leave_their_subtree_hashes_behind(tmp_path: Path) -> None:
    """The first two segments deleted (retention): every later row's proof and every
    consistency proof from a size at or after the retained rows still come out right."""
    live = tmp_path / "journal.sqlite"
    write_segments(live, 5, 29).close()
    leaves = leaves_of(live)
    size = len(leaves)
    closed = sorted(p for p in live_segments(live) if p != live)
    kept_from = int(closed[2].stem.rsplit("-", 1)[1])
    for path in closed[:2]:
        path.unlink()
    root = merkle.root_of(leaves)
    with MerkleLog(live) as log:
        assert log.root(size) == root
        for seq in range(kept_from, size + 1, 7):
            proof = log.inclusion_proof(seq, size)
            assert merkle.verify_inclusion(leaves[seq - 1], seq - 1, size, proof, root)
        for old in range(kept_from, size + 1, 11):
            proof = log.consistency_proof(old, size)
            assert merkle.verify_consistency(old, size, merkle.root_of(leaves[:old]), root, proof)
        with pytest.raises(merkle.MerkleError, match="retired"):
            log.inclusion_proof(3, size)
    reopened = Journal(live)
    assert reopened.tree.root() == root
    reopened.close()


def test_a_journal_written_before_the_log_gets_its_tree(tmp_path: Path) -> None:
    """A format-1 journal (no merkle table, rows without nonces): opened, its log is built
    from every segment's rows, once, and goes on."""
    live = tmp_path / "journal.sqlite"
    write_segments(live, 2, 20).close()
    for path in live_segments(live):
        path.chmod(0o600)
        db = sqlite3.connect(path)
        db.execute("DROP TABLE merkle")
        db.execute("PRAGMA user_version=1")
        db.commit()
        db.close()
    journal = Journal(live)
    assert journal.tree.root() == merkle.root_of(leaves_of(live))
    journal.append("note", {"type": "after"})
    journal.close()
    with MerkleLog(live) as log:
        assert log.root(log.size()) == merkle.root_of(leaves_of(live))


def test_every_row_but_a_seal_carries_a_secret_nonce(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    journal = Journal(live)
    first = journal.append("event", {"type": "card", "card": "As"}, round_number=1)
    second = journal.append("event", {"type": "card", "card": "As"}, round_number=1)
    journal.append("seal", {"type": "seal", "epoch": 0})
    journal.close()
    rows = list(read_rows(live))
    assert rows[0].body == rows[1].body == {"type": "card", "card": "As"}
    assert rows[0].nonce and rows[1].nonce and rows[0].nonce != rows[1].nonce
    assert len(bytes.fromhex(rows[0].nonce)) == 16
    assert rows[2].nonce is None
    db = sqlite3.connect(live)
    bodies = dict(db.execute("SELECT seq, body FROM journal").fetchall())
    db.close()
    assert json.loads(bodies[first])["nonce"] == rows[0].nonce
    assert json.loads(bodies[second])["nonce"] == rows[1].nonce


def test_a_cut_tail_continued_after_keeps_leaf_numbers(tmp_path: Path) -> None:
    """`continue_after` (a cut tail): the skipped seqs are gap leaves, so leaf seq-1 stays
    row seq's."""
    live = tmp_path / "journal.sqlite"
    journal = Journal(live)
    for i in range(5):
        journal.append("note", {"i": i})
    journal.continue_after(9)
    seq = journal.append("note", {"i": 10})
    assert seq == 10 and journal.tree.size == 10
    journal.close()
    with MerkleLog(live) as log:
        root = log.root(10)
        leaf = log.leaf(10)
        assert merkle.verify_inclusion(leaf, 9, 10, log.inclusion_proof(10, 10), root)
        assert log.leaf(7) == merkle.leaf_hash(b"")
    again = Journal(live)
    assert again.tree.root() == root
    again.close()


def test_no_checkpoint_covers_rows_that_were_never_committed(tmp_path: Path) -> None:
    """Rows appended, then the journal fails (a write error): their leaves are in the tree
    but never on the disk, so the signer signs nothing more, on request or at a stop."""
    import asyncio

    from tablectl.controller.record.checkpoints import CheckpointSigner, checkpoint_file
    from tablectl.controller.record.journal import JournalError
    from tablectl.controller.record.note import IdentityKey

    journal = Journal(tmp_path / "journal.sqlite")
    signer = CheckpointSigner(journal, IdentityKey.generate("tablectl/T1"))
    journal.append("note", {"i": 1})
    first = signer.sign()
    assert first is not None and first.size == 1
    journal.append("note", {"i": 2})  # pending, then lost with the failure
    journal.fail(JournalError("a write failed"))

    async def on_the_loop() -> None:
        signer.request()
        await asyncio.sleep(0.05)
        await signer.stop()

    asyncio.run(on_the_loop())
    assert signer.latest == first
    with pytest.raises(JournalError):
        signer.sign()
    assert "\n1\n" in checkpoint_file(journal.path).read_text()
    journal.discard()
