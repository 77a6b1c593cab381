"""A throwaway pgBackRest repository beside a throwaway PostgreSQL (tests of the floor's backup).

Debian's `pgbackrest` runs as the server's own user (`nobody` when this process is root), with
its configuration, repository, logs and locks in one temp dir: the server archives every WAL
segment to the repository (`archive_command = pgbackrest ... archive-push %p`), full and
incremental backups are taken from its data directory, and a restore writes a fresh data
directory that recovers to a chosen time (`--type=time`) and is started as a new server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tablectl.simulators.pgserver import PostgresUnavailable, ThrowawayPostgres

STANZA = "floor"


class BackRestUnavailable(PostgresUnavailable):
    """No pgBackRest here (install Debian's `pgbackrest`), or a command of it failed."""


class ThrowawayBackRest:
    """A repository for one server's stanza: `write_config`, `run`, `restore_to`."""

    def __init__(self, server: ThrowawayPostgres, base: Path | None = None) -> None:
        self.binary = shutil.which("pgbackrest") or ""
        if not self.binary:
            raise BackRestUnavailable(
                "no pgbackrest: apt-get install pgbackrest "
                "(tests/tools/install-system-tools.sh does it for make test-long)"
            )
        self.server = server
        self.root = Path(tempfile.mkdtemp(prefix="tablectl-backrest-", dir=base))
        os.chmod(self.root, 0o755)
        self.repo = self.root / "repo"
        self.config = self.root / "pgbackrest.conf"
        for path in (self.repo, self.root / "log", self.root / "lock", self.root / "spool"):
            path.mkdir(mode=0o750)
            self._own(path)

    def _own(self, path: Path) -> None:
        uid, gid = self.server._uid, self.server._gid
        if uid is not None and gid is not None:
            os.chown(path, uid, gid)

    def write_config(self) -> None:
        """The repository's configuration, and the server's archiving pointed at it (the
        server's postgresql.conf: takes effect at its next start)."""
        self.config.write_text(
            "[global]\n"
            f"repo1-path={self.repo}\n"
            "repo1-retention-full=2\n"
            f"log-path={self.root / 'log'}\n"
            f"lock-path={self.root / 'lock'}\n"
            f"spool-path={self.root / 'spool'}\n"
            "compress-type=lz4\n"
            "start-fast=y\n"
            "log-level-console=warn\n"
            f"\n[{STANZA}]\n"
            f"pg1-path={self.server.data}\n"
            f"pg1-port={self.server.port}\n"
            f"pg1-socket-path={self.server.sockets}\n"
            "pg1-user=postgres\n"
        )
        self.config.chmod(0o644)
        with open(self.server.data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# the floor's WAL to pgBackRest (simulators/pgbackrest.py)\n"
                "wal_level = replica\narchive_mode = on\n"
                f"archive_command = '{self.binary} --config={self.config} --stanza={STANZA}"
                " archive-push %p'\n"
            )

    def command(self, *args: str) -> list[str]:
        return [self.binary, f"--config={self.config}", f"--stanza={STANZA}", *args]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A pgBackRest command as the server's user; BackRestUnavailable when it fails."""
        done = self.run_unchecked(*args, timeout=timeout)
        if done.returncode != 0:
            raise BackRestUnavailable(
                f"pgbackrest {' '.join(args)} failed ({done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}"
            )
        return done

    def run_unchecked(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            user=self.server._uid,
            group=self.server._gid,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
        )

    def restore_to(self, target_time: str, base: Path | None = None) -> ThrowawayPostgres:
        """A fresh server whose data directory pgBackRest restored and recovered to
        `target_time` (then promoted), started on ports of its own, archiving off."""
        restored = ThrowawayPostgres(base, user=self.server.run_as, settings=self.server.settings)
        os.chmod(restored.root, 0o755)  # the unprivileged server user must reach its data dir
        restored.data.mkdir(mode=0o700)
        restored.sockets.mkdir(mode=0o700)
        for path in (restored.data, restored.sockets):
            restored._own(path)
        restored.log.touch()
        restored._own(restored.log)
        self.run(
            "restore",
            f"--pg1-path={restored.data}",
            "--type=time",
            f"--target={target_time}",
            "--target-action=promote",
            "--archive-mode=off",
        )
        restored.start()  # accepts connections while it still replays the archive: wait for
        self._wait_promoted(restored)  # the end of recovery (the target reached, promoted)
        return restored

    @staticmethod
    def _wait_promoted(restored: ThrowawayPostgres, timeout: float = 300) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(restored.admin_dsn(), autocommit=True) as conn:
                if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,):
                    return
            if time.monotonic() > deadline:
                raise BackRestUnavailable(
                    f"the restored server is still recovering after {timeout} s: "
                    f"{restored.log.read_text()[-2000:]}"
                )
            time.sleep(0.1)

    def destroy(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
