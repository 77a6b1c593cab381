"""A table's log held in memory for witness tests: leaves, signed checkpoints, proofs, and the
add-checkpoint requests a table sends (built with the project's own merkle.py and note.py)."""

from __future__ import annotations

import base64
import http.client
import urllib.parse
from dataclasses import dataclass, field

from tablectl.controller.record.merkle import CompactTree, consistency_proof, leaf_hash
from tablectl.controller.record.note import Checkpoint, IdentityKey, sign_note


@dataclass
class MemoryLog:
    origin: str
    key: IdentityKey
    tree: CompactTree = field(default_factory=CompactTree)
    nodes: dict[tuple[int, int], bytes] = field(default_factory=dict)

    @classmethod
    def new(cls, origin: str) -> MemoryLog:
        return cls(origin, IdentityKey.generate(origin))

    def append(self, *data: bytes) -> MemoryLog:
        for item in data:
            for level, index, digest in self.tree.append(leaf_hash(item)):
                self.nodes[(level, index)] = digest
        return self

    def grow(self, count: int, tag: str = "row") -> MemoryLog:
        start = self.tree.size
        return self.append(*(f"{tag} {start + i}".encode() for i in range(count)))

    def fork(self, size: int, tag: str) -> MemoryLog:
        """The same table (same key) with its first `size` leaves kept, the rest rewritten."""
        other = MemoryLog(self.origin, self.key)
        kept = CompactTree.at(size, self.node)
        other.tree = kept
        other.nodes = {
            (level, index): digest
            for (level, index), digest in self.nodes.items()
            if ((index + 1) << level) <= size
        }
        return other.grow(self.tree.size - size + 1, tag)

    def node(self, level: int, index: int) -> bytes:
        return self.nodes[(level, index)]

    @property
    def size(self) -> int:
        return self.tree.size

    def checkpoint(self) -> str:
        body = Checkpoint(self.origin, self.tree.size, self.tree.root()).body()
        return sign_note(body, self.key)

    def request(self, old: int, *, checkpoint: str | None = None) -> bytes:
        proof = consistency_proof(old, self.tree.size, self.node)
        lines = [f"old {old}", *(base64.b64encode(h).decode() for h in proof)]
        return ("\n".join(lines) + "\n\n" + (checkpoint or self.checkpoint())).encode()


def post(port: int, body: bytes) -> tuple[int, str, str]:
    """POST /add-checkpoint to a witness on 127.0.0.1:port: (status, content type, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/add-checkpoint", body)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read().decode()
    finally:
        connection.close()


def latest(port: int, origin: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/checkpoint?" + urllib.parse.urlencode({"origin": origin}))
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()
