"""A witness's memory (C2SP tlog-witness): the last checkpoint it cosigned for each table's log.

A regulator runs `tablectl witness serve` on their own machine. For every log it knows (by its
origin line and the table's public key) it cosigns a new checkpoint only when the checkpoint
is signed by that table, its old size is the size it cosigned last, and the RFC 9162
consistency proof from that tree to the new one verifies: never a smaller tree, never a
different tree of the same size. What it cosigned is durable before it answers (SQLite,
synchronous=FULL; concurrent requests share one commit), so a restart or a power cut never
lets it cosign a second history. A refused checkpoint that proves the table rewrote its log
(a proof that does not verify, another root at the same size) is kept as evidence, both
checkpoints signed, in `evidence/` before the refusal is answered.

This module is the protocol without HTTP (controller/service/witness_server.py serves it).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.common.logs import get_logger
from tablectl.controller.record.durable import fsync_directory, write_private_file
from tablectl.controller.record.merkle import EMPTY_ROOT, verify_consistency
from tablectl.controller.record.note import (
    IdentityKey,
    NoteError,
    Verifier,
    cosign,
    open_note,
    parse_checkpoint,
)

#: The protocol's limits (tlog-witness: at most 63 proof lines); a request body larger than
#: this is refused before it is read whole.
MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = 64 * 1024
SIZE_CONTENT_TYPE = "text/x.tlog.size"
TEXT = "text/plain; charset=utf-8"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cosigned (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    cosigned_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS refused (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    refused_at INTEGER NOT NULL,
    reason TEXT NOT NULL,
    cosigned TEXT NOT NULL,
    request TEXT NOT NULL,
    evidence_file TEXT NOT NULL
);
"""


class WitnessError(RuntimeError):
    """The witness cannot keep its state (the message names the file and why)."""


@dataclass(frozen=True)
class Answer:
    """An add-checkpoint answer: the HTTP status, its body and its content type."""

    status: int
    body: bytes
    content_type: str = TEXT

    @classmethod
    def text(cls, status: int, message: str) -> Answer:
        return cls(status, (message.rstrip("\n") + "\n").encode())


@dataclass(frozen=True)
class Cosigned:
    """The last checkpoint cosigned for one log: its size, root and the note as cosigned."""

    origin: str
    size: int
    root: bytes
    checkpoint: str  # the table's signed note with this witness's cosignature line
    cosigned_at: int


class BadRequest(ValueError):
    """A request that is not an add-checkpoint body (400)."""


def parse_request(body: bytes) -> tuple[int, list[bytes], str]:
    """(old size, consistency proof, checkpoint note) of an add-checkpoint body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequest(f"the body is not UTF-8: {error}") from None
    head, blank, note_text = text.partition("\n\n")
    if not blank:
        raise BadRequest("no empty line between the old size and proof and the checkpoint")
    lines = head.split("\n")
    words = lines[0].split(" ")
    if len(words) != 2 or words[0] != "old" or not _decimal(words[1]):
        raise BadRequest(f"the first line must be 'old SIZE' (a decimal), got {lines[0][:80]!r}")
    proof_lines = lines[1:]
    if len(proof_lines) > MAX_PROOF_LINES:
        raise BadRequest(f"{len(proof_lines)} proof lines: at most {MAX_PROOF_LINES}")
    proof: list[bytes] = []
    for number, line in enumerate(proof_lines, start=2):
        try:
            digest = base64.b64decode(line, validate=True)
        except ValueError:
            raise BadRequest(f"line {number}: not a base64 hash: {line[:80]!r}") from None
        if len(digest) != 32:
            raise BadRequest(f"line {number}: a hash of {len(digest)} bytes, not 32")
        proof.append(digest)
    return int(words[1]), proof, note_text


def _decimal(text: str) -> bool:
    """An ASCII decimal with no leading zero (but "0")."""
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def _durable_mkdir(directory: Path) -> None:
    """Create `directory` (and its parents) so that it survives a power cut: each new
    directory's entry is made durable by an fsync of the directory holding it."""
    if directory.is_dir():
        return
    _durable_mkdir(directory.parent)
    directory.mkdir(mode=0o700, exist_ok=True)
    fsync_directory(directory.parent)


def _slug(origin: str) -> str:
    """A file-name-safe, unique word for an origin line (evidence files are named by it)."""
    readable = "".join(c if c.isalnum() or c in "-." else "_" for c in origin)[:48]
    return f"{readable}-{hashlib.sha256(origin.encode()).hexdigest()[:12]}"


class _Commit:
    """One cosigned checkpoint waiting for the group commit; `done` is set once it is durable
    (or the commit failed: `error`)."""

    __slots__ = ("cosigned", "done", "error")

    def __init__(self, cosigned: Cosigned) -> None:
        self.cosigned = cosigned
        self.done = threading.Event()
        self.error: str | None = None


class WitnessState:
    """The witness's logs and what it cosigned, in `directory` (witness.sqlite, evidence/).

    `logs`: origin -> the table's verifier key (note.py), the only signer trusted for that
    origin; `cosigner`: this witness's key. Thread-safe: the HTTP server calls
    `add_checkpoint` from one thread per connection; the check against the last cosigned
    tree and its update are one step under a lock, and the answer waits for the commit.
    """

    def __init__(
        self,
        directory: Path,
        logs: Mapping[str, Verifier],
        cosigner: IdentityKey,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.logs = dict(logs)
        self.cosigner = cosigner
        self.clock = clock
        self._log = get_logger("witness", state=str(directory))
        self.evidence_dir = directory / "evidence"
        self.path = directory / "witness.sqlite"
        self._lock = threading.Lock()
        self._failure: str | None = None
        try:
            _durable_mkdir(directory)
            _durable_mkdir(self.evidence_dir)
            created = not self.path.exists()
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            if created:
                fsync_directory(directory)
            # Refusals are written by the request's thread, apart from the group commit's
            # transaction: a connection of their own, each insert its own durable commit.
            self._evidence_db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            self._evidence_db.execute("PRAGMA synchronous=FULL")
            rows = self._db.execute(
                "SELECT origin, size, root, checkpoint, cosigned_at FROM cosigned"
            ).fetchall()
        except (OSError, sqlite3.Error) as error:
            raise WitnessError(f"{self.path}: cannot open the witness state: {error}") from error
        self._cosigned: dict[str, Cosigned] = {
            origin: Cosigned(origin, size, base64.b64decode(root), text, at)
            for origin, size, root, text, at in rows
        }
        self._queue: queue.SimpleQueue[_Commit | None] = queue.SimpleQueue()
        self._committer = threading.Thread(
            target=self._commit_loop, name="witness-commit", daemon=True
        )
        self._committer.start()

    # -- reading ---------------------------------------------------------------------------

    @property
    def failure(self) -> str | None:
        """Why the state could not be written (from then on every request gets 503)."""
        return self._failure

    def latest(self, origin: str) -> Cosigned | None:
        """The last checkpoint cosigned for `origin` (durable: answered only once committed)."""
        with self._lock:
            return self._cosigned.get(origin)

    def refusals(self) -> list[dict[str, object]]:
        """Every refusal kept as evidence, oldest first."""
        with self._lock:
            rows = self._evidence_db.execute(
                "SELECT origin, refused_at, reason, evidence_file FROM refused ORDER BY id"
            ).fetchall()
        return [
            {"origin": o, "refused_at": at, "reason": why, "evidence": str(self.directory / f)}
            for o, at, why, f in rows
        ]

    # -- add-checkpoint --------------------------------------------------------------------

    def add_checkpoint(self, body: bytes) -> Answer:
        """The tlog-witness add-checkpoint call: the answer to send, once it is durable."""
        if self._failure is not None:
            return Answer.text(503, f"the witness cannot record: {self._failure}")
        try:
            old_size, proof, note_text = parse_request(body)
        except BadRequest as error:
            return Answer.text(400, str(error))
        origin = note_text.split("\n", 1)[0]
        verifier = self.logs.get(origin)
        if verifier is None:
            return Answer.text(404, f"unknown log origin {origin[:120]!r}")
        try:
            opened = open_note(note_text, [verifier])
            checkpoint = parse_checkpoint(opened.text)
        except NoteError as error:
            return Answer.text(403, f"not a checkpoint signed by {verifier.name}: {error}")
        if checkpoint.size == 0 and checkpoint.root_hash != EMPTY_ROOT:
            return Answer.text(422, "a checkpoint of size 0 whose root is not the empty tree's")
        if old_size > checkpoint.size:
            return Answer.text(
                400, f"old size {old_size} is larger than the checkpoint's {checkpoint.size}"
            )
        with self._lock:
            last = self._cosigned.get(origin)
            last_size = last.size if last is not None else 0
            if old_size != last_size:
                return Answer(409, f"{last_size}\n".encode(), SIZE_CONTENT_TYPE)
            if last is not None and checkpoint.size == last.size:
                if checkpoint.root_hash != last.root:
                    self._keep_evidence(
                        last, body, "another root hash for the tree size it cosigned"
                    )
                    return Answer(409, f"{last_size}\n".encode(), SIZE_CONTENT_TYPE)
            elif last is not None and not verify_consistency(
                last.size, checkpoint.size, last.root, checkpoint.root_hash, proof
            ):
                self._keep_evidence(
                    last,
                    body,
                    f"the consistency proof from size {last.size} to {checkpoint.size} "
                    "does not verify",
                )
                return Answer.text(
                    422,
                    f"the consistency proof from the tree of size {last.size} it cosigned to "
                    f"size {checkpoint.size} does not verify: the log was rewritten "
                    "(kept as evidence)",
                )
            elif last is None and proof:
                return Answer.text(422, "old size 0 takes an empty consistency proof")
            at = int(self.clock())
            line = cosign(opened.text, self.cosigner, timestamp=at)
            # kept as the table signed it, this witness's cosignature added: what a table's
            # start (GET /checkpoint) and a proof check against
            cosigned = Cosigned(origin, checkpoint.size, checkpoint.root_hash, note_text + line, at)
            self._cosigned[origin] = cosigned
            commit = _Commit(cosigned)
            self._queue.put(commit)
        commit.done.wait()
        if commit.error is not None:
            return Answer.text(503, f"the witness cannot record: {commit.error}")
        return Answer(200, line.encode())

    def _keep_evidence(self, last: Cosigned, request: bytes, reason: str) -> None:
        """Both checkpoints, each signed by the table, on disk before the refusal is answered."""
        at = int(self.clock())
        name = f"{_slug(last.origin)}-{at}-{os.urandom(4).hex()}.txt"
        text = (
            f"tablectl witness: refused a checkpoint of {last.origin}\n"
            f"reason: {reason}\n"
            f"refused at: {at} (seconds since the epoch)\n\n"
            "--- the last checkpoint this witness cosigned (the table's signature and this "
            "witness's cosignature)\n"
            f"{last.checkpoint}\n"
            "--- the request refused (old size, consistency proof, the table's signed "
            "checkpoint), as received\n"
            f"{request.decode('utf-8', 'replace')}"
        )
        try:
            write_private_file(self.evidence_dir / name, text)
            self._evidence_db.execute(
                "INSERT INTO refused (origin, refused_at, reason, cosigned, request, evidence_file)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    last.origin,
                    at,
                    reason,
                    last.checkpoint,
                    request.decode("utf-8", "replace"),
                    f"evidence/{name}",
                ),
            )
        except (OSError, sqlite3.Error) as error:
            self._log.error("witness_evidence_not_kept", origin=last.origin, error=str(error))
            return
        self._log.critical(
            "witness_refused_inconsistent",
            origin=last.origin,
            cosigned_size=last.size,
            reason=reason,
            evidence=str(self.evidence_dir / name),
        )

    # -- the group commit ------------------------------------------------------------------

    def _commit_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._commit(batch)
            if stop:
                return

    def _commit(self, batch: list[_Commit]) -> None:
        """One transaction (one fsync) for every checkpoint cosigned since the last commit; a
        size never goes down (the upsert's condition), whatever order they come in."""
        error: str | None = self._failure
        if error is None:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT INTO cosigned (origin, size, root, checkpoint, cosigned_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET"
                    " size = excluded.size, root = excluded.root,"
                    " checkpoint = excluded.checkpoint, cosigned_at = excluded.cosigned_at"
                    " WHERE excluded.size >= cosigned.size",
                    [
                        (
                            c.cosigned.origin,
                            c.cosigned.size,
                            base64.b64encode(c.cosigned.root).decode(),
                            c.cosigned.checkpoint,
                            c.cosigned.cosigned_at,
                        )
                        for c in batch
                    ],
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as failed:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                # What is in memory is now ahead of the disk: fail-stop, answer nothing more.
                error = self._failure = f"{self.path}: commit failed: {failed}"
                self._log.critical("witness_commit_failed", error=error)
        for commit in batch:
            commit.error = error
            commit.done.set()

    def close(self) -> None:
        self._queue.put(None)
        self._committer.join(timeout=10)
        for db in (self._db, self._evidence_db):
            with contextlib.suppress(sqlite3.Error):
                db.close()
