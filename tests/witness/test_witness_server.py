"""The witness (`tablectl witness serve`): C2SP tlog-witness add-checkpoint over real HTTP on
a port the kernel chose, its state in a temp dir; every refusal made to happen."""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    IdentityKey,
    create_identity_key,
    open_note,
    parse_checkpoint,
)
from tablectl.controller.record.witness_state import WitnessState
from tablectl.controller.service.witness_server import WitnessHTTPServer
from tests.witness.logs import MemoryLog, latest, post

ORIGIN = "casino.example/tablectl/t01"


class Running:
    def __init__(self, state_dir: Path, logs: list[MemoryLog], key: IdentityKey) -> None:
        self.state = WitnessState(state_dir, {log.origin: log.key.verifier for log in logs}, key)
        self.server = WitnessHTTPServer(self.state, "127.0.0.1", 0)
        self.server.start()
        self.port = self.server.port

    def close(self) -> None:
        self.server.close()
        self.state.close()


@pytest.fixture
def witness_key() -> IdentityKey:
    return IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1)


@pytest.fixture
def table() -> MemoryLog:
    return MemoryLog.new(ORIGIN).grow(5)


@pytest.fixture
def witness(tmp_path: Path, table: MemoryLog, witness_key: IdentityKey) -> Iterator[Running]:
    running = Running(tmp_path / "state", [table], witness_key)
    yield running
    running.close()


def test_cosigns_a_first_checkpoint_and_each_extension(
    witness: Running, table: MemoryLog, witness_key: IdentityKey
) -> None:
    status, _, body = post(witness.port, table.request(0))
    assert status == 200, body
    cosigned = table.checkpoint() + body
    opened = open_note(cosigned, [witness_key.verifier])
    assert opened.signed_by(witness_key.name) is not None
    assert parse_checkpoint(opened.text).size == 5
    table.grow(7)
    status, _, body = post(witness.port, table.request(5))
    assert status == 200, body
    status, text = latest(witness.port, ORIGIN)
    assert status == 200
    opened = open_note(text, [witness_key.verifier, table.key.verifier])
    assert parse_checkpoint(opened.text).size == 12
    assert len(opened.verified) == 2  # the table's signature and the witness's cosignature


def test_a_stale_old_size_gets_409_with_the_size_it_cosigned(
    witness: Running, table: MemoryLog
) -> None:
    assert post(witness.port, table.request(0))[0] == 200
    table.grow(3)
    status, content_type, body = post(witness.port, table.request(0))
    assert (status, content_type, body) == (409, "text/x.tlog.size", "5\n")
    assert post(witness.port, table.request(5))[0] == 200


def test_never_a_smaller_tree(witness: Running, table: MemoryLog) -> None:
    bigger = MemoryLog(table.origin, table.key, table.tree.copy(), dict(table.nodes)).grow(10)
    assert post(witness.port, bigger.request(0))[0] == 200
    # the older, smaller checkpoint (a table restored from an older copy): refused either way
    assert post(witness.port, table.request(0))[:1] == (409,)
    status, _, body = post(witness.port, table.request(5))
    assert status == 409 and body == "15\n"
    assert witness.state.latest(ORIGIN).size == 15  # type: ignore[union-attr]


def test_a_rewritten_log_is_refused_and_both_checkpoints_kept(
    witness: Running, table: MemoryLog, tmp_path: Path
) -> None:
    assert post(witness.port, table.request(0))[0] == 200
    honest_checkpoint = table.checkpoint()
    # the insider rewrites row 4 onwards (same table key) and asks for a bigger tree
    forged = table.fork(3, "forged")
    assert forged.size == 6
    status, _, body = post(witness.port, forged.request(5))
    assert status == 422, body
    assert "does not verify" in body
    evidence = sorted((tmp_path / "state" / "evidence").iterdir())
    assert len(evidence) == 1
    text = evidence[0].read_text()
    assert honest_checkpoint in text and forged.checkpoint() in text
    assert witness.state.latest(ORIGIN).size == 5  # type: ignore[union-attr]
    # the honest log goes on being cosigned
    table.grow(2)
    assert post(witness.port, table.request(5))[0] == 200


def test_another_root_at_the_cosigned_size_is_a_conflict_kept(
    witness: Running, table: MemoryLog, tmp_path: Path
) -> None:
    assert post(witness.port, table.request(0))[0] == 200
    other = MemoryLog(table.origin, table.key).grow(5, "other")
    status, _, body = post(witness.port, other.request(5))
    assert (status, body) == (409, "5\n")
    assert len(list((tmp_path / "state" / "evidence").iterdir())) == 1
    assert len(witness.state.refusals()) == 1


def test_unknown_origin_unsigned_and_malformed_are_refused(
    witness: Running, table: MemoryLog
) -> None:
    stranger = MemoryLog.new("casino.example/tablectl/t99").grow(2)
    assert post(witness.port, stranger.request(0))[0] == 404
    thief = MemoryLog(ORIGIN, IdentityKey.generate(ORIGIN)).grow(5)  # the origin, another key
    status, _, body = post(witness.port, thief.request(0))
    assert status == 403, body
    assert post(witness.port, b"old 01\n\n" + table.checkpoint().encode())[0] == 400
    assert post(witness.port, b"no blank line")[0] == 400
    assert post(witness.port, table.request(0).replace(b"old 0", b"old 9"))[0] == 400
    assert witness.state.latest(ORIGIN) is None


def test_what_it_cosigned_survives_a_restart(
    tmp_path: Path, table: MemoryLog, witness_key: IdentityKey
) -> None:
    first = Running(tmp_path / "state", [table], witness_key)
    try:
        assert post(first.port, table.request(0))[0] == 200
    finally:
        first.close()
    again = Running(tmp_path / "state", [table], witness_key)
    try:
        assert post(again.port, table.request(0))[:3] == (409, "text/x.tlog.size", "5\n")
        assert latest(again.port, ORIGIN)[0] == 200
    finally:
        again.close()


def test_its_own_metrics(witness: Running, table: MemoryLog) -> None:
    assert post(witness.port, table.request(0))[0] == 200
    assert post(witness.port, table.request(0))[0] == 409
    connection = http.client.HTTPConnection("127.0.0.1", witness.port, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    assert 'tablectl_witness_server_answers_total{status="200"} 1.0' in text
    assert 'tablectl_witness_server_answers_total{status="409"} 1.0' in text
    assert "tablectl_witness_server_logs 1.0" in text


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--log", "not-a-key"], "--log 'not-a-key': expected VKEY or ORIGIN=VKEY"),
        (["--log", "t01=nope+00000000+AAAA"], "--log t01: verifier key"),
        ([], "no log to witness"),
        (["--listen", "127.0.0.1:99999", "--log", "KEY"], "port 99999 is outside 0-65535"),
    ],
)
def test_serve_names_bad_input(
    tmp_path: Path, table: MemoryLog, arguments: list[str], said: str
) -> None:
    key = tmp_path / "w.key"
    create_identity_key(key, "regulator.example/w1", ALG_COSIGNATURE_V1)
    arguments = [table.key.vkey if a == "KEY" else a for a in arguments]
    if "--listen" not in arguments:
        arguments += ["--listen", "127.0.0.1:0"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tablectl.controller",
            "witness",
            "serve",
            "--state",
            str(tmp_path / "state"),
            "--key",
            str(key),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert said in done.stderr, done.stderr
    assert not (tmp_path / "state").exists()  # nothing made before the input is right
