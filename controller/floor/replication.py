"""Whether the floor's acknowledgement means two machines: the primary's synchronous standby.

A shipper's batch is acknowledged when its COPY commits. On a floor with a synchronous standby
(`synchronous_standby_names`, set by Patroni in `synchronous_mode`) and `synchronous_commit`
`on` or `remote_apply`, that commit returns only once the standby has flushed the batch's WAL:
every acknowledged row is then on two machines' disks, and Patroni promotes only that standby
(docs/floor.md, "A replicated floor"). `remote_write` (the standby's OS has it, not its disk)
and `off`/`local` do not count. `tablectl floor init` prints this and, with
`--require-sync-standby`, refuses a floor without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: synchronous_commit levels at which a commit waits for the standby's disk
DURABLE_COMMIT_LEVELS = ("on", "remote_apply")


@dataclass(frozen=True)
class ReplicationState:
    """The connected server's replication, as the floor's acknowledgement depends on it."""

    in_recovery: bool
    synchronous_commit: str
    synchronous_standby_names: str
    #: (application_name, sync_state, flush_lsn) of each standby the primary waits for
    sync_standbys: tuple[tuple[str, str, str], ...]
    #: streaming standbys the primary does not wait for
    async_standbys: tuple[str, ...]
    #: False when this login may not see pg_stat_replication's details (pg_monitor)
    visible: bool = True

    @property
    def two_machines(self) -> bool:
        """Every commit acknowledged now is on a synchronous standby's disk as well."""
        return (
            not self.in_recovery
            and bool(self.sync_standbys)
            and self.synchronous_commit in DURABLE_COMMIT_LEVELS
        )

    def describe(self) -> str:
        if self.in_recovery:
            return "a standby (read-only): tables ship to the primary"
        if self.two_machines:
            names = ", ".join(f"{n} (flushed to {lsn})" for n, _, lsn in self.sync_standbys)
            extra = (
                f"; asynchronous: {', '.join(self.async_standbys)}" if self.async_standbys else ""
            )
            return (
                f"synchronous standby {names}, synchronous_commit={self.synchronous_commit}: "
                f"a row acknowledged to a table is on two machines{extra}"
            )
        if not self.visible:
            return (
                "cannot see the standbys (grant pg_monitor to this role): whether an "
                "acknowledged row is on two machines is unknown"
            )
        if self.sync_standbys:
            return (
                f"a synchronous standby, but synchronous_commit={self.synchronous_commit}: a "
                "commit does not wait for the standby's disk; an acknowledged row may be on "
                "this server alone"
            )
        names = self.synchronous_standby_names or "empty"
        streaming = (
            f"; streaming asynchronously to {', '.join(self.async_standbys)} (rows may trail)"
            if self.async_standbys
            else ""
        )
        return (
            f"no synchronous standby (synchronous_standby_names is {names}): an acknowledged "
            f"row is on this server alone{streaming} (docs/floor.md, a replicated floor)"
        )


def replication_state(conn: Any) -> ReplicationState:
    in_recovery = bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])
    commit = str(conn.execute("SHOW synchronous_commit").fetchone()[0])
    names = str(conn.execute("SHOW synchronous_standby_names").fetchone()[0])
    rows = conn.execute(
        "SELECT application_name, sync_state, flush_lsn::text, state"
        " FROM pg_stat_replication ORDER BY application_name"
    ).fetchall()
    visible = all(r[3] is not None for r in rows)
    sync = tuple(
        (str(n), str(s), str(lsn))
        for n, s, lsn, state in rows
        if s in ("sync", "quorum") and state == "streaming"
    )
    others = tuple(str(n) for n, s, _, state in rows if s == "async" and state == "streaming")
    return ReplicationState(in_recovery, commit, names, sync, others, visible)
