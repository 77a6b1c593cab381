"""`tablectl floor prove` on a real PostgreSQL: a table with a witness ships its rows and its
cosigned checkpoints; the floor serves a round's proof that the same `tablectl proof verify`
accepts, and the same bundle `journal prove` writes; a floor row changed by its owner makes
the proof fail; a round in play, a round without a covering checkpoint and a tree whose rows
were retired are refused, named; a reader proves a round but never reads a checkpoint past
the release mark, nor the checkpoints table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tablectl.controller.commands.cli import main
from tablectl.controller.floor.schema import (
    READER_GROUP,
    RECORDED_AT_SQL,
    RELEASED_CHECKPOINTS,
    SCHEMA,
    writer_role,
)
from tablectl.controller.floor.shipper import HISTORY_TAIL_BYTES, CosignedFeed, FloorShipper
from tablectl.controller.record.checkpoints import CheckpointSigner
from tablectl.controller.record.journal import Journal, row_hash
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    IdentityKey,
    add_signature_lines,
    cosign,
)
from tablectl.controller.record.witnessed import WitnessedStore
from tests.floor.floorkit import FloorDb, unique_table_id, wait_for

#: a round's cards (face down when dealt: the round in play must not be provable)
CARDS = {1: ("As", "Kd", "7c"), 2: ("2h", "Qs", "9d"), 3: ("5c", "Jh", "3s"), 4: ("8s",)}


@dataclass
class WitnessedTable:
    table_id: str
    journal: Path
    table_key: str
    witness_key: str
    cosigned: list[int]  # the tree sizes the witness cosigned


def _cosigned(signer: CheckpointSigner, witness: IdentityKey, when: int) -> tuple[int, str]:
    """Sign the committed tree and cosign it as a witness does (its cosignature/v1 line)."""
    signed = signer.sign()
    assert signed is not None
    text = signed.note[: signed.note.index("\n\n") + 1]
    return signed.size, add_signature_lines(signed.note, [cosign(text, witness, timestamp=when)])


def witnessed_table(floor_db: FloorDb, directory: Path) -> WitnessedTable:
    """Three ended rounds and a fourth in play, each round's end signed and cosigned (kept
    beside the journal as the table's witness client keeps them), then shipped."""
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    key = IdentityKey.generate(f"tablectl/{table_id}")
    witness = IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1)
    path = directory / f"{table_id}.sqlite"
    journal = Journal(path)
    signer = CheckpointSigner(journal, key)
    store = WitnessedStore(path)
    cosigned: list[int] = []
    journal.append("table", {"type": "table", "game": "three_card_21"}, durable=True)
    for round_number, cards in CARDS.items():
        journal.append("event", {"type": "bets_closed"}, round_number=round_number)
        for card in cards:
            journal.append(
                "event",
                {"type": "card_drawn", "card": card, "face_up": False, "device": "shoe"},
                round_number=round_number,
            )
        if round_number < 4:
            journal.append("event", {"type": "hands_collected"}, round_number=round_number)
        journal.flush()
        size, note = _cosigned(signer, witness, 1_800_000_000 + round_number)
        store.save(witness.name, note)
        cosigned.append(size)
    journal.close()
    shipper = FloorShipper(table_id, path, config, publish_metrics=False)
    shipper.start()
    try:
        # rounds 1-3's checkpoints: the fourth covers a round in play and stays 'held'
        wait_for(
            lambda: shipper.rows_behind == 0 and shipper.shipped_checkpoints >= 3,
            30,
            "the rows and three cosigned checkpoints shipped",
        )
    finally:
        shipper.stop()
    return WitnessedTable(table_id, path, key.vkey, witness.vkey, cosigned)


@pytest.fixture
def table(floor_db: FloorDb, tmp_path: Path) -> WitnessedTable:
    return witnessed_table(floor_db, tmp_path)


def floor_prove(
    floor_db: FloorDb, table: WitnessedTable, round_number: int, out: Path, *, dsn: str = ""
) -> int:
    return main(
        [
            "floor",
            "prove",
            "--dsn",
            dsn or floor_db.admin_dsn,
            "--table",
            table.table_id,
            "--round",
            str(round_number),
            "--output",
            str(out),
        ]
    )


def proof_verify(table: WitnessedTable, bundle: Path) -> int:
    return main(
        [
            "proof",
            "verify",
            str(bundle),
            "--table-key",
            table.table_key,
            "--witness-key",
            table.witness_key,
        ]
    )


def test_a_round_proved_from_the_floor_and_checked_offline(
    floor_db: FloorDb, table: WitnessedTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Round 2 proved from the floor against the smallest cosigned tree covering it, checked
    by `proof verify` with the table's and the witness's keys (its cards printed), the same
    bundle as `journal prove`'s; then the round in play refused, and a reader's proof."""
    with floor_db.admin() as conn:
        held = conn.execute(
            f"SELECT tree_size FROM {SCHEMA}.checkpoints WHERE table_id = %s ORDER BY 1",
            (table.table_id,),
        ).fetchall()
    # the first three rounds' checkpoints; the one over the round in play is not on the floor
    assert [size for (size,) in held] == table.cosigned[:3]
    bundle = tmp_path / "round2.json"
    assert floor_prove(floor_db, table, 2, bundle) == 0, capsys.readouterr().err
    data = json.loads(bundle.read_text())
    # the smallest cosigned tree that covers the round: the one signed at its end
    assert int(data["checkpoint"].split("\n")[1]) == table.cosigned[1]
    capsys.readouterr()
    assert proof_verify(table, bundle) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"round 2 of tablectl/{table.table_id}" in out
    assert "cosigned by regulator.example/w1 at 1800000002" in out
    shown = [line.split("card=")[1].split()[0] for line in out.splitlines() if "card=" in line]
    assert shown == list(CARDS[2])
    # the same bundle the table's own `journal prove` writes against that checkpoint
    note = tmp_path / "note"
    note.write_text(data["checkpoint"])
    journal_bundle = tmp_path / "journal-round2.json"
    made = main(
        [
            "journal",
            "prove",
            str(table.journal),
            "--round",
            "2",
            "--output",
            str(journal_bundle),
            "--checkpoint",
            str(note),
        ]
    )
    assert made == 0, capsys.readouterr().err
    assert json.loads(journal_bundle.read_text()) == data
    # one table's floor serves the next checks too (a few seconds of make test saved)
    check_a_round_in_play_is_refused_naming_it(floor_db, table, tmp_path, capsys)
    check_a_reader_proves_a_round_and_reads_no_checkpoint_beyond_the_release(
        floor_db, table, tmp_path, capsys
    )


def test_a_floor_row_changed_by_its_owner_fails_the_proof(
    floor_db: FloorDb, table: WitnessedTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The floor's owner turns the append-only trigger off and changes a card of round 2:
    the bundle the floor serves is refused by `proof verify`; rehashed as well (the row's
    hash and the next row's link), the floor's rows no longer give the signed root and
    `floor prove` refuses, naming it."""
    bundle = tmp_path / "round2.json"
    with floor_db.admin() as conn:
        seq, kind, rnd, at, body, prev = conn.execute(
            f"SELECT seq, kind, round, {RECORDED_AT_SQL}, body, prev_hash"
            f" FROM {SCHEMA}.journal_rows"
            " WHERE table_id = %s AND round = 2"
            ' AND body LIKE \'%%"card":"Qs"%%\'',
            (table.table_id,),
        ).fetchone()
        edited = body.replace('"card":"Qs"', '"card":"As"')
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows DISABLE TRIGGER append_only")
        conn.execute(
            f"UPDATE {SCHEMA}.journal_rows SET body = %s WHERE table_id = %s AND seq = %s",
            (edited, table.table_id, seq),
        )
    assert floor_prove(floor_db, table, 2, bundle) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert proof_verify(table, bundle) == 1
    assert f"row {seq} edited: its content does not match its hash" in capsys.readouterr().err
    with floor_db.admin() as conn:
        conn.execute(
            f"UPDATE {SCHEMA}.journal_rows SET hash = %s WHERE table_id = %s AND seq = %s",
            (row_hash(prev, seq, kind, rnd, at, edited), table.table_id, seq),
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows ENABLE TRIGGER append_only")
    bundle.unlink()
    assert floor_prove(floor_db, table, 2, bundle) == 1
    err = capsys.readouterr().err
    assert f"table {table.table_id}, round 2: the floor's rows 1-{table.cosigned[1]}" in err
    assert "a row on the floor differs from the one the table signed" in err
    assert not bundle.exists()


def check_a_round_in_play_is_refused_naming_it(
    floor_db: FloorDb, table: WitnessedTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "round4.json"
    assert floor_prove(floor_db, table, 4, bundle) == 1
    err = capsys.readouterr().err
    assert f"table {table.table_id}, round 4: not ended on the floor" in err, err
    assert not bundle.exists()
    # the floor holds no checkpoint over the round in play, even offered again by its login
    four = table.cosigned[3]
    with floor_db.as_writer(table.table_id) as conn:
        note = Path(f"{table.journal}.witnessed").glob("*.checkpoint").__next__().read_text()
        assert int(note.split("\n")[1]) == four
        shipped = conn.execute(
            f"SELECT {SCHEMA}.ship_checkpoint(%s, %s)", (table.table_id, note)
        ).fetchone()
        assert shipped == ("held",)
    with floor_db.admin() as conn:
        assert conn.execute(
            f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE table_id = %s AND tree_size = %s",
            (table.table_id, four),
        ).fetchone() == (0,)


def test_no_covering_checkpoint_and_retired_rows_are_refused(
    floor_db: FloorDb, table: WitnessedTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Round 3's checkpoint not shipped (a table whose witness was away): refused, named.
    Rows 1-2 gone (a retired gaming day, as the owner drops it): refused, naming them."""
    bundle = tmp_path / "b.json"
    with floor_db.admin() as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.checkpoints DISABLE TRIGGER append_only")
        conn.execute(
            f"DELETE FROM {SCHEMA}.checkpoints WHERE table_id = %s AND tree_size = %s",
            (table.table_id, table.cosigned[2]),
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.checkpoints ENABLE TRIGGER append_only")
    assert floor_prove(floor_db, table, 3, bundle) == 1
    err = capsys.readouterr().err
    assert f"table {table.table_id}, round 3: no cosigned checkpoint on the floor covers" in err
    with floor_db.admin() as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows DISABLE TRIGGER append_only")
        conn.execute(
            f"DELETE FROM {SCHEMA}.journal_rows WHERE table_id = %s AND seq <= 2",
            (table.table_id,),
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.journal_rows ENABLE TRIGGER append_only")
    assert floor_prove(floor_db, table, 2, bundle) == 1
    err = capsys.readouterr().err
    assert f"table {table.table_id}, round 2: rows 1-2 of the tree of {table.cosigned[1]}" in err
    assert "not on the floor" in err
    assert not bundle.exists()


def check_a_reader_proves_a_round_and_reads_no_checkpoint_beyond_the_release(
    floor_db: FloorDb, table: WitnessedTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """floor prove is a reader's (released state only); the checkpoints table itself is not,
    and released_checkpoints() gives none past the release mark (one the owner put there)."""
    reader = unique_table_id("reader_")
    with floor_db.admin() as conn:
        conn.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_GROUP}")
        beyond = conn.execute(
            f"SELECT head_seq FROM {SCHEMA}.tables WHERE table_id = %s", (table.table_id,)
        ).fetchone()[0]
        conn.execute(
            f"INSERT INTO {SCHEMA}.checkpoints (table_id, tree_size, note_sha256, note)"
            " VALUES (%s, %s, '\\x00', 'not released')",
            (table.table_id, beyond),
        )
    dsn = f"host={floor_db.server.sockets} port={floor_db.server.port} dbname={floor_db.name}"
    bundle = tmp_path / "round1.json"
    assert floor_prove(floor_db, table, 1, bundle, dsn=f"{dsn} user={reader}") == 0, (
        capsys.readouterr().err
    )
    capsys.readouterr()
    assert proof_verify(table, bundle) == 0, capsys.readouterr().err
    with psycopg.connect(f"{dsn} user={reader}", autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT note FROM {SCHEMA}.checkpoints")
        sizes = [
            size
            for size, _ in conn.execute(
                f"SELECT * FROM {SCHEMA}.{RELEASED_CHECKPOINTS}(%s)", (table.table_id,)
            )
        ]
        assert sizes == table.cosigned[:3] and beyond not in sizes
    # a table's login may not: it reads nothing of the floor
    assert (
        floor_prove(
            floor_db,
            table,
            1,
            tmp_path / "w.json",
            dsn=floor_db.server.table_dsn(floor_db.name, writer_role(table.table_id))
            + f" passfile={floor_db.passfile}",
        )
        == 2
    )
    assert "floor prove is a reader's, the auditor's or the DBA's" in capsys.readouterr().err


def test_the_shipper_reads_each_cosigned_checkpoint_once_as_it_comes(tmp_path: Path) -> None:
    """At its start the newest of each witness and the tail of its history; then each line
    the witness client appends, a line still being written only once it is whole."""
    path = tmp_path / "journal.sqlite"
    store = WitnessedStore(path)
    notes = [f"tablectl/t\n{size}\nroot\n\n\u2014 tablectl/t sig{size}\n" for size in range(1, 6)]
    for note in notes[:3]:
        store.save("regulator.example/w1", note)
    feed = CosignedFeed(path)
    assert sorted(feed.new(), key=notes.index) == notes[:3]
    assert feed.new() == []
    store.save("regulator.example/w1", notes[3])
    assert feed.new() == [notes[3]]
    history = next(store.directory.glob("*.history"))
    line = json.dumps({"note": notes[4]}) + "\n"
    with history.open("a") as stream:
        stream.write(line[:20])
        stream.flush()
        assert feed.new() == []  # half a line: not yet
        stream.write(line[20:])
    assert feed.new() == [notes[4]]
    # a long history: a new shipper reads its tail only (and the newest), never from the start
    with history.open("a") as stream:
        for size in range(6, 6 + HISTORY_TAIL_BYTES // 10):
            stream.write(json.dumps({"note": f"tablectl/t\n{size}\n"}) + "\n")
    tail = CosignedFeed(path).new()
    last = f"tablectl/t\n{5 + HISTORY_TAIL_BYTES // 10}\n"
    assert notes[3] in tail and last in tail  # the newest file's, the history's last
    assert notes[0] not in tail and len(tail) < HISTORY_TAIL_BYTES // 20


def test_a_running_shipper_sends_a_checkpoint_once_its_rows_are_released(
    floor_db: FloorDb, tmp_path: Path
) -> None:
    """As in the daemon: a round ends, its checkpoint is cosigned while the shipper runs; the
    floor holds it back until the next row releases the round, then takes it."""
    table_id = unique_table_id()
    config = floor_db.provision(table_id)
    key = IdentityKey.generate(f"tablectl/{table_id}")
    witness = IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1)
    path = tmp_path / f"{table_id}.sqlite"
    journal = Journal(path)
    signer = CheckpointSigner(journal, key)
    shipper = FloorShipper(table_id, path, config, publish_metrics=False)
    shipper.start()
    try:
        journal.append("table", {"type": "table", "game": "three_card_21"}, durable=True)
        journal.append("event", {"type": "bets_closed"}, round_number=1)
        journal.append("event", {"type": "card_drawn", "card": "As"}, round_number=1)
        journal.append("event", {"type": "hands_collected"}, round_number=1)
        journal.flush()
        size, note = _cosigned(signer, witness, 1_800_000_001)
        WitnessedStore(path).save(witness.name, note)
        shipper.notify(size)
        wait_for(lambda: shipper.acknowledged_seq == size, 20, "round 1 shipped")
        with floor_db.as_writer(table_id) as conn:  # the round's end not released yet
            assert conn.execute(
                f"SELECT {SCHEMA}.ship_checkpoint(%s, %s)", (table_id, note)
            ).fetchone() == ("held",)
        assert shipper.shipped_checkpoints == 0
        journal.append("event", {"type": "bets_closed"}, round_number=2)  # releases round 1
        journal.flush()
        shipper.notify(size + 1)
        wait_for(lambda: shipper.shipped_checkpoints == 1, 20, "round 1's checkpoint shipped")
    finally:
        shipper.stop()
        journal.close()
    with floor_db.admin() as conn:
        assert conn.execute(
            f"SELECT tree_size, note FROM {SCHEMA}.checkpoints WHERE table_id = %s", (table_id,)
        ).fetchall() == [(size, note)]
