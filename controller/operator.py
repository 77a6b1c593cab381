"""The operator interface: a local Unix socket speaking JSON lines, for one group only.

The dealer's and supervisor's terminal sends EVENTS.md operator events; each reply carries the
decisions they led to. A client may also ask for the table's public status, or subscribe to
decisions, alarms and state changes as they happen. Access is checked on every connection with
the peer's kernel credentials (SO_PEERCRED: pid, uid, gid; supplementary groups from
/proc/PID/status): the service's own user, root and members of the configured operator group
are served; anyone else gets one refusal line, the connection is closed and the attempt logged.
File permissions on the socket (group-owned, 0660) are a second lock, not the only one.

Wire format (one JSON object per line, UTF-8):
  in:  {"type": "<operator event>", ...fields}    out: {"reply": "decisions", "decisions": [...]}
  in:  {"type": "status"}                         out: {"reply": "status", "status": {...}}
  in:  {"type": "subscribe"}                      out: {"reply": "subscribed"}, then pushed
                                                       {"message": "decision"|"alarm"|"state", ...}
  any problem:                                    out: {"reply": "error", "error": "..."}
  a stranger:                                     out: {"reply": "refused", "error": "..."}
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import socket
import stat
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.logs import get_logger, public_view

# EVENTS.md, "Operator events": the only events accepted on this socket. Device events come
# from drivers alone, so a terminal cannot impersonate the shoe.
OPERATOR_EVENTS = frozenset(
    {
        "deck_received",
        "reader_inspected",
        "bets_closed",
        "starting_position",
        "deal_completed",
        "stub_counted",
        "dealer_changed",
        "bonus_settled",
        "insurance_closed",
        "dealer_turn",
        "dealer_card_exposed",
        "misdeal_reported",
        "hands_collected",
        "reshuffle_requested",
        "device_removed",
        "shuffler_empty_confirmed",
        "supervisor_ack",
    }
)
REQUESTS = frozenset({"status", "subscribe"})
MAX_LINE = 64 * 1024
SUBSCRIBER_BACKLOG = 1024 * 1024  # unread bytes after which a subscriber is dropped
CLOSE_GRACE = 2.0  # seconds connections get to finish when the server closes
REFUSAL_LINGER = 0.5  # seconds a refused peer may take to send its line before we close
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class PeerCredentials:
    """Who is on the other end of a Unix socket, as the kernel says."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int]

    def describe(self) -> str:
        try:
            user = pwd.getpwuid(self.uid).pw_name
        except KeyError:
            user = "?"
        return f"uid {self.uid} ({user}), gid {self.gid}, pid {self.pid}"


EventHandler = Callable[[dict[str, Any], PeerCredentials], Awaitable[list[dict[str, Any]]]]
StatusProvider = Callable[[], Mapping[str, Any]]


class OperatorError(RuntimeError):
    """The operator socket cannot be set up; the message says what and where."""


def supplementary_groups(pid: int, uid: int, gid: int) -> frozenset[int]:
    """The peer process's groups: /proc/PID/status `Groups:`, else the user's group list."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:]) | {gid}
    except OSError:
        pass
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return frozenset({gid})
    return frozenset(os.getgrouplist(name, gid)) | {gid}


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """SO_PEERCRED of a connected Unix socket, with the peer's supplementary groups."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid, uid, gid, supplementary_groups(pid, uid, gid))


def _encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class OperatorServer:
    """The asyncio Unix-socket server; `handle_event` decides, this class only transports."""

    def __init__(
        self,
        socket_path: str | Path,
        *,
        allowed_group: str,
        handle_event: EventHandler,
        status: StatusProvider,
        socket_mode: int = 0o660,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.allowed_group = allowed_group
        self.socket_mode = socket_mode
        self._handle_event = handle_event
        self._status = status
        self._server: asyncio.AbstractServer | None = None
        self._subscribers: set[asyncio.StreamWriter] = set()
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._log = get_logger("operator")
        try:
            self.allowed_gid = grp.getgrnam(allowed_group).gr_gid
        except KeyError:
            raise OperatorError(
                f"operator group {allowed_group!r} does not exist (create it, e.g. with the "
                "sysusers entry, or name another group in [operator] group)"
            ) from None

    def is_allowed(self, peer: PeerCredentials) -> bool:
        """The service's own user, root, or a member of the operator group."""
        return (
            peer.uid in (0, os.geteuid())
            or peer.gid == self.allowed_gid
            or self.allowed_gid in peer.groups
        )

    async def start(self) -> None:
        """Bind the socket (replacing a stale one), set its group and mode, start serving."""
        path = self.socket_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise OperatorError(f"{path}: exists and is not a socket; refusing to replace it")
            path.unlink()
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(path), limit=MAX_LINE
            )
        except OSError as error:
            raise OperatorError(f"{path}: cannot listen: {error.strerror}") from error
        try:
            os.chown(path, -1, self.allowed_gid)
        except PermissionError:
            self._log.warning(
                "operator_socket_group_unchanged", path=str(path), group=self.allowed_group
            )
        os.chmod(path, self.socket_mode)
        self._log.info("operator_listening", path=str(path), group=self.allowed_group)

    async def close(self) -> None:
        """Stop accepting, end every connection, remove the socket file."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # Closing each connection ends its conversation at the next read; a handler that
        # does not finish within the grace period is cancelled.
        for writer in list(self._connections.values()):
            writer.close()
        tasks = list(self._connections)
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=CLOSE_GRACE)
            for task in stuck:
                task.cancel()
            for task in stuck:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def publish(self, message: Mapping[str, Any]) -> None:
        """Push a decision, alarm or state change to every subscribed client.

        Never waits for a client: a terminal that stops reading must not stall the table. One
        whose unread backlog passes SUBSCRIBER_BACKLOG bytes is disconnected (and logged).
        """
        if not self._subscribers:
            return  # nobody to tell: not even the encoding is needed
        data = _encode(message)
        for writer in list(self._subscribers):
            if writer.is_closing():
                self._subscribers.discard(writer)
                continue
            if writer.transport.get_write_buffer_size() > SUBSCRIBER_BACKLOG:
                self._log.warning("operator_subscriber_dropped", reason="not reading")
                self._subscribers.discard(writer)
                writer.close()
                continue
            writer.write(data)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections[task] = writer
        try:
            sock = writer.get_extra_info("socket")
            peer = peer_credentials(sock)
            if not self.is_allowed(peer):
                self._log.warning(
                    "operator_refused",
                    uid=peer.uid,
                    gid=peer.gid,
                    pid=peer.pid,
                    required_group=self.allowed_group,
                )
                writer.write(
                    _encode(
                        {
                            "reply": "refused",
                            "error": f"permission denied: {peer.describe()} is not in the "
                            f"operator group {self.allowed_group!r}",
                        }
                    )
                )
                await writer.drain()
                # Consume what the stranger already sent, so closing does not reset the
                # connection before the refusal line is read; then close.
                with contextlib.suppress(TimeoutError, ValueError):
                    await asyncio.wait_for(reader.read(MAX_LINE), REFUSAL_LINGER)
                return
            self._log.info("operator_connected", uid=peer.uid, pid=peer.pid)
            await self._conversation(reader, writer, peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._subscribers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            if task is not None:
                self._connections.pop(task, None)

    async def _conversation(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: PeerCredentials
    ) -> None:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than MAX_LINE
                writer.write(
                    _encode({"reply": "error", "error": f"line longer than {MAX_LINE} bytes"})
                )
                await writer.drain()
                return
            if not line:
                return
            if not line.strip():
                continue
            reply = await self._answer(line, writer, peer)
            writer.write(_encode(reply))
            await writer.drain()

    async def _answer(
        self, line: bytes, writer: asyncio.StreamWriter, peer: PeerCredentials
    ) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError as error:
            return {"reply": "error", "error": f"not JSON: {error}"}
        if not isinstance(request, dict) or not isinstance(request.get("type"), str):
            return {"reply": "error", "error": 'expected a JSON object with a "type" string'}
        kind = request["type"]
        if kind == "status":
            return {"reply": "status", "status": public_view(self._status())}
        if kind == "subscribe":
            self._subscribers.add(writer)
            return {"reply": "subscribed"}
        if kind not in OPERATOR_EVENTS:
            allowed = ", ".join(sorted(OPERATOR_EVENTS | REQUESTS))
            return {
                "reply": "error",
                "error": f"{kind!r} is not an operator event; allowed: {allowed}",
            }
        self._log.info("operator_event", type=kind, uid=peer.uid)
        try:
            decisions = await self._handle_event(request, peer)
        except Exception as error:  # the daemon must outlive a handler bug; the log has it
            self._log.exception("operator_event_failed", type=kind)
            name = type(error).__name__
            return {"reply": "error", "error": f"the table service failed on {kind!r} ({name})"}
        return {"reply": "decisions", "event": kind, "decisions": decisions}
