"""`tablectl watch` driven headless (Textual's pilot) against `tablectl run` on simulators.

A round of five-card hi-lo is played on the rig's devices and the operator socket while the
view follows it; then a stack dispensed before "no more bets" raises a C9 supervisor
notification, the view shows it, and the supervisor presses `a`: the daemon's status and
journal show the acknowledgement. No card ever appears on the screen (H7).

Set TABLECTL_WATCH_SCREENSHOT=PATH to keep the view's SVG (`make watch-screenshot` writes
docs/watch.svg for the README).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tablectl.controller.commands.watch import PUSH_REFRESH_SECONDS, TableWatch
from tests.e2e.conftest import Table
from tests.e2e.test_daemon_process import clean, in_shoe, shuffle_into_shoe

#: a card as the journal writes it ("Th", "As", "10c", a joker), anywhere on the screen
CARD = re.compile(r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[cdhs](?![A-Za-z0-9])|\bJK\b")
SIZE = (130, 44)


async def until(
    predicate: Callable[[], bool], what: str, app: TableWatch | None = None, timeout: float = 10.0
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the view never showed {what}: {app and app.shown}")
        await asyncio.sleep(0.05)


def screen_text(app: TableWatch) -> str:
    return "\n".join(app.shown.values()) + "\n" + "\n".join(app.alarms)


async def watch_a_round_and_acknowledge(table: Table, screenshot: Path | None = None) -> None:
    app = TableWatch(table.socket_path, refresh_seconds=0.5)
    async with app.run_test(size=SIZE) as pilot:
        shown = app.shown
        await until(lambda: "five card hilo: round" in shown.get("round", ""), "the round")
        await until(lambda: "shuffler: up" in shown.get("devices", ""), "the shuffler up")
        assert "shoe: up" in shown["devices"] and "rack: up" in shown["devices"]
        assert shown["decks"] == "A  not yet seen  -  -"  # nothing reported on the cards yet

        # one round, as the dealer and the devices play it
        await asyncio.to_thread(shuffle_into_shoe, table)
        await until(lambda: "shuffled, ready to deal" in shown["decks"], "the deck shuffled")
        clean(await asyncio.to_thread(table.op, "bets_closed", positions=[1, 3]))
        await until(lambda: "dealing" in shown["round"], "the deal")
        for _ in range(3):
            assert await asyncio.to_thread(table.sim, "call", "shoe", method="dispense") is not None
        await asyncio.to_thread(in_shoe, table, 37)
        await until(
            lambda: "position 1 5, position 3 5, dealer 5" in shown["round"], "the cards dealt"
        )
        clean(await asyncio.to_thread(table.op, "deal_completed"))
        await until(lambda: "hands in play" in shown["round"], "the hands in play", app)
        assert "  1 of 5  " in shown["decks"]  # the S1 cadence, short in its column
        assert not CARD.search(screen_text(app)), screen_text(app)
        clean(await asyncio.to_thread(table.op, "stub_counted", count=37))
        clean(await asyncio.to_thread(table.op, "hands_collected"))
        await until(lambda: "between rounds" in shown["round"], "the round collected", app)

        # a stack dispensed before "no more bets": C9, a supervisor notification
        await asyncio.to_thread(table.sim, "call", "shuffler", method="load")
        await asyncio.to_thread(shuffle_into_shoe, table)
        assert await asyncio.to_thread(table.sim, "call", "shoe", method="dispense") is not None
        await until(lambda: "C9" in shown["notifications"], "the notification")
        assert "before 'no more bets'" in shown["notifications"]
        await until(
            lambda: any("ALARM  notify_supervisor [C9]" in line for line in app.alarms),
            "the alarm as it came",
            app,
        )
        assert table.status()["pending_supervisor_notifications"] == ["C9"]
        if screenshot is not None:
            app.save_screenshot(filename=screenshot.name, path=str(screenshot.parent))
        assert not CARD.search(screen_text(app)), screen_text(app)

        await pilot.press("a")
        await until(lambda: shown["notifications"] == "none waiting", "the acknowledgement")
        assert any(f"acknowledged by {getpass.getuser()}: C9" in line for line in app.alarms)
        svg = app.export_screenshot()
        assert "none" in svg and "waiting" in svg and not CARD.search(re.sub(r"<[^>]*>", " ", svg))

    assert table.status()["pending_supervisor_notifications"] == []
    acks = [e for e in table.events() if e.get("type") == "supervisor_ack"]
    assert len(acks) == 1 and acks[0]["by"] == getpass.getuser()  # from the socket's peer


@pytest.mark.slow
def test_watch_follows_a_round_and_a_supervisor_acknowledges_from_it(
    make_table: Callable[..., Table],
) -> None:
    table = make_table("five_card_hilo")
    table.start()
    target = os.environ.get("TABLECTL_WATCH_SCREENSHOT")
    screenshot = Path(target).resolve() if target else None
    asyncio.run(asyncio.wait_for(watch_a_round_and_acknowledge(table, screenshot), 90))


def test_a_burst_of_pushes_asks_for_the_status_once_not_once_a_push(
    make_table: Callable[..., Table],
) -> None:
    """A push per card would be a status request per card: the daemon's work, and the caller's
    line budget (20 a second) that the dealer's own `tablectl op` shares."""
    table = make_table("five_card_hilo")
    table.start()

    async def main() -> None:
        app = TableWatch(table.socket_path, refresh_seconds=60)
        async with app.run_test(size=SIZE):
            await until(lambda: "round 0" in app.shown.get("round", ""), "the table")
            asked = app.status_requests
            for _ in range(50):  # as the subscription hands each pushed line
                await app._pushed({"message": "state", "state": "idle"})
            await asyncio.sleep(3 * PUSH_REFRESH_SECONDS)
            assert 1 <= app.status_requests - asked <= 2, app.status_requests - asked
            # the view still follows the table: the pushes of a real event redraw it
            await asyncio.to_thread(shuffle_into_shoe, table)
            clean(await asyncio.to_thread(table.op, "bets_closed", positions=[1]))
            await until(lambda: "round 1" in app.shown.get("round", ""), "round 1", app)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_watch_says_when_the_daemon_does_not_answer(tmp_path: Path) -> None:
    async def main() -> None:
        app = TableWatch(tmp_path / "absent.sock", refresh_seconds=0.2)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: "does not answer" in app.shown.get("round", ""), "the failure")
            assert "cannot connect" in app.shown["round"]
            await pilot.press("a")
            assert app.alarms[-1].endswith("nothing to acknowledge")

    asyncio.run(main())
