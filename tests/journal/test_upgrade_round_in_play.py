"""A round in play when a format-1 journal (rows without nonces) is upgraded to format 2: its
rows' hashes are guessable, so a tree head over them is a card oracle (issue 30, "Hiding").
The signer signs no checkpoint until a later round begins; then it signs the whole tree. The
format-1 file is written as the old code wrote it: real rows hashed without a nonce, no
`merkle` table, `PRAGMA user_version=1`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tablectl.controller.record.checkpoints import CheckpointSigner, checkpoint_file
from tablectl.controller.record.journal import GENESIS_HASH, Journal, canonical_json, row_hash
from tablectl.controller.record.note import IdentityKey


def write_format_1(live: Path, rows: list[tuple[int, dict[str, str]]]) -> None:
    """`rows` (round, body) as format 1 wrote them: no nonce in a body, hashed as they are."""
    Journal(live).close()  # the schema
    db = sqlite3.connect(live)
    db.execute("DROP TABLE merkle")
    previous = GENESIS_HASH
    for seq, (round_number, body) in enumerate(rows, start=1):
        text = canonical_json(body)
        at = f"2026-11-01T12:00:{seq:02d}"
        digest = row_hash(previous, seq, "event", round_number, at, text)
        db.execute(
            "INSERT INTO journal VALUES (?, 'event', ?, ?, ?, ?, ?)",
            (seq, round_number, at, text, previous, digest),
        )
        previous = digest
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()


ENDED = [(1, {"type": "card", "card": c}) for c in ("As", "Kd", "7h")]
IN_PLAY = [(2, {"type": "card", "card": c}) for c in ("Qs", "2c")]


def test_no_checkpoint_while_a_round_without_nonces_is_in_play(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    write_format_1(live, ENDED + IN_PLAY)
    journal = Journal(live)  # the upgrade: the tree built from the nonceless rows
    assert journal.tree.size == 5
    signer = CheckpointSigner(journal, IdentityKey.generate("tablectl/T1"))
    assert signer.sign() is None, "a tree head over a round in play without nonces was signed"
    journal.append("event", {"type": "card", "card": "9s"}, round_number=2)  # same round
    assert signer.sign() is None
    assert not checkpoint_file(live).exists()
    journal.append("event", {"type": "round_started"}, round_number=3)  # round 2 is over
    signed = signer.sign()
    assert signed is not None and signed.size == 7 == journal.tree.size
    assert checkpoint_file(live).exists()
    journal.close()
    again = Journal(live)  # a restart after: nothing withheld any more
    again.append("note", {"type": "after"})
    assert CheckpointSigner(again, IdentityKey.generate("tablectl/T1")).sign() is not None
    again.close()


def test_a_restart_before_the_round_ends_still_withholds(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    write_format_1(live, ENDED + IN_PLAY)
    Journal(live).close()  # upgraded, then stopped mid-round
    journal = Journal(live)
    journal.append("event", {"type": "card", "card": "9s"}, round_number=2)
    assert CheckpointSigner(journal, IdentityKey.generate("tablectl/T1")).sign() is None
    journal.close()


def test_a_format_2_journal_is_never_withheld(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    journal.append("event", {"type": "card", "card": "As"}, round_number=1)
    assert CheckpointSigner(journal, IdentityKey.generate("tablectl/T1")).sign() is not None
    journal.close()
