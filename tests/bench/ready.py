"""Start to READY and idle RSS of the daemon with one table (never asserted).

With `tablectl run` (controller/service/daemon.py): the e2e five_card_hilo table (shuffler, ADS and
discard rack simulated on ptys by the e2e rig process, tests/e2e/conftest.py's Table) and a
real NOTIFY_SOCKET; READY=1 comes once every device has handshaken and the metrics port is
bound. Median of several starts; the idle daemon's VmRSS after it sat idle for 3 s. (This
was tests/bench/bench_daemon_ready.py, by the daemon's engineer; unified here.)

Without `tablectl run` (a tree where it has not landed), the harness times what exists of the
start in a child process instead (``python -m tests.bench.ready --child FILE``): configuration,
journal replay, metrics port, READY through controller.sdnotify. details.json says which.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = """
[table]
id = "bench"
game = "five_card_hilo"
[table.options]
dealing = "manual_shoe"
[journal]
path = "{journal}"
sealing = "off"
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{socket}"
"""


def measure(repeats: int = 7) -> dict[str, Any]:
    """Median start->READY over ``repeats`` starts, and the idle RSS."""
    from tablectl.controller.commands.cli import COMMANDS

    if "run" in COMMANDS:
        return _measure_daemon(repeats)
    return _measure_child(repeats)


IDLE_SECONDS = 3.0


def compile_like_an_install() -> list[str]:
    """Byte-compile tablectl's own modules, as pip does when it installs the wheel.

    An editable checkout has no bytecode of its own modules, and with PYTHONDONTWRITEBYTECODE
    set (this machine's environment) none is ever written: every start then compiled all 37
    modules from source, ~130 ms of the start here (-X importtime: tablectl's own import time
    196-238 ms without bytecode, 57-92 ms with it), which no installed table ever pays.
    Returns the folders compiled.
    """
    import compileall

    import tablectl.controller
    import tablectl.drivers
    import tablectl.simulators

    folders = []
    for package in (tablectl.controller, tablectl.drivers, tablectl.simulators):
        folder = Path(package.__file__ or "").parent
        compileall.compile_dir(folder, quiet=1)
        folders.append(str(folder))
    return folders


def _measure_daemon(repeats: int) -> dict[str, Any]:
    from tests.e2e.conftest import Table

    compiled = compile_like_an_install()
    table = Table("five_card_hilo")
    try:
        ready = []
        for _ in range(repeats):
            ready.append(table.start() * 1000)
            table.stop()
        table.start()
        assert table.daemon is not None
        time.sleep(IDLE_SECONDS)
        rss = _rss_mib(table.daemon.pid)
        table.stop()
    finally:
        table.close()
    ready.sort()
    return {
        "ready_ms": round(ready[len(ready) // 2], 1),
        "ready_ms_all": [round(x, 1) for x in ready],
        "idle_rss_mib": round(rss, 1),
        "measured": "tablectl run, five_card_hilo: shuffler, ADS, discard rack on ptys",
        "bytecode": f"compiled first, as an install does: {', '.join(compiled)}",
    }


def _measure_child(repeats: int) -> dict[str, Any]:
    ready: list[float] = []
    rss_mib = 0.0
    what = ""
    with tempfile.TemporaryDirectory(prefix="tablectl-ready-") as tmp:
        directory = Path(tmp)
        for attempt in range(repeats):
            config = directory / f"bench{attempt}.toml"
            config.write_text(
                CONFIG.format(
                    journal=directory / f"journal{attempt}.sqlite",
                    socket=directory / f"op{attempt}.sock",
                )
            )
            command = [sys.executable, "-m", "tests.bench.ready", "--child", str(config)]
            what = "tests/bench/ready.py child (no `tablectl run`): config+journal+metrics"
            notify_path = directory / f"notify{attempt}"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            listener.bind(str(notify_path))
            listener.settimeout(30)
            env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
            started = time.perf_counter()
            process = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                while True:
                    message = listener.recv(4096).decode()
                    if "READY=1" in message.splitlines():
                        ready.append((time.perf_counter() - started) * 1000)
                        break
                time.sleep(1.0)
                rss_mib = _rss_mib(process.pid)
            finally:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                listener.close()
    ready.sort()
    return {
        "ready_ms": round(ready[len(ready) // 2], 1),
        "ready_ms_all": [round(x, 1) for x in ready],
        "idle_rss_mib": round(rss_mib, 1),
        "measured": what,
    }


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def child(config_path: str) -> int:
    """What exists of the daemon's start: configuration, journal replay, metrics, READY."""
    from tablectl.controller.common.config import load_config
    from tablectl.controller.common.metrics import start_metrics_server
    from tablectl.controller.service.sdnotify import SdNotifier
    from tablectl.controller.service.service import open_service

    async def serve() -> None:
        config = load_config(config_path)
        service = await open_service(config)
        server = start_metrics_server(config.metrics_host, config.metrics_port)
        SdNotifier().ready(status=f"table {config.table_id} idle")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        server.close()
        service.close()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2]))
    print(measure())
