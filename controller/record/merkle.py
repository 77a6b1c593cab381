"""RFC 9162 (§2.1) Merkle tree hashing, proofs and an incremental tree: the journal's log.

Pure functions over 32-byte SHA-256 hashes; no I/O. The journal's rows are the leaves (docs/
journal.md, "The Merkle log"); a witness (`tablectl witness`) and `tablectl proof verify` check
what is computed here, and so does Go's `golang.org/x/mod/sumdb/tlog` (tests/gotlog).

Hashing (RFC 9162 §2.1.1)::

    leaf_hash(data)         = SHA-256(0x00 || data)
    node_hash(left, right)  = SHA-256(0x01 || left || right)
    root_of([])             = SHA-256("")

Storage: a *node* `(level, index)` is the complete, aligned subtree over leaves
`[index * 2**level, (index + 1) * 2**level)`; level 0 is a leaf hash. Any tree of any size is
made of such nodes, so a store keeps only those (each written once, when its last leaf is
appended: `CompactTree.append` returns them) and every root and proof below is computed from a
`NodeReader`, `node_at(level, index) -> bytes`. `stored_index(level, index)` numbers the nodes
in the order they are written (Go's `tlog.StoredHashIndex`): a store may key them by it.

Proofs (RFC 9162 §2.1.3, §2.1.4), each a list of 32-byte hashes::

    proof = inclusion_proof(index, size, node_at)
    verify_inclusion(leaf_hash(data), index, size, proof, root) -> bool
    proof = consistency_proof(old_size, new_size, node_at)
    verify_consistency(old_size, new_size, old_root, new_root, proof) -> bool

`nodes_needed(...)` tells a store which nodes a proof reads, so it can fetch them in one batch.
A consistency proof from size 0 is empty and always verifies (every tree extends the empty
one), as a proof between equal sizes is empty and verifies when the roots are equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

#: (level, index) -> the hash of that complete, aligned subtree.
NodeReader = Callable[[int, int], bytes]


class MerkleError(ValueError):
    """A size, index or stored tree that cannot be; the message says which."""


def leaf_hash(data: bytes) -> bytes:
    """The hash of a leaf holding `data`: SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an interior node: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2): RFC 9162's k."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of leaf hashes held in memory (tests, small trees)."""
    if not leaf_hashes:
        return EMPTY_ROOT
    level = list(leaf_hashes)
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])  # an odd node moves up unchanged (same as MTH's split)
        level = paired
    return level[0]


def stored_index(level: int, index: int) -> int:
    """The position of node (level, index) in write order (Go's tlog.StoredHashIndex).

    Appending leaf n writes the leaf, then each node it completes, lowest first; before leaf
    n, 2n - popcount(n) nodes have been written.
    """
    last_leaf = ((index + 1) << level) - 1
    return 2 * last_leaf - last_leaf.bit_count() + level


def last_leaf_of(level: int, index: int) -> int:
    """The index of the last leaf under node (level, index): the append that completes it."""
    return ((index + 1) << level) - 1


#: Subtree hashes already computed, by (start, end): proofs of many leaves of one tree (a
#: round's rows) share their ragged right edge.
SubtreeCache = dict[tuple[int, int], bytes]


def subtree_hash(
    start: int, end: int, node_at: NodeReader, cache: SubtreeCache | None = None
) -> bytes:
    """MTH of leaves [start, end) where that range is a subtree of a tree (RFC 9162's
    D[start:end] in a recursion): complete nodes read, the ragged right edge hashed."""
    n = end - start
    if n <= 0:
        raise MerkleError(f"an empty subtree [{start}, {end})")
    if n & (n - 1) == 0 and start % n == 0:
        return node_at(n.bit_length() - 1, start // n)
    if cache is not None:
        found = cache.get((start, end))
        if found is not None:
            return found
    k = _split(n)
    digest = node_hash(
        subtree_hash(start, start + k, node_at, cache), subtree_hash(start + k, end, node_at, cache)
    )
    if cache is not None:
        cache[(start, end)] = digest
    return digest


def tree_root(size: int, node_at: NodeReader) -> bytes:
    """The root of the tree of the first `size` leaves."""
    if size < 0:
        raise MerkleError(f"tree size {size} is negative")
    return EMPTY_ROOT if size == 0 else subtree_hash(0, size, node_at)


def inclusion_proof(
    index: int, size: int, node_at: NodeReader, cache: SubtreeCache | None = None
) -> list[bytes]:
    """PATH(index, D[size]) (RFC 9162 §2.1.3.1), leaf side first. `cache`: shared by the
    proofs of many leaves of the same tree."""
    if not 0 <= index < size:
        raise MerkleError(f"leaf {index} is not in a tree of {size} leaves")
    proof: list[bytes] = []
    start, end = 0, size
    siblings: list[tuple[int, int]] = []
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            siblings.append((start + k, end))
            end = start + k
        else:
            siblings.append((start, start + k))
            start = start + k
    for low, high in reversed(siblings):
        proof.append(subtree_hash(low, high, node_at, cache))
    return proof


def consistency_proof(old_size: int, new_size: int, node_at: NodeReader) -> list[bytes]:
    """PROOF(old_size, D[new_size]) (RFC 9162 §2.1.4.1); empty when old_size is 0 or equal."""
    if not 0 <= old_size <= new_size:
        raise MerkleError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size == 0 or old_size == new_size:
        return []
    # SUBPROOF(m, D[start:end], b), iteratively; the nodes come out root side first.
    parts: list[tuple[int, int]] = []
    start, end, m, whole = 0, new_size, old_size, True
    while True:
        n = end - start
        if m == n:
            if not whole:
                parts.append((start, end))
            break
        k = _split(n)
        if m <= k:
            parts.append((start + k, end))
            end = start + k
        else:
            parts.append((start, start + k))
            start, m, whole = start + k, m - k, False
    return [subtree_hash(low, high, node_at) for low, high in reversed(parts)]


def nodes_needed(
    prove: Callable[[NodeReader], object],
) -> list[tuple[int, int]]:
    """The nodes a proof (or root) computation reads: call `prove` with a recording reader.

    `nodes_needed(lambda r: inclusion_proof(i, n, r))` lists them, so a store can fetch them
    in one query and then call the proof again with a dictionary's `__getitem__`.
    """
    seen: list[tuple[int, int]] = []

    def record(level: int, index: int) -> bytes:
        seen.append((level, index))
        return bytes(HASH_SIZE)

    prove(record)
    return list(dict.fromkeys(seen))


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: does `proof` put the leaf hash `leaf` at `index` of the tree of
    `size` leaves whose root is `root`?"""
    if not 0 <= index < size or any(len(h) != HASH_SIZE for h in proof):
        return False
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: is the tree of `new_size` leaves (root `new_root`) an extension of
    the tree of `old_size` leaves (root `old_root`)?"""
    if not 0 <= old_size <= new_size or any(len(h) != HASH_SIZE for h in proof):
        return False
    if old_size == 0:
        return not proof
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


class CompactTree:
    """The right edge of a growing tree (its *frontier*): O(log n) hashes give the root and
    the nodes each append completes, so the journal never re-reads a leaf to extend the log.

    `frontier[i]` is the complete node of the i-th set bit of `size`, highest level first.
    Serialised as `to_bytes()` (8-byte big-endian size, then the hashes) for a store.
    """

    __slots__ = ("frontier", "size")

    def __init__(self, size: int = 0, frontier: Iterable[bytes] = ()) -> None:
        self.size = size
        self.frontier = list(frontier)
        if len(self.frontier) != size.bit_count():
            raise MerkleError(
                f"a tree of {size} leaves has {size.bit_count()} frontier nodes, "
                f"not {len(self.frontier)}"
            )

    @classmethod
    def at(cls, size: int, node_at: NodeReader) -> CompactTree:
        """The frontier of the tree of `size` leaves, read from stored nodes."""
        frontier: list[bytes] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                frontier.append(node_at(level, start >> level))
                start += 1 << level
        return cls(size, frontier)

    @staticmethod
    def frontier_nodes(size: int) -> list[tuple[int, int]]:
        """The (level, index) of the nodes `at(size, ...)` reads."""
        nodes: list[tuple[int, int]] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                nodes.append((level, start >> level))
                start += 1 << level
        return nodes

    def copy(self) -> CompactTree:
        return CompactTree(self.size, self.frontier)

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Add a leaf hash; the nodes it completes, (level, index, hash), the leaf first."""
        n = self.size
        written = [(0, n, leaf)]
        node = leaf
        level = 0
        while n >> level & 1:
            node = node_hash(self.frontier.pop(), node)
            level += 1
            written.append((level, n >> level, node))
        self.frontier.append(node)
        self.size = n + 1
        return written

    def root(self) -> bytes:
        """The root of the tree of `size` leaves."""
        if not self.frontier:
            return EMPTY_ROOT
        root = self.frontier[-1]
        for node in reversed(self.frontier[:-1]):
            root = node_hash(node, root)
        return root

    def to_bytes(self) -> bytes:
        return self.size.to_bytes(8, "big") + b"".join(self.frontier)

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactTree:
        if len(data) < 8 or (len(data) - 8) % HASH_SIZE:
            raise MerkleError(f"a stored frontier of {len(data)} bytes is malformed")
        size = int.from_bytes(data[:8], "big")
        hashes = [data[i : i + HASH_SIZE] for i in range(8, len(data), HASH_SIZE)]
        return cls(size, hashes)


def split_stored_index(idx: int) -> tuple[int, int]:
    """The (level, index) that `stored_index` numbers `idx` (its inverse)."""
    if idx < 0:
        raise MerkleError(f"no node is stored at {idx}")
    # the leaf written last at or before idx: leaf n is written at 2n - popcount(n)
    n = idx // 2
    at = stored_index(0, n)
    while at > idx:
        n -= 1
        at = stored_index(0, n)
    while True:
        following = at + 1 + ((n + 1) & -(n + 1)).bit_length() - 1  # 1 + trailing zeros of n+1
        if following > idx:
            break
        n += 1
        at = following
    level = idx - at
    return level, n >> level


class StoredNodeCheck:
    """The journal's stored log nodes recomputed from its rows (`journal verify`).

    The rows' chain proves the rows; the stored nodes are what a witness's checkpoint and a
    round's proof are built from, so a node changed on disk would prove rows that are not
    these. Fed segment by segment in seq order: `begin_segment` with the segment's stored
    nodes, `row` for each row, `end_segment`; each returns a message naming the node and the
    row that completed it, or None. A walk that begins at a later segment (the earlier ones
    archived) takes that segment's stored frontier as its start: the nodes before it cannot
    be recomputed here, every node after it is.
    """

    def __init__(self) -> None:
        self.tree: CompactTree | None = None
        self._stored: dict[int, bytes] = {}
        self._name = ""
        self._first = 0
        #: nodes of earlier segments copied into later ones (a frontier, an upgrade's log):
        #: recorded as they are recomputed, compared when their copy's segment comes
        self._wanted: dict[int, bytes | None] = {}

    def want(self, copies: Iterable[int]) -> None:
        """Stored indexes some later segment holds for rows before its own."""
        for idx in copies:
            self._wanted.setdefault(idx, None)

    def begin_segment(self, name: str, first_seq: int, stored: dict[int, bytes]) -> str | None:
        self._name, self._first, self._stored = name, first_seq, stored
        before = stored_index(0, first_seq - 1) if first_seq > 1 else 0
        if self.tree is None:
            self.tree = CompactTree()
            if first_seq > 1:  # earlier segments archived: their frontier as stored here
                try:
                    self.tree = CompactTree.at(
                        first_seq - 1, lambda lv, i: stored[stored_index(lv, i)]
                    )
                except KeyError:
                    return (
                        f"{name}: the Merkle log's frontier before row {first_seq} is not stored "
                        "here: the nodes of the rows after it cannot be checked"
                    )
                return None
        for idx, value in stored.items():
            if idx >= before or idx not in self._wanted:
                continue
            level, index = split_stored_index(idx)
            known = self._wanted.get(idx)
            if known is not None and known != value:
                return (
                    f"{name}: the Merkle log's node (level {level}, index {index}), a copy of "
                    f"row {last_leaf_of(level, index) + 1}'s, is not the hash of the rows before "
                    "it: the log would prove rows that are not these"
                )
        return None

    def row(self, seq: int, row_hash: bytes) -> str | None:
        """Row `seq` (its stored hash) appended; the nodes it completes compared."""
        assert self.tree is not None
        for level, index, value in self.tree.append(leaf_hash(row_hash)):
            idx = stored_index(level, index)
            if idx in self._wanted:
                self._wanted[idx] = value
            stored = self._stored.get(idx)
            if stored is not None and stored != value:
                return (
                    f"{self._name}: the Merkle log's node (level {level}, index {index}) that "
                    f"row {seq} completed is not the hash of the rows: stored {stored.hex()[:16]}"
                    f"…, the rows give {value.hex()[:16]}…; the log would prove rows that are "
                    "not these"
                )
        return None

    def end_segment(self, last_seq: int) -> str | None:
        """No stored node past the segment's last row (none that its rows did not complete)."""
        beyond = stored_index(0, last_seq)  # the first index written after row last_seq
        extra = sorted(idx for idx in self._stored if idx >= beyond)
        self._stored = {}
        if extra:
            level, index = split_stored_index(extra[0])
            return (
                f"{self._name}: the Merkle log holds node (level {level}, index {index}), which "
                f"no row up to row {last_seq} completes ({len(extra)} such): not the log of "
                "these rows"
            )
        return None
