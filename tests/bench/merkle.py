"""A round's proof from a year-sized log, and its offline check (issue 30, docs/journal.md).

A year of a busy table, written through the real journal (`Journal.append`, its nonces, its
Merkle nodes in each segment, `roll_over` every gaming day, the table's identity key signing
the checkpoint at the end): 365 segments of ~460 rounds of 30 rows (a bet, 26 cards, a
collection and its decision, a note) = ~5.0 M rows (--quick: 30 days). Then, each timed
over rounds drawn across the year:

- `prove_year_ms`: `journal prove` as the command runs it (`round_proof.prove_round_in`:
  the directory's segments found, the round's segment by binary search, its rows, the
  signed checkpoint, the tree's root checked against it, every row's inclusion proof);
  median, goal <= 50 ms;
- `proof_verify_ms`: `proof verify`'s check of that bundle (`verify_bundle`: the note's
  Ed25519 signature, each row's hash, the chain, each inclusion proof); median, goal <= 10.

Figures, never asserted.
"""

from __future__ import annotations

import datetime
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tablectl.controller.record.checkpoints import CheckpointSigner
from tablectl.controller.record.journal import Journal, closed_segment_name
from tablectl.controller.record.note import IdentityKey
from tablectl.controller.record.round_proof import prove_round_in, verify_bundle

DAYS = 365
ROUNDS_A_DAY = 460
CARDS = [r + s for r in "23456789TJQKA" for s in "cdhs"]
SAMPLES = 40


def write_year(directory: Path, days: int, rounds_a_day: int) -> tuple[IdentityKey, int, int]:
    """The journal of `days` gaming days; (the key, rounds, rows)."""
    key = IdentityKey.generate("tablectl/bench")
    live = directory / "journal.sqlite"
    journal = Journal(live, max_batch=4096)
    rng = random.Random(30)
    round_number = 0
    journal.append("table", {"type": "table", "game": "bench", "options": {}})
    for day in range(days):
        if day:
            journal.flush()
            first = journal.first_row()
            assert first is not None
            closing = datetime.date(2026, 1, 1) + datetime.timedelta(days=day - 1)
            journal.roll_over(
                closed_segment_name(live, closing.isoformat(), first.seq),
                {"gaming_day": (closing + datetime.timedelta(days=1)).isoformat()},
                [("checkpoint", {"type": "checkpoint", "engine": {}})],
            )
            # the roll-over's checkpoint names the round the segment begins after
        for _ in range(rounds_a_day):
            round_number += 1
            append = journal.append
            append(
                "event",
                {"type": "bets_closed", "positions": [1, 2, 3, 4]},
                round_number=round_number,
            )
            for _card in range(26):
                append(
                    "event",
                    {
                        "type": "card_drawn",
                        "card": rng.choice(CARDS),
                        "face_up": False,
                        "device": "shoe",
                    },
                    round_number=round_number,
                )
            append("event", {"type": "hands_collected"}, round_number=round_number)
            append(
                "decision",
                {
                    "decision": "round_completed",
                    "rule_id": "R1",
                    "rule": "the round ends at collection",
                },
                round_number=round_number,
            )
            append("note", {"type": "between_rounds"}, round_number=round_number)
    signer = CheckpointSigner(journal, key)
    signer.sign()
    rows = journal.last_seq
    journal.close()
    return key, round_number, rows


def measure(quick: bool = False) -> dict[str, Any]:
    days = 30 if quick else DAYS
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-merkle-") as tmp:
        directory = Path(tmp) / "t"
        started = time.perf_counter()
        key, rounds, rows = write_year(directory, days, ROUNDS_A_DAY)
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in directory.iterdir())
        rng = random.Random(9)
        chosen = [rng.randrange(1, rounds) for _ in range(SAMPLES)]
        prove_ms: list[float] = []
        verify_ms: list[float] = []
        bundle_bytes: list[int] = []
        for round_number in chosen:
            began = time.perf_counter()
            bundle = prove_round_in(directory, round_number)
            prove_ms.append((time.perf_counter() - began) * 1000)
            text = json.dumps(bundle)
            bundle_bytes.append(len(text))
            loaded = json.loads(text)
            began = time.perf_counter()
            proven = verify_bundle(loaded, key.verifier)
            verify_ms.append((time.perf_counter() - began) * 1000)
            assert proven.round == round_number
    return {
        "prove_year_ms": round(statistics.median(prove_ms), 2),
        "prove_year_p90_ms": round(sorted(prove_ms)[int(len(prove_ms) * 0.9)], 2),
        "proof_verify_ms": round(statistics.median(verify_ms), 2),
        "proof_verify_p90_ms": round(sorted(verify_ms)[int(len(verify_ms) * 0.9)], 2),
        "merkle_log_rows": rows,
        "merkle_log_days": days,
        "merkle_log_bytes": size,
        "merkle_log_build_seconds": round(built, 1),
        "proof_bundle_bytes": int(statistics.median(bundle_bytes)),
        "samples": len(chosen),
    }
