"""RFC 9162 Merkle hashing and proofs (controller/record/merkle.py) against the RFC 6962
reference vectors (certificate-transparency's 8-leaf tree) and against a brute-force tree."""

from __future__ import annotations

import random

import pytest

from tablectl.controller.record import merkle
from tablectl.controller.record.merkle import (
    CompactTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_of,
    stored_index,
    verify_consistency,
    verify_inclusion,
)

LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


class Store:
    """Nodes as a journal keeps them: written by CompactTree.append, keyed by stored_index."""

    def __init__(self, leaves: list[bytes]) -> None:
        self.tree = CompactTree()
        self.nodes: dict[int, bytes] = {}
        for leaf in leaves:
            for level, index, digest in self.tree.append(leaf):
                key = stored_index(level, index)
                assert key not in self.nodes
                self.nodes[key] = digest

    def node_at(self, level: int, index: int) -> bytes:
        return self.nodes[stored_index(level, index)]


def test_reference_roots() -> None:
    assert root_of([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    hashes = [leaf_hash(d) for d in LEAVES]
    for size in range(1, 9):
        assert root_of(hashes[:size]).hex() == ROOTS[size - 1]
        store = Store(hashes[:size])
        assert store.tree.root().hex() == ROOTS[size - 1]
        assert merkle.tree_root(size, store.node_at).hex() == ROOTS[size - 1]


@pytest.mark.parametrize(("index", "size", "expected"), INCLUSION)
def test_reference_inclusion(index: int, size: int, expected: list[str]) -> None:
    store = Store([leaf_hash(d) for d in LEAVES])
    proof = inclusion_proof(index, size, store.node_at)
    assert [p.hex() for p in proof] == expected
    root = bytes.fromhex(ROOTS[size - 1])
    assert verify_inclusion(leaf_hash(LEAVES[index]), index, size, proof, root)
    assert not verify_inclusion(leaf_hash(b"not it"), index, size, proof, root)
    if proof:
        bad = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
        assert not verify_inclusion(leaf_hash(LEAVES[index]), index, size, bad, root)
        assert not verify_inclusion(leaf_hash(LEAVES[index]), index, size, proof[:-1], root)
        assert not verify_inclusion(leaf_hash(LEAVES[index]), index ^ 1, size, proof, root)


@pytest.mark.parametrize(("old", "new", "expected"), CONSISTENCY)
def test_reference_consistency(old: int, new: int, expected: list[str]) -> None:
    store = Store([leaf_hash(d) for d in LEAVES])
    proof = consistency_proof(old, new, store.node_at)
    assert [p.hex() for p in proof] == expected
    old_root, new_root = bytes.fromhex(ROOTS[old - 1]), bytes.fromhex(ROOTS[new - 1])
    assert verify_consistency(old, new, old_root, new_root, proof)
    other = bytes.fromhex(ROOTS[0 if new > 1 else 1])
    assert not verify_consistency(old, new, old_root, other, proof)
    if proof:
        bad = [*proof[:-1], bytes([proof[-1][0] ^ 1]) + proof[-1][1:]]
        assert not verify_consistency(old, new, old_root, new_root, bad)
        assert not verify_consistency(old, new, old_root, new_root, proof[:-1])


def test_every_proof_of_every_small_tree() -> None:
    """Every leaf of every size to 70, every pair of sizes: generated proofs verify, and a
    proof for another leaf, size or root does not."""
    rng = random.Random(7)
    hashes = [leaf_hash(rng.randbytes(rng.randrange(40))) for _ in range(70)]
    store = Store(hashes)
    for size in range(1, 71):
        root = root_of(hashes[:size])
        assert merkle.tree_root(size, store.node_at) == root
        assert CompactTree.at(size, store.node_at).root() == root
        for index in range(size):
            proof = inclusion_proof(index, size, store.node_at)
            assert verify_inclusion(hashes[index], index, size, proof, root)
            assert not verify_inclusion(hashes[index - 1], index, size, proof, root) or size == 1
        for old in range(0, size + 1):
            old_root = root_of(hashes[:old])
            proof = consistency_proof(old, size, store.node_at)
            assert verify_consistency(old, size, old_root, root, proof)
            if 0 < old < size:
                wrong = bytes([old_root[0] ^ 1]) + old_root[1:]
                assert not verify_consistency(old, size, wrong, root, proof)
                assert not verify_consistency(old, size, old_root, wrong, proof)


def test_compact_tree_serialises_and_rejects_garbage() -> None:
    tree = CompactTree()
    for i in range(1000):
        tree.append(leaf_hash(str(i).encode()))
    again = CompactTree.from_bytes(tree.to_bytes())
    assert again.size == 1000 and again.root() == tree.root()
    with pytest.raises(merkle.MerkleError, match="malformed"):
        CompactTree.from_bytes(tree.to_bytes()[:-1])
    with pytest.raises(merkle.MerkleError, match="frontier nodes"):
        CompactTree(3, [bytes(32)])


def test_nodes_needed_names_the_nodes_a_proof_reads() -> None:
    hashes = [leaf_hash(bytes([i])) for i in range(37)]
    store = Store(hashes)
    needed = merkle.nodes_needed(lambda read: inclusion_proof(20, 37, read))
    fetched = {node: store.node_at(*node) for node in needed}
    proof = inclusion_proof(20, 37, lambda level, index: fetched[(level, index)])
    assert verify_inclusion(hashes[20], 20, 37, proof, root_of(hashes))


def test_stored_index_is_write_order() -> None:
    tree = CompactTree()
    order = []
    for _ in range(300):
        order += [stored_index(level, index) for level, index, _ in tree.append(bytes(32))]
    assert order == list(range(len(order)))


def test_bad_sizes_are_refused() -> None:
    store = Store([leaf_hash(b"a")])
    with pytest.raises(merkle.MerkleError, match="leaf 1 is not in a tree of 1"):
        inclusion_proof(1, 1, store.node_at)
    with pytest.raises(merkle.MerkleError, match="from size 2 to size 1"):
        consistency_proof(2, 1, store.node_at)
    assert not verify_inclusion(leaf_hash(b"a"), 0, 0, [], merkle.EMPTY_ROOT)
    assert not verify_consistency(2, 1, bytes(32), bytes(32), [])
