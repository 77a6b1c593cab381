"""A proof for one round, checked offline (`tablectl journal prove`, `tablectl proof verify`).

A *bundle* (JSON, kilobytes) holds an ended round's rows as written (bodies with their
nonces: released now that the round is over), each row's RFC 9162 inclusion proof in the tree
of a signed checkpoint, and that checkpoint as a signed note (with the witnesses'
cosignatures when the journal holds a cosigned one). `verify_bundle` needs no journal: it
recomputes each row's hash from its content, checks the rows are one unbroken run of the
chain, each row's leaf is in the checkpoint's tree, the checkpoint is signed by the table's
key and cosigned by every witness key given. Tampering anywhere is refused with the reason.

What it cannot show alone: that no row of the round is left out at its ends (the first row
names its predecessor's hash, the last is the collection's last decision: rows of the round
after it, a burn card of the next shoe, wait for the next collection as on the floor; a
round that never had a collection is released with a later one, H7). A row of the round is
not found in any other place of the log: each leaf's position is its seq.

Release rule (H7, the floor's rule): a round's rows are released up to the last decision
after its accepted collection (a `hands_collected` not refused by a `rejected` decision);
a round without one is released when a later round's collection is accepted.
"""

from __future__ import annotations

import base64
import itertools
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.record import merkle
from tablectl.controller.record.checkpoints import checkpoint_file
from tablectl.controller.record.journal import (
    NONCE_KEY,
    JournalError,
    _connect_read_only,
    row_hash,
    row_leaf,
)
from tablectl.controller.record.merkle import MerkleError
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    Verifier,
    add_signature_lines,
    open_note,
    parse_checkpoint,
    split_note,
)
from tablectl.controller.record.witnessed import witnessed_dir

BUNDLE_FORMAT = "tablectl-round-proof/1"
_COLUMNS = "seq, kind, round, recorded_at, body, prev_hash, hash"


class ProofError(ValueError):
    """A round that cannot be proved yet, or a bundle that does not verify: the reason."""


# --- proving ----------------------------------------------------------------------------------


def _first_round(db: sqlite3.Connection) -> int | None:
    """The round of a segment's first row that has one (a few rows read: the segment, table
    and checkpoint rows that open it have none); None for a segment without rounds."""
    row = db.execute(
        "SELECT round FROM journal WHERE round IS NOT NULL ORDER BY seq LIMIT 1"
    ).fetchone()
    return int(row[0]) if row and isinstance(row[0], int) else None


def _round_at_or_after(db: sqlite3.Connection, seq: int) -> int | None:
    row = db.execute(
        "SELECT round FROM journal WHERE seq >= ? AND round IS NOT NULL ORDER BY seq LIMIT 1",
        (seq,),
    ).fetchone()
    return int(row[0]) if row else None


def _first_seq_of_round_at_least(db: sqlite3.Connection, low: int, high: int, rnd: int) -> int:
    """The smallest seq in [low, high + 1] from which the next row with a round has a round
    of at least `rnd` (high + 1 when none has)."""
    high += 1
    while low < high:
        middle = (low + high) // 2
        found = _round_at_or_after(db, middle)
        if found is not None and found >= rnd:
            high = middle
        else:
            low = middle + 1
    return low


def _round_span(db: sqlite3.Connection, rnd: int) -> tuple[int, int] | None:
    """The seqs of a segment from its first row of round `rnd` to its last (rows of no round
    between them included), or None when it holds none."""
    low, high = db.execute("SELECT min(seq), max(seq) FROM journal").fetchone()
    if low is None:
        return None
    first = _first_seq_of_round_at_least(db, low, high, rnd)
    first_row = db.execute(
        "SELECT seq, round FROM journal WHERE seq >= ? AND round IS NOT NULL ORDER BY seq LIMIT 1",
        (first,),
    ).fetchone()
    if first_row is None or first_row[1] != rnd:
        return None
    after = _first_seq_of_round_at_least(db, first_row[0], high, rnd + 1)
    # the last row of the round: the last one with a round before `after`
    last = db.execute(
        "SELECT max(seq) FROM journal WHERE seq >= ? AND seq < ? AND round IS NOT NULL",
        (first_row[0], after),
    ).fetchone()[0]
    return int(first_row[0]), int(last)


def _is_collection(kind: str, body: str) -> bool:
    return kind == "event" and '"type":"hands_collected"' in body


def _released_through(rows: Sequence[tuple[Any, ...]]) -> int | None:
    """The last seq released by an accepted collection among `rows` (seq order), or None."""
    for position, row in enumerate(rows):
        if not _is_collection(row[1], row[4]):
            continue
        last = row[0]
        refused = False
        for later in rows[position + 1 :]:
            if later[1] != "decision":
                break
            if '"decision":"rejected"' in later[4]:
                refused = True
            last = later[0]
        if not refused:
            return int(last)
    return None


def prove_round(
    log: MerkleLog,
    live: Path | None,
    round_number: int,
    *,
    checkpoint_note: str | None = None,
) -> dict[str, Any]:
    """The bundle for `round_number` (ProofError when it is in play, absent or unsigned)."""
    paths = log.segments
    # the last segment begun after a round before this one: a binary search, a few files
    # opened of a year's
    low, high = 0, len(paths)
    while low < high:
        middle = (low + high) // 2
        first = _first_round(log.connection(paths[middle]))
        if first is not None and first < round_number:
            low = middle + 1
        else:
            high = middle
    position = max(0, low - 1)
    # the run from its first row to its last, rows of no round (notes) between included;
    # found by bisection on seq (rounds only grow along the chain): no scan of a segment
    rows: list[tuple[Any, ...]] = []
    for path in paths[position:]:
        db = log.connection(path)
        span = _round_span(db, round_number)
        if span is None:
            if rows:
                break
            continue
        rows += db.execute(
            f"SELECT {_COLUMNS} FROM journal WHERE seq BETWEEN ? AND ? ORDER BY seq", span
        ).fetchall()
        last = db.execute("SELECT max(seq) FROM journal").fetchone()[0]
        if span[1] < last:
            break
    if not rows:
        raise ProofError(f"round {round_number} is not in the journal")
    shipped, held = released_part(
        rows,
        round_number,
        later_collection=lambda: _later_collection(log, paths[position:], round_number),
    )
    note = checkpoint_note if checkpoint_note is not None else _newest_checkpoint(live, shipped)
    checkpoint = checkpoint_of(note)
    last = int(shipped[-1][0])
    if checkpoint.size < last:
        raise ProofError(
            f"the newest signed checkpoint covers rows up to {checkpoint.size}, round "
            f"{round_number} ends at row {last}: sign one first (the daemon does at every "
            "round's end)"
        )
    try:
        if log.root(checkpoint.size) != checkpoint.root_hash:
            raise ProofError(
                f"the journal's tree of {checkpoint.size} rows is not the one the checkpoint "
                "signs: the journal was rewritten after it was signed"
            )
        proofs = log.inclusion_proofs([int(r[0]) for r in shipped], checkpoint.size)
    except MerkleError as error:
        raise ProofError(str(error)) from error
    return round_bundle(round_number, checkpoint, note, shipped, held, proofs)


def released_part(
    rows: Sequence[tuple[Any, ...]], round_number: int, *, later_collection: Callable[[], bool]
) -> tuple[list[tuple[Any, ...]], int]:
    """The rows of a round (its first row to its last, in seq order: seq, kind, round,
    recorded_at, body, prev_hash, hash) a proof carries, and how many later ones it holds
    back: through the last decision after its accepted collection, or all of them when a
    later round's collection ended it (`later_collection`, asked only then); ProofError
    when it is still in play (H7)."""
    released = _released_through(rows)
    if released is None and later_collection():
        released = int(rows[-1][0])
    if released is None:
        raise ProofError(
            f"round {round_number} is still in play (no accepted hands_collected yet): its rows "
            "and their nonces are released only when it has ended (H7)"
        )
    shipped = [row for row in rows if row[0] <= released]
    if any(b[0] != a[0] + 1 for a, b in itertools.pairwise(shipped)):
        raise ProofError(f"round {round_number}: its rows are not one run of seqs here")
    return shipped, len(rows) - len(shipped)


def checkpoint_of(note: str) -> Checkpoint:
    """The checkpoint a signed note holds (its signatures are checked by verify_bundle)."""
    try:
        text, _ = split_note(note)
        return parse_checkpoint(text)
    except NoteError as error:
        raise ProofError(f"the signed checkpoint is malformed: {error}") from error


def round_bundle(
    round_number: int,
    checkpoint: Checkpoint,
    note: str,
    shipped: Sequence[tuple[Any, ...]],
    held: int,
    proofs: Mapping[int, Sequence[bytes]],
) -> dict[str, Any]:
    """The bundle (BUNDLE_FORMAT): the round's rows with their inclusion proofs in the
    checkpoint's tree, and the signed note; `journal prove` and `floor prove` both write it."""
    return {
        "format": BUNDLE_FORMAT,
        "origin": checkpoint.origin,
        "round": round_number,
        "checkpoint": note,
        "rows": [
            {
                "seq": seq,
                "kind": kind,
                "round": rnd,
                "recorded_at": at,
                "body": body,
                "prev_hash": prev,
                "hash": digest,
                "proof": [base64.b64encode(h).decode() for h in proofs[seq]],
            }
            for seq, kind, rnd, at, body, prev, digest in shipped
        ],
        "held_back": held,
    }


class LeafGap(MerkleError):
    """Rows of the tree's range that are not there (retired, or never shipped)."""

    def __init__(self, first: int, last: int, size: int) -> None:
        super().__init__(f"rows {first}-{last} of the tree of {size} rows are missing")
        self.first, self.last, self.size = first, last, size


def proofs_from_leaves(
    leaves: Iterable[tuple[int, str]], size: int, seqs: Sequence[int]
) -> tuple[bytes, dict[int, list[bytes]]]:
    """The root of the tree of rows 1..`size` and the inclusion proof of each row of `seqs`,
    from every row's (seq, chain hash) in seq order, streamed: only the nodes the proofs
    read are kept (a year of rows is never in memory). LeafGap names the first rows missing
    from the stream; ValueError a hash that is not hex."""
    wanted: set[tuple[int, int]] = set()
    for seq in seqs:

        def prove(reader: merkle.NodeReader, index: int = seq - 1) -> object:
            return merkle.inclusion_proof(index, size, reader)

        wanted.update(merkle.nodes_needed(prove))
    found: dict[tuple[int, int], bytes] = {}
    tree = merkle.CompactTree()
    for seq, digest in leaves:
        if seq > size:
            break
        if seq != tree.size + 1:
            raise LeafGap(tree.size + 1, min(seq, size + 1) - 1, size)
        for level, index, value in tree.append(row_leaf(digest)):
            if (level, index) in wanted:
                found[(level, index)] = value
    if tree.size < size:
        raise LeafGap(tree.size + 1, size, size)
    cache: merkle.SubtreeCache = {}
    proofs = {
        seq: merkle.inclusion_proof(seq - 1, size, lambda level, i: found[(level, i)], cache)
        for seq in seqs
    }
    return tree.root(), proofs


def _later_collection(log: MerkleLog, paths: Iterable[Path], round_number: int) -> bool:
    for path in paths:
        rows = (
            log.connection(path)
            .execute(
                f"SELECT {_COLUMNS} FROM journal WHERE round > ? AND (kind = 'decision' OR"
                " (kind = 'event' AND body LIKE '%\"type\":\"hands_collected\"%')) ORDER BY seq",
                (round_number,),
            )
            .fetchall()
        )
        if _released_through(rows) is not None:
            return True
    return False


def _newest_checkpoint(live: Path | None, rows: Sequence[tuple[Any, ...]]) -> str:
    """The checkpoint to prove against: of the cosigned ones kept beside the journal
    (`JOURNAL.witnessed/*.checkpoint`, one per witness) that cover the round, the size most
    witnesses cosigned (the largest on a tie), their cosignatures on one note; else the
    table's own newest (`JOURNAL.checkpoint`)."""
    if live is None:
        raise ProofError("no live journal file here: give the signed checkpoint (--checkpoint)")
    last = int(rows[-1][0])
    by_text: dict[str, list[str]] = {}
    directory = witnessed_dir(live)
    for path in sorted(directory.glob("*.checkpoint")) if directory.is_dir() else []:
        try:
            note = path.read_text()
            text, _ = split_note(note)
            if parse_checkpoint(text).size >= last:
                by_text.setdefault(text, []).append(note)
        except (OSError, UnicodeError, NoteError):
            continue
    if by_text:
        text, notes = max(
            by_text.items(), key=lambda item: (len(item[1]), parse_checkpoint(item[0]).size)
        )
        merged = notes[0]
        for other in notes[1:]:
            merged = add_signature_lines(merged, [s.line for s in split_note(other)[1]])
        return merged
    try:
        return checkpoint_file(live).read_text()
    except (OSError, UnicodeError) as error:
        raise ProofError(
            f"no signed checkpoint beside {live} ({checkpoint_file(live).name}): the table has "
            f"no identity key (journal setup-keys) or has not signed yet ({error})"
        ) from error


def prove_round_in(
    path: Path, round_number: int, *, archive: Path | None = None, checkpoint: Path | None = None
) -> dict[str, Any]:
    """`journal prove PATH`: a directory of segments or the live journal file."""
    try:
        if path.is_dir():
            log = MerkleLog.of_directory(path, archive=archive)
        else:
            _connect_read_only(path).close()
            log = MerkleLog(path, archive=archive)
    except JournalError as error:
        raise ProofError(str(error)) from error
    try:
        note = None
        if checkpoint is not None:
            try:
                note = checkpoint.read_text()
            except (OSError, UnicodeError) as error:
                raise ProofError(f"{checkpoint}: cannot read: {error}") from error
        return prove_round(log, log.live, round_number, checkpoint_note=note)
    except sqlite3.Error as error:
        raise ProofError(f"{path}: cannot read the journal: {error}") from error
    finally:
        log.close()


# --- verifying --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProvenRow:
    seq: int
    kind: str
    round: int | None
    recorded_at: str
    body: dict[str, Any]


@dataclass(frozen=True)
class ProvenRound:
    round: int
    origin: str
    tree_size: int
    root: bytes
    rows: tuple[ProvenRow, ...]
    cosigned_by: tuple[tuple[str, int], ...]  # (witness name, cosignature time)
    held_back: int


def _field(row: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = row.get(name)
    if kind is int and name == "round" and value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProofError(f"{where}: its {name} is missing or not a {kind.__name__}")
    return value


def verify_bundle(
    bundle: Any, table_key: Verifier, witness_keys: Sequence[Verifier] = ()
) -> ProvenRound:
    """Check a bundle offline; ProofError names the first thing wrong."""
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise ProofError(f"not a round proof (format {BUNDLE_FORMAT!r} expected)")
    note = bundle.get("checkpoint")
    if not isinstance(note, str):
        raise ProofError("the bundle holds no signed checkpoint")
    try:
        opened = open_note(note, [table_key, *witness_keys])
        checkpoint = parse_checkpoint(opened.text)
    except NoteError as error:
        raise ProofError(f"the checkpoint: {error}") from error
    signed = opened.signed_by(table_key.name)
    if signed is None or signed.key_id != table_key.key_id or signed.timestamp is not None:
        raise ProofError(f"the checkpoint is not signed by the table key {table_key.name}")
    if checkpoint.origin != table_key.name:
        raise ProofError(
            f"the checkpoint's origin {checkpoint.origin!r} is not the table key's name "
            f"{table_key.name!r}"
        )
    cosigned: list[tuple[str, int]] = []
    for witness in witness_keys:
        found = next(
            (s for s in opened.verified if s.name == witness.name and s.key_id == witness.key_id),
            None,
        )
        if found is None or (witness.alg == ALG_COSIGNATURE_V1 and found.timestamp is None):
            raise ProofError(f"the checkpoint carries no cosignature by the witness {witness.name}")
        cosigned.append((witness.name, found.timestamp or 0))
    round_number = bundle.get("round")
    rows = bundle.get("rows")
    if not isinstance(round_number, int) or not isinstance(rows, list) or not rows:
        raise ProofError("the bundle names no round or holds no rows")
    proven: list[ProvenRow] = []
    previous: tuple[int, str] | None = None
    for position, row in enumerate(rows):
        where = f"row {row.get('seq') if isinstance(row, dict) else f'#{position + 1}'}"
        if not isinstance(row, dict):
            raise ProofError(f"{where}: not an object")
        seq = _field(row, "seq", int, where)
        kind = _field(row, "kind", str, where)
        rnd = _field(row, "round", int, where)
        at = _field(row, "recorded_at", str, where)
        body = _field(row, "body", str, where)
        prev = _field(row, "prev_hash", str, where)
        digest = _field(row, "hash", str, where)
        if rnd is not None and rnd != round_number:
            raise ProofError(f"{where} is of round {rnd}, not round {round_number}")
        if row_hash(prev, seq, kind, rnd, at, body) != digest:
            raise ProofError(f"{where} edited: its content does not match its hash")
        if previous is not None:
            if seq != previous[0] + 1:
                raise ProofError(
                    f"{where} follows row {previous[0]}: rows {previous[0] + 1}-{seq - 1} are "
                    "missing from the bundle"
                )
            if prev != previous[1]:
                raise ProofError(f"{where} does not follow row {previous[0]} (the chain breaks)")
        try:
            proof = [base64.b64decode(h, validate=True) for h in row.get("proof", [])]
            leaf = row_leaf(digest)
        except (ValueError, TypeError) as error:
            raise ProofError(f"{where}: its proof or hash is malformed: {error}") from error
        if not 1 <= seq <= checkpoint.size or not merkle.verify_inclusion(
            leaf, seq - 1, checkpoint.size, proof, checkpoint.root_hash
        ):
            raise ProofError(
                f"{where} is not in the log the checkpoint signs (tree of {checkpoint.size} "
                "rows): its inclusion proof fails"
            )
        try:
            parsed = json.loads(body)
        except ValueError as error:
            raise ProofError(f"{where}: its body is not JSON") from error
        if isinstance(parsed, dict):
            parsed.pop(NONCE_KEY, None)
        proven.append(ProvenRow(seq, kind, rnd, at, parsed if isinstance(parsed, dict) else {}))
        previous = (seq, digest)
    held = bundle.get("held_back", 0)
    return ProvenRound(
        round_number,
        checkpoint.origin,
        checkpoint.size,
        checkpoint.root_hash,
        tuple(proven),
        tuple(cosigned),
        held if isinstance(held, int) else 0,
    )


def describe_row(row: ProvenRow) -> str:
    """One line of `proof verify`: the row's seq (its citation), what it is, its cards and
    decision with the rule it cites."""
    body = dict(row.body)
    if row.kind == "decision":
        decision = body.pop("decision", "?")
        rule = body.pop("rule_id", None)
        text = body.pop("rule", None)
        cited = f" [{rule}]" if rule else ""
        said = f" {text}" if text else ""
        rest = _fields(body)
        return f"row {row.seq}  decision {decision}{cited}{said}{rest}"
    kind = body.pop("type", row.kind)
    return f"row {row.seq}  {row.kind} {kind}{_fields(body)}"


def _fields(body: dict[str, Any]) -> str:
    shown = [
        f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}"
        for key, value in body.items()
        if key not in ("time", "at") and not isinstance(value, dict)
    ]
    return ("  " + " ".join(shown)) if shown else ""
