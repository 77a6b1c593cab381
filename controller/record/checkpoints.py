"""The table's signed checkpoints of its journal's Merkle log (C2SP tlog-checkpoint).

`tablectl journal setup-keys` writes the table's Ed25519 *identity key* (`identity.key` beside
the sealing key; its name is the checkpoints' origin, `tablectl/<table id>` unless chosen)
and prints its public vkey. The daemon signs a checkpoint of the committed tree at the end of
every round and at least every CHECKPOINT_INTERVAL_SECONDS when rows were added, and keeps the
newest one durably in `<journal>.checkpoint` (the signed note, written whole through
controller/record/durable.py). A checkpoint covers only committed rows, and only a tree whose
every row carries its nonce (format 2) hides what is in play: nothing in it lets anyone test a
guess at a face-down card.

API for the witness client (controller/service, `[witness]`)::

    signer = daemon.service.checkpoint_signer          # None: no identity key
    signer.listeners.append(callback)                  # callback(SignedCheckpoint), on the loop,
                                                       # after the file is durable
    signer.latest                                      # SignedCheckpoint | None (size, root, note)
    signer.consistency_proof(old_size, new_size)       # list[bytes], RFC 9162, committed rows
    signer.inclusion_proof(seq, size)                  # list[bytes]
    signer.verifier                                    # note.Verifier of the table's key
    read_checkpoint_file(live_path, verifier)          # the newest signed checkpoint, checked

A re-signed size gives the same note (Ed25519 is deterministic), so no history of notes is
kept: any earlier size's root comes from the log (`MerkleLog.root`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tablectl.controller.common.logs import get_logger
from tablectl.controller.record.durable import write_private_file
from tablectl.controller.record.journal import Journal, JournalError
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import (
    Checkpoint,
    IdentityKey,
    NoteError,
    Verifier,
    open_note,
    parse_checkpoint,
    sign_note,
)

CHECKPOINT_INTERVAL_SECONDS = 120.0
IDENTITY_KEY_NAME = "identity.key"


def checkpoint_file(live: Path) -> Path:
    """`journal.sqlite` -> `journal.sqlite.checkpoint`: the newest signed checkpoint."""
    return live.with_name(f"{live.name}.checkpoint")


def default_origin(table_id: str) -> str:
    """The checkpoints' origin (and the key's name) when setup-keys is not told one."""
    return f"tablectl/{table_id}"


@dataclass(frozen=True)
class SignedCheckpoint:
    size: int
    root: bytes
    note: str  # the signed note's text, signature lines included
    origin: str = ""


def read_checkpoint_file(live: Path, verifier: Verifier) -> SignedCheckpoint | None:
    """The newest signed checkpoint kept beside the journal, its signature checked (None when
    there is none); NoteError when it is there but does not verify or parse."""
    path = checkpoint_file(live)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeError) as error:
        raise NoteError(f"{path}: cannot read the signed checkpoint: {error}") from error
    try:
        opened = open_note(text, [verifier])
        checkpoint = parse_checkpoint(opened.text)
    except NoteError as error:
        raise NoteError(f"{path}: {error}") from error
    return SignedCheckpoint(checkpoint.size, checkpoint.root_hash, text, checkpoint.origin)


class CheckpointSigner:
    """Signs the journal's committed tree head; one per daemon, on its loop."""

    def __init__(
        self, journal: Journal, key: IdentityKey, *, interval: float = CHECKPOINT_INTERVAL_SECONDS
    ) -> None:
        self.journal = journal
        self.key = key
        self.interval = interval
        self.listeners: list[Callable[[SignedCheckpoint], None]] = []
        self._log = get_logger("journal", path=str(journal.path))
        self.latest: SignedCheckpoint | None = None
        try:
            self.latest = read_checkpoint_file(journal.path, key.verifier)
        except NoteError as error:  # replaced by the next one; said, not trusted
            self._log.error("checkpoint_file_unreadable", error=str(error))
        self._wanted = False
        self._task: asyncio.Task[None] | None = None
        self._writing: set[asyncio.Task[None]] = set()
        # one writer of the file at a time (executor threads), never an older over a newer
        self._write_lock = threading.Lock()
        self._written = self.latest.size if self.latest is not None else 0
        # A round in play when the journal was upgraded from format 1: its rows carry no
        # nonce, so any tree head over them is a card oracle; none is signed before a later
        # round begins (docs/journal.md, "Hiding").
        self._withheld = journal.round_without_nonces_in_play()
        if self._withheld is not None:
            self._log.warning(
                "checkpoint_withheld",
                round=self._withheld[0],
                reason="rows of a round in play without nonces (written before format 2): "
                "no checkpoint before a later round begins",
            )
        journal.commit_listeners.append(self._committed)

    @property
    def origin(self) -> str:
        return self.key.name

    @property
    def verifier(self) -> Verifier:
        return self.key.verifier

    def _make(self) -> SignedCheckpoint | None:
        """A checkpoint of the committed tree, when it grew since the last one."""
        tree = self.journal.tree
        if self.journal.failure is not None:
            return None  # rows of the failed commit are in the tree, never on the disk
        if self.journal.pending or (self.latest is not None and self.latest.size >= tree.size):
            return None
        if self._withheld is not None:
            self._withheld = self.journal.round_without_nonces_in_play(self._withheld[1])
            if self._withheld is not None:
                return None
        root = tree.root()
        note = sign_note(Checkpoint(self.origin, tree.size, root).body(), self.key)
        return SignedCheckpoint(tree.size, root, note, self.origin)

    def _write(self, signed: SignedCheckpoint) -> None:
        with self._write_lock:
            if signed.size <= self._written:
                return
            write_private_file(checkpoint_file(self.journal.path), signed.note)
            self._written = signed.size

    def _done(self, signed: SignedCheckpoint) -> None:
        if self.latest is not None and self.latest.size >= signed.size:
            return
        self.latest = signed
        self._log.info("checkpoint_signed", size=signed.size, root=signed.root.hex())
        for listener in self.listeners:
            listener(signed)

    def sign(self) -> SignedCheckpoint | None:
        """Flush, sign the committed tree and keep it durably (a stop, a command); None when
        the tree did not grow. An unwritable file fails the journal (fail-stop)."""
        self.journal.flush()
        signed = self._make()
        if signed is None:
            return None
        try:
            self._write(signed)
        except OSError as error:
            self._fail(error)
        self._done(signed)
        return signed

    def _fail(self, error: OSError) -> None:
        where = checkpoint_file(self.journal.path)
        self.journal.fail(JournalError(f"{where}: cannot record the signed checkpoint: {error}"))
        assert self.journal.failure is not None
        raise self.journal.failure from error

    def request(self) -> None:
        """Sign after the rows appended so far are committed (the end of a round): no commit
        of its own, and the file is written off the loop."""
        self._wanted = True
        if not self.journal.pending:
            self._committed(self.journal.last_seq)

    def _committed(self, _seq: int) -> None:
        if not self._wanted or self.journal.pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a command): sign() is called directly
        self._wanted = False
        signed = self._make()
        if signed is not None:
            task = loop.create_task(self._write_then_tell(signed))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    async def _write_then_tell(self, signed: SignedCheckpoint) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._write, signed)
        except OSError as error:
            with contextlib.suppress(JournalError):
                self._fail(error)
            return
        self._done(signed)

    def start(self) -> None:
        """Sign every `interval` seconds when rows were added."""
        self._task = asyncio.get_running_loop().create_task(
            self._every_interval(), name="journal:checkpoints"
        )

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.request()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)

    # -- proofs for the witness client -----------------------------------------------------------

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """RFC 9162 consistency proof between two committed sizes of this journal's log (a
        signed checkpoint's size is committed). Safe from any thread: it reads the segments
        through its own read-only connections, never the journal's writer."""
        with MerkleLog(self.journal.path) as log:
            return log.consistency_proof(old_size, new_size)

    def inclusion_proof(self, seq: int, size: int) -> list[bytes]:
        """Row `seq`'s inclusion proof in the tree of `size` committed rows (any thread)."""
        with MerkleLog(self.journal.path) as log:
            return log.inclusion_proof(seq, size)


def identity_key_path(sealing_key_path: Path) -> Path:
    """The identity key lives beside the sealing key (`journal setup-keys` writes both)."""
    return sealing_key_path.with_name(IDENTITY_KEY_NAME)
