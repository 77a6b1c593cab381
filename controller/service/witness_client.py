"""Sends the table's signed checkpoints to its witnesses, off the event path (C2SP tlog-witness).

One thread per configured witness. The journal signs a checkpoint of its Merkle log at the end
of every round and every few minutes and tells the client (`notify`, a few hundred nanoseconds
on the table's thread); each witness's thread then sends the newest signed checkpoint with an
RFC 9162 consistency proof from the size that witness last cosigned, and keeps the cosignature
it returns beside the journal (controller/record/witnessed.py). The newest checkpoint covers
every earlier one, so a witness that was away gets one request when it is back, however many
checkpoints it missed: the queue is the journal's own signed checkpoints, durable with it, and
the size each witness cosigned, kept with its cosignature.

A witness that refuses (422: the proof does not verify; 409 at the same size with another root;
a cosigned tree larger than the journal's) says the table's history was rewritten or cut: the
daemon is told (`on_refused`: a journal note and a critical alarm) and the refusal shows in
`tablectl_witness_refused` until the witness cosigns again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tablectl.controller.common import metrics
from tablectl.controller.common.config import TableConfig, WitnessConfig, WitnessEndpoint
from tablectl.controller.common.logs import get_logger
from tablectl.controller.record.checkpoints import (
    CheckpointSigner,
    SignedCheckpoint,
    identity_key_path,
)
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import (
    NoteError,
    Verifier,
    add_signature_lines,
    load_identity_key,
)
from tablectl.controller.record.witnessed import (
    Anchor,
    AnchorDamage,
    WitnessedStore,
    anchor_damage,
    narrowed,
    newest_per_witness,
    open_cosigned,
)

#: seconds between attempts after a failure: doubling from RETRY_MIN up to RETRY_MAX
RETRY_MIN = 0.5
RETRY_MAX = 30.0
#: a refusing witness is asked again this often (it may have been a stale view of ours)
REFUSED_RETRY = 60.0
#: while caught up a thread sleeps until a checkpoint is signed; this wakes it regardless
IDLE_WAKE_SECONDS = 30.0
#: how often the daemon's loop recomputes each witness's gauges (well inside a scrape)
GAUGE_SECONDS = 1.0


class CheckpointSource(Protocol):
    """What the client needs of the journal's log (record layer)."""

    def newest_checkpoint(self) -> SignedCheckpoint | None: ...

    def consistency_proof(self, old_size: int, new_size: int) -> Sequence[bytes]: ...


class JournalCheckpoints:
    """The daemon's journal as a CheckpointSource: the signer's newest checkpoint (an
    attribute the loop replaces whole) and proofs read from the committed segments through
    read-only connections of this thread's own (never the journal's writer)."""

    def __init__(self, signer: CheckpointSigner) -> None:
        self.signer = signer
        self.path = signer.journal.path

    def newest_checkpoint(self) -> SignedCheckpoint | None:
        return self.signer.latest

    def consistency_proof(self, old_size: int, new_size: int) -> Sequence[bytes]:
        with MerkleLog(self.path) as log:
            return log.consistency_proof(old_size, new_size)


@dataclass(frozen=True)
class Refusal:
    """A witness refused a checkpoint as inconsistent with what it cosigned."""

    witness: str
    url: str
    status: int
    reason: str
    size: int  # the refused checkpoint's tree size


class WitnessAnswerError(RuntimeError):
    """An answer that is not tlog-witness's (the message says what)."""


def http_post(endpoint: WitnessEndpoint, path: str, body: bytes, timeout: float) -> tuple[int, str]:
    """One request to a witness, on a fresh connection (the caller keeps none open while
    idle); (status, body text)."""
    parts = urllib.parse.urlsplit(endpoint.url)
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.hostname or "", parts.port, timeout=timeout)
    try:
        connection.request(
            "POST", parts.path + path, body, {"Content-Type": "text/plain; charset=utf-8"}
        )
        answer = connection.getresponse()
        return answer.status, answer.read(1 << 16).decode("utf-8", "replace")
    finally:
        connection.close()


def fetch_cosigned(endpoint: WitnessEndpoint, origin: str, timeout: float) -> str | None:
    """The newest checkpoint the witness cosigned for `origin` (GET /checkpoint, tablectl's
    read endpoint); None when it has none. OSError when it cannot be reached."""
    parts = urllib.parse.urlsplit(endpoint.url)
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.hostname or "", parts.port, timeout=timeout)
    try:
        query = urllib.parse.urlencode({"origin": origin})
        connection.request("GET", f"{parts.path}/checkpoint?{query}")
        answer = connection.getresponse()
        text = answer.read(1 << 16).decode("utf-8", "replace")
    finally:
        connection.close()
    if answer.status == 404:
        return None
    if answer.status != 200:
        raise OSError(f"{endpoint.url}: GET /checkpoint answered {answer.status}: {text[:200]}")
    return text


class _Witness:
    """One witness's thread and what it knows: the size it cosigned, since when it waits."""

    def __init__(self, client: WitnessClient, endpoint: WitnessEndpoint) -> None:
        self.client = client
        self.endpoint = endpoint
        self.verifier = Verifier.parse(endpoint.key)
        self.name = endpoint.name
        self.cosigned: Anchor | None = None
        self.known_size: int | None = None  # what the witness said it holds (409), if told
        self.waiting_since: float | None = None  # the oldest signed checkpoint not cosigned
        self.behind = 0
        self.refused: Refusal | None = None
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"witness:{self.name}", daemon=True)
        self._log = get_logger("witness_client", witness=self.name, url=endpoint.url)

    def note_signed(self, at: float) -> None:
        if self.waiting_since is None:
            self.waiting_since = at
        self.behind += 1
        self.wake.set()

    def run(self) -> None:
        delay = RETRY_MIN
        while not self.client.stopping.is_set():
            self.wake.clear()
            try:
                pending = self.step()
            except (OSError, http.client.HTTPException, WitnessAnswerError) as error:
                word = "bad_answer" if isinstance(error, WitnessAnswerError) else "connection"
                metrics.WITNESS_ERRORS_TOTAL.labels(witness=self.name, error=word).inc()
                self.client.last_error[self.name] = str(error)
                self._log.warning("witness_unreachable", error=str(error), retry_in=delay)
                self.client.stopping.wait(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            delay = RETRY_MIN
            if self.refused is not None:
                self.client.stopping.wait(REFUSED_RETRY)
            elif not pending:
                self.wake.wait(IDLE_WAKE_SECONDS)

    def step(self) -> bool:
        """Send the newest signed checkpoint if this witness has not cosigned it; whether
        anything is still waiting afterwards."""
        newest = self.client.source.newest_checkpoint()
        if newest is None:
            return False
        if (
            self.cosigned is not None
            and self.cosigned.size == newest.size
            and self.cosigned.root == newest.root
        ):
            self._caught_up()
            return False
        old = self.cosigned.size if self.cosigned is not None else (self.known_size or 0)
        for _ in range(3):  # a 409 tells the size to prove from: at most a retry or two
            if old > newest.size:
                self._refused(
                    409,
                    f"the witness cosigned a tree of {old} rows; the journal's newest "
                    f"checkpoint has {newest.size}: rows were cut, or an older copy put back",
                    newest,
                )
                return False
            proof = self.client.source.consistency_proof(old, newest.size) if old else []
            body = (
                "\n".join([f"old {old}", *(base64.b64encode(h).decode() for h in proof)])
                + "\n\n"
                + newest.note
            ).encode()
            status, text = http_post(self.endpoint, "/add-checkpoint", body, self.client.timeout)
            if status == 200:
                self._cosigned(newest, text)
                return False
            if status == 409:
                try:
                    size = int(text.strip())
                except ValueError:
                    raise WitnessAnswerError(f"409 without a tree size: {text[:120]!r}") from None
                if size == old:
                    # the same size with another root: the witness holds another history
                    self._refused(
                        409,
                        f"the witness cosigned another tree of {size} rows than the journal's",
                        newest,
                    )
                    return False
                self.known_size = old = size
                continue
            if status == 422:
                self._refused(
                    422,
                    f"the journal's tree of {newest.size} rows is not an extension of the tree "
                    f"of {old} rows the witness cosigned (the consistency proof does not "
                    f"verify): the history was rewritten",
                    newest,
                )
                return False
            word = {404: "unknown_log", 403: "unknown_log"}.get(status, "bad_answer")
            metrics.WITNESS_ERRORS_TOTAL.labels(witness=self.name, error=word).inc()
            raise WitnessAnswerError(f"add-checkpoint answered {status}: {text.strip()[:200]}")
        raise WitnessAnswerError("the witness's size kept changing (409 thrice)")

    def _cosigned(self, newest: SignedCheckpoint, line_text: str) -> None:
        try:
            note = add_signature_lines(newest.note, [line_text])
            anchor = open_cosigned(note, self.client.table_key, self.verifier, "returned")
        except NoteError as error:
            raise WitnessAnswerError(f"its answer is not its cosignature: {error}") from None
        # only this witness's line is kept (a signature by an unknown key is never trusted)
        kept = add_signature_lines(newest.note, [line_text])
        try:
            self.client.store.save(self.name, kept)
        except OSError as error:
            # the cosignature is not lost from the witness; the next checkpoint tries again
            self._log.error("witness_cosignature_not_kept", error=str(error))
        self.cosigned = anchor
        self.known_size = anchor.size
        self.client.last_error.pop(self.name, None)
        if self.refused is not None:
            self._log.warning("witness_cosigns_again", size=anchor.size)
        self.refused = None
        metrics.WITNESS_REFUSED.labels(witness=self.name).set(0)
        metrics.WITNESS_COSIGNED_SIZE.labels(witness=self.name).set(anchor.size)
        self._caught_up()
        self.client.cosigned(self.name, anchor)

    def _caught_up(self) -> None:
        newest = self.client.source.newest_checkpoint()
        if newest is not None and self.cosigned is not None and newest.size > self.cosigned.size:
            return  # signed again meanwhile: still waiting, since then
        self.waiting_since = None
        self.behind = 0

    def _refused(self, status: int, reason: str, newest: SignedCheckpoint) -> None:
        first = self.refused is None
        self.refused = Refusal(self.name, self.endpoint.url, status, reason, newest.size)
        metrics.WITNESS_REFUSED.labels(witness=self.name).set(1)
        metrics.WITNESS_ERRORS_TOTAL.labels(witness=self.name, error="refused").inc()
        self._log.critical("witness_refused", status=status, reason=reason, size=newest.size)
        if first:
            self.client.on_refused(self.refused)


class WitnessClient:
    """The table's witnesses: `start`, `notify` per signed checkpoint, `refresh` the gauges,
    `stop`. `on_refused` is called on a witness's thread (the daemon hands it to its loop)."""

    def __init__(
        self,
        config: WitnessConfig,
        source: CheckpointSource,
        store: WitnessedStore,
        table_key: Verifier,
        on_refused: Callable[[Refusal], None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.source = source
        self.store = store
        self.table_key = table_key
        self.on_refused = on_refused
        self.clock = clock
        self.timeout = config.timeout
        self.stopping = threading.Event()
        self.last_error: dict[str, str] = {}
        self.witnesses = [_Witness(self, endpoint) for endpoint in config.witnesses]
        self._lock = threading.Lock()
        self.on_cosigned: Callable[[str, Anchor], None] | None = None
        metrics.register_witness_metrics(w.name for w in self.witnesses)
        held, _problems = store.held(table_key, [w.verifier for w in self.witnesses])
        for anchor in held:
            for witness in self.witnesses:
                if witness.name == anchor.witness:
                    witness.cosigned = witness.cosigned or anchor
                    witness.known_size = anchor.size
                    metrics.WITNESS_COSIGNED_SIZE.labels(witness=witness.name).set(anchor.size)
        newest = source.newest_checkpoint()
        for witness in self.witnesses:
            if newest is not None and (
                witness.cosigned is None or witness.cosigned.size < newest.size
            ):
                witness.waiting_since = self.clock()  # at the latest since this start
                witness.behind = 1

    def start(self) -> None:
        for witness in self.witnesses:
            witness.thread.start()

    def notify(self, at: float | None = None) -> None:
        """A checkpoint was signed (the journal's thread): every witness's thread wakes."""
        moment = self.clock() if at is None else at
        for witness in self.witnesses:
            witness.note_signed(moment)

    def cosigned(self, name: str, anchor: Anchor) -> None:
        if self.on_cosigned is not None:
            self.on_cosigned(name, anchor)

    def quorum_size(self) -> int:
        """The largest tree size at least `quorum` witnesses cosigned (0: none yet)."""
        sizes = sorted((w.cosigned.size for w in self.witnesses if w.cosigned), reverse=True)
        return sizes[self.config.quorum - 1] if len(sizes) >= self.config.quorum else 0

    def refresh(self) -> None:
        """Each witness's gauges, from this side, whatever its thread is doing."""
        now = self.clock()
        for witness in self.witnesses:
            since = witness.waiting_since
            metrics.WITNESS_BEHIND_SECONDS.labels(witness=witness.name).set(
                max(0.0, now - since) if since is not None else 0.0
            )
            metrics.WITNESS_BEHIND_CHECKPOINTS.labels(witness=witness.name).set(witness.behind)

    def status(self) -> dict[str, object]:
        return {
            "quorum": self.config.quorum,
            "quorum_cosigned_size": self.quorum_size(),
            "witnesses": {
                w.name: {
                    "url": w.endpoint.url,
                    "cosigned_size": w.cosigned.size if w.cosigned else 0,
                    "behind_checkpoints": w.behind,
                    "refused": w.refused.reason if w.refused else None,
                    "last_error": self.last_error.get(w.name),
                }
                for w in self.witnesses
            },
        }

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        for witness in self.witnesses:
            witness.wake.set()
        for witness in self.witnesses:
            if witness.thread.is_alive():
                witness.thread.join(timeout)
        with contextlib.suppress(Exception):
            self.refresh()


# --- the daemon's side: the start check, the client's life ------------------------------------


def table_verifier(config: TableConfig) -> Verifier | None:
    """The table's public key (its identity key's), when `journal setup-keys` wrote one."""
    path = identity_key_path(config.sealing_key_path)
    if not path.exists():
        return None
    return load_identity_key(path).verifier


def gather_anchors(
    config: WitnessConfig, table: Verifier, store: WitnessedStore, *, fetch: bool = True
) -> tuple[list[Anchor], list[str]]:
    """Every cosigned checkpoint the table can find: those held beside the journal and (with
    `fetch`) the newest each witness returns now; what could not be had or did not verify.
    A fetched one newer than the one held is kept, so the next start has it without the
    network."""
    verifiers = [Verifier.parse(w.key) for w in config.witnesses]
    anchors, problems = store.held(table, verifiers)
    if not fetch:
        return anchors, problems
    held = newest_per_witness(anchors)
    for endpoint, verifier in zip(config.witnesses, verifiers, strict=True):
        try:
            note = fetch_cosigned(endpoint, table.name, config.timeout)
        except (OSError, http.client.HTTPException) as error:
            problems.append(f"witness {verifier.name} ({endpoint.url}) not reached: {error}")
            continue
        if note is None:
            continue
        try:
            anchor = open_cosigned(note, table, verifier, f"returned by {endpoint.url}")
        except NoteError as error:
            problems.append(f"witness {verifier.name} ({endpoint.url}) returned: {error}")
            continue
        anchors.append(anchor)
        mine = held.get(verifier.name)
        if mine is None or anchor.size > mine.size:
            with contextlib.suppress(OSError):
                store.save(verifier.name, note)
    return anchors, problems


def witness_anchor_damage(config: TableConfig, journal_path: Path, log: Any) -> AnchorDamage | None:
    """The start check against the witnesses (docs/journal.md, "Verify at start"): the
    journal's Merkle log must extend every checkpoint a witness cosigned, held or returned.
    Blocking (the witnesses are asked over HTTP, each within its timeout): run off the loop."""
    if config.witness is None:
        return None
    table = table_verifier(config)
    if table is None:
        log.warning("witness_check_skipped", reason="no identity key (journal setup-keys)")
        return None
    anchors, problems = gather_anchors(config.witness, table, WitnessedStore(journal_path))
    for problem in problems:
        log.warning("witness_anchor_unavailable", problem=problem)
    if not anchors:
        return None
    with MerkleLog(journal_path) as tree:
        size = tree.size()
        damage = anchor_damage(anchors, size, tree.root)
        if damage is not None:
            keys = [Verifier.parse(w.key) for w in config.witness.witnesses]
            damage = narrowed(damage, WitnessedStore(journal_path), table, keys, tree.root)
    newest = max(anchors, key=lambda a: a.size)
    if damage is None:
        log.info(
            "journal_extends_witnessed",
            witness=newest.witness,
            cosigned_size=newest.size,
            rows=size,
            anchors=len(anchors),
        )
    return damage


class DaemonWitnesses:
    """The running daemon's witness client: woken by each signed checkpoint, its gauges
    refreshed on the loop, a refusal handed to the loop (`on_refused`, a coroutine)."""

    def __init__(
        self,
        config: WitnessConfig,
        signer: CheckpointSigner,
        on_refused: Callable[[Refusal], Coroutine[Any, Any, None]],
    ) -> None:
        loop = asyncio.get_running_loop()

        def refused(refusal: Refusal) -> None:  # a witness's thread
            loop.call_soon_threadsafe(lambda: loop.create_task(on_refused(refusal)))

        self.client = WitnessClient(
            config,
            JournalCheckpoints(signer),
            WitnessedStore(signer.journal.path),
            signer.verifier,
            refused,
        )
        signer.listeners.append(lambda _signed: self.client.notify())
        self._gauges: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.client.start()
        self._gauges = asyncio.get_running_loop().create_task(
            self._gauge_loop(), name="daemon:witnesses"
        )

    async def _gauge_loop(self) -> None:
        while True:
            self.client.refresh()
            await asyncio.sleep(GAUGE_SECONDS)

    def status(self) -> dict[str, object]:
        return self.client.status()

    async def stop(self) -> None:
        if self._gauges is not None:
            self._gauges.cancel()
            self._gauges = None
        await asyncio.get_running_loop().run_in_executor(None, self.client.stop)
