"""Signals against a real `tablectl run`: a second SIGTERM while the first one's stop is held
up ends the process at once with 128 + 15 (docs/operations.md, "What the daemon refuses")."""

from __future__ import annotations

import signal
import socket
import time
from typing import Any


def test_a_second_sigterm_during_a_held_up_stop_exits_143_at_once(make_table: Any) -> None:
    # A floor that takes the TCP connection and never answers: the shipper's connect waits
    # out its timeout, and the stop waits (bounded) for the shipper's thread.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        table = make_table("heads_up_holdem")
        config = table.config_path.read_text()
        table.config_path.write_text(
            config + f'\n[floor]\ndsn = "host=127.0.0.1 port={port} dbname=floor user=t"\n'
        )
        table.start()
        table.daemon.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while '"stopping"' not in table.log() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert '"stopping"' in table.log(), table.log()[-2000:]
        time.sleep(0.3)
        assert table.daemon.poll() is None, "the stop was not held up: nothing to test"
        sent = time.monotonic()
        table.daemon.send_signal(signal.SIGTERM)
        code = table.daemon.wait(5)
        took = time.monotonic() - sent
        table.daemon = None
        assert code == 128 + signal.SIGTERM, code
        assert took < 2.0, took  # at once, not after the held-up stop (seconds more)
        assert "second_signal_exit_now" in table.log()
    finally:
        silent.close()
