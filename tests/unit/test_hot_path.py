"""The hot path's shortcuts (journal row hash, one-row commits, -wal, status) change nothing."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.controller.journal import Journal, canonical_json, read_rows, row_hash, verify_journal


def reference_row_hash(
    prev_hash: str, seq: int, kind: str, round_number: int | None, recorded_at: str, body: str
) -> str:
    content = canonical_json(
        {"seq": seq, "kind": kind, "round": round_number, "recorded_at": recorded_at, "body": body}
    )
    return hashlib.sha256((prev_hash + content).encode()).hexdigest()


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    seq=st.integers(min_value=0, max_value=2**63),
    kind=text,
    round_number=st.none() | st.integers(min_value=-(2**40), max_value=2**40),
    recorded_at=text,
    body=text,
)
def test_row_hash_is_the_sha256_of_the_rows_canonical_json(
    seq: int, kind: str, round_number: int | None, recorded_at: str, body: str
) -> None:
    prev = "ab" * 32
    assert row_hash(prev, seq, kind, round_number, recorded_at, body) == reference_row_hash(
        prev, seq, kind, round_number, recorded_at, body
    )


def test_row_hash_of_a_bool_round_keeps_jsons_spelling() -> None:
    assert row_hash("0" * 64, 1, "event", True, "t", "{}") == reference_row_hash(  # type: ignore[arg-type]
        "0" * 64, 1, "event", True, "t", "{}"
    )


def test_single_and_batched_commits_chain_and_verify(tmp_path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.append("event", {"type": "a", "note": 'quote " é \u2028'}, durable=True)  # one row
    for index in range(5):
        journal.append("decision", {"n": index}, round_number=1)
    journal.flush()  # a batch of five
    journal.append("note", {"type": "b"}, durable=True)
    journal.close()
    rows = list(read_rows(path))
    assert [row.seq for row in rows] == list(range(1, 8))
    assert rows[0].body["note"] == 'quote " é \u2028'
    assert verify_journal(path).ok


def test_the_wal_is_preallocated_and_a_killed_writer_loses_no_durable_row(tmp_path) -> None:
    import os
    import subprocess
    import sys

    path = tmp_path / "j.sqlite"
    script = (
        "import os, sys\n"
        "from controller.journal import Journal\n"
        "j = Journal(sys.argv[1])\n"
        "print('wal', os.path.getsize(sys.argv[1] + '-wal'), flush=True)\n"
        "for n in range(40):\n"
        "    j.append('event', {'type': 'card_drawn', 'n': n}, durable=True)\n"
        "os._exit(0)  # as kill -9: no close, no checkpoint, the -wal stays with its zeroes\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    preallocated = int(done.stdout.split("wal ")[-1].split()[0])
    assert preallocated > 4_000_000  # ~a checkpoint's worth of frames, written as zeroes
    assert os.path.getsize(f"{path}-wal") >= preallocated
    rows = list(read_rows(path))
    assert [row.body["n"] for row in rows] == list(range(40))
    assert verify_journal(path).ok
    journal = Journal(path)  # recovery stops at the zeroes; appending goes on from row 40
    assert journal.last_seq == 40
    journal.append("event", {"type": "card_drawn", "n": 40}, durable=True)
    journal.close()
    assert [row.body["n"] for row in read_rows(path)] == list(range(41))
    assert verify_journal(path).ok


def test_service_status_is_built_once_per_event_and_follows_every_event(tmp_path) -> None:
    import asyncio

    from tablectl.controller.config import parse_config
    from tablectl.controller.service import TableService

    config = parse_config(
        {
            "table": {"id": "t1", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
            "journal": {"path": str(tmp_path / "j.sqlite")},
        },
        "t.toml",
    )

    async def go() -> None:
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        built = 0
        engine_status = service.engine.status  # type: ignore[attr-defined]

        def counting() -> dict:
            nonlocal built
            built += 1
            return engine_status()

        service.engine.status = counting  # type: ignore[attr-defined]
        await service.handle_event({"type": "shuffle_started"}, source="operator")
        assert built == 1  # the gauges' read
        first = service.engine_status()
        assert service.status()["state"] == first["state"] and built == 1
        await service.handle_event({"type": "shuffle_completed", "count": 52}, source="operator")
        assert built == 2 and service.engine_status()["state"] != first["state"]
        service.close()

    asyncio.run(go())
