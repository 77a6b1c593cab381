"""The start's and `journal verify --witness-key`'s words for a rewritten history (issue 30):
a real Merkle tree, real signed and cosigned checkpoints held beside a journal path, a row
rewritten. With the witnesses' history beside the journal deleted, nothing narrows where the
rewrite starts: the refusal names the cosigned size and root against the journal's root at
that size, says nothing narrows it, and never says "rows 1-0 match" (it did). Fast: no daemon."""

from __future__ import annotations

import base64
from pathlib import Path

from tablectl.controller.record.merkle import leaf_hash, root_of
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    IdentityKey,
    add_signature_lines,
    cosign,
    sign_note,
)
from tablectl.controller.record.witnessed import (
    WitnessedStore,
    anchor_damage,
    narrowed,
    verify_witnessed,
)

ROWS = 40
COSIGNED_SIZES = (10, 20, 30, 40)
REWRITTEN_ROW = 25


def _leaves(rewritten: bool) -> list[bytes]:
    return [
        leaf_hash(f"row {seq}{' forged' if rewritten and seq == REWRITTEN_ROW else ''}".encode())
        for seq in range(1, ROWS + 1)
    ]


def _held(tmp_path: Path) -> tuple[Path, IdentityKey, IdentityKey]:
    """Checkpoints of the honest tree at each cosigned size, kept as the table keeps them."""
    table = IdentityKey.generate("tablectl.invalid/table/T1")
    witness = IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1)
    live = tmp_path / "journal.sqlite"
    store = WitnessedStore(live)
    honest = _leaves(rewritten=False)
    for size in COSIGNED_SIZES:
        body = Checkpoint(table.name, size, root_of(honest[:size])).body()
        note = add_signature_lines(
            sign_note(body, table), [cosign(body, witness, timestamp=1_800_000_000 + size)]
        )
        store.save(witness.name, note)
    return live, table, witness


def _forged_root(size: int) -> bytes:
    return root_of(_leaves(rewritten=True)[:size])


def test_history_deleted_the_refusal_names_size_and_roots_not_a_span_from_row_1(
    tmp_path: Path,
) -> None:
    live, table, witness = _held(tmp_path)
    store = WitnessedStore(live)
    for history in store.directory.glob("*.history"):
        history.unlink()  # the insider deletes the cosigned history, keeps the newest
    anchors, problems = store.held(table.verifier, [witness.verifier])
    assert not problems and [a.size for a in anchors] == [ROWS]
    damage = anchor_damage(anchors, ROWS, _forged_root)
    assert damage is not None
    damage = narrowed(damage, store, table.verifier, [witness.verifier], _forged_root)
    cosigned_root = base64.b64encode(root_of(_leaves(rewritten=False))).decode()
    journal_root = base64.b64encode(_forged_root(ROWS)).decode()
    assert f"cosigned a tree of {ROWS} rows with root {cosigned_root}" in damage.message
    assert f"the journal's first {ROWS} rows have root {journal_root}" in damage.message
    assert "no smaller cosigned checkpoint that the journal matches is held" in damage.message
    assert "rows 1-0" not in damage.message, damage.message
    assert f"one of rows 1-{ROWS}, and none of them is proven" in damage.message
    verdict = verify_witnessed(live, ROWS, _forged_root, table.verifier, [witness.verifier])
    assert not verdict.ok and verdict.first_bad_seq == 1
    assert "rows 1-0" not in verdict.message, verdict.message
    assert f"with root {cosigned_root}" in verdict.message
    assert f"have root {journal_root}" in verdict.message


def test_history_kept_the_refusal_narrows_to_the_cosigned_sizes_around_the_row(
    tmp_path: Path,
) -> None:
    live, table, witness = _held(tmp_path)
    store = WitnessedStore(live)
    anchors, _ = store.held(table.verifier, [witness.verifier])
    damage = anchor_damage(anchors, ROWS, _forged_root)
    assert damage is not None
    damage = narrowed(damage, store, table.verifier, [witness.verifier], _forged_root)
    assert damage.first_bad_seq == 21
    assert "rows 1-20 match what was cosigned" in damage.message
    assert "the first row that differs is one of rows 21-30" in damage.message
    assert "cosigned a tree of 30 rows with root" in damage.message
