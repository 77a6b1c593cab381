"""A throwaway replicated floor: etcd and three Patroni-managed PostgreSQL nodes in a temp dir.

Debian's `etcd-server` and `patroni` run as unprivileged processes (`nobody` when this process
is root, as simulators.pgserver does) on loopback. Patroni bootstraps one node, clones the
others with pg_basebackup, keeps one synchronous standby (`synchronous_mode`, strict: the
primary takes no commit that a standby has not flushed) and promotes that standby when the
primary's postmaster dies (`primary_start_timeout: 0`: fail over at once rather than restart a
crashed primary in place). Patroni fails over only to a standby within
`maximum_lag_on_failover` bytes of the last WAL position the primary published in etcd, which
runs ahead of what the standby has (WAL written but not yet acknowledged: the batch in flight,
a checkpoint, hint bits); at 0 (read patroni/ha.py `is_lagging`, `is_failover_possible`,
`recover`) the crash mid-batch usually found no eligible standby and Patroni restarted the
crashed primary in place, keeping its leader key (CI: "no standby promoted 120 s after the
kill"). It is one WAL segment here: no acknowledged row rests on it, since in strict
synchronous mode a commit returns only once the synchronous standby flushed it.

Ports come from the kernel and are never given back while the cluster lives: each is a socket
bound to 127.0.0.1:0 with SO_REUSEADDR and never listened on (`HeldPort`). The kernel hands a
bound port to no other `bind(0)` (nor to a plain bind of that number), while the server, which
sets SO_REUSEADDR on its own listening socket (PostgreSQL, Go's net for etcd, Python's
HTTPServer for Patroni's REST API all do), binds and listens on it beside the held socket. So
there is no window between choosing a number and the server taking it, and none while a node
restarts (the old primary rejoining, a failover): the port stays ours until `destroy`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tablectl.simulators.pgserver import SUPERUSER, PostgresUnavailable, server_bindir
from tablectl.simulators.ports import HeldPort

SCOPE = "floor"
#: bytes a synchronous standby may trail the primary's last published LSN and still be
#: promoted: one WAL segment (see `ThrowawayPatroniCluster.dcs_settings`)
MAXIMUM_LAG_ON_FAILOVER = 16 * 1024 * 1024
REPLICATOR = "replicator"


class ClusterUnavailable(PostgresUnavailable):
    """No Patroni or etcd here (install Debian's `patroni`, `etcd-server`)."""


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ClusterUnavailable(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    """Every live process under `pid` (by /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


class _Process:
    """A child server process as the unprivileged user, its output to a log file."""

    def __init__(self, owner: ThrowawayPatroniCluster, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as sink:
            self.popen = subprocess.Popen(
                argv,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=owner.root,
                user=owner.uid,
                group=owner.gid,
                env=owner.env,
                start_new_session=True,
            )

    def stop(self, timeout: float = 30) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


class PatroniNode:
    """One PostgreSQL node and its Patroni."""

    def __init__(self, cluster: ThrowawayPatroniCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.home = cluster.root / name
        self.data = self.home / "data"
        self.sockets = self.home / "sockets"
        self.pg_port = HeldPort()
        self.rest_port = HeldPort()
        self.process: _Process | None = None

    @property
    def port(self) -> int:
        return self.pg_port.number

    def config(self) -> dict[str, Any]:
        cluster = self.cluster
        return {
            "scope": SCOPE,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{self.rest_port.number}",
                "connect_address": f"127.0.0.1:{self.rest_port.number}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{cluster.etcd_client.number}"]},
            "bootstrap": {
                "dcs": cluster.dcs_settings(),
                "initdb": [
                    {"encoding": "UTF8"},
                    {"locale": "C.UTF-8"},
                    {"auth-local": "trust"},
                    {"auth-host": "scram-sha-256"},
                    "data-checksums",
                ],
                "pg_hba": [
                    "local all all trust",
                    f"host replication {REPLICATOR} 127.0.0.1/32 scram-sha-256",
                    "host all all 127.0.0.1/32 scram-sha-256",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.port}",
                "connect_address": f"127.0.0.1:{self.port}",
                "data_dir": str(self.data),
                "bin_dir": str(cluster.bindir),
                "pgpass": str(self.home / "pgpass"),
                "use_unix_socket": True,
                "use_unix_socket_repl": False,
                "authentication": {
                    "superuser": {"username": SUPERUSER, "password": cluster.secret},
                    "replication": {"username": REPLICATOR, "password": cluster.secret},
                    "rewind": {"username": SUPERUSER, "password": cluster.secret},
                },
                "parameters": {"unix_socket_directories": str(self.sockets)},
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False},
        }

    def write(self) -> Path:
        self.home.mkdir(mode=0o700)
        self.sockets.mkdir(mode=0o700)
        for path in (self.home, self.sockets):
            self.cluster.own(path)
        path = self.home / "patroni.json"  # YAML is a superset of JSON
        path.write_text(json.dumps(self.config(), indent=2))
        self.cluster.own(path)
        return path

    def start(self) -> None:
        config = self.home / "patroni.json"
        if not config.exists():
            config = self.write()
        self.process = _Process(
            self.cluster, [self.cluster.patroni, str(config)], self.home / "patroni.log"
        )

    def stop(self) -> None:
        """Patroni stopped (it stops its PostgreSQL), then any postmaster left, killed."""
        if self.process is not None:
            self.process.stop(60)
        pid = self.postmaster_pid()
        if pid is not None and _alive(pid):
            for victim in [pid, *_descendants(pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def status(self) -> dict[str, Any]:
        """Patroni's REST view of this node ({} when it does not answer)."""
        url = f"http://127.0.0.1:{self.rest_port.number}/patroni"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return dict(json.load(answer))
        except urllib.error.HTTPError as error:  # 503 for a replica or a stopped node
            with contextlib.suppress(ValueError):
                return dict(json.loads(error.read()))
            return {}
        except (OSError, ValueError):
            return {}

    def admin_dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.sockets} port={self.port} user={SUPERUSER} dbname={dbname}"

    def close(self) -> None:
        self.pg_port.close()
        self.rest_port.close()


class ThrowawayPatroniCluster:
    """etcd + `nodes` Patroni nodes; `start`, `leader`, `kill_primary_postmaster`, `destroy`."""

    def __init__(
        self,
        base: Path | None = None,
        *,
        nodes: int = 3,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.patroni = shutil.which("patroni") or ""
        self.etcd = shutil.which("etcd") or ""
        if not self.patroni or not self.etcd:
            raise ClusterUnavailable(
                "no patroni or etcd: apt-get install patroni etcd-server "
                "(tests/tools/install-system-tools.sh does it for make test-long)"
            )
        self.bindir = server_bindir()
        #: server settings: Patroni writes them to every node's postgresql.conf
        self.settings = {"max_connections": "200", "shared_buffers": "64MB", "fsync": "on"}
        self.settings.update(settings or {})
        self.root = Path(tempfile.mkdtemp(prefix="tablectl-ha-", dir=base))
        os.chmod(self.root, 0o755)
        user = "nobody" if os.geteuid() == 0 else None
        self.uid: int | None = None
        self.gid: int | None = None
        if user is not None:
            entry = pwd.getpwnam(user)
            self.uid, self.gid = entry.pw_uid, entry.pw_gid
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "LC_ALL": "C.UTF-8",
            "LANG": "C.UTF-8",
        }
        self.secret = secrets.token_urlsafe(18)
        self.etcd_client = HeldPort()
        self.etcd_peer = HeldPort()
        self.etcd_process: _Process | None = None
        self.nodes = [PatroniNode(self, f"node{n + 1}") for n in range(nodes)]

    def own(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)

    def dcs_settings(self) -> dict[str, Any]:
        """What Patroni decides, for every node (kept in etcd): a sync standby that alone may
        be promoted; no commit without one; fail over at once when the primary crashes."""
        return {
            "ttl": 20,
            "loop_wait": 1,
            "retry_timeout": 5,
            # the lag is measured against the last LSN the primary published in etcd, which
            # runs ahead of what it has streamed (WAL inserted but not yet flushed: the batch in
            # flight, a checkpoint, hint bits). At 0 the synchronous standby is "lagging" after
            # almost every crash mid-batch, no member may be promoted, and Patroni restarts the
            # crashed primary in place instead (CI saw no promotion in 120 s). What keeps every
            # acknowledged row is synchronous_mode_strict (a commit returns only once the
            # synchronous standby flushed it; only that standby may be promoted), not this
            # limit: one WAL segment of unacknowledged tail may be left behind.
            "maximum_lag_on_failover": MAXIMUM_LAG_ON_FAILOVER,
            "synchronous_mode": True,
            "synchronous_mode_strict": True,
            "primary_start_timeout": 0,
            "postgresql": {
                "use_pg_rewind": True,
                "use_slots": True,
                "parameters": {
                    "wal_level": "replica",
                    "hot_standby": "on",
                    "wal_log_hints": "on",
                    "max_wal_senders": 10,
                    "max_replication_slots": 10,
                    "synchronous_commit": "on",
                    # the other standby retries its source every 0.5 s (not 5 s): it follows
                    # the new primary, which waits for a synchronous standby, sooner
                    "wal_retrieve_retry_interval": "500ms",
                    **self.settings,
                },
            },
        }

    # -- life ---------------------------------------------------------------------------------

    def start(self, timeout: float = 180) -> None:
        etcd_data = self.root / "etcd"
        etcd_data.mkdir(mode=0o700)
        self.own(etcd_data)
        client = f"http://127.0.0.1:{self.etcd_client.number}"
        peer = f"http://127.0.0.1:{self.etcd_peer.number}"
        self.etcd_process = _Process(
            self,
            [
                self.etcd,
                "--name",
                "etcd1",
                "--data-dir",
                str(etcd_data),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                f"etcd1={peer}",
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                self.root.name,
            ],
            self.root / "etcd.log",
        )
        _wait(self._etcd_healthy, 60, "etcd to answer")
        first, *others = self.nodes
        first.start()
        _wait(lambda: self.leader() is first, timeout, f"{first.name} to bootstrap")
        for node in others:
            node.start()
        _wait(
            lambda: (
                all(n.status().get("state") == "running" for n in self.nodes)
                and self.sync_standby() is not None
            ),
            timeout,
            "every node running and a synchronous standby",
        )

    def _etcd_healthy(self) -> bool:
        if self.etcd_process is not None and self.etcd_process.popen.poll() is not None:
            raise ClusterUnavailable(f"etcd exited: {(self.root / 'etcd.log').read_text()[-2000:]}")
        try:
            url = f"http://127.0.0.1:{self.etcd_client.number}/health"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(json.load(answer).get("health") == "true")
        except (OSError, ValueError):
            return False

    def destroy(self) -> None:
        """Every process stopped (Patroni, then any PostgreSQL left, then etcd), ports and the
        temp dir given back."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()
        if self.etcd_process is not None:
            self.etcd_process.stop()
        for node in self.nodes:
            node.close()
        self.etcd_client.close()
        self.etcd_peer.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the cluster's state ------------------------------------------------------------------

    def cluster_status(self) -> dict[str, Any]:
        for node in self.nodes:
            url = f"http://127.0.0.1:{node.rest_port.number}/cluster"
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(url, timeout=2) as answer,
            ):
                return dict(json.load(answer))
        return {}

    def leader(self) -> PatroniNode | None:
        for node in self.nodes:
            status = node.status()
            if status.get("role") in ("master", "primary") and status.get("state") == "running":
                return node
        return None

    def sync_standby(self) -> PatroniNode | None:
        for member in self.cluster_status().get("members", []):
            if member.get("role") == "sync_standby" and member.get("state") in (
                "running",
                "streaming",
            ):
                return next(n for n in self.nodes if n.name == member["name"])
        return None

    def diagnosis(self, lines: int = 25) -> str:
        """What a failed wait should print: the cluster as Patroni sees it, and the tail of
        each node's Patroni log (why a standby was, or was not, promoted)."""
        parts = [f"cluster: {json.dumps(self.cluster_status(), default=str)[:2000]}"]
        for node in self.nodes:
            log = node.home / "patroni.log"
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError as error:
                tail = [f"(unreadable: {error})"]
            parts.append(f"--- {node.name} {log}:\n" + "\n".join(tail))
        return "\n".join(parts)

    def replicas(self) -> list[PatroniNode]:
        leader = self.leader()
        return [n for n in self.nodes if n is not leader]

    def kill_primary_postmaster(self) -> PatroniNode:
        """kill -9 the primary's postmaster (its backends die with it); returns that node."""
        leader = self.leader()
        if leader is None:
            raise ClusterUnavailable("no primary to kill")
        pid = leader.postmaster_pid()
        if pid is None:
            raise ClusterUnavailable(f"{leader.name}: no postmaster.pid")
        os.kill(pid, signal.SIGKILL)
        return leader

    # -- connecting -----------------------------------------------------------------------------

    def hosts(self) -> tuple[str, str]:
        return (
            ",".join("127.0.0.1" for _ in self.nodes),
            ",".join(str(n.port) for n in self.nodes),
        )

    def table_dsn(self, dbname: str, role: str, attrs: str = "read-write") -> str:
        """A table's DSN over every node: libpq tries each and keeps the one that takes
        writes (`target_session_attrs=read-write`): the primary, whichever node it is."""
        hosts, ports = self.hosts()
        return f"host={hosts} port={ports} user={role} dbname={dbname} target_session_attrs={attrs}"

    def create_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        leader = self.leader()
        if leader is None:
            raise ClusterUnavailable("no primary")
        with psycopg.connect(leader.admin_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
