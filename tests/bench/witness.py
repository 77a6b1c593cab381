"""The witnessed log's cost (issue 30): an event's p99 with the table's checkpoints signed and
sent to a witness vs without, and a witness cosigning 400 tables' checkpoints vs the bare check
of the same checkpoints.

``merkle_e2e_p99_on_vs_off`` (goal <= 1.05): two daemons in this process, each as
tests/bench/latency.py's rig (one simulated manual shoe on a real pty, 5 Card Hi-Lo), taking
turns sample by sample: *on* has the table's identity key (a checkpoint signed and written at
every round's end) and a `[witness]` section pointing at `tablectl witness serve` running as
its own process (the client's thread sends each checkpoint with its consistency proof; the
witness fsyncs and answers); *off* has neither. Both journals keep the Merkle log itself (the
journal's format 2 always does: its nodes are written in the rows' own transaction), so the
ratio is what signing, the checkpoint file and the witness add to an event's p99.

``witness_cosign_vs_floor`` (goal >= 0.5): 400 tables, each a log of LEAVES rows with one
checkpoint already cosigned; each then sends its next checkpoint (ROWS_MORE rows on) to
`tablectl witness serve` (its own process, its state on this disk, answering once durable)
from CLIENTS threads at once: the seconds until all 400 are cosigned, against the floor: the
same 400 requests checked bare in one thread (the table's Ed25519 signature on the note and
the RFC 9162 consistency proof: what a witness cannot skip). The ratio is floor seconds /
witness seconds. The witness in this process (WitnessState without HTTP) is printed beside it
as information: what the HTTP server costs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.record.checkpoints import identity_key_path
from tablectl.controller.record.merkle import verify_consistency
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    IdentityKey,
    create_identity_key,
    open_note,
    parse_checkpoint,
)
from tablectl.controller.record.witness_state import WitnessState, parse_request
from tests.bench.latency import DaemonRig, figures_us
from tests.witness.logs import MemoryLog

TABLES = 400
LEAVES = 2000
ROWS_MORE = 60
CLIENTS = 64


class WitnessServe:
    """`tablectl witness serve` as its own process on a port the kernel chose."""

    def __init__(self, directory: Path, logs: list[str]) -> None:
        key = directory / "witness.key"
        made = subprocess.run(
            [
                sys.executable,
                "-m",
                "tablectl.controller",
                "witness",
                "setup-key",
                "--key",
                str(key),
                "--name",
                "bench.example/witness",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        self.vkey = made.stdout.strip()
        listing = directory / "logs.toml"
        listing.write_text(
            "".join(f'[[log]]\norigin = "{v.split("+", 1)[0]}"\nkey = "{v}"\n' for v in logs)
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tablectl.controller",
                "witness",
                "serve",
                "--state",
                str(directory / "state"),
                "--listen",
                "127.0.0.1:0",
                "--key",
                str(key),
                "--logs",
                str(listing),
                "--log-level",
                "warning",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            raise RuntimeError(f"the witness did not start: {line!r}")
        self.port = int(line.split("listening on http://127.0.0.1:")[1].split()[0])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- merkle_e2e_p99_on_vs_off ----------------------------------------------------------------


class WitnessedRig(DaemonRig):
    """The latency rig with the table's identity key and a witness."""

    def __init__(self, directory: Path, witness: WitnessServe) -> None:
        super().__init__(directory)
        self.extra_config = (
            f'\n[witness]\nwitnesses = [{{ url = "http://127.0.0.1:{witness.port}", '
            f'key = "{witness.vkey}" }}]\n'
        )


async def e2e_on_vs_off(samples: int, warmup: int = 100) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-witness-") as tmp:
        root = Path(tmp)
        (root / "on").mkdir()
        (root / "off").mkdir()
        table = create_identity_key(
            identity_key_path(root / "on" / "sealing-key"), "bench.example/tables/bench"
        )
        witness = WitnessServe(root, [table.vkey])
        on, off = WitnessedRig(root / "on", witness), DaemonRig(root / "off")
        try:
            await on.start()
            await off.start()
            for _ in range(warmup):
                await on.sample()
                await off.sample()
            on_samples: list[float] = []
            off_samples: list[float] = []
            for _ in range(samples):
                on_samples.append(await on.sample())
                off_samples.append(await off.sample())
            assert on.daemon is not None and on.daemon.witnesses is not None
            cosigned = on.daemon.witnesses.client.quorum_size()
            await on.close()
            await off.close()
        finally:
            witness.stop()
    on_f, off_f = figures_us(on_samples), figures_us(off_samples)
    return {
        "samples": samples,
        "on": on_f,
        "off": off_f,
        "rounds": on.rounds,
        "cosigned_size": cosigned,
        "merkle_e2e_p99_on_vs_off": round(on_f["p99_us"] / off_f["p99_us"], 3),
        "merkle_e2e_median_on_vs_off": round(on_f["median_us"] / off_f["median_us"], 3),
    }


# --- witness_cosign_vs_floor -----------------------------------------------------------------


def tables_with_requests(count: int) -> tuple[list[MemoryLog], list[bytes], list[bytes]]:
    """`count` tables' logs; each one's first request (old 0) and its next (ROWS_MORE on)."""
    logs: list[MemoryLog] = []
    first: list[bytes] = []
    second: list[bytes] = []
    for index in range(count):
        log = MemoryLog.new(f"bench.example/tables/t{index:03d}").grow(LEAVES)
        first.append(log.request(0))
        log.grow(ROWS_MORE)
        second.append(log.request(LEAVES))
        logs.append(log)
    return logs, first, second


def bare_check(logs: list[MemoryLog], requests: list[bytes], cosigned_roots: list[bytes]) -> float:
    """The floor: each request parsed, its signature and its consistency proof checked."""
    started = time.perf_counter()
    for log, request, old_root in zip(logs, requests, cosigned_roots, strict=True):
        old, proof, note_text = parse_request(request)
        checkpoint = parse_checkpoint(open_note(note_text, [log.key.verifier]).text)
        if not verify_consistency(old, checkpoint.size, old_root, checkpoint.root_hash, proof):
            raise RuntimeError("the bench's own proof does not verify")
    return time.perf_counter() - started


def send_all(port: int, requests: list[bytes]) -> float:
    """Every request sent by CLIENTS threads, each on one keep-alive connection (as
    tlog-witness asks of clients): seconds until the last cosignature is back."""
    chunks = [requests[i::CLIENTS] for i in range(CLIENTS)]

    def client(chunk: list[bytes]) -> list[int]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        statuses = []
        try:
            for body in chunk:
                connection.request("POST", "/add-checkpoint", body)
                answer = connection.getresponse()
                answer.read()
                statuses.append(answer.status)
        finally:
            connection.close()
        return statuses

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        answers = [status for statuses in pool.map(client, chunks) for status in statuses]
    seconds = time.perf_counter() - started
    if set(answers) != {200}:
        raise RuntimeError(f"the witness did not cosign every checkpoint: {set(answers)}")
    return seconds


def in_process(
    directory: Path, logs: list[MemoryLog], first: list[bytes], second: list[bytes]
) -> float:
    key = IdentityKey.generate("bench.example/inprocess", ALG_COSIGNATURE_V1)
    state = WitnessState(directory, {log.origin: log.key.verifier for log in logs}, key)
    try:
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(state.add_checkpoint, first))
            started = time.perf_counter()
            statuses = [a.status for a in pool.map(state.add_checkpoint, second)]
        seconds = time.perf_counter() - started
    finally:
        state.close()
    if set(statuses) != {200}:
        raise RuntimeError(f"in process: {set(statuses)}")
    return seconds


def cosign_vs_floor(tables: int = TABLES, repeats: int = 3) -> dict[str, Any]:
    logs, first, second = tables_with_requests(tables)
    roots = [
        parse_checkpoint(open_note(parse_request(r)[2], [log.key.verifier]).text).root_hash
        for log, r in zip(logs, first, strict=True)
    ]
    witness_runs: list[float] = []
    floor_runs: list[float] = []
    inprocess_runs: list[float] = []
    for repeat in range(repeats):
        with tempfile.TemporaryDirectory(prefix="tablectl-bench-cosign-") as tmp:
            witness = WitnessServe(Path(tmp), [log.key.vkey for log in logs])
            try:
                send_all(witness.port, first)  # each table's first checkpoint, not measured
                floor_runs.append(bare_check(logs, second, roots))
                witness_runs.append(send_all(witness.port, second))
            finally:
                witness.stop()
            inprocess_runs.append(in_process(Path(tmp) / f"inprocess{repeat}", logs, first, second))
    witness_s, floor_s = statistics.median(witness_runs), statistics.median(floor_runs)
    inproc_s = statistics.median(inprocess_runs)
    return {
        "tables": tables,
        "leaves": LEAVES,
        "rows_more": ROWS_MORE,
        "clients": CLIENTS,
        "witness_seconds": [round(x, 4) for x in witness_runs],
        "floor_seconds": [round(x, 4) for x in floor_runs],
        "inprocess_seconds": [round(x, 4) for x in inprocess_runs],
        "witness_cosign_vs_floor": round(floor_s / witness_s, 3),
        "witness_inprocess_vs_floor": round(floor_s / inproc_s, 3),
        "witness_cosigns_per_second": round(tables / witness_s, 1),
        "floor_checks_per_second": round(tables / floor_s, 1),
    }


def measure(quick: bool) -> dict[str, Any]:
    e2e = asyncio.run(e2e_on_vs_off(200 if quick else 2000, warmup=20 if quick else 100))
    cosign = cosign_vs_floor(TABLES, repeats=1 if quick else 3)
    return {"e2e": e2e, "cosign": cosign}
