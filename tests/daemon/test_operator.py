"""The operator socket: JSON lines, SO_PEERCRED group check, op/status clients, no card out."""

from __future__ import annotations

import argparse
import asyncio
import grp
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tablectl.controller.commands import cli, op
from tablectl.controller.common import logs
from tablectl.controller.engine.events import EVENT_TYPES
from tablectl.controller.service.operator import (
    OperatorError,
    OperatorServer,
    PeerCredentials,
    peer_credentials,
    supplementary_groups,
)
from tablectl.controller.service.operator_client import request

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"


def root_as(role: str) -> dict[str, Any]:
    """The caller record of root (these tests run as root) acting in `role`."""
    return {"uid": 0, "user": "root", "role": role, "granted_by": "root"}


def a_group_nobody_is_not_in() -> grp.struct_group:
    for group in grp.getgrall():
        if group.gr_gid not in (0, NOBODY) and "nobody" not in group.gr_mem:
            return group
    raise AssertionError("no spare group on this machine")


class RunningServer:
    """An OperatorServer on its own event loop thread, like the daemon's loop."""

    def __init__(self, path: Path, group: str, socket_mode: int) -> None:
        self.events: list[tuple[dict[str, Any], PeerCredentials]] = []
        self.status: dict[str, Any] = {
            "state": "dealing",
            "round": 3,
            "decks": {"A": {"rounds": 2}},
        }
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = OperatorServer(
            path,
            allowed_group=group,
            handle_event=self.handle,
            status=lambda: self.status,
            socket_mode=socket_mode,
        )
        self.call(self.server.start())

    async def handle(self, event: dict[str, Any], peer: PeerCredentials) -> list[dict[str, Any]]:
        self.events.append((event, peer))
        if event["type"] == "reshuffle_requested":
            raise RuntimeError("boom As")
        if event["type"] == "bets_closed" and len(event.get("positions", [])) > 7:
            return [
                {
                    "decision": "rejected",
                    "rule_id": "C11",
                    "rule": "40.7",
                    "at": 1,
                    "reason": "too many positions",
                    "error": "positions: at most 7",
                }
            ]
        return [
            {
                "decision": "continue_play",
                "rule_id": "C3",
                "rule": "40.12(c)",
                "at": 1,
                "reason": "play continues",
            }
        ]

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=5)

    def stop(self) -> None:
        self.call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure_logging("debug", mode="json", stream=stream)
    yield stream
    structlog.reset_defaults()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tablectl-op-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def server(shared_dir, log_stream) -> Iterator[RunningServer]:
    running = RunningServer(shared_dir / "operator.sock", a_group_nobody_is_not_in().gr_name, 0o666)
    yield running
    running.stop()


def test_operator_event_reaches_the_handler_and_decisions_come_back(server):
    reply = request(server.server.socket_path, {"type": "bets_closed", "positions": [1, 2]})
    assert reply["reply"] == "decisions"
    assert reply["decisions"][0]["decision"] == "continue_play"
    ((event, peer),) = server.events
    assert event == {"type": "bets_closed", "positions": [1, 2], "caller": root_as("dealer")}
    assert (peer.pid, peer.uid) == (os.getpid(), os.getuid())


def test_device_events_are_refused_on_the_operator_socket(server):
    reply = request(server.server.socket_path, {"type": "card_drawn", "card": "As"})
    assert reply["reply"] == "error"
    assert "'card_drawn' is a device event; a terminal sends operator events only" in reply["error"]
    assert "bets_closed" in reply["error"]
    assert server.events == []


def test_garbage_lines_get_an_error_and_the_connection_lives_on(server):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(server.server.socket_path))
        stream = sock.makefile("rwb")
        for line in (b"{not json\n", b"[1, 2]\n", b'{"type": "dealer_changed"}\n'):
            stream.write(line)
            stream.flush()
            replies = json.loads(stream.readline())
            if line.startswith(b'{"type"'):
                assert replies["reply"] == "decisions"
            else:
                assert replies["reply"] == "error"


def test_a_failing_handler_is_an_error_reply_without_its_message(server, log_stream):
    reply = request(server.server.socket_path, {"type": "reshuffle_requested"})
    assert reply == {
        "reply": "error",
        "error": "the table service failed on 'reshuffle_requested' (RuntimeError)",
        "protocol": 1,
    }
    assert "operator_event_failed" in log_stream.getvalue()
    # the server still serves
    assert request(server.server.socket_path, {"type": "status"})["reply"] == "status"


def test_status_never_carries_a_card_even_if_the_provider_leaks_one(server):
    server.status["hole_card"] = "Qs"
    server.status["dealer"] = {"up": "Kd", "cards": ["Kd", "Qs"]}
    reply = request(server.server.socket_path, {"type": "status"})
    assert "Qs" not in json.dumps(reply) and "Kd" not in json.dumps(reply)
    assert reply["status"]["round"] == 3


def test_subscribers_receive_published_messages(server):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(server.server.socket_path))
        stream = sock.makefile("rwb")
        stream.write(b'{"type": "subscribe"}\n')
        stream.flush()
        assert json.loads(stream.readline()) == {"reply": "subscribed", "protocol": 1}
        server.call(server.server.publish({"message": "alarm", "decision": "notify_supervisor"}))
        assert json.loads(stream.readline())["message"] == "alarm"


def test_op_cli_sends_fields_and_prints_decisions(server, capsys):
    path = str(server.server.socket_path)
    assert (
        cli.main(
            ["op", "--socket", path, "stub_counted", "--count", "47", "--hand_counts", '{"1": 5}']
        )
        == 0
    )
    assert "continue_play [C3; 40.12(c)]" in capsys.readouterr().out
    assert server.events[-1][0] == {
        "type": "stub_counted",
        "count": 47,
        "hand_counts": {"1": 5},
        "caller": root_as("dealer"),
    }
    assert cli.main(["op", "--socket", path, "bets_closed", "--positions", "1,2,3,4,5,6,7,8"]) == 1
    assert "rejected" in capsys.readouterr().out


def test_status_cli_renders_the_public_status(server, capsys):
    assert cli.main(["status", "--socket", str(server.server.socket_path)]) == 0
    out = capsys.readouterr().out
    assert "round 3, dealing" in out and "  A: " in out
    assert cli.main(["status", "--json", "--socket", str(server.server.socket_path)]) == 0
    assert json.loads(capsys.readouterr().out) == server.status


def test_clients_report_an_absent_daemon(tmp_path, capsys):
    assert cli.main(["status", "--socket", str(tmp_path / "none.sock")]) == 2
    assert "cannot connect" in capsys.readouterr().err


def test_socket_mode_and_group(shared_dir, log_stream):
    group = a_group_nobody_is_not_in()
    running = RunningServer(shared_dir / "op.sock", group.gr_name, 0o660)
    try:
        info = (shared_dir / "op.sock").stat()
        assert stat.S_IMODE(info.st_mode) == 0o660
        assert info.st_gid == group.gr_gid
    finally:
        running.stop()
    assert not (shared_dir / "op.sock").exists()


SERVE_AS_NOBODY = """
import asyncio, sys
from tablectl.controller.service.operator import OperatorError, OperatorServer

async def handle(event, peer):
    return []

server = OperatorServer(sys.argv[1], allowed_group=sys.argv[2], handle_event=handle, status=dict)
try:
    asyncio.run(server.start())
except OperatorError as error:
    print(error)
    sys.exit(2)
print("started with the socket left to the service's own group")
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="serving as another user needs root and a system python",
)
def test_a_socket_the_daemon_cannot_hand_to_the_operator_group_stops_the_start(shared_dir):
    """The service user cannot chown its socket to the operator group (not a member, or a
    seccomp filter without @chown, issue 34): only root could talk to the table, so the start
    fails, saying why and what the unit needs, and the socket is not left behind."""
    group = a_group_nobody_is_not_in()
    state = shared_dir / "run"
    state.mkdir()
    os.chown(state, NOBODY, NOBODY)
    site = next((REPO / ".venv" / "lib").glob("python3.11/site-packages"))
    done = subprocess.run(
        [SYSTEM_PYTHON, "-c", SERVE_AS_NOBODY, str(state / "operator.sock"), group.gr_name],
        user=NOBODY, group=NOBODY, extra_groups=[],
        env={"PYTHONPATH": f"{REPO / '.src'}:{site}", "PATH": "/usr/bin:/bin"},
        cwd="/", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"{state / 'operator.sock'}: cannot give the operator socket to group "
        f"{group.gr_name!r} (operator.group): chown: Operation not permitted"
    ) in done.stdout
    assert "SystemCallFilter=@chown" in done.stdout
    assert not (state / "operator.sock").exists()


def test_unknown_group_is_a_clear_error(tmp_path):
    async def handler(event: dict[str, Any], peer: PeerCredentials) -> list[dict[str, Any]]:
        return []

    with pytest.raises(OperatorError, match="'no-such-group-x' does not exist"):
        OperatorServer(
            tmp_path / "s", allowed_group="no-such-group-x", handle_event=handler, status=dict
        )


def test_a_regular_file_in_the_way_is_not_replaced(tmp_path):
    async def handler(event: dict[str, Any], peer: PeerCredentials) -> list[dict[str, Any]]:
        return []

    (tmp_path / "s").write_text("precious")
    server = OperatorServer(tmp_path / "s", allowed_group="root", handle_event=handler, status=dict)
    with pytest.raises(OperatorError, match="is not a socket"):
        asyncio.run(server.start())
    assert (tmp_path / "s").read_text() == "precious"


def test_peer_credentials_of_a_socketpair():
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        peer = peer_credentials(left)
    assert (peer.pid, peer.uid, peer.gid) == (os.getpid(), os.getuid(), os.getgid())
    assert set(os.getgroups()) <= peer.groups


def test_supplementary_groups_fall_back_to_the_group_database():
    groups = supplementary_groups(pid=2**22 + 12345, uid=0, gid=0)  # no such process
    assert 0 in groups


def test_membership_rule():
    group = a_group_nobody_is_not_in()

    async def handler(event: dict[str, Any], peer: PeerCredentials) -> list[dict[str, Any]]:
        return []

    server = OperatorServer(
        "/nonexistent/s", allowed_group=group.gr_name, handle_event=handler, status=dict
    )
    assert server.is_allowed(PeerCredentials(1, NOBODY, NOBODY, frozenset({NOBODY, group.gr_gid})))
    assert server.is_allowed(PeerCredentials(1, NOBODY, group.gr_gid, frozenset()))
    assert server.is_allowed(PeerCredentials(1, 0, 0, frozenset()))
    assert not server.is_allowed(PeerCredentials(1, NOBODY, NOBODY, frozenset({NOBODY})))


def test_op_reads_each_field_as_its_type_says():
    def fields(event: str, *tokens: str) -> dict[str, Any]:
        args = argparse.Namespace(event=event, socket=None, table=None, timeout=5.0, json=False)
        return op.split_arguments(args, tokens)[0]

    assert fields("bets_closed", "--positions", "1,2,4") == {"positions": [1, 2, 4]}
    assert fields("bets_closed", "--positions", "[3]") == {"positions": [3]}
    assert fields("supervisor_ack", "--by=123") == {"by": "123"}  # a user name stays text
    assert fields("stub_counted", "--count", "47", "--hand-counts", '{"1": 5}') == {
        "count": 47,
        "hand_counts": {"1": 5},
    }
    assert fields("misdeal_reported", "--position", "dealer", "--cards", "4") == {
        "position": "dealer",
        "cards": 4,
    }
    with pytest.raises(op.UsageError, match="--count needs a value"):
        fields("stub_counted", "--count")
    with pytest.raises(op.UsageError, match="expected --field value"):
        fields("stub_counted", "count", "3")


def test_op_own_options_may_follow_the_event():
    args = argparse.Namespace(
        event="dealer_changed", socket=None, table=None, timeout=5.0, json=False
    )
    fields, wants_help = op.split_arguments(
        args, ["--socket", "/run/x.sock", "--timeout=2.5", "--json"]
    )
    assert (fields, wants_help) == ({}, False)
    assert (args.socket, args.timeout, args.json) == ("/run/x.sock", 2.5, True)


def test_no_event_field_is_named_like_an_op_option():
    options = {o[2:] for o in (*op.VALUE_OPTIONS, *op.FLAG_OPTIONS)} | {"help", "h"}
    for spec in EVENT_TYPES.values():
        assert not options & {f.name for f in spec.fields}, spec.name


needs_root_and_system_python = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="running a client as another user needs root and a system python",
)


def run_as_nobody(args: list[str], extra_groups: list[int]) -> subprocess.CompletedProcess[str]:
    """The real `tablectl` client as uid nobody (the client needs only the standard library)."""
    return subprocess.run(
        [SYSTEM_PYTHON, "-m", "tablectl.controller", *args],
        user=NOBODY,
        group=NOBODY,
        extra_groups=extra_groups,
        env={"PYTHONPATH": str(REPO / ".src"), "PATH": "/usr/bin:/bin"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=20,
    )


@needs_root_and_system_python
def test_a_stranger_is_refused_with_a_clear_message_and_logged(server, log_stream):
    result = run_as_nobody(["status", "--socket", str(server.server.socket_path)], [])
    assert result.returncode == 2, result.stderr  # the status cannot be read: unreachable
    assert f"permission denied: uid {NOBODY} (nobody)" in result.stderr
    assert "is not in the operator group" in result.stderr
    assert server.events == []
    refused = [
        json.loads(line)
        for line in log_stream.getvalue().splitlines()
        if "operator_refused" in line
    ]
    assert refused and refused[0]["uid"] == NOBODY and refused[0]["level"] == "warning"


@needs_root_and_system_python
def test_a_member_of_the_operator_group_is_served(server):
    gid = grp.getgrnam(server.server.allowed_group).gr_gid
    result = run_as_nobody(
        ["op", "dealer_changed", "--socket", str(server.server.socket_path)], [gid]
    )
    assert result.returncode == 0, result.stderr
    ((event, peer),) = server.events
    assert event == {
        "type": "dealer_changed",
        "caller": {
            "uid": NOBODY,
            "user": "nobody",
            "role": "dealer",
            "granted_by": f"group {server.server.allowed_group}",
        },
    }
    assert peer.uid == NOBODY and gid in peer.groups


def test_a_subscriber_that_stops_reading_never_stalls_publishing(server, log_stream, monkeypatch):
    import tablectl.controller.service.operator as operator_module

    monkeypatch.setattr(operator_module, "SUBSCRIBER_BACKLOG", 64 * 1024)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(str(server.server.socket_path))
        sock.sendall(b'{"type": "subscribe"}\n')
        sock.settimeout(5)
        assert b"subscribed" in sock.recv(100)
        big = {"message": "state", "padding": "x" * 4000}
        for _ in range(400):  # ~1.6 MB the client never reads
            server.call(server.server.publish(big))
        assert server.server._subscribers == set()
    assert "operator_subscriber_dropped" in log_stream.getvalue()


# -- the protocol's version ---------------------------------------------------------------------


def test_a_client_of_another_protocol_is_refused_naming_both_versions(server):
    """A request saying another protocol (a tablectl of another release after an upgrade) gets
    an error naming both; the reply always says the daemon's; a request of no version (a
    client of its own: socat, a script) is served."""
    from tablectl.controller.service.operator_client import OPERATOR_PROTOCOL

    path = str(server.server.socket_path)
    newer = request_raw(path, {"type": "status", "protocol": OPERATOR_PROTOCOL + 1})
    assert newer["reply"] == "error" and newer["protocol"] == OPERATOR_PROTOCOL
    assert (
        f"this daemon speaks operator protocol {OPERATOR_PROTOCOL}, the client "
        f"{OPERATOR_PROTOCOL + 1}"
    ) in newer["error"]
    assert request_raw(path, {"type": "status"})["reply"] == "status"
    spoken = request_raw(path, {"type": "status", "protocol": OPERATOR_PROTOCOL})
    assert spoken["reply"] == "status" and spoken["protocol"] == OPERATOR_PROTOCOL


def request_raw(path: str, message: dict[str, Any]) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(path)
        stream = sock.makefile("rwb")
        stream.write((json.dumps(message) + "\n").encode())
        stream.flush()
        return json.loads(stream.readline())


def test_tablectl_refuses_a_daemon_of_another_protocol(tmp_path, capsys):
    """`tablectl status` and `op` against a daemon that answers in another protocol (here a
    socket answering as a daemon from before versions did, with no `protocol`, and as a later
    one) say so and what to do, instead of reading its replies as their own."""
    olden, later = {"reply": "status", "status": {}}, {"reply": "status", "protocol": 99}
    for n, answered in enumerate((olden, later)):
        path = tmp_path / f"daemon-{n}.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listener.listen(4)
        received: list[dict[str, Any]] = []

        def answer(listener=listener, answered=answered, received=received) -> None:
            for _ in range(2):
                conn, _ = listener.accept()
                with conn, conn.makefile("rwb") as stream:
                    received.append(json.loads(stream.readline()))
                    stream.write((json.dumps(answered) + "\n").encode())
                    stream.flush()

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        assert cli.main(["status", "--socket", str(path)]) == 2
        assert cli.main(["op", "--socket", str(path), "dealer_changed"]) == 2
        thread.join(10)
        listener.close()
        err = capsys.readouterr().err
        spoken = "protocol 99" if "protocol" in answered else "a protocol from before versions"
        assert f"the daemon speaks operator {spoken}, this tablectl protocol 1" in err, err
        assert "systemctl restart tablectl@TABLE" in err
        assert [r["protocol"] for r in received] == [1, 1]  # what the client speaks, said
