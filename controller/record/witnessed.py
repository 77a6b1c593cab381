"""The table's side of its witnesses: the cosigned checkpoints it holds, and the start check.

A witness (`tablectl witness serve`, on a regulator's machine) cosigns a checkpoint of the
journal's Merkle log only when it extends the last one it cosigned. Each checkpoint a witness
cosigned is kept beside the journal (`JOURNAL.witnessed/WITNESS.checkpoint`: the table's
signature and that witness's cosignature), durably, the newest per witness. At start the daemon
checks its journal against the newest of these and of those the witnesses return
(`anchor_damage`): a journal with fewer rows than a cosigned tree, or whose tree at a cosigned
size has another root, was cut or rewritten, and is refused (docs/journal.md, "The witness").

An insider with root on the table PC can delete or replace the files here, and holds the
table's key; what they cannot do is make a witness cosign a second history, or unsay a
cosignature the witness returns at the next start.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.record.durable import fsync_directory, write_private_file
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    NoteError,
    Verifier,
    open_note,
    parse_checkpoint,
)

#: Beside the journal file: `journal.sqlite` -> `journal.sqlite.witnessed/`.
WITNESSED_SUFFIX = ".witnessed"


def witnessed_dir(journal_path: Path) -> Path:
    return Path(f"{journal_path}{WITNESSED_SUFFIX}")


def _file_name(witness: str, suffix: str = ".checkpoint") -> str:
    readable = "".join(c if c.isalnum() or c in "-." else "_" for c in witness)[:48]
    return f"{readable}-{hashlib.sha256(witness.encode()).hexdigest()[:8]}{suffix}"


@dataclass(frozen=True)
class Anchor:
    """A checkpoint a witness cosigned: its tree size and root, who and when, and where the
    table found it (held beside the journal, or returned by the witness at start)."""

    witness: str
    size: int
    root: bytes
    cosigned_at: int
    note: str
    source: str


def open_cosigned(note: str, table: Verifier, witness: Verifier, source: str) -> Anchor:
    """The anchor a cosigned checkpoint gives, once both signatures verify; NoteError else."""
    if witness.alg != ALG_COSIGNATURE_V1:
        raise NoteError(f"{witness.name}: not a witness key (a cosignature/v1 key, type 0x04)")
    opened = open_note(note, [table, witness])
    if opened.signed_by(table.name) is None:
        raise NoteError(f"not signed by the table's key {table.name}")
    cosignature = opened.signed_by(witness.name)
    if cosignature is None or cosignature.timestamp is None:
        raise NoteError(f"no cosignature by the witness {witness.name}")
    checkpoint = parse_checkpoint(opened.text)
    if checkpoint.origin != table.name:
        raise NoteError(f"a checkpoint of {checkpoint.origin!r}, not of {table.name!r}")
    return Anchor(
        witness.name, checkpoint.size, checkpoint.root_hash, cosignature.timestamp, note, source
    )


class WitnessedStore:
    """`JOURNAL.witnessed/`: the newest checkpoint each witness cosigned, one file each."""

    def __init__(self, journal_path: Path) -> None:
        self.journal_path = journal_path
        self.directory = witnessed_dir(journal_path)

    def save(self, witness: str, note: str) -> None:
        """Keep `note` (cosigned by `witness`) as its newest, durably, and append it to that
        witness's history (OSError on failure)."""
        if not self.directory.is_dir():
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fsync_directory(self.directory.parent)
        write_private_file(self.directory / _file_name(witness), note)
        self._append_history(witness, note)

    def _append_history(self, witness: str, note: str) -> None:
        """`WITNESS.history`: every checkpoint it cosigned, a JSON line each (about 400 bytes:
        a table's day of rounds is ~0.6 MB), appended and fsynced; read only when the start
        finds the journal rewritten, to name the first row that differs more closely."""
        path = self.directory / _file_name(witness, ".history")
        created = not path.exists()
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            view = memoryview((json.dumps({"note": note}) + "\n").encode())
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if created:
            fsync_directory(self.directory)

    def history(self, witness: str) -> list[tuple[int, str]]:
        """(tree size, cosigned note) of every checkpoint `witness` cosigned, as held (not
        verified: each is checked when it is used), by size; unreadable lines skipped."""
        path = self.directory / _file_name(witness, ".history")
        found: dict[int, str] = {}
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeError):
            return []
        for line in lines:
            try:
                note = json.loads(line)["note"]
                found[int(note.split("\n", 2)[1])] = note
            except (ValueError, KeyError, TypeError, IndexError):
                continue
        return sorted(found.items())

    def held(
        self, table: Verifier, witnesses: Iterable[Verifier]
    ) -> tuple[list[Anchor], list[str]]:
        """The anchors held for `witnesses` that verify, and what is wrong with any that do
        not (a file edited on the box is said, never trusted)."""
        anchors: list[Anchor] = []
        problems: list[str] = []
        for witness in witnesses:
            path = self.directory / _file_name(witness.name)
            try:
                note = path.read_text()
            except FileNotFoundError:
                continue
            except (OSError, UnicodeError) as error:
                problems.append(f"{path}: cannot be read: {error}")
                continue
            try:
                anchors.append(open_cosigned(note, table, witness, f"held in {path}"))
            except NoteError as error:
                problems.append(f"{path}: {error}")
        return anchors, problems


@dataclass(frozen=True)
class AnchorDamage:
    """Why the journal contradicts a cosigned checkpoint; `first_bad_seq` the row to look at."""

    message: str
    first_bad_seq: int
    #: a rewrite: the largest cosigned size the journal matches and the smallest it does not
    matched: int | None = None
    anchor: Anchor | None = None  # the cosigned checkpoint the journal does not extend


def anchor_damage(
    anchors: Iterable[Anchor], tree_size: int, root_at: Callable[[int], bytes]
) -> AnchorDamage | None:
    """The journal's tree (`tree_size` leaves, leaf i = row i + 1; `root_at(n)` its root at
    n leaves) against cosigned checkpoints: None when it extends every one of them.

    A cosigned tree larger than the journal's: rows were cut (or an older copy restored).
    A cosigned tree whose root the journal's tree at that size does not have: rows were
    rewritten; the first row that differs lies after the largest cosigned size the journal
    still matches (every row up to it is proven) and within the smallest it does not.
    """
    ordered = sorted(anchors, key=lambda a: (a.size, a.cosigned_at))
    if not ordered:
        return None
    newest = ordered[-1]
    matched = 0
    for anchor in ordered:
        if anchor.size > tree_size:
            return AnchorDamage(
                f"the journal holds {tree_size} rows, but witness {anchor.witness} cosigned "
                f"a tree of {anchor.size} rows (at {anchor.cosigned_at}, {anchor.source}): "
                f"rows {tree_size + 1}-{anchor.size} were cut, or an older copy of the journal "
                "was put back",
                tree_size + 1,
            )
        if anchor.size == 0:
            continue
        if root_at(anchor.size) != anchor.root:
            return rewritten(anchor, matched, root_at(anchor.size))
        matched = max(matched, anchor.size)
    assert newest.size <= tree_size
    return None


def rewritten(anchor: Anchor, matched: int, journal_root: bytes) -> AnchorDamage:
    """The journal is not the history `anchor` cosigned; rows 1-`matched` are.

    The message says what is really wrong first: the cosigned size and root against the
    root of the journal's first that many rows. With no smaller cosigned checkpoint that
    the journal matches (`matched` 0: none held, e.g. the witnesses' history beside the
    journal deleted), nothing narrows where the rewrite begins, and the message says so
    rather than name a span "from row 1" as if row 1 were known to differ."""
    said = (
        f"witness {anchor.witness} cosigned a tree of {anchor.size} rows with root "
        f"{base64.b64encode(anchor.root).decode()} (at {anchor.cosigned_at}, {anchor.source}), "
        f"but the journal's first {anchor.size} rows have root "
        f"{base64.b64encode(journal_root).decode()}: the history was rewritten; "
    )
    if matched:
        where = (
            f"rows 1-{matched} match what was cosigned, the first row that differs is one of "
            f"rows {matched + 1}-{anchor.size}"
        )
    else:
        where = (
            f"no smaller cosigned checkpoint that the journal matches is held (the witnesses' "
            f"history beside the journal is missing, or the rewrite starts before the first "
            f"one), so nothing narrows it: the first row that differs is one of rows "
            f"1-{anchor.size}, and none of them is proven"
        )
    return AnchorDamage(said + where, matched + 1, matched, anchor)


def narrowed(
    damage: AnchorDamage,
    store: WitnessedStore,
    table: Verifier,
    witnesses: Iterable[Verifier],
    root_at: Callable[[int], bytes],
) -> AnchorDamage:
    """A rewrite's span narrowed by the checkpoints the witnesses cosigned before (their
    history beside the journal): a binary search over the cosigned sizes inside the span,
    each checkpoint verified as it is used (one that does not verify is skipped). The
    journal matches every cosigned size before the first row that differs and none after,
    so the span shrinks to the two cosigned sizes around that row."""
    if damage.matched is None or damage.anchor is None:
        return damage
    low, high = damage.matched, damage.anchor.size
    candidates: dict[int, tuple[str, Verifier]] = {}
    for witness in witnesses:
        for size, note in store.history(witness.name):
            if low < size < high:
                candidates.setdefault(size, (note, witness))
    sizes = sorted(candidates)
    best = damage.anchor
    while sizes:
        middle = len(sizes) // 2
        size = sizes[middle]
        note, witness = candidates[size]
        try:
            anchor = open_cosigned(note, table, witness, "held in the witnesses' history")
        except NoteError:
            del sizes[middle]
            continue
        if root_at(anchor.size) == anchor.root:
            low, sizes = anchor.size, sizes[middle + 1 :]
        else:
            high, best, sizes = anchor.size, anchor, sizes[:middle]
    return rewritten(best, low, root_at(best.size))


def newest_per_witness(anchors: Iterable[Anchor]) -> Mapping[str, Anchor]:
    newest: dict[str, Anchor] = {}
    for anchor in anchors:
        if anchor.witness not in newest or anchor.size > newest[anchor.witness].size:
            newest[anchor.witness] = anchor
    return newest


@dataclass(frozen=True)
class WitnessedVerdict:
    """`journal verify --witness-key`'s verdict: the span the cosigned checkpoints prove, or
    why the journal contradicts them (`first_bad_seq`), or that none was found."""

    ok: bool
    message: str
    first_bad_seq: int | None = None
    proven_rows: int = 0
    rows: int = 0


def verify_witnessed(
    live: Path,
    tree_size: int,
    root_at: Callable[[int], bytes],
    table: Verifier,
    witnesses: Iterable[Verifier],
    given: Iterable[tuple[str, str]] = (),
) -> WitnessedVerdict:
    """The journal's log (`tree_size` leaves, `root_at`) against every checkpoint cosigned by
    one of `witnesses` (and signed by `table`): those held beside `live` and `given`
    (where, note text), e.g. fetched from a witness by the regulator."""
    keys = list(witnesses)
    anchors, problems = WitnessedStore(live).held(table, keys)
    for where, note in given:
        found = False
        for witness in keys:
            try:
                anchors.append(open_cosigned(note, table, witness, where))
                found = True
            except NoteError:
                continue
        if not found:
            problems.append(
                f"{where}: no checkpoint of {table.name} cosigned by a witness key given"
            )
    said = "".join(f"; {problem}" for problem in problems)
    if not anchors:
        return WitnessedVerdict(
            False,
            f"no checkpoint cosigned by {', '.join(k.name for k in keys)} was found (held "
            f"beside the journal in {witnessed_dir(live)}, or given with --cosigned){said}: "
            "nothing outside the box vouches for this journal",
            rows=tree_size,
        )
    damage = anchor_damage(anchors, tree_size, root_at)
    if damage is not None:
        return WitnessedVerdict(False, damage.message + said, damage.first_bad_seq, rows=tree_size)
    newest = max(anchors, key=lambda a: (a.size, a.cosigned_at))
    who = sorted({a.witness for a in anchors if a.size == newest.size})
    rest = (
        f"; rows {newest.size + 1}-{tree_size} are not witnessed yet"
        if tree_size > newest.size
        else ""
    )
    return WitnessedVerdict(
        True,
        f"witnessed: rows 1-{newest.size} are the rows {', '.join(who)} cosigned (a checkpoint "
        f"of {newest.size} rows at {newest.cosigned_at}, {newest.source}){rest}{said}",
        proven_rows=newest.size,
        rows=tree_size,
    )
