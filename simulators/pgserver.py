"""A throwaway PostgreSQL server in a temp dir, as an unprivileged user (demos and tests).

Debian's server binaries (package `postgresql`) are started with initdb and pg_ctl: the data
directory, the Unix socket and the log all live under one temp dir; TCP listens on 127.0.0.1
at a free port. PostgreSQL refuses to run as root, so when this process is root the server
runs as `nobody` (the temp dir is made traversable and the data dir given to it). Local socket
connections are trusted (the DBA's role, `postgres`); TCP connections need a password
(scram-sha-256), as a table's daemon would use over the network.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tablectl.simulators.ports import HeldPort

SUPERUSER = "postgres"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here (install Debian's `postgresql`)."""


def server_bindir() -> Path:
    """The newest installed server's bin dir (/usr/lib/postgresql/N/bin), or pg_config's."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb): apt-get install postgresql "
        "(tests/tools/install-system-tools.sh does it for make test)"
    )


class ThrowawayPostgres:
    """initdb + pg_ctl in a temp dir; `start`, `stop`, `destroy`; DSNs for the DBA and tables."""

    def __init__(
        self,
        base: Path | None = None,
        *,
        user: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        #: server settings over the throwaway defaults (a bench's floor sized like a floor's)
        self.settings = {"fsync": "off", "max_connections": "200", "shared_buffers": "32MB"}
        self.settings.update(settings or {})
        self.bindir = server_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="tablectl-pg-", dir=base))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "postgres.log"
        self._port = HeldPort()  # held until destroy: see simulators.ports
        self.port = self._port.number
        self.run_as = user or self.server_user()
        self._uid: int | None = None
        self._gid: int | None = None
        if self.run_as is not None:
            entry = pwd.getpwnam(self.run_as)
            self._uid, self._gid = entry.pw_uid, entry.pw_gid
        self.running = False

    @staticmethod
    def server_user() -> str | None:
        """The user the server runs as: `nobody` when this process is root, else this user."""
        return "nobody" if os.geteuid() == 0 else None

    # -- life ---------------------------------------------------------------------------------

    def _own(self, path: Path) -> None:
        if self._uid is not None and self._gid is not None:
            os.chown(path, self._uid, self._gid)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            user=self._uid,
            group=self._gid,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
        )

    def init(self) -> None:
        os.chmod(self.root, 0o755)  # the unprivileged server user must reach its data dir
        for path in (self.data, self.sockets):
            path.mkdir(mode=0o700)
            self._own(path)
        self.log.touch()
        self._own(self.log)
        done = self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {done.stderr.strip() or done.stdout}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1" + "".join(
            f" -c {name}={value}" for name, value in self.settings.items()
        )
        done = self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"pg_ctl start failed: {done.stderr.strip()}\n{self.log.read_text()[-2000:]}"
            )
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        done = self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"
        )
        if done.returncode != 0 and "not running" not in done.stderr + done.stdout:
            raise PostgresUnavailable(f"pg_ctl stop failed: {done.stderr.strip()}")
        self.running = False

    def destroy(self) -> None:
        if self.running:
            with contextlib.suppress(PostgresUnavailable):
                self.stop("immediate")
        self._port.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- connecting -----------------------------------------------------------------------------

    def admin_dsn(self, dbname: str = "postgres") -> str:
        """The DBA's connection: the superuser over the Unix socket (trusted locally)."""
        return f"host={self.sockets} port={self.port} user={SUPERUSER} dbname={dbname}"

    def table_dsn(self, dbname: str, role: str) -> str:
        """A table daemon's connection: TCP with a password from its passfile (never here)."""
        return f"host=127.0.0.1 port={self.port} user={role} dbname={dbname}"

    def create_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
