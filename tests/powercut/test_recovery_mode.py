"""The start's undo of an interrupted roll-over leaves the live file 0600 on the disk.

The undo makes the closed file (0400) 0600 and renames it back to the live name, then fsyncs
the directory. A directory's fsync makes the new name durable, not the mode: on lossyfs (as
on the POSIX model it follows) a power cut right after the undo brought the live journal back
at 0400 unless the file itself was fsynced after its chmod (durable.chmod_durably). Run as
the service user (the unit's `User=`, UMask=0077, its state directory 0700 its own), on an
`allow_other` mount where the kernel checks that user's access against the modes lossyfs
reports.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tablectl.controller.record.journal import read_head_file, read_rows, verify_journal
from tests.journal.history import ServiceUser
from tests.journal.service_user import hand_over, service_user, shared_dir  # noqa: F401
from tests.powercut.conftest import need_fuse
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

#: what the daemon's start runs first: the undo of the interrupted roll-over
RECOVER = """
import sys
from pathlib import Path
from tablectl.controller.record.journal import recover_at_start
print("\\n".join(recover_at_start(Path(sys.argv[1]))))
"""

#: what the undo must leave: the live file opened read-write and written to by the user
WRITE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("PRAGMA user_version = 0")
db.execute("COMMIT")
"""


def _as_user(
    user: ServiceUser, script: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*user.prefix(), user.python, "-c", script, *args],
        cwd=ROOT,
        env={**user.environment(), **env},
        capture_output=True,
        text=True,
        timeout=60,
        umask=0o077,  # the unit's UMask=
    )


@pytest.mark.long  # a lossyfs mount and three processes: ~3 s, make test has no room
def test_a_cut_right_after_the_undo_of_a_roll_over_keeps_the_live_file_0600(
    shared_dir: Path,  # noqa: F811
):
    need_fuse()
    user = service_user()
    lossy = LossyMount(shared_dir / "disk", shared_dir / "mnt", allow_other=True)
    state = lossy.backing / "state"
    state.mkdir(parents=True)
    lossy.backing.chmod(0o755)
    hand_over(state, user)  # the unit's StateDirectory=: 0700, the user's
    lossy.mount()
    try:
        live = lossy.mountpoint / "state" / "journal.sqlite"
        crashed = _as_user(
            user, CUT_ROLL_OVER, str(live), TABLECTL_FAULT_AT="rollover.after_rename"
        )
        assert crashed.returncode == -9, crashed.stderr
        (closed,) = live.parent.glob("journal-*.sqlite")
        assert not live.exists() and stat.S_IMODE(closed.stat().st_mode) == 0o400
        assert read_head_file(live) == (12, list(read_rows(closed))[-1].hash)

        undone = _as_user(user, RECOVER, str(live))
        assert undone.returncode == 0, undone.stderr
        assert "undid an interrupted roll-over" in undone.stdout, undone.stdout
        lossy.cut()  # the power goes right after the undo's directory fsync
        lossy.remount()

        assert live.exists() and not closed.exists(), sorted(os.listdir(live.parent))
        found = live.stat()
        assert (found.st_uid, found.st_gid) == (user.uid, user.gid)
        mode = stat.S_IMODE(found.st_mode)
        assert mode == 0o600, f"the live journal came back {mode:04o} after the cut"
        written = _as_user(user, WRITE, str(live))  # no start's repair first
        assert written.returncode == 0, written.stderr
        assert [row.seq for row in read_rows(live)] == list(range(1, 13))
        assert verify_journal(live.parent).ok
    finally:
        lossy.unmount()
