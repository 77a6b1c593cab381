"""The journal's Merkle log read back from its segments: roots and proofs (docs/journal.md).

The journal (controller/record/journal.py) writes the log: leaf seq-1 is
`merkle.leaf_hash(bytes.fromhex(row.hash))` of row `seq`; each segment's `merkle` table holds
the interior nodes its rows completed, keyed by `merkle.stored_index`, and the frontier at
its start (so retiring the segments before it keeps every later proof possible). A node's
*home* is the segment holding the row that completed it; one missing there (the frontier a
later segment copied, a gap's leaf, a journal upgraded from format 1) is looked up in the
`merkle` tables of the others.

API (the witness client in the daemon, `tablectl journal prove`)::

    log = MerkleLog(live_path)            # or MerkleLog.of_directory(dir, archive=...)
    log.size()                            # leaves committed (the last committed seq)
    log.root(size)                        # 32-byte root of the first `size` leaves
    log.leaf(seq)                         # row seq's leaf hash
    log.inclusion_proof(seq, size)        # RFC 9162 PATH for row seq in the tree of `size`
    log.consistency_proof(old, new)       # RFC 9162 PROOF between two sizes
    log.close()

Only committed rows are read (a read-only connection per segment): the daemon flushes before
it asks. MerkleError names a node no segment here holds (retired before the log kept it).
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from tablectl.controller.record import merkle
from tablectl.controller.record.journal import (
    JournalError,
    _connect_read_only,
    closed_segment_first_seq,
    live_segments,
    row_leaf,
    segment_files,
)
from tablectl.controller.record.merkle import MerkleError, NodeReader

_BATCH = 500  # SQLite's variable limit is far above; a round's proofs need a few hundred nodes


class MerkleLog:
    """The log over a set of segment files (each with its first seq), read on demand."""

    def __init__(self, live: Path, *, archive: Path | None = None) -> None:
        files = live_segments(live)
        if archive is not None and archive.is_dir():
            here = {f.name for f in files}
            files += [f for f in segment_files(archive) if f.name not in here]
        self._setup(files, live if live.is_file() else None)

    @classmethod
    def of_directory(cls, directory: Path, *, archive: Path | None = None) -> MerkleLog:
        """A directory of segments (a copy of the journal's): the file whose name is not a
        closed segment's is the live one."""
        files = segment_files(directory)
        if archive is not None and archive.is_dir():
            here = {f.name for f in files}
            files += [f for f in segment_files(archive) if f.name not in here]
        live = [f for f in files if closed_segment_first_seq(f) is None]
        if len(live) > 1:
            raise JournalError(
                f"{directory}: {len(live)} journal files that are not closed segments "
                f"({', '.join(f.name for f in live)}): which is the live one?"
            )
        self = cls.__new__(cls)
        self._setup(files, live[0] if live else None)
        return self

    def _setup(self, files: Iterable[Path], live: Path | None) -> None:
        self._connections: dict[Path, sqlite3.Connection] = {}
        starts: list[tuple[int, Path]] = []
        for path in files:
            first = closed_segment_first_seq(path)
            if first is None:
                first = self._first_seq(path)
                if first is None:
                    continue
            starts.append((first, path))
        if not starts:
            raise JournalError("no journal segments to read the Merkle log from")
        starts.sort(key=lambda item: (item[0], item[1] == live))
        self._firsts = [first for first, _ in starts]
        self._paths = [path for _, path in starts]
        self._live = live

    @property
    def segments(self) -> list[Path]:
        """The segment files, oldest first."""
        return list(self._paths)

    @property
    def live(self) -> Path | None:
        return self._live

    def connection(self, path: Path) -> sqlite3.Connection:
        """A read-only connection to one of the segments (kept until close)."""
        return self._db(path)

    def _db(self, path: Path) -> sqlite3.Connection:
        db = self._connections.get(path)
        if db is None:
            db = self._connections[path] = _connect_read_only(path)
        return db

    def _first_seq(self, path: Path) -> int | None:
        row = self._db(path).execute("SELECT min(seq) FROM journal").fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def close(self) -> None:
        for db in self._connections.values():
            db.close()
        self._connections.clear()

    def __enter__(self) -> MerkleLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def size(self) -> int:
        """The leaves committed: the last seq of the newest segment."""
        row = self._db(self._paths[-1]).execute("SELECT max(seq) FROM journal").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def segment_of(self, seq: int) -> Path:
        """The segment whose rows include `seq` (by first seqs)."""
        position = bisect.bisect_right(self._firsts, seq) - 1
        if position < 0:
            raise MerkleError(f"row {seq} is before the first segment here (row {self._firsts[0]})")
        return self._paths[position]

    def nodes(
        self, wanted: Iterable[tuple[int, int]], *, prefer: Path | None = None
    ) -> dict[tuple[int, int], bytes]:
        """The hashes of nodes (level, index), read in a few queries per segment. `prefer`: a
        segment to look in first (a round's own: its merkle table holds the frontier at its
        start, every left sibling of its rows' paths that lies before it)."""
        found: dict[tuple[int, int], bytes] = {}
        by_home: dict[Path, list[tuple[int, int]]] = {}
        wanted = list(dict.fromkeys(wanted))
        if prefer is not None:
            self._read_stored(prefer, [node for node in wanted if node[0] > 0], found)
        for node in wanted:
            if node in found:
                continue
            seq = merkle.last_leaf_of(*node) + 1
            position = bisect.bisect_right(self._firsts, seq) - 1
            home = self._paths[max(position, 0)]
            by_home.setdefault(home, []).append(node)
        for home, nodes in by_home.items():
            self._read(home, nodes, found)
        missing = [node for homes in by_home.values() for node in homes if node not in found]
        for path in reversed(self._paths):
            if not missing:
                break
            self._read_stored(path, missing, found)
            missing = [node for node in missing if node not in found]
        if missing:
            level, index = missing[0]
            raise MerkleError(
                f"the Merkle log's node (level {level}, index {index}) is in no segment here "
                f"(its rows {(index << level) + 1}-{merkle.last_leaf_of(level, index) + 1} were "
                "retired before the log kept it)"
            )
        return found

    def _read(
        self, path: Path, nodes: list[tuple[int, int]], found: dict[tuple[int, int], bytes]
    ) -> None:
        leaves = [index + 1 for level, index in nodes if level == 0]
        db = self._db(path)
        for chunk in _chunks(leaves):
            marks = ",".join("?" * len(chunk))
            for seq, digest in db.execute(
                f"SELECT seq, hash FROM journal WHERE seq IN ({marks})", chunk
            ):
                try:
                    found[(0, seq - 1)] = row_leaf(digest)
                except (TypeError, ValueError):
                    continue  # a damaged row: its leaf is looked for elsewhere, then refused
        self._read_stored(path, [node for node in nodes if node[0] > 0], found)

    def _read_stored(
        self, path: Path, nodes: list[tuple[int, int]], found: dict[tuple[int, int], bytes]
    ) -> None:
        if not nodes:
            return
        index_of = {merkle.stored_index(*node): node for node in nodes}
        db = self._db(path)
        for chunk in _chunks(list(index_of)):
            marks = ",".join("?" * len(chunk))
            try:
                rows = db.execute(f"SELECT idx, hash FROM merkle WHERE idx IN ({marks})", chunk)
                for idx, digest in rows:
                    if isinstance(digest, bytes) and len(digest) == merkle.HASH_SIZE:
                        found.setdefault(index_of[idx], digest)
            except sqlite3.OperationalError:
                return  # a format-1 segment: no merkle table

    def _computed(
        self, compute: Callable[[NodeReader], object], prefer: Path | None = None
    ) -> object:
        fetched = self.nodes(merkle.nodes_needed(compute), prefer=prefer)
        return compute(lambda level, index: fetched[(level, index)])

    def root(self, size: int) -> bytes:
        """The root of the first `size` leaves (its frontier: the newest segment's, mostly)."""
        root = self._computed(
            lambda read: merkle.tree_root(size, read), prefer=self.segment_of(max(size, 1))
        )
        assert isinstance(root, bytes)
        return root

    def leaf(self, seq: int) -> bytes:
        return self.nodes([(0, seq - 1)])[(0, seq - 1)]

    def inclusion_proof(self, seq: int, size: int) -> list[bytes]:
        """The proof that row `seq` is leaf seq-1 of the tree of `size` leaves."""
        proof = self._computed(lambda read: merkle.inclusion_proof(seq - 1, size, read))
        assert isinstance(proof, list)
        return proof

    def inclusion_proofs(self, seqs: Iterable[int], size: int) -> dict[int, list[bytes]]:
        """Proofs for many rows, their nodes fetched together (a round's rows)."""
        seqs = list(seqs)
        needed: list[tuple[int, int]] = []
        shape: merkle.SubtreeCache = {}  # the dry run's: which nodes, not their hashes
        for seq in seqs:
            needed += merkle.nodes_needed(_prover(seq - 1, size, shape))
        fetched = self.nodes(needed, prefer=self.segment_of(seqs[0]) if seqs else None)
        cache: merkle.SubtreeCache = {}
        return {
            seq: merkle.inclusion_proof(seq - 1, size, lambda lv, ix: fetched[(lv, ix)], cache)
            for seq in seqs
        }

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        proof = self._computed(lambda read: merkle.consistency_proof(old_size, new_size, read))
        assert isinstance(proof, list)
        return proof


def _prover(index: int, size: int, cache: merkle.SubtreeCache) -> Callable[[NodeReader], object]:
    return lambda read: merkle.inclusion_proof(index, size, read, cache)


def _chunks(items: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]
