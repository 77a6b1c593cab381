"""Seals a stolen key cannot backdate, on journals the real daemon wrote (`tablectl demo`, a
child process, its keys made with 2-second epochs): every seal vouches only for rows stamped
inside the time its key was held.

The daemon's own journal, across several epochs, a kill -9 and a restart (the crash's rows
sealed at the restart with the key still held, the epochs that passed while down unsealed),
verifies with every span checked. The issue's forged reseal, made as real file edits with the
key read from the real key file, fails.
"""

from __future__ import annotations

import datetime
import itertools
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import (
    canonical_json,
    live_segments,
    read_head_file,
    read_rows,
    row_hash,
    write_head_file,
)
from tablectl.controller.record.sealing import (
    Sealer,
    VerificationKey,
    read_key_file,
    seal_mac,
    setup_keys,
)
from tests.journal.sealed import Row, forge_one_first_seal, read_all, write_all

TABLECTL = [sys.executable, "-m", "tablectl.controller"]
INTERVAL = 2


def demo(state: Path, rounds: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *TABLECTL,
            "demo",
            "--state-dir",
            str(state),
            "--rounds",
            str(rounds),
            "--pace",
            "0.05",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def seals_in(journal: Path) -> tuple[list[int], bool]:
    """The seal rows so far, and whether the table is between rounds (the last round's hands
    collected and no card of the next drawn yet)."""
    try:
        db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
        try:
            seals = [r[0] for r in db.execute("SELECT seq FROM journal WHERE kind = 'seal'")]
            last = db.execute(
                "SELECT body FROM journal WHERE kind = 'event' ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            return seals, last is not None and '"hands_collected"' in last[0]
        finally:
            db.close()
    except sqlite3.Error:
        return [], False


def journal_end(journal: Path) -> int:
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT max(seq) FROM journal").fetchone()[0])
    finally:
        db.close()


def verify(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [*TABLECTL, "journal", "verify", *args], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout + done.stderr


def crashed_and_restarted(state: Path) -> tuple[VerificationKey, datetime.datetime]:
    """The demo across several epochs, killed (-9) mid-play, down two epochs, restarted and
    stopped cleanly: its verification key and when it stopped."""
    key = setup_keys(state / "sealing-key", interval=INTERVAL)
    journal = state / "journal.sqlite"
    first = demo(state, 50)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        seals, between_rounds = seals_in(journal)
        # killed between rounds, rows after the last seal (left unsealed by the kill); a
        # round killed in play is voided at the restart and the demo's dealer stops there
        if len(seals) >= 2 and between_rounds and max(seals) < journal_end(journal):
            break
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=10) == -signal.SIGKILL
    assert len(seals_in(journal)[0]) >= 2
    time.sleep(2 * INTERVAL + 0.5)  # epochs pass while the table is down
    second = demo(state, 1)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err.decode(errors="replace")[-2000:]
    return key, datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def daemon_journal(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, VerificationKey, datetime.datetime]:
    """One run of the daemon's crash and restart for the module (each test copies it)."""
    state = tmp_path_factory.mktemp("seal-spans") / "demo"
    state.mkdir()
    key, stopped = crashed_and_restarted(state)
    return state, key, stopped


def copy_of(daemon_journal: tuple[Path, VerificationKey, datetime.datetime], tmp_path: Path):
    state, key, stopped = daemon_journal
    copy = tmp_path / "demo"
    shutil.copytree(state, copy, ignore=shutil.ignore_patterns("*.sock", "*.lock"))
    return copy, key, stopped


@pytest.mark.long  # make test stays under 10 minutes
def test_the_daemons_journal_across_a_kill_and_a_restart_verifies_with_every_span(
    daemon_journal, tmp_path
):
    state, key, stopped = copy_of(daemon_journal, tmp_path)
    journal = state / "journal.sqlite"
    seals = [row for row in read_rows(journal) if row.kind == "seal"]
    epochs = [s.body["epoch"] for s in seals]
    assert len(seals) >= 4, epochs
    # the restart sealed what the kill left with the key it still held, and the epochs that
    # passed while down got no seal: somewhere an epoch is skipped
    assert any(b > a + 1 for a, b in itertools.pairwise(epochs)), epochs
    until = (stopped - datetime.timedelta(seconds=5)).isoformat()
    code, out = verify(str(state), "--verify-key", str(key), "--expect-until", until)
    assert code == 0, out
    assert f"under {len(seals)} seals (epochs {epochs[0]}-{epochs[-1]})" in out, out
    assert "every row stamped inside its seal's span; 0 rows after: unsealed" in out, out
    assert "proven from 20" in out and "cannot prove:" in out, out


def test_the_issues_forged_reseal_fails_on_the_daemons_journal(daemon_journal, tmp_path):
    """Delete every seal after the one of epoch e0, change a card after it and recompute the
    chain, append one seal made with the current key stolen from the key file naming e0 as
    its predecessor, and update the head file: the rows under that one seal are stamped in
    epochs whose seals were removed, and `verify` says so, naming the row and the seal."""
    state, key, stopped = copy_of(daemon_journal, tmp_path)
    journal = state / "journal.sqlite"
    rows = read_all(journal)
    seal_rows = [r for r in rows if r[1] == "seal"]
    e0_row = seal_rows[1]
    e0 = json.loads(str(e0_row[4]))["epoch"]
    e0_seq = int(str(e0_row[0]))
    # the intruder's rows: everything up to e0's seal, then the later rows without seals,
    # one card changed, renumbered and rehashed from there
    kept: list[Row] = [r for r in rows if int(str(r[0])) <= e0_seq]
    later = [list(r) for r in rows if int(str(r[0])) > e0_seq and r[1] != "seal"]
    card_row = next(r for r in later if '"card":"' in str(r[4]) and r[1] == "event")
    body = json.loads(str(card_row[4]))
    body["card"] = "As" if body["card"] != "As" else "Kd"
    card_row[4] = canonical_json(body)
    prev = str(kept[-1][6])
    for index, row in enumerate(later):
        seq = e0_seq + 1 + index
        digest = row_hash(prev, seq, str(row[1]), row[2], str(row[3]), str(row[4]))  # type: ignore[arg-type]
        kept.append([seq, row[1], row[2], row[3], row[4], prev, digest])
        prev = digest
    stolen = read_key_file(state / "sealing-key").as_dict()  # what the table PC holds now
    now = datetime.datetime.now(datetime.UTC)
    fields = {
        "type": "seal",
        "epoch": stolen["epoch"],
        "prev_epoch": e0,
        "sealed_at": now.isoformat(timespec="microseconds"),
        "last_seq": int(str(kept[-1][0])),
        "head": prev,
    }
    fields["mac"] = seal_mac(bytes.fromhex(stolen["key"]), fields)
    seal_seq = int(str(kept[-1][0])) + 1
    at = now.isoformat(timespec="microseconds")
    seal_body = canonical_json(fields)
    digest = row_hash(prev, seal_seq, "seal", kept[-1][2], at, seal_body)  # type: ignore[arg-type]
    kept.append([seal_seq, "seal", kept[-1][2], at, seal_body, prev, digest])
    write_all(journal, kept)
    (state / "journal.sqlite.head").write_text(json.dumps({"seq": seal_seq, "head": digest}))
    assert read_head_file(journal) == (seal_seq, digest)
    assert live_segments(journal) == [journal]

    until = (stopped - datetime.timedelta(seconds=5)).isoformat()
    code, out = verify(str(state), "--verify-key", str(key), "--expect-until", until)
    assert code == 1, out
    assert (
        f"before seal row {seal_seq} (epoch {stolen['epoch']}, after the seal of epoch {e0})" in out
    ), out
    first_after = e0_seq + 1
    assert f"row {first_after} is stamped" in out, out
    assert "backdated" in out, out
    # the chain alone (no key) holds: the rewrite is consistent, only the seals' spans tell
    code, out = verify(str(state))
    assert code == 0, out


def test_every_seal_removed_and_one_first_seal_under_a_stolen_key_is_refused(
    daemon_journal, tmp_path
):
    """Issue 30's first forgery on the daemon's journal: every seal dropped, a card changed
    in row 101, the rows renumbered and rehashed with their original stamps, one seal of the
    stolen key's current epoch with no predecessor, the head and key files updated. The
    chain, the head and the MAC all hold; the forged seal cannot vouch for rows stamped
    before its own epoch, and `verify` names the row and the seal."""
    state, key, stopped = copy_of(daemon_journal, tmp_path)
    rows_before = read_all(state / "journal.sqlite")
    changed, seal_seq, epoch = forge_one_first_seal(state)
    forged_rows = read_all(state / "journal.sqlite")
    assert '"card":"' in str(forged_rows[changed - 1][4])  # the row whose card was changed
    until = (stopped - datetime.timedelta(seconds=5)).isoformat()
    code, out = verify(str(state), "--verify-key", str(key), "--expect-until", until)
    assert code == 1, out
    first_stamp = str(rows_before[0][3])
    assert f"row 1 is stamped {first_stamp}, before seal row {seal_seq} (epoch {epoch}" in out
    assert "after no earlier seal" in out and "A first seal vouches for no row" in out, out
    code, out = verify(str(state))  # the chain alone holds: only the seal's span tells
    assert code == 0, out


def test_history_compressed_into_the_stolen_epoch_still_verifies_by_the_seals_alone(
    daemon_journal, tmp_path
):
    """What the seals cannot show alone (docs/journal.md): a cut at a seal, the rows after it
    re-stamped into the thief's current epoch (a card changed) and sealed with the stolen key
    naming that seal as predecessor, verifies with the key and --expect-until: to the seals
    it is a table down from that seal until now. Only a record off the table PC (witnessed
    checkpoints, the floor) tells; if this ever fails, the seals learned more than claimed."""
    state, key, stopped = copy_of(daemon_journal, tmp_path)
    journal = state / "journal.sqlite"
    rows = read_all(journal)
    e0_row = [r for r in rows if r[1] == "seal"][1]
    e0 = json.loads(str(e0_row[4]))["epoch"]
    e0_seq = int(str(e0_row[0]))
    kept: list[Row] = [r for r in rows if int(str(r[0])) <= e0_seq]
    later = [list(r) for r in rows if int(str(r[0])) > e0_seq and r[1] != "seal"]
    card_row = next(r for r in later if '"card":"' in str(r[4]) and r[1] == "event")
    body = json.loads(str(card_row[4]))
    body["card"] = "As" if body["card"] != "As" else "Kd"
    card_row[4] = canonical_json(body)
    stolen = Sealer(state / "sealing-key")
    now = datetime.datetime.now(datetime.UTC)
    stolen.catch_up(now)  # the thief's current epoch (a clean stop may leave it ahead of now)
    epoch_began = key.start + stolen.epoch * key.interval
    stamp = max(now, datetime.datetime.fromtimestamp(epoch_began, datetime.UTC))
    prev = str(kept[-1][6])
    for index, row in enumerate(later):
        seq = e0_seq + 1 + index
        stamp += datetime.timedelta(microseconds=10)
        when = stamp.isoformat(timespec="microseconds")  # re-stamped into the current epoch
        digest = row_hash(prev, seq, str(row[1]), row[2], when, str(row[4]))  # type: ignore[arg-type]
        kept.append([seq, row[1], row[2], when, row[4], prev, digest])
        prev = digest
    stolen.last_sealed_epoch = e0
    sealed_at = stamp + datetime.timedelta(milliseconds=1)
    fields = stolen.seal_body(int(str(kept[-1][0])), prev, sealed_at)
    seal_seq = int(str(kept[-1][0])) + 1
    text = canonical_json(fields)
    at = sealed_at.isoformat(timespec="microseconds")
    digest = row_hash(prev, seal_seq, "seal", kept[-1][2], at, text)  # type: ignore[arg-type]
    kept.append([seal_seq, "seal", kept[-1][2], at, text, prev, digest])
    write_all(journal, kept)
    write_head_file(journal, seal_seq, digest)
    until = (stopped - datetime.timedelta(seconds=5)).isoformat()
    code, out = verify(str(state), "--verify-key", str(key), "--expect-until", until)
    assert code == 0, out
    first_epoch = json.loads(str(next(r for r in rows if r[1] == "seal")[4]))["epoch"]
    assert f"(epochs {first_epoch}-" in out, out  # proven from the real first seal on
