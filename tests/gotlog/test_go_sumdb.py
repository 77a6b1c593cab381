"""Checked by someone else's code: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's
golang-go and golang-golang-x-mod-dev, built offline) verify the journal's signed checkpoints,
a witness's cosignature, inclusion and consistency proofs, rebuild the tree from the rows
themselves, and reject each tampered one (tests/gotlog/verify.go)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tablectl.controller.record import merkle
from tablectl.controller.record.checkpoints import CheckpointSigner
from tablectl.controller.record.journal import Journal, closed_segment_name, live_segments
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    IdentityKey,
    add_signature_lines,
    cosign,
    split_note,
)
from tests.ops.opstools import missing, require_tool

GO_PROGRAM = Path(__file__).with_name("verify.go")
GOPATH = Path("/usr/share/gocode")


def go_verdicts(tmp_path: Path, table_key: str, checks: list[dict[str, Any]]) -> list[str]:
    go = require_tool("go")
    if not (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        missing("golang-golang-x-mod-dev is not installed (/usr/share/gocode)")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(tmp_path / "gocache"),
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
    }
    done = subprocess.run(
        [go, "run", str(GO_PROGRAM)],
        input=json.dumps({"table_key": table_key, "checks": checks}),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)
    assert isinstance(verdicts, list) and len(verdicts) == len(checks)
    return verdicts


def b64(hashes: list[bytes]) -> list[str]:
    return [base64.b64encode(h).decode() for h in hashes]


def flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[-1] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def retimed(note: str) -> str:
    """The last signature line (a cosignature) with its timestamp changed, signature kept."""
    head, _, line = note[:-1].rpartition("\n")
    prefix, _, payload = line.rpartition(" ")
    raw = bytearray(base64.b64decode(payload))
    raw[11] ^= 1  # the last byte of the 8-byte time after the 4-byte key ID
    return f"{head}\n{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


def test_go_sumdb_checks_our_checkpoints_and_proofs(tmp_path: Path) -> None:
    live = tmp_path / "journal.sqlite"
    key = IdentityKey.generate("tablectl/T1")
    journal = Journal(live)
    signer = CheckpointSigner(journal, key)
    for i in range(64):  # a power of two: RFC 9162's special case of a consistency proof
        journal.append("event", {"type": "card_drawn", "card": "As", "i": i}, round_number=1)
    old = signer.sign()
    journal.flush()
    journal.roll_over(closed_segment_name(live, "2026-11-20", 1), {"gaming_day": "2026-11-21"})
    for i in range(141):
        journal.append("event", {"type": "card_drawn", "card": "Kd", "i": i}, round_number=2)
    middle = signer.sign()
    for i in range(3):
        journal.append("note", {"type": "x", "i": i})
    new = signer.sign()
    journal.close()
    assert old is not None and middle is not None and new is not None
    witness = IdentityKey.generate("witness.example/w1", ALG_COSIGNATURE_V1)
    text, _ = split_note(new.note)
    cosigned = add_signature_lines(new.note, [cosign(text, witness, timestamp=1_800_000_000)])
    rows: list[tuple[int, str]] = []
    import sqlite3

    for path in live_segments(live):
        db = sqlite3.connect(path)
        rows += db.execute("SELECT seq, hash FROM journal").fetchall()
        db.close()
    row_hashes = [h for _, h in sorted(rows)]
    checks: list[dict[str, Any]] = []
    expect: list[bool] = []

    def add(ok: bool, **check: Any) -> None:
        checks.append(check)
        expect.append(ok)

    with MerkleLog(live) as log:
        size = new.size
        add(True, kind="checkpoint", note=new.note)
        add(True, kind="tree", note=new.note, row_hashes=row_hashes)
        add(False, kind="tree", note=new.note, row_hashes=row_hashes[:-1])
        add(False, kind="checkpoint", note=new.note.replace(f"\n{size}\n", f"\n{size + 1}\n"))
        add(True, kind="cosignature", note=cosigned, witness=witness.vkey)
        add(
            False,
            kind="cosignature",
            note=retimed(cosigned),
            witness=witness.vkey,
        )
        for seq in (1, 64, 65, 100, size):
            proof = b64(log.inclusion_proof(seq, size))
            add(
                True,
                kind="inclusion",
                note=new.note,
                index=seq - 1,
                row_hash=row_hashes[seq - 1],
                proof=proof,
            )
        proof = b64(log.inclusion_proof(100, size))
        add(False, kind="inclusion", note=new.note, index=99, row_hash=row_hashes[100], proof=proof)
        add(False, kind="inclusion", note=new.note, index=100, row_hash=row_hashes[99], proof=proof)
        add(
            False,
            kind="inclusion",
            note=new.note,
            index=99,
            row_hash=row_hashes[99],
            proof=[*proof[:-1], flip(proof[-1])],
        )
        for earlier in (old, middle):
            proof = b64(log.consistency_proof(earlier.size, size))
            add(True, kind="consistency", note=new.note, old_note=earlier.note, proof=proof)
            if proof:
                add(
                    False,
                    kind="consistency",
                    note=new.note,
                    old_note=earlier.note,
                    proof=[flip(proof[0]), *proof[1:]],
                )
        # a forged history: the old checkpoint re-signed over other rows is not consistent
        forged_root = merkle.root_of([merkle.leaf_hash(b"forged")] * old.size)
        from tablectl.controller.record.note import Checkpoint, sign_note

        forged = sign_note(Checkpoint(key.name, old.size, forged_root).body(), key)
        proof = b64(log.consistency_proof(old.size, size))
        add(False, kind="consistency", note=new.note, old_note=forged, proof=proof)
    verdicts = go_verdicts(tmp_path, key.vkey, checks)
    for check, ok, verdict in zip(checks, expect, verdicts, strict=True):
        summary = {k: v for k, v in check.items() if k in ("kind", "index")}
        if ok:
            assert verdict == "ok", (summary, verdict)
        else:
            assert verdict != "ok", (summary, "Go accepted a tampered one")
