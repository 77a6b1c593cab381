"""The client side of the operator socket, standard library only (for `tablectl op`/`status`).

Kept free of the daemon's dependencies so a dealer's terminal needs nothing but Python.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

OPERATOR_SOCKET_TEMPLATE = "/run/tablectl/{table}/operator.sock"
#: The operator socket's protocol. A client's request says the version it speaks
#: (`"protocol": N`), every reply the daemon's; each side refuses the other's when they differ.
#: A `tablectl op`, `status` or `watch` of one release against a daemon of another is the window
#: a package upgrade opens until the table is restarted between rounds. Raise it when a
#: request or reply changes meaning.
OPERATOR_PROTOCOL = 1


def versioned(message: Mapping[str, Any]) -> dict[str, Any]:
    """A request as this client sends it: with the protocol it speaks."""
    return {**message, "protocol": OPERATOR_PROTOCOL}


def check_protocol(socket_path: str | Path, reply: Mapping[str, Any]) -> None:
    """OperatorClientError when the daemon speaks another protocol than this client."""
    spoken = reply.get("protocol")
    if spoken != OPERATOR_PROTOCOL:
        daemon = f"protocol {spoken}" if spoken is not None else "a protocol from before versions"
        raise OperatorClientError(
            f"{socket_path}: the daemon speaks operator {daemon}, this tablectl protocol "
            f"{OPERATOR_PROTOCOL}: a table still running the release before an upgrade (restart "
            "it between rounds: systemctl restart tablectl@TABLE), or a tablectl of another "
            "release; use the one the daemon runs"
        )


class OperatorClientError(RuntimeError):
    """The daemon could not be reached or answered something unusable."""


def default_socket(table: str | None) -> Path:
    """The operator socket of a systemd-installed table, or the only one present."""
    if table:
        return Path(OPERATOR_SOCKET_TEMPLATE.format(table=table))
    found = sorted(Path("/run/tablectl").glob("*/operator.sock"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise OperatorClientError(
            "no operator socket under /run/tablectl: give --socket or --table"
        )
    names = ", ".join(p.parent.name for p in found)
    raise OperatorClientError(f"several tables run here ({names}): give --table")


def request(
    socket_path: str | Path, message: Mapping[str, Any], timeout: float = 5.0
) -> dict[str, Any]:
    """Send one JSON line and return the daemon's one-line reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(socket_path))
        except OSError as error:
            raise OperatorClientError(f"{socket_path}: cannot connect: {error.strerror}") from error
        # A refused peer is closed at once; its refusal line is still there to be read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall((json.dumps(versioned(message)) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise OperatorClientError(f"{socket_path}: no answer within {timeout} s") from None
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return reply_of(socket_path, data)


def reply_of(socket_path: str | Path, data: bytes) -> dict[str, Any]:
    if not data:
        raise OperatorClientError(
            f"{socket_path}: the daemon closed the connection without answering"
        )
    try:
        reply = json.loads(data.splitlines()[0])
    except ValueError as error:
        raise OperatorClientError(f"{socket_path}: unreadable answer: {error}") from error
    if not isinstance(reply, dict):
        raise OperatorClientError(f"{socket_path}: unexpected answer {reply!r}")
    check_protocol(socket_path, reply)
    return reply


def render_decision(decision: Mapping[str, Any]) -> str:
    extras = {
        k: v
        for k, v in decision.items()
        if k not in ("decision", "rule", "rule_id", "at", "reason")
    }
    text = f"{decision.get('decision')} [{decision.get('rule_id')}; {decision.get('rule')}]"
    if extras:
        text += " " + " ".join(f"{k}={v}" for k, v in extras.items())
    if decision.get("reason"):
        text += f": {decision['reason']}"
    return text
