"""`tablectl watch` at 80 columns by 24 lines, as a terminal shows it: run in tmux against
`tablectl run` on simulators, the screen read back with `tmux capture-pane`.

Every panel must be whole at that size: the decks' four columns (side by side with the
devices they were cut to "stub c"), every device, the notification and the keys. The H2
notification said its rule twice (the catalogue's summary, then the decision's reason in
other words); each waiting notification is one line.

TABLECTL_WATCH_CAPTURE=PATH keeps the captured screen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tablectl.controller.commands.watch import notification_text
from tablectl.controller.engine.rules import CATALOGUE
from tests.e2e.conftest import Table
from tests.e2e.test_daemon_process import clean, in_shoe, shuffle_into_shoe


class Tmux:
    """A tmux server of this test's own (its socket in the test's directory), one window."""

    def __init__(self, socket: Path, command: list[str], width: int, height: int) -> None:
        self.socket = socket
        self.run(
            "new-session", "-d", "-x", str(width), "-y", str(height), "-e", "TERM=xterm-256color",
            " ".join(command),
        )  # fmt: skip

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p")

    def until(self, predicate: Callable[[str], bool], what: str, timeout: float = 15) -> str:
        deadline = time.monotonic() + timeout
        while not predicate(screen := self.screen()):
            assert time.monotonic() < deadline, f"never on the screen: {what}\n{screen}"
            time.sleep(0.2)
        return screen

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)


def test_the_h2_notification_says_its_rule_once() -> None:
    reason = "the hole card was inserted with an up card other than A, K, Q, J or 10"
    text = notification_text(["H2"], {"H2": reason})
    assert text.splitlines() == [
        "1 waiting; a supervisor presses  a  to acknowledge",
        f"  H2: {reason}",
    ]
    assert CATALOGUE["H2"].summary not in text  # not the same sentence twice
    # not seen pushed (the view started after it): the catalogue's summary, once
    assert notification_text(["H2"], {}).splitlines()[1] == f"  H2: {CATALOGUE['H2'].summary}"


@pytest.mark.slow
def test_watch_is_complete_at_80_by_24(make_table: Callable[..., Table], tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    table = make_table("five_card_hilo")
    table.start()
    shuffle_into_shoe(table)
    clean(table.op("bets_closed", positions=[1, 3]))
    for _ in range(3):
        assert table.sim("call", "shoe", method="dispense") is not None
    in_shoe(table, 37)
    for kind, fields in (("deal_completed", {}), ("stub_counted", {"count": 37})):
        clean(table.op(kind, **fields))
    clean(table.op("hands_collected"))
    command = [sys.executable, "-m", "tablectl.controller", "watch", "--socket",
               str(table.socket_path)]  # fmt: skip
    tmux = Tmux(tmp_path / "tmux.sock", command, 80, 24)
    try:
        tmux.until(lambda s: "shuffler  up" in s, "the devices")
        # a stack dispensed before "no more bets", while the view watches: C9, pushed
        table.sim("call", "shuffler", method="load")
        shuffle_into_shoe(table)
        assert table.sim("call", "shoe", method="dispense") is not None
        screen = tmux.until(lambda s: "  C9: " in s, "the C9 notification")
        screen = tmux.until(
            lambda s: "47" in s and s.count("more bets'") >= 3, "the count and the alarm's end"
        )
    finally:
        tmux.close()
    if os.environ.get("TABLECTL_WATCH_CAPTURE"):
        Path(os.environ["TABLECTL_WATCH_CAPTURE"]).write_text(screen)
    lines = screen.rstrip("\n").splitlines()
    assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
    body = "\n".join(lines[1:])  # the header's title may be shortened; nothing below it
    assert "…" not in body, screen
    deck = next(line for line in lines if line.startswith("│ A "))
    assert deck.split() == ["│", "A", "shuffled,", "ready", "to", "deal", "0", "of", "5", "47",
                            "│"], deck  # fmt: skip
    assert "stub count (S1)  in the shoe" in body
    for device in ("shuffler", "shoe", "rack"):
        assert any(line.split()[1:3] == [device, "up"] for line in lines if len(line.split()) > 2)
    notes = [line for line in lines if "C9:" in line]
    assert len(notes) == 1 and "no more bets" in notes[0], screen
    assert "1 waiting; a supervisor presses  a  to acknowledge" in body
    assert "a Acknowledge notifications (supervisor)" in lines[-1]
    assert "Alarms and decisions" in body
    # the newest alarm whole, wrapped at the box, its end in sight (not cut, not below it)
    start = max(i for i, line in enumerate(lines) if "ALARM  notify_supervisor [C9]" in line)
    said = " ".join(line.strip("│ ▁▂▃▄▅▆▇█▏") for line in lines[start : start + 2])
    assert " ".join(said.split()).endswith(
        "ALARM notify_supervisor [C9]: a stack was dispensed before 'no more bets'"
    ), screen
