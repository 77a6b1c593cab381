"""The start's undo of an interrupted roll-over leaves the live file 0600 on the disk.

The undo makes the closed file (0400) 0600 and renames it back to the live name, then fsyncs
the directory. A directory's fsync makes the new name durable, not the mode: on lossyfs (as
on the POSIX model it follows) a power cut right after the undo brought the live journal back
at 0400 unless the file itself was fsynced after its chmod (durable.chmod_durably).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tablectl.controller.record.durable import fsync_directory
from tablectl.controller.record.journal import (
    read_head_file,
    read_rows,
    recover_at_start,
    verify_journal,
)
from tests.powercut.lossyfs import LossyMount

ROOT = Path(__file__).resolve().parents[2]

#: a journal of 12 rows, its roll-over killed (its own fault point) once the closed file's
#: rename is durable and before the new live file exists
CUT_ROLL_OVER = """
import sys
from pathlib import Path
from tablectl.controller.record.journal import Journal, closed_segment_name
live = Path(sys.argv[1])
journal = Journal(live)
for i in range(12):
    journal.append("event", {"type": "card", "i": i}, round_number=1)
journal.flush()
first = journal.first_row()
journal.roll_over(closed_segment_name(live, "2026-11-01", first.seq), {"gaming_day": "2026-11-02"})
"""


def test_a_cut_right_after_the_undo_of_a_roll_over_keeps_the_live_file_0600(lossy: LossyMount):
    live = lossy.mountpoint / "state" / "journal.sqlite"
    live.parent.mkdir(mode=0o700)
    fsync_directory(lossy.mountpoint)  # the state directory itself durable (as installed)
    crashed = subprocess.run(
        [sys.executable, "-c", CUT_ROLL_OVER, str(live)],
        cwd=ROOT,
        env={**os.environ, "TABLECTL_FAULT_AT": "rollover.after_rename"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crashed.returncode == -9, crashed.stderr
    (closed,) = live.parent.glob("journal-*.sqlite")
    assert not live.exists() and stat.S_IMODE(closed.stat().st_mode) == 0o400
    assert read_head_file(live) == (12, list(read_rows(closed))[-1].hash)

    done = recover_at_start(live)
    assert any("undid an interrupted roll-over" in line for line in done), done
    lossy.cut()  # the power goes right after the undo's directory fsync
    lossy.remount()

    assert live.exists() and not closed.exists(), sorted(p.name for p in live.parent.iterdir())
    mode = stat.S_IMODE(live.stat().st_mode)
    assert mode == 0o600, f"the live journal came back {mode:04o} after the cut"
    assert [row.seq for row in read_rows(live)] == list(range(1, 13))
    assert verify_journal(live.parent).ok
