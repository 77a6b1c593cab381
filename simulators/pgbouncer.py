"""A throwaway PgBouncer in front of a ThrowawayPostgres (the floor's bench and tests).

A casino's 400 table PCs each hold one connection to the floor; PostgreSQL serves them best
through a pooler. Debian's pgbouncer runs here in transaction mode in a temp dir, as the same
unprivileged user as the server (it refuses root), listening on 127.0.0.1 at a free port: up
to `max_client_conn` table connections share `pool_size` server connections. Clients
authenticate with SCRAM against the server's own verifiers (read from pg_authid by the DBA's
connection into the auth file), and PgBouncer logs in to the server with the same SCRAM
secret: no password is written anywhere. The tables' startup `options` (statement_timeout)
are ignored by the pooler; the floor sets the same limit on each table role.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tablectl.simulators.pgserver import ThrowawayPostgres
from tablectl.simulators.ports import HeldPort


class PgBouncerUnavailable(RuntimeError):
    """No pgbouncer here (Debian's package `pgbouncer`)."""


class ThrowawayPgBouncer:
    def __init__(
        self, server: ThrowawayPostgres, dbname: str, *, pool_size: int = 20, clients: int = 1000
    ) -> None:
        binary = shutil.which("pgbouncer") or (
            "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
        )
        if binary is None:
            raise PgBouncerUnavailable("no pgbouncer: apt-get install pgbouncer")
        self.binary = binary
        self.server = server
        self.dbname = dbname
        self.pool_size = pool_size
        self.clients = clients
        self.root = Path(tempfile.mkdtemp(prefix="tablectl-pgbouncer-"))
        os.chmod(self.root, 0o755)
        self._port = HeldPort()  # held until stop: see simulators.ports
        self.port = self._port.number
        self.process: subprocess.Popen[bytes] | None = None

    def _own(self, path: Path) -> None:
        if server_uid := self.server._uid:
            os.chown(path, server_uid, self.server._gid or 0)

    def start(self, roles: list[str]) -> None:
        """Start it for these login roles (their SCRAM verifiers into the auth file)."""
        import psycopg

        with psycopg.connect(self.server.admin_dsn(), autocommit=True) as conn:
            secrets: dict[str, str] = dict(
                conn.execute(
                    "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = ANY(%s)"
                    " AND rolpassword IS NOT NULL",
                    (roles,),
                ).fetchall()
            )
        userlist = self.root / "userlist.txt"
        userlist.write_text("".join(f'"{role}" "{secret}"\n' for role, secret in secrets.items()))
        os.chmod(userlist, 0o600)
        ini = self.root / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{self.dbname} = host=127.0.0.1 port={self.server.port} dbname={self.dbname}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir = {self.root}\n"
            "auth_type = scram-sha-256\n"
            f"auth_file = {userlist}\n"
            "pool_mode = transaction\n"
            f"max_client_conn = {self.clients}\n"
            f"default_pool_size = {self.pool_size}\n"
            # pools are per (database, user): every table has its own role, so the cap on the
            # server's side is the database's, shared by all the tables' pools
            f"max_db_connections = {self.pool_size}\n"
            "server_idle_timeout = 5\n"
            "ignore_startup_parameters = options,extra_float_digits\n"
            f"logfile = {self.root / 'pgbouncer.log'}\n"
            f"pidfile = {self.root / 'pgbouncer.pid'}\n"
        )
        for path in (self.root, userlist, ini):
            self._own(path)
        self.process = subprocess.Popen(
            [self.binary, str(ini)],
            user=self.server._uid,
            group=self.server._gid,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.root,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        log = self.root / "pgbouncer.log"
        raise PgBouncerUnavailable(
            f"pgbouncer did not start: {log.read_text()[-1500:] if log.exists() else ''}"
        )

    def table_dsn(self, role: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={role} dbname={self.dbname}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None
        self._port.close()
        shutil.rmtree(self.root, ignore_errors=True)
