"""`tablectl floor prove`: a round's proof served from the floor (docs/floor.md, "A round's
proof from the floor").

The same bundle `tablectl journal prove` writes on the table PC (controller/record/
round_proof.py), checked by the same `tablectl proof verify`: the round's rows (nonces
included, released with the round), each row's RFC 9162 inclusion proof, and a cosigned
checkpoint. Here the rows are the floor's copy, the checkpoint one the table's shipper sent
(floor.checkpoints, through ship_checkpoint: cosigned by the table's witnesses, its tree
within the released rows), and the proofs are computed from the floor's rows 1..N (their
chain hashes are the leaves, `journal.row_leaf`). Everything read is released state
(ended_rounds, released_rows, released_leaves, released_checkpoints), so any floor reader may
prove a round, and none can prove a round in play.

Refused, naming the table and the round: a round not ended on the floor (in play, its last
rows waiting for the next collection, or not shipped yet); no shipped cosigned checkpoint
covering its last row; rows of the tree's range no longer on the floor (retired gaming days);
the floor's rows giving another root than the checkpoint signs (a row changed on the floor).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tablectl.controller.floor.schema import (
    ENDED_ROUNDS,
    RELEASED_CHECKPOINTS,
    RELEASED_LEAVES,
    RELEASED_ROWS,
    SCHEMA,
)
from tablectl.controller.floor.store import CHAIN_SELECT, FETCH_ROWS, require_table
from tablectl.controller.record.note import NoteError, add_signature_lines, split_note
from tablectl.controller.record.round_proof import (
    LeafGap,
    ProofError,
    checkpoint_of,
    proofs_from_leaves,
    released_part,
    round_bundle,
)


def _leaves(conn: Any, table_id: str, size: int) -> Iterator[tuple[int, str]]:
    """(seq, hash) of the table's released rows 1..size, streamed (a server-side cursor)."""
    with conn.transaction(), conn.cursor(name=f"floor_leaves_{table_id}") as cursor:
        cursor.itersize = FETCH_ROWS * 10
        cursor.execute(
            f"SELECT seq, hash FROM {SCHEMA}.{RELEASED_LEAVES}(%s, %s)", (table_id, size)
        )
        for seq, digest in cursor:
            yield int(seq), str(digest)


def _smallest_covering(conn: Any, table_id: str, last: int) -> list[str]:
    """The notes of the smallest shipped tree covering row `last`, one per checkpoint text
    (the cosignatures of the same checkpoint by several witnesses merged onto one note)."""
    by_text: dict[str, str] = {}
    size: int | None = None
    for tree_size, note in conn.execute(
        f"SELECT tree_size, note FROM {SCHEMA}.{RELEASED_CHECKPOINTS}(%s, %s)", (table_id, last)
    ):
        if size is not None and tree_size != size:
            break
        size = int(tree_size)
        try:
            text, signatures = split_note(note)
            held = by_text.get(text)
            by_text[text] = (
                note if held is None else add_signature_lines(held, [s.line for s in signatures])
            )
        except NoteError:
            continue  # not a note: proof verify would refuse it; another may serve
    return list(by_text.values())


def prove_round_on_floor(conn: Any, table_id: str, round_number: int) -> dict[str, Any]:
    """The bundle of `round_number` of `table_id` from the floor; ProofError says why not."""
    where = f"table {table_id}, round {round_number}"
    require_table(conn, table_id)
    span = conn.execute(
        f"SELECT first_seq, last_seq FROM {SCHEMA}.{ENDED_ROUNDS} WHERE table_id = %s"
        " AND round = %s",
        (table_id, round_number),
    ).fetchone()
    if span is None:
        raise ProofError(
            f"{where}: not ended on the floor: a round's rows and their nonces are released, "
            "and proved, only once it has ended (H7): it is in play, its last rows wait for "
            "the next round's collection, or it is not shipped yet"
        )
    first, last = int(span[0]), int(span[1])
    rows = [
        tuple(row)
        for row in conn.execute(
            f"SELECT {CHAIN_SELECT} FROM {SCHEMA}.{RELEASED_ROWS}(%s, %s, %s) AS r ORDER BY r.seq",
            (table_id, first - 1, last),
        )
    ]
    if [row[0] for row in rows] != list(range(first, last + 1)):
        held = {row[0] for row in rows}
        missing = [seq for seq in range(first, last + 1) if seq not in held]
        raise ProofError(
            f"{where}: rows {missing[0]}-{missing[-1]} of its rows {first}-{last} are not on "
            "the floor (retired gaming days: floor.retired): `journal prove` on the table's "
            "journal, or the archive restored, serves it"
        )
    # in ended_rounds: the release passed its last row, by its own collection or a later one
    shipped, held_back = released_part(rows, round_number, later_collection=lambda: True)
    end = int(shipped[-1][0])
    notes = _smallest_covering(conn, table_id, end)
    if not notes:
        raise ProofError(
            f"{where}: no cosigned checkpoint on the floor covers its last row {end} yet (the "
            "table's shipper sends each checkpoint its witnesses cosigned once the floor has "
            "released every row of it; a table without a witness sends none)"
        )
    checkpoints = [(note, checkpoint_of(note)) for note in notes]
    size = checkpoints[0][1].size
    seqs = [int(row[0]) for row in shipped]
    try:
        root, proofs = proofs_from_leaves(_leaves(conn, table_id, size), size, seqs)
    except LeafGap as gap:
        raise ProofError(
            f"{where}: rows {gap.first}-{gap.last} of the tree of {size} rows its checkpoint "
            "signs are not on the floor (retired gaming days: floor.retired), so no inclusion "
            "proof can be computed here: `journal prove` on the table's journal serves it"
        ) from gap
    except ValueError as error:
        raise ProofError(f"{where}: a row hash on the floor is malformed: {error}") from error
    for note, checkpoint in checkpoints:
        if checkpoint.root_hash == root:
            return round_bundle(round_number, checkpoint, note, shipped, held_back, proofs)
    raise ProofError(
        f"{where}: the floor's rows 1-{size} give the root {root.hex()}, the cosigned "
        f"checkpoint of {size} rows signs {checkpoints[0][1].root_hash.hex()}: a row on the "
        "floor differs from the one the table signed (`tablectl floor verify` and `floor "
        "compare` name it)"
    )
