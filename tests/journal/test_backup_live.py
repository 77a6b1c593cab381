"""`tablectl journal backup` while the daemon deals (`tablectl demo`, dealt automatically).

A plain `cp` of the running journal once gave 1,760 of 2,401 rows and still verified; the
online backup copies every committed row: each copy holds at least the rows committed before
it began, every one of them the journal's own, and it verifies. The demo seals its journal
and leaves the verification key in its state dir.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablectl.controller.record.journal import read_rows, verify_journal
from tablectl.controller.record.sealing import VerificationKey
from tests.demo.demo_helpers import demo_command

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def committed_seq(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    finally:
        db.close()


@pytest.mark.long  # make test stays under 10 minutes
def test_backup_while_the_daemon_deals(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journal = state / "journal.sqlite"
    demo = subprocess.Popen(
        demo_command(state, "--game", "five_card_hilo"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    copies: list[tuple[Path, int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not journal.exists() or committed_seq(journal) < 300
        ):
            assert demo.poll() is None, demo.communicate()
            time.sleep(0.2)
        for index in range(3):
            before = committed_seq(journal)
            dest = tmp_path / f"backup{index}"
            done = subprocess.run(
                [*TABLECTL, "journal", "backup", str(dest), "--journal", str(journal)],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            head = next(line for line in done.stdout.splitlines() if line.startswith("rows "))
            copied = int(head.split()[1].split("-")[1])
            copies.append((dest / "journal.sqlite", before, copied))
            time.sleep(0.5)
    finally:
        demo.send_signal(signal.SIGINT)
        _out, err = demo.communicate(timeout=60)
    assert demo.returncode == 0, err[-2000:]
    final = {row.seq: row.hash for row in read_rows(journal)}
    assert copies[-1][2] > copies[0][1]  # the table dealt on while the copies were taken
    for copy, before, copied in copies:
        assert copied >= before  # every row committed before the backup began
        rows = list(read_rows(copy))
        assert [row.seq for row in rows] == list(range(1, copied + 1))
        assert all(final[row.seq] == row.hash for row in rows)  # the journal's own rows
    key = VerificationKey.parse((state / "verification-key").read_text())
    result = verify_journal(journal, verification_key=key)
    assert result.ok and result.seals >= 1 and result.unsealed_rows == 0, result.message
