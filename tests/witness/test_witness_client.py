"""The table's witness client against a real `WitnessHTTPServer` (port from the kernel): it
cosigns and keeps the cosignature, queues while the witness is away (the socket held, not
listening), counts how far behind it is, and reports a refusal of a rewritten history."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tablectl.controller.common import metrics
from tablectl.controller.common.config import WitnessConfig, WitnessEndpoint
from tablectl.controller.record.checkpoints import SignedCheckpoint
from tablectl.controller.record.merkle import consistency_proof
from tablectl.controller.record.note import ALG_COSIGNATURE_V1, IdentityKey
from tablectl.controller.record.witness_state import WitnessState
from tablectl.controller.record.witnessed import WitnessedStore
from tablectl.controller.service.witness_client import Refusal, WitnessClient
from tablectl.controller.service.witness_server import WitnessHTTPServer
from tests.witness.logs import MemoryLog

ORIGIN = "casino.example/tablectl/t07"


class MemorySource:
    """A table's log in memory, as the client reads the journal's (newest checkpoint, proofs)."""

    def __init__(self, log: MemoryLog) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.signed: SignedCheckpoint | None = None

    def sign(self) -> None:
        with self.lock:
            self.signed = SignedCheckpoint(
                self.log.size, self.log.tree.root(), self.log.checkpoint(), self.log.origin
            )

    def newest_checkpoint(self) -> SignedCheckpoint | None:
        with self.lock:
            return self.signed

    def consistency_proof(self, old_size: int, new_size: int) -> Sequence[bytes]:
        with self.lock:
            return consistency_proof(old_size, new_size, self.log.node)


def wait_for(condition: Callable[[], object], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def gauge(metric: object, name: str) -> float:
    return metrics.REGISTRY.get_sample_value(metric, {"witness": name}) or 0.0  # type: ignore[arg-type]


@pytest.fixture
def witness_key() -> IdentityKey:
    return IdentityKey.generate("regulator.example/wc", ALG_COSIGNATURE_V1)


@pytest.fixture
def held_socket() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # held from now on; not listening: connections are refused
    yield sock
    sock.close()


def test_queues_while_away_then_cosigns_and_keeps_the_cosignature(
    tmp_path: Path, witness_key: IdentityKey, held_socket: socket.socket
) -> None:
    log = MemoryLog.new(ORIGIN).grow(4)
    source = MemorySource(log)
    port = held_socket.getsockname()[1]
    config = WitnessConfig((WitnessEndpoint(f"http://127.0.0.1:{port}", witness_key.vkey),), 1)
    store = WitnessedStore(tmp_path / "journal.sqlite")
    refusals: list[Refusal] = []
    client = WitnessClient(config, source, store, log.key.verifier, refusals.append)
    client.start()
    try:
        for _ in range(3):  # three checkpoints signed while the witness is away
            log.grow(5)
            source.sign()
            client.notify()
        client.refresh()
        assert gauge("tablectl_witness_behind_checkpoints", witness_key.name) == 3
        wait_for(lambda: client.last_error.get(witness_key.name))
        time.sleep(0.05)
        client.refresh()
        assert gauge("tablectl_witness_behind_seconds", witness_key.name) > 0
        state = WitnessState(tmp_path / "wstate", {ORIGIN: log.key.verifier}, witness_key)
        server = WitnessHTTPServer(state, "127.0.0.1", 0, bound=held_socket)
        server.start()
        try:
            client.notify()
            wait_for(lambda: client.quorum_size() == 19)
            client.refresh()
            assert gauge("tablectl_witness_behind_checkpoints", witness_key.name) == 0
            assert gauge("tablectl_witness_behind_seconds", witness_key.name) == 0
            assert gauge("tablectl_witness_cosigned_size", witness_key.name) == 19
            held, problems = store.held(log.key.verifier, [witness_key.verifier])
            assert problems == [] and [a.size for a in held] == [19]
            log.grow(2)
            source.sign()
            client.notify()
            wait_for(lambda: client.quorum_size() == 21)
            assert state.latest(ORIGIN).size == 21  # type: ignore[union-attr]
        finally:
            server.close()
            state.close()
    finally:
        client.stop()
    assert refusals == []


def test_a_rewritten_history_is_refused_and_reported(
    tmp_path: Path, witness_key: IdentityKey
) -> None:
    log = MemoryLog.new(ORIGIN).grow(10)
    state = WitnessState(tmp_path / "wstate", {ORIGIN: log.key.verifier}, witness_key)
    server = WitnessHTTPServer(state, "127.0.0.1", 0)
    server.start()
    config = WitnessConfig(
        (WitnessEndpoint(f"http://127.0.0.1:{server.port}", witness_key.vkey),), 1
    )
    refusals: list[Refusal] = []
    try:
        source = MemorySource(log)
        source.sign()
        store = WitnessedStore(tmp_path / "journal.sqlite")
        client = WitnessClient(config, source, store, log.key.verifier, refusals.append)
        client.start()
        try:
            wait_for(lambda: client.quorum_size() == 10)
        finally:
            client.stop()
        # the insider rewrites rows 6 onwards with the table's key, and removes what the
        # table held of the witness's cosignature: the witness still refuses
        forged = MemorySource(log.fork(5, "forged").grow(3))
        forged.sign()
        (store.directory).rename(tmp_path / "gone")
        client = WitnessClient(config, forged, store, log.key.verifier, refusals.append)
        client.start()
        try:
            wait_for(lambda: refusals)
            assert refusals[0].status == 422 and "rewritten" in refusals[0].reason
            assert gauge("tablectl_witness_refused", witness_key.name) == 1
        finally:
            client.stop()
        assert len(state.refusals()) == 1
    finally:
        server.close()
        state.close()
