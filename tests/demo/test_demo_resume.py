"""A restart mid-round (issue 22, X1 and L1): the real demo killed (SIGKILL) in the middle of
a deal and resumed on its state dir. The daemon's round is the journal's round; the dealer's
next "no more bets" does not end it silently; `tablectl journal export` reports every round
completed (collected) or voided, never completed without its collection."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from demo_helpers import demo_command, run_demo

from tablectl.controller.record.journal import JournalError, read_rows


def _rows(path: Path) -> list[Any]:
    try:
        return list(read_rows(path))
    except (JournalError, OSError, Exception):  # mid-write: try again
        return []


def _mid_deal(rows: list[Any]) -> int | None:
    """The round being dealt (its bets closed, three cards out, not collected), if any."""
    events = [r for r in rows if r.kind == "event"]
    closed = [i for i, r in enumerate(events) if r.body.get("type") == "bets_closed"]
    if not closed:
        return None
    after = [r.body.get("type") for r in events[closed[-1] + 1 :]]
    if after.count("card_drawn") >= 3 and "hands_collected" not in after:
        numbers = [r.round for r in rows if r.kind == "decision" or r.kind == "event"]
        return max(n for n in numbers if n is not None)
    return None


def _export(path: Path) -> list[dict[str, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "export", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [r for r in csv.DictReader(io.StringIO(done.stdout)) if r["record"] == "round"]


@pytest.mark.slow
def test_a_demo_killed_mid_deal_resumes_the_journals_round(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    command = [arg for arg in demo_command(tmp_path) if arg != "--fast"]
    first = subprocess.Popen(
        [*command, "--game", "three_card_21", "--seed", "5", "--pace", "0.05", "--rounds", "30"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    open_round = None
    try:
        deadline = time.monotonic() + 90
        while open_round is None and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.02)
            open_round = _mid_deal(_rows(journal))
        assert open_round is not None, "the demo never got into a deal"
        os.kill(first.pid, signal.SIGKILL)  # mid-deal: no chance to finish the round
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(timeout=30)
    killed_at = len(_rows(journal))

    again = run_demo(tmp_path, "--game", "three_card_21", "--rounds", "1", "--seed", "6")
    assert again.returncode == 0, again.stderr
    rows = _rows(journal)
    later = rows[killed_at:]
    kinds = [(r.kind, r.body.get("type") or r.body.get("decision"), r.round) for r in later]
    restarted = [k for k in kinds if k[1] == "controller_restarted"]
    assert restarted, kinds
    # X1: Three Card 21 is dealt face up: the round resumes, as the journal left it
    assert ("decision", "continue_play", open_round) in kinds
    # nothing refused: the dealer finished the open round instead of closing bets again (L1)
    assert not [r.body for r in later if r.kind == "decision" and r.body["decision"] == "rejected"]
    first_bets = next(
        i for i, r in enumerate(later) if r.kind == "event" and r.body["type"] == "bets_closed"
    )
    before_bets = [r.body.get("type") for r in later[:first_bets] if r.kind == "event"]
    assert "hands_collected" in before_bets  # the open round was collected first
    assert later[first_bets].round == open_round  # journaled while it was the round in play
    # the export: each round completed (with the time of its collection) or voided
    rounds = _export(journal)
    assert rounds and all(r["outcome"] in ("completed", "voided") for r in rounds), rounds
    assert all(r["time"] for r in rounds), rounds
    by_number = {int(r["round"]): r for r in rounds}
    assert by_number[open_round]["outcome"] == "completed"
    assert by_number[open_round + 1]["outcome"] == "completed"
    # the law over the whole journal, replayed through a fresh engine event by event
    from tablectl.controller.engine.conservation import RoundWatch
    from tablectl.controller.record.journal import engine_from_table_row

    table = next(r for r in rows if r.kind == "table")
    engine = engine_from_table_row(table.body, lambda bound: 0)
    watch = RoundWatch(engine)
    for row in rows:
        if row.kind == "event":
            watch.after(row.body, engine.handle(row.body, row.seq))
    assert watch.outcomes[open_round] == "completed"


def _asked_not_counted(rows: list[Any]) -> bool:
    """The round in play drew S1's stub_count_required and the stub is not counted yet."""
    asked = [
        i
        for i, r in enumerate(rows)
        if r.kind == "decision" and r.body["decision"] == ("stub_count_required")
    ]
    return bool(asked) and not any(
        r.kind == "event" and r.body.get("type") == "stub_counted" for r in rows[asked[-1] :]
    )


@pytest.mark.long  # three demo runs, one of them paced: seconds, not for make test
def test_a_demo_killed_before_the_asked_stub_count_counts_it_before_dealing_again(
    tmp_path: Path,
) -> None:
    """The power-cut harness's stalled HILO table (issue 33's harness, partial mode, round 41):
    the fifth round of the deck asks for a stub count (S1), the table restarts mid-deal
    before the dealer counts, the restart voids that round (X1: face-down cards out). The
    engine is right that the deck's sixth round may not be dealt uncounted (deal_blocked S1,
    the shoe held); the demo's dealer only counted when it saw the request itself, so it
    never counted and the table dealt no more. A dealer counts the stub the terminal says is
    due (`tablectl status`: rounds_since_stub_count) before the deck's next deal."""
    journal = tmp_path / "journal.sqlite"
    hilo = ("--game", "five_card_hilo")
    first = run_demo(tmp_path, *hilo, "--rounds", "4", "--seed", "2")
    assert first.returncode == 0, first.stderr
    command = [arg for arg in demo_command(tmp_path) if arg != "--fast"]
    paced = subprocess.Popen(
        [*command, *hilo, "--seed", "2", "--pace", "0.2", "--rounds", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        asked = False
        while not asked and time.monotonic() < deadline and paced.poll() is None:
            time.sleep(0.02)
            asked = _asked_not_counted(_rows(journal))
        assert asked, "the fifth round never asked for its stub count"
        os.kill(paced.pid, signal.SIGKILL)  # mid-deal, the count asked for, not given
    finally:
        if paced.poll() is None:
            paced.kill()
        paced.wait(timeout=30)
    killed_at = len(_rows(journal))
    assert _asked_not_counted(_rows(journal))

    again = run_demo(tmp_path, *hilo, "--rounds", "2", "--seed", "3")
    assert again.returncode == 0, again.stderr[-2000:]
    later = _rows(journal)[killed_at:]
    said = [
        (r.kind, r.body.get("type") or r.body.get("decision"), r.body.get("rule_id")) for r in later
    ]
    assert ("decision", "void_round", "X1") in said  # the asking round, voided by the restart
    assert ("event", "stub_counted", None) in said, said
    assert not [s for s in said if s[1] in ("deal_blocked", "rejected", "void_hand")], said
    collected = [s for s in said if s[1] == "hands_collected"]
    assert len(collected) >= 3, said  # the voided round and two new ones
