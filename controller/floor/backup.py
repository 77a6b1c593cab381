"""When the floor was last backed up, and whether that backup holds (pgBackRest).

The floor's acknowledgement lets a table retire rows it holds nowhere else, so the floor
itself must outlive its disks: a synchronous standby (docs/floor.md, "A replicated floor")
and backups with the WAL archived, restorable to any moment. `tablectl floor backup-check`
asks pgBackRest (`info`) for the stanza's newest backup and has it re-read every file of the
repository against its checksums (`verify`: the backups and the WAL archive); it says when
the last verified backup finished, and refuses (exit 1) when there is none, when it is older
than the allowed age, or when the repository does not verify. The restore drill (a
point-in-time restore into a fresh cluster, then `floor verify` over it) is a runbook in
docs/floor.md, exercised by tests/floor/test_floor_backup.py.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: a floor backed up nightly is stale after a day and a bit
DEFAULT_MAX_AGE_HOURS = 26.0


class BackupCheckError(RuntimeError):
    """pgBackRest cannot be asked (missing, misconfigured): the check cannot say."""


@dataclass(frozen=True)
class BackupFinding:
    """The outcome: `ok` (a recent backup, the repository verified) and the lines to print."""

    ok: bool
    lines: list[str]
    label: str | None = None
    finished_at: datetime.datetime | None = None


def _pgbackrest(config: Path | None, stanza: str, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("pgbackrest")
    if binary is None:
        raise BackupCheckError("pgbackrest is not installed (apt-get install pgbackrest)")
    argv = [binary, f"--stanza={stanza}", *args]
    if config is not None:
        argv.insert(1, f"--config={config}")
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BackupCheckError(f"pgbackrest {args[0]}: {error}") from error


def _stanza_info(config: Path | None, stanza: str) -> dict[str, Any]:
    done = _pgbackrest(config, stanza, "info", "--output=json")
    if done.returncode != 0:
        raise BackupCheckError(
            f"pgbackrest info for stanza {stanza!r} failed: "
            f"{(done.stderr or done.stdout).strip() or done.returncode}"
        )
    try:
        stanzas = json.loads(done.stdout)
    except ValueError as error:
        raise BackupCheckError(f"pgbackrest info: not JSON: {error}") from error
    for entry in stanzas:
        if entry.get("name") == stanza:
            return dict(entry)
    raise BackupCheckError(f"pgbackrest knows no stanza {stanza!r}")


def check_backups(
    stanza: str,
    *,
    config: Path | None = None,
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS,
    now: datetime.datetime | None = None,
) -> BackupFinding:
    """The newest backup of `stanza`, its age against `max_age_hours`, and the repository's
    own verification."""
    now = now or datetime.datetime.now(datetime.UTC)
    info = _stanza_info(config, stanza)
    backups = [b for b in info.get("backup", []) if not b.get("error")]
    status = info.get("status", {})
    if not backups:
        return BackupFinding(
            False,
            [
                f"NO BACKUP: stanza {stanza!r} holds no usable backup "
                f"({status.get('message', 'no backup')}): the floor is on its disks alone; "
                f"run pgbackrest --stanza={stanza} backup --type=full"
            ],
        )
    newest = max(backups, key=lambda b: int(b["timestamp"]["stop"]))
    label = str(newest["label"])
    finished = datetime.datetime.fromtimestamp(int(newest["timestamp"]["stop"]), datetime.UTC)
    age_hours = (now - finished).total_seconds() / 3600
    wal = newest.get("archive", {}) or {}
    lines = [
        f"last backup {label} ({newest.get('type', '?')}), finished "
        f"{finished.isoformat(timespec='seconds')} ({age_hours:.1f} h ago); WAL "
        f"{wal.get('start', '?')} to {wal.get('stop', '?')}; "
        f"{len(backups)} backup(s) in the repository"
    ]
    ok = True
    if age_hours > max_age_hours:
        ok = False
        lines.append(
            f"STALE: the last backup finished {age_hours:.1f} h ago, more than the allowed "
            f"{max_age_hours:g} h: rows the floor took since are not in any backup"
        )
    verified = _pgbackrest(config, stanza, "verify", "--output=text")
    report = (verified.stdout + verified.stderr).strip()
    if verified.returncode != 0 or "status: error" in report or "invalid" in report.lower():
        ok = False
        lines.append(f"NOT VERIFIED: pgbackrest verify found the repository damaged: {report}")
    else:
        lines.append(
            f"verified now: every file of the repository's backups and WAL archive matches "
            f"its checksum (pgbackrest verify); last verified backup {label}, finished "
            f"{finished.isoformat(timespec='seconds')}"
        )
    return BackupFinding(ok, lines, label, finished)
