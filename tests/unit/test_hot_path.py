"""The hot path's shortcuts (journal row hash, one-row commits, -wal, status) change nothing."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.controller.record.journal import (
    Journal,
    canonical_json,
    read_rows,
    row_hash,
    verify_journal,
)


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
        "from controller.record.journal import Journal\n"
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


def _hilo_config(tmp_path):
    from tablectl.controller.common.config import parse_config

    return parse_config(
        {
            "table": {"id": "t1", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
            "journal": {"path": str(tmp_path / "j.sqlite")},
        },
        "t.toml",
    )


def test_no_status_is_built_per_event_and_status_follows_every_event(tmp_path) -> None:
    import asyncio

    from tablectl.controller.service.service import TableService

    config = _hilo_config(tmp_path)

    async def go() -> None:
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        built = 0
        engine_status = service.engine.status

        def counting() -> dict:
            nonlocal built
            built += 1
            return engine_status()

        service.engine.status = counting  # type: ignore[method-assign]
        await service.handle_event({"type": "shuffle_started"}, source="operator")
        await service.handle_event({"type": "shuffle_completed", "count": 52}, source="operator")
        await service.handle_event({"type": "bets_closed", "positions": [1, 2]}, source="operator")
        for card in ("As", "Kd", "Qh", "Jc", "Ts"):
            await service.handle_event({"type": "card_drawn", "card": card, "face_up": False})
        assert built == 0  # handling events, the daemon's STATUS= and state pushes built none
        assert service.status()["state"] == service.engine.state == "dealing"
        assert built == 1
        service.engine_status()
        assert built == 1  # cached until the next event
        await service.handle_event({"type": "card_drawn", "card": "9s", "face_up": False})
        assert service.status()["state"] == "dealing" and built == 2
        service.close()

    asyncio.run(go())


def test_status_gauges_follow_within_the_refresh_and_at_close(tmp_path) -> None:
    import asyncio
    import random

    from tablectl.controller.common import metrics
    from tablectl.controller.engine.table import TableSpec
    from tablectl.controller.service.service import GAUGE_REFRESH_SECONDS, TableService
    from tablectl.simulators.roundgen import legal_stream

    config = _hilo_config(tmp_path)
    spec = TableSpec.from_dict({"game": "five_card_hilo", "options": {"dealing": "manual_shoe"}})
    events = legal_stream(spec, random.Random(3), 2)
    dealt = next(i for i, e in enumerate(events) if e["type"] == "deal_completed")
    counted = next(i for i, e in enumerate(events) if e["type"] == "stub_counted")

    async def go() -> None:
        service = TableService(config, Journal(config.journal_path))
        await service.start()
        for event in events[: dealt + 1]:  # a deal completed, its stub not yet counted
            await service.handle_event(event)
        await asyncio.sleep(GAUGE_REFRESH_SECONDS * 3)
        assert metrics.ROUNDS_SINCE_STUB_COUNT.value("A") == 1
        for event in events[dealt + 1 : counted + 1]:
            await service.handle_event(event)
        await asyncio.sleep(GAUGE_REFRESH_SECONDS * 3)
        assert metrics.ROUNDS_SINCE_STUB_COUNT.value("A") == 0
        for event in events[counted + 1 :]:  # the next deal completes; close at once
            await service.handle_event(event)
            if event["type"] == "deal_completed":
                break
        service.close()
        assert metrics.ROUNDS_SINCE_STUB_COUNT.value("A") == 1

    asyncio.run(go())


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | text,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=12,
    )
)
def test_canonical_json_is_jsons_own_spelling(value) -> None:
    import json

    assert canonical_json(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=(2**33) * 10**9))
def test_utc_timestamp_is_datetimes_isoformat(nanoseconds: int) -> None:
    import datetime

    from tablectl.controller.record.journal import UtcTimestamp

    stamp = UtcTimestamp()
    moment = datetime.datetime.fromtimestamp(nanoseconds // 1000 // 10**6, datetime.UTC)
    expected = moment.replace(microsecond=nanoseconds // 1000 % 10**6).isoformat(
        timespec="microseconds"
    )
    assert stamp(nanoseconds) == expected
    assert stamp(nanoseconds) == expected  # from the kept second too
    assert stamp(nanoseconds + 1_000_000_000) != expected


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=(2**33) * 10**9))
def test_local_timestamp_is_datetimes_isoformat(nanoseconds: int) -> None:
    """The service's per-event `time`: the text datetime.now().isoformat() would give."""
    import datetime

    from tablectl.controller.record.journal import LocalTimestamp

    stamp = LocalTimestamp()
    moment = datetime.datetime.fromtimestamp(nanoseconds // 1000 // 10**6)
    expected = moment.replace(microsecond=nanoseconds // 1000 % 10**6).isoformat(
        timespec="microseconds"
    )
    assert stamp(nanoseconds) == expected
    assert stamp(nanoseconds) == expected  # from the kept second too
    assert stamp(nanoseconds + 1_000_000_000) != expected


def test_local_timestamp_follows_the_clock_now() -> None:
    import datetime

    from tablectl.controller.record.journal import LocalTimestamp

    before = datetime.datetime.now()
    stamped = datetime.datetime.fromisoformat(LocalTimestamp()())
    after = datetime.datetime.now()
    assert before <= stamped <= after


def test_the_daemon_process_never_imports_rich() -> None:
    """`tablectl run` and `demo`: structlog is imported without rich (start time, RSS)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from tablectl.controller.commands.cli import (\n"
        "    TABLE_PROCESSES, import_structlog_without_rich)\n"
        "assert {'run', 'demo'} <= TABLE_PROCESSES\n"
        "import_structlog_without_rich()\n"
        "import tablectl.controller.service.daemon, tablectl.simulators.demo\n"
        "assert 'rich' not in sys.modules, 'rich was imported'\n"
        "import structlog\n"
        "line = structlog.dev.ConsoleRenderer(colors=False)(\n"
        "    None, 'error', {'event': 'x', 'exc_info': ValueError('boom')})\n"
        "assert 'boom' in line, line\n"
        "import rich.console\n"  # textual's rich still imports afterwards (tablectl watch)
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
