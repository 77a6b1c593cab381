"""`journal verify` recomputes the Merkle log's stored nodes from the rows (issue 30).

The rows' chain proves the rows; a witness's checkpoint and a round's proof are built from the
stored nodes, so a node changed on disk would have the log prove rows that are not these,
while every row still verifies. Each test changes the nodes (or the rows without the nodes) as
root on the table PC could, and `journal verify` must refuse, naming the node and the row.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.record.journal import Journal
from tablectl.controller.record.merkle import CompactTree, stored_index
from tests.journal.history import write_config
from tests.journal.sealed import read_all, rehash, write_all
from tests.journal.test_start_verification import build_segments

TABLE = {"type": "table", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}}


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["journal", "verify", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def a_journal(path: Path, rows: int = 40) -> Path:
    with Journal(path) as journal:
        journal.append("table", TABLE)
        for n in range(rows - 1):
            journal.append("event", {"type": "card_drawn", "n": n}, round_number=1 + n // 10)
    return path


def change_node(path: Path, idx: int, value: bytes) -> None:
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS merkle_no_update")
    db.execute("UPDATE merkle SET hash = ? WHERE idx = ?", (value, idx))
    assert db.total_changes == 1, f"no stored node {idx}"
    db.commit()
    db.close()


def test_an_intact_journal_verifies_with_its_nodes(tmp_path: Path, capsys) -> None:
    path = a_journal(tmp_path / "journal.sqlite")
    code, out = verify(capsys, str(path))
    assert code == 0 and "intact: 40 rows" in out, out


def test_one_stored_node_changed_is_found_naming_it_and_its_row(tmp_path: Path, capsys) -> None:
    path = a_journal(tmp_path / "journal.sqlite")
    # node (level 2, index 3): leaves 12-15, completed by row 16
    change_node(path, stored_index(2, 3), bytes(32))
    code, out = verify(capsys, str(path))
    assert code == 1, out
    assert "TAMPERED" in out and "node (level 2, index 3) that row 16 completed" in out, out
    assert "the log would prove rows that are not these" in out


def test_rows_rewritten_with_the_log_left_as_it_was_are_found(tmp_path: Path, capsys) -> None:
    """A consistent rewrite of the chain (every hash recomputed, unsealed journal, no key):
    the chain holds; the stored nodes, still the old rows', do not."""
    path = a_journal(tmp_path / "journal.sqlite")
    rows = read_all(path)
    rows[20][4] = rows[20][4].replace('"n":19', '"n":99')
    write_all(path, rehash(rows), log_too=False)
    code, out = verify(capsys, str(path))
    assert code == 1, out
    assert "that row 22 completed is not the hash of the rows" in out, out  # leaf 21's pair
    # a careful intruder recomputes the log too: the chain and the log agree again; what
    # catches that is a witness's cosigned checkpoint (docs/journal.md), not the box
    write_all(path, rehash(rows), log_too=True)
    code, out = verify(capsys, str(path))
    assert code == 0, out


def test_a_node_beyond_the_last_row_is_found(tmp_path: Path, capsys) -> None:
    path = a_journal(tmp_path / "journal.sqlite")
    db = sqlite3.connect(path)
    db.execute("INSERT INTO merkle (idx, hash) VALUES (?, ?)", (stored_index(1, 40), bytes(32)))
    db.commit()
    db.close()
    code, out = verify(capsys, str(path))
    assert code == 1, out
    assert "holds node (level 1, index 40), which no row up to row 40 completes" in out, out


def test_a_segments_copied_frontier_changed_is_found(tmp_path: Path, capsys) -> None:
    """A new segment keeps the log's frontier at its start (proofs outlive the retired
    segments): a copy that differs from the nodes the earlier rows give is found."""
    config = write_config(tmp_path / "t")
    closed = build_segments(config, 2)
    directory = config.parent
    code, out = verify(capsys, str(directory))
    assert code == 0, out
    newest = closed[-1]
    db = sqlite3.connect(newest)
    first = int(db.execute("SELECT min(seq) FROM journal").fetchone()[0])
    db.close()
    level, index = CompactTree.frontier_nodes(first - 1)[0]
    change_node(newest, stored_index(level, index), bytes(32))
    code, out = verify(capsys, str(directory))
    assert code == 1, out
    assert f"{newest.name}: the Merkle log's node (level {level}, index {index}), a copy" in out


def test_a_stored_node_of_no_hash_is_a_verdict_not_an_exception(tmp_path: Path, capsys) -> None:
    """Damage the fuzz found (a NULL hash read from a damaged page) raised TypeError from verify; a
    text where a hash belongs is the same kind of damage."""
    path = a_journal(tmp_path / "journal.sqlite")
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS merkle_no_update")
    db.execute("UPDATE merkle SET hash = 'not a hash' WHERE idx = (SELECT min(idx) FROM merkle)")
    db.commit()
    db.close()
    code, out = verify(capsys, str(path))
    assert code == 1, out
    assert "a stored Merkle node is malformed" in out, out
