"""Seed inputs for the fuzzers: the project's own valid files, so mutations start deep."""

from __future__ import annotations

import random
from pathlib import Path

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.frame import Frame, encode

ROOT = Path(__file__).resolve().parents[2]


def _files(pattern: str) -> list[bytes]:
    """The files matching ``pattern``; golden expectations (decisions, not events) left out."""
    paths = sorted(p for p in ROOT.glob(pattern) if not p.name.endswith(".expected.jsonl"))
    return [path.read_bytes() for path in paths]


def protocol_seeds() -> list[bytes]:
    identity = m.Identity("shoe", "RS-1", "SN-0001", "1.0.0", "11" * 32)
    payloads = [
        (m.Msg.HELLO, m.pack_hello(1, 1)),
        (m.Msg.IDENTITY, m.pack_identity(1, identity)),
        (m.Msg.CARD_DRAWN, m.pack_card_drawn("As", False)),
        (m.Msg.CARD_DRAWN, m.pack_card_drawn("JK", True)),
        (m.Msg.SHUFFLE_COMPLETED, m.pack_shuffle_completed("A", 52)),
        (m.Msg.ACK, b""),
    ]
    frames = [encode(Frame(int(t), seq, p)) for seq, (t, p) in enumerate(payloads)]
    return [*frames, b"".join(frames), frames[2] + frames[2], b"\x00garbage" + frames[1]]


def scenario_seeds() -> list[bytes]:
    return (
        _files("tests/replay/scenarios/*.jsonl")[:8]
        + _files("simulators/scenarios/*.jsonl")
        + [
            b'{"at": 0.2, "step": "draw", "count": 3}\n{"at": 0.5, "step": "face_up"}\n'
            b'{"at": 1.0, "step": "garbage", "bytes": 40}\n{"at": 1.5, "step": "disconnect"}\n'
        ]
    )


def config_seeds() -> list[bytes]:
    return _files("config/*.toml")


def mutate(seed: bytes, rng: random.Random, rounds: int = 4) -> bytes:
    """A few byte-level mutations of ``seed``: flips, cuts, duplicated or inserted spans."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, rounds)):
        if not data:
            data.extend(rng.randbytes(rng.randint(1, 8)))
            continue
        at = rng.randrange(len(data))
        action = rng.randrange(5)
        if action == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif action == 1:
            del data[at : at + rng.randint(1, 16)]
        elif action == 2:
            end = min(len(data), at + rng.randint(1, 32))
            data[at:at] = data[at:end]
        elif action == 3:
            data[at:at] = rng.choice([b"\x00", b"\xff", b"{", b"}", b'"', b"=", b"[", b"\n", b"-1"])
        else:
            data[at] = rng.randrange(256)
    return bytes(data)
