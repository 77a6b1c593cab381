"""The operator interface: a local Unix socket speaking JSON lines, with roles from the kernel.

The dealer's and supervisor's terminal sends operator events (docs/events.md); each reply
carries the decisions they led to. A client may also ask for the table's public status, or
subscribe to decisions, alarms and state changes as they happen.

Who is calling comes from the socket, never from the message: the peer's kernel credentials
(SO_PEERCRED: pid, uid, gid; supplementary groups from /proc/PID/status). Members of the
operator group are dealers, members of the supervisor group supervisors (who may also do what
a dealer does); root and the service's own user may act as both, and the journal says so.
Each event has the role docs/operations.md lists (`events.EVENT_TYPES[...].role`); a caller
without it is refused, and the refusal is journaled with the caller. `by` is the caller's user
name (a different one is refused), and every accepted event carries a `caller` record.

The socket holds under abuse (limits in `config.OperatorLimits`, docs/operations.md): lines
over 64 KiB close the connection; every field is checked against the strict schema; a request
line must arrive within the idle timeout; connections are bounded per caller and in all, with
room kept for root; operator events and other requests are rate-limited per caller; malformed
JSON of any kind gets an error reply. An event's optional client `id` makes it idempotent: a
retry is answered with the first answer, not applied twice (also across a restart: the
daemon seeds the answers from the journal).

Wire format (one JSON object per line, UTF-8; a request may say `"protocol": N`, the version
its client speaks, and a different one is refused; every reply says the daemon's, `"protocol":
OPERATOR_PROTOCOL`, which tablectl's clients check):
  in:  {"type": "<operator event>", ...fields}    out: {"reply": "decisions", "decisions": [...]}
  in:  {"type": "status"}                         out: {"reply": "status", "status": {...}}
  in:  {"type": "subscribe"}                      out: {"reply": "subscribed"}, then pushed
                                                       {"message": "decision"|"alarm"|"state", ...}
  any problem:                                    out: {"reply": "error", "error": "..."}
  a stranger, a missing role, a limit:            out: {"reply": "refused", "error": "..."}
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import resource
import socket
import stat
import struct
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import OperatorLimits
from tablectl.controller.common.logs import get_logger, public_view
from tablectl.controller.engine.events import (
    EVENT_TYPES,
    MAX_LINE,
    EventError,
    parse_json_object,
    validate,
)
from tablectl.controller.service.operator_client import OPERATOR_PROTOCOL

REQUESTS = frozenset({"status", "subscribe"})
SUBSCRIBER_BACKLOG = 1024 * 1024  # unread bytes after which a subscriber is dropped
CLOSE_GRACE = 0.5  # seconds connections get to finish when the server closes (stop is bounded)
REFUSAL_LINGER = 0.5  # seconds a refused peer may take to send its line before we close
LISTEN_BACKLOG = 128  # pending connections the kernel queues (asyncio accepts this many at once)
REMEMBERED_IDS = 4096  # client ids whose answers are kept for retries
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# The fields that make two events with the same client id the same event.
_NOT_CONTENT = frozenset({"id", "caller", "time"})


class NotDealing(RuntimeError):
    """The table has stopped dealing (fail-stop); the message says why. No event is taken."""


def socket_in_use(path: str | os.PathLike[str]) -> bool:
    """Something accepts connections on this Unix socket now (a stale one refuses them)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(os.fspath(path))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class PeerCredentials:
    """Who is on the other end of a Unix socket, as the kernel says."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int]

    @property
    def user(self) -> str:
        """The uid's user name (`uid1234` for a uid without one)."""
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return f"uid{self.uid}"

    def describe(self) -> str:
        return f"uid {self.uid} ({self.user}), gid {self.gid}, pid {self.pid}"


EventHandler = Callable[[dict[str, Any], PeerCredentials], Awaitable[list[dict[str, Any]]]]
StatusProvider = Callable[[], Mapping[str, Any]]
# Told of every refused operator event (a missing role, another `by`): the journal keeps it.
RefusalRecorder = Callable[[dict[str, Any]], Awaitable[None]]


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


def peer_ids(sock: socket.socket) -> tuple[int, int, int]:
    """SO_PEERCRED of a connected Unix socket: pid, uid, gid (cheap: no file is read)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """SO_PEERCRED of a connected Unix socket, with the peer's supplementary groups."""
    pid, uid, gid = peer_ids(sock)
    return PeerCredentials(pid, uid, gid, supplementary_groups(pid, uid, gid))


def _encode(message: Mapping[str, Any]) -> bytes:
    """A line out; a reply says the protocol the daemon speaks (OPERATOR_PROTOCOL)."""
    if "reply" in message:
        message = {**message, "protocol": OPERATOR_PROTOCOL}
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def _group_id(name: str, key: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise OperatorError(
            f"{key.split('.')[-1].replace('_', ' ')} {name!r} does not exist (create it, e.g. "
            f"with the sysusers entry, or name another group in [operator] {key.split('.')[-1]})"
        ) from None


async def _linger(reader: asyncio.StreamReader) -> None:
    """Consume what the peer is still sending, for at most REFUSAL_LINGER seconds, so that
    closing does not reset the connection before it has read our last line."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REFUSAL_LINGER
    with contextlib.suppress(TimeoutError, ValueError, ConnectionError):
        async with asyncio.timeout_at(deadline):  # not wait_for (gh-86296)
            while await reader.read(MAX_LINE):
                pass


def stamp_in_process(event: Mapping[str, Any]) -> dict[str, Any]:
    """An operator event from inside the daemon's process (the demo's dealer, tests): it acts
    as the service user, and is journaled so, like any event from the socket."""
    stamped = dict(event)
    spec = EVENT_TYPES.get(str(stamped.get("type")))
    if spec is None or spec.source != "operator" or "caller" in stamped:
        return stamped  # the engine refuses what is wrong with it
    user = PeerCredentials(os.getpid(), os.geteuid(), os.getegid(), frozenset()).user
    for field in spec.fields:
        if field.from_caller:
            stamped.setdefault(field.name, user)
    role = spec.role or "supervisor"
    stamped["caller"] = {
        "uid": os.geteuid(),
        "user": user,
        "role": role,
        "granted_by": "service user",
    }
    return stamped


def _content(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in _NOT_CONTENT}


def answers_from_journal(
    rows: Iterable[Any],
) -> OrderedDict[tuple[int, str], tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(uid, client id) -> (the event's content, its decisions), for the ids in a journal.

    `rows` are journal rows (kind, seq, body); the decisions of an event follow its row.
    """
    answers: OrderedDict[tuple[int, str], tuple[dict[str, Any], list[dict[str, Any]]]]
    answers = OrderedDict()
    current: list[dict[str, Any]] | None = None
    for row in rows:
        if row.kind == "event":
            current = None
            caller, client_id = row.body.get("caller"), row.body.get("id")
            if isinstance(caller, Mapping) and isinstance(client_id, str):
                current = []
                answers[(int(caller["uid"]), client_id)] = (_content(row.body), current)
                while len(answers) > REMEMBERED_IDS:
                    answers.popitem(last=False)
        elif row.kind == "decision" and current is not None:
            current.append(row.body)
    return answers


class TokenBucket:
    """`rate` tokens a second up to `burst`; take() says whether one was there."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def wait(self) -> float:
        """Seconds until the next token."""
        return max(0.0, (1 - self.tokens) / self.rate)


class Refused(Exception):
    """A request refused for who sent it or how often; the reply is `refused`."""


class OperatorServer:
    """The asyncio Unix-socket server: who may do what, and the limits; `handle_event` decides."""

    def __init__(
        self,
        socket_path: str | Path,
        *,
        allowed_group: str,
        handle_event: EventHandler,
        status: StatusProvider,
        supervisor_group: str | None = None,
        limits: OperatorLimits | None = None,
        record_refusal: RefusalRecorder | None = None,
        socket_mode: int = 0o660,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.allowed_group = allowed_group
        self.supervisor_group = supervisor_group or allowed_group
        self.socket_mode = socket_mode
        self.limits = limits or OperatorLimits()
        self._handle_event = handle_event
        self._status = status
        self._record_refusal = record_refusal
        self._server: asyncio.AbstractServer | None = None
        self._bound: tuple[int, int] | None = None  # (st_dev, st_ino) of the socket we bound
        self._subscribers: set[asyncio.StreamWriter] = set()
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._per_uid: dict[int, int] = {}
        self._open_unprivileged = 0
        self._event_buckets: dict[int, TokenBucket] = {}
        self._request_buckets: dict[int, TokenBucket] = {}
        self._answers: OrderedDict[tuple[int, str], tuple[dict[str, Any], list[dict[str, Any]]]]
        self._answers = OrderedDict()
        self._in_flight: dict[tuple[int, str], asyncio.Future[list[dict[str, Any]]]] = {}
        self._warned: dict[tuple[int, str], float] = {}
        self._log = get_logger("operator")
        self.allowed_gid = _group_id(allowed_group, "operator.group")
        self.supervisor_gid = _group_id(self.supervisor_group, "operator.supervisor_group")

    # -- who may do what ----------------------------------------------------------------------

    def is_privileged(self, peer: PeerCredentials) -> bool:
        """Root and the service's own user: both roles, and room kept for their connections."""
        return peer.uid in (0, os.geteuid())

    def is_allowed(self, peer: PeerCredentials) -> bool:
        """Root, the service's own user, or a member of the operator or supervisor group."""
        return self.is_privileged(peer) or bool(
            {peer.gid, *peer.groups} & {self.allowed_gid, self.supervisor_gid}
        )

    def grant(self, peer: PeerCredentials, role: str) -> str | None:
        """How the caller holds `role` ("root", "service user", "group NAME"), or None."""
        if peer.uid == 0:
            return "root"
        if peer.uid == os.geteuid():
            return "service user"
        groups = {peer.gid, *peer.groups}
        if self.supervisor_gid in groups:
            return f"group {self.supervisor_group}"
        if role == "dealer" and self.allowed_gid in groups:
            return f"group {self.allowed_group}"
        return None

    def remember(self, rows: Iterable[Any]) -> None:
        """Seed the answers to client ids from the journal, so a retry after a restart is
        answered and not applied twice."""
        self._answers = answers_from_journal(rows)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the socket (replacing a stale one), set its group and mode, start serving."""
        path = self.socket_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise OperatorError(f"{path}: exists and is not a socket; refusing to replace it")
            if socket_in_use(path):
                # Another daemon (a copied configuration) serves it: never take it over.
                raise OperatorError(
                    f"{path}: another process accepts connections on it; refusing to replace it"
                )
            path.unlink()  # stale: left by a process that died
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(path), limit=MAX_LINE, backlog=LISTEN_BACKLOG
            )
        except OSError as error:
            raise OperatorError(f"{path}: cannot listen: {error.strerror}") from error
        bound = path.lstat()
        self._bound = (bound.st_dev, bound.st_ino)
        try:
            if bound.st_gid != self.allowed_gid:
                os.chown(path, -1, self.allowed_gid)
        except OSError as error:
            # A socket left with the service's own group admits root alone: no dealer or
            # supervisor could reach the table, so the daemon does not start that way.
            await self.close()
            raise OperatorError(
                f"{path}: cannot give the operator socket to group {self.allowed_group!r} "
                f"(operator.group): chown: {error.strerror}; dealers and supervisors could not "
                "connect. The daemon's user must be a member of that group, and a systemd unit "
                "must allow chown (tablectl@.service: SystemCallFilter=@chown)"
            ) from error
        os.chmod(path, self.socket_mode)
        self._check_descriptors()
        self._log.info(
            "operator_listening",
            path=str(path),
            group=self.allowed_group,
            supervisor_group=self.supervisor_group,
        )

    def descriptors_needed(self) -> int:
        """File descriptors the socket may hold at once: every connection, one accept burst."""
        limits = self.limits
        return limits.max_connections + limits.privileged_connections + 2 * LISTEN_BACKLOG

    def _check_descriptors(self) -> None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        needed = self.descriptors_needed() + 64  # the journal, devices, metrics, Python
        if soft != resource.RLIM_INFINITY and soft < needed:
            self._log.warning(
                "operator_limits_exceed_nofile",
                nofile=soft,
                needed=needed,
                hint="raise LimitNOFILE or lower [operator] max_connections",
            )

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
        # Only our own socket file: one bound at this path since (by whoever) is left alone.
        with contextlib.suppress(FileNotFoundError):
            now = self.socket_path.lstat()
            if self._bound == (now.st_dev, now.st_ino):
                self.socket_path.unlink()
        self._bound = None

    def has_subscribers(self) -> bool:
        """Whether any client reads the pushes (the service skips state nobody would read)."""
        return bool(self._subscribers)

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

    # -- one connection -----------------------------------------------------------------------

    def _over_connection_limit(self, peer: PeerCredentials) -> str | None:
        limits = self.limits
        mine = self._per_uid.get(peer.uid, 0)
        if self.is_privileged(peer):
            if mine >= limits.privileged_connections:
                return (
                    f"uid {peer.uid} has {mine} connections open "
                    f"(at most {limits.privileged_connections})"
                )
            return None
        if mine >= limits.max_connections_per_caller:
            return (
                f"uid {peer.uid} has {mine} connections open "
                f"(at most {limits.max_connections_per_caller} per caller)"
            )
        if self._open_unprivileged >= limits.max_connections:
            return f"{self._open_unprivileged} connections open (at most {limits.max_connections})"
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        counted: PeerCredentials | None = None
        try:
            sock = writer.get_extra_info("socket")
            # The limit is checked on the uid alone, before /proc is read for the groups:
            # a flood of connections costs the daemon as little as possible.
            pid, uid, gid = peer_ids(sock)
            over = self._over_connection_limit(PeerCredentials(pid, uid, gid, frozenset()))
            if over is not None:
                # Refused before anything is read or kept: answered, closed, never counted.
                self._warn_once(uid, "operator_connection_refused", reason=over)
                writer.write(
                    _encode({"reply": "refused", "error": f"too many connections: {over}"})
                )
                return
            peer = PeerCredentials(pid, uid, gid, supplementary_groups(pid, uid, gid))
            counted = peer
            self._per_uid[peer.uid] = self._per_uid.get(peer.uid, 0) + 1
            if not self.is_privileged(peer):
                self._open_unprivileged += 1
            if task is not None:
                self._connections[task] = writer
            if not self.is_allowed(peer):
                self._log.warning(
                    "operator_refused",
                    uid=peer.uid,
                    gid=peer.gid,
                    pid=peer.pid,
                    required_group=self.allowed_group,
                )
                groups = f"{self.allowed_group!r} or {self.supervisor_group!r}"
                if self.supervisor_group == self.allowed_group:
                    groups = repr(self.allowed_group)
                writer.write(
                    _encode(
                        {
                            "reply": "refused",
                            "error": f"permission denied: {peer.describe()} is not in the "
                            f"operator group {groups}",
                        }
                    )
                )
                await writer.drain()
                await _linger(reader)
                return
            self._log.debug("operator_connected", uid=peer.uid, pid=peer.pid)
            await self._conversation(reader, writer, peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if counted is not None:
                left = self._per_uid.get(counted.uid, 1) - 1
                if left:
                    self._per_uid[counted.uid] = left
                else:
                    self._per_uid.pop(counted.uid, None)
                if not self.is_privileged(counted):
                    self._open_unprivileged -= 1
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
                if writer in self._subscribers or self.is_privileged(peer):
                    # a subscriber listens, it need not speak; root's and the service user's
                    # connections come out of their own room, not the others'
                    line = await reader.readline()
                else:
                    line = await asyncio.wait_for(reader.readline(), self.limits.idle_timeout)
            except TimeoutError:
                writer.write(
                    _encode(
                        {
                            "reply": "error",
                            "error": f"no complete request within {self.limits.idle_timeout:g} s"
                            "; closing",
                        }
                    )
                )
                await writer.drain()
                return
            except ValueError:  # longer than MAX_LINE
                writer.write(
                    _encode(
                        {"reply": "error", "error": f"line longer than {MAX_LINE} bytes; closing"}
                    )
                )
                await writer.drain()
                await _linger(reader)
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                reply = await self._answer(line, writer, peer)
            except Refused as refused:
                reply = {"reply": "refused", "error": str(refused)}
            except NotDealing as stopped:  # the refusal itself could not be journaled
                reply = {"reply": "error", "error": str(stopped)}
            close = reply.pop("close", False)
            writer.write(_encode(reply))
            await writer.drain()
            if close:
                return

    def _bucket(
        self, buckets: dict[int, TokenBucket], uid: int, rate: float, burst: int
    ) -> TokenBucket:
        bucket = buckets.get(uid)
        if bucket is None:
            bucket = buckets[uid] = TokenBucket(rate, burst)
        return bucket

    def _warn_once(self, uid: int, what: str, **fields: Any) -> None:
        """A warning per caller and kind of abuse per minute, not one per line of a flood."""
        key = (uid, what)
        now = time.monotonic()
        last = self._warned.get(key)
        if last is None or now - last > 60:
            self._warned[key] = now
            self._log.warning(what, uid=uid, **fields)

    async def _answer(
        self, line: bytes, writer: asyncio.StreamWriter, peer: PeerCredentials
    ) -> dict[str, Any]:
        limits = self.limits
        try:
            request = parse_json_object(line)
        except EventError as error:
            request = None
            problem = str(error)
        kind = request.get("type") if request is not None else None
        # Every line counts (a flood of bad lines costs replies); events also count below.
        # Root and the service user are not limited: they own the journal and the daemon.
        privileged = self.is_privileged(peer)
        requests = self._bucket(
            self._request_buckets, peer.uid, limits.requests_per_second, limits.request_burst
        )
        if not privileged and not requests.take():
            self._warn_once(peer.uid, "operator_requests_limited")
            return {
                "reply": "refused",
                "error": f"more than {limits.requests_per_second:g} requests a second; closing",
                "close": True,
            }
        if request is None:
            return {"reply": "error", "error": problem}
        spoken = request.pop("protocol", None)  # absent: a client of its own (socat, a script)
        if spoken is not None and spoken != OPERATOR_PROTOCOL:
            return {
                "reply": "error",
                "error": f"this daemon speaks operator protocol {OPERATOR_PROTOCOL}, the client "
                f"{spoken!r}: use the tablectl of the release the daemon runs, or restart the "
                "table between rounds to run the installed one",
            }
        if not isinstance(kind, str):
            return {"reply": "error", "error": 'expected a JSON object with a "type" string'}
        if kind in REQUESTS:
            if len(request) > 1:
                extra = sorted(k for k in request if k != "type")[0]
                return {"reply": "error", "error": f"{extra[:40]}: {kind} takes no fields"}
            if kind == "status":
                return {"reply": "status", "status": public_view(self._status())}
            self._subscribers.add(writer)
            return {"reply": "subscribed"}
        try:
            event = validate(request, client=True)
        except EventError as error:
            return {"reply": "error", "error": str(error)}
        # Only a well-formed event reaches the table (and the journal): it is what is limited.
        bucket = self._bucket(
            self._event_buckets, peer.uid, limits.events_per_second, limits.event_burst
        )
        if not privileged and not bucket.take():
            self._warn_once(peer.uid, "operator_events_limited")
            raise Refused(
                f"rate limit: at most {limits.events_per_second:g} operator events a second "
                f"(burst {limits.event_burst}) per caller; retry in {bucket.wait():.1f} s"
            )
        event = await self._authorize(event, peer)
        client_id = event.get("id")
        if client_id is None:
            return await self._apply(event, peer)
        return await self._apply_once(event, peer, (peer.uid, client_id))

    async def _authorize(self, event: dict[str, Any], peer: PeerCredentials) -> dict[str, Any]:
        """The event with `by` and `caller` from the socket; Refused (journaled) if not allowed."""
        spec = EVENT_TYPES[event["type"]]
        role = spec.role or "supervisor"
        granted = self.grant(peer, role)
        user = peer.user
        problem = None
        if granted is None:
            problem = (
                f"{event['type']} needs a {role} (group {self.supervisor_group!r}); "
                f"{peer.describe()} is not one"
            )
        for field in spec.fields:
            if field.from_caller:
                given = event.get(field.name)
                if given is not None and given != user and problem is None:
                    problem = (
                        f"{field.name}: {given!r} is not the caller; the socket says "
                        f"{user!r} (leave {field.name} out, it is filled in)"
                    )
                event[field.name] = user
        caller = {"uid": peer.uid, "user": user, "role": role, "granted_by": granted or "none"}
        if problem is not None:
            self._log.warning("operator_event_refused", type=event["type"], uid=peer.uid)
            if self._record_refusal is not None:
                await self._record_refusal(
                    {"event": event, "caller": caller, "pid": peer.pid, "reason": problem}
                )
            raise Refused(problem)
        event["caller"] = caller
        return event

    async def _apply(self, event: dict[str, Any], peer: PeerCredentials) -> dict[str, Any]:
        kind = event["type"]
        self._log.info("operator_event", type=kind, uid=peer.uid, user=event["caller"]["user"])
        try:
            decisions = await self._handle_event(event, peer)
        except NotDealing as refused:
            return {"reply": "error", "error": str(refused)}
        except Exception as error:  # the daemon must outlive a handler bug; the log has it
            self._log.exception("operator_event_failed", type=kind)
            name = type(error).__name__
            return {"reply": "error", "error": f"the table service failed on {kind!r} ({name})"}
        return {"reply": "decisions", "event": kind, "decisions": decisions}

    async def _apply_once(
        self, event: dict[str, Any], peer: PeerCredentials, key: tuple[int, str]
    ) -> dict[str, Any]:
        """Apply an event with a client id once; a retry gets the first answer."""
        while key in self._in_flight:  # the first try is still being decided
            with contextlib.suppress(Exception):
                await asyncio.shield(self._in_flight[key])
        known = self._answers.get(key)
        if known is not None:
            content, decisions = known
            if content != _content(event):
                return {
                    "reply": "error",
                    "error": f"id: {key[1]!r} was already used for another event; use a new id",
                }
            kind = event["type"]
            return {"reply": "decisions", "event": kind, "decisions": decisions, "repeated": True}
        future: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            reply = await self._apply(event, peer)
            if reply["reply"] == "decisions":
                self._answers[key] = (_content(event), reply["decisions"])
                while len(self._answers) > REMEMBERED_IDS:
                    self._answers.popitem(last=False)
            return reply
        finally:
            del self._in_flight[key]
            future.set_result([])
