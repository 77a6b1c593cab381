"""`tablectl watch`: a live view of one table for the dealer's and the supervisor's screen.

A Textual app that talks to the daemon over the operator socket only, as any terminal does:
one connection subscribed to decisions, alarms and state changes, and a `status` request
after each of them (and every few seconds, so "down since" stays current). It shows the
round and how many cards each hand has been dealt, each deck's state and stub-count
cadence, every device (and why one is down), alarms as they come and the supervisor
notifications waiting; `a` sends `supervisor_ack`: the daemon takes who acknowledges from
the socket's peer credentials and refuses anyone but a supervisor (docs/operations.md, Roles).

What it shows comes from the public status and from decisions' rule and reason, never a
card (docs/rules.md H7): the status holds counts, and a decision's extra fields are not shown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import getpass
import json
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Header, RichLog, Static

from tablectl.controller.commands.op import add_socket_choice
from tablectl.controller.service.operator_client import (
    OperatorClientError,
    default_socket,
    reply_of,
    versioned,
)
from tablectl.controller.service.status_words import (
    cards_dealt_line,
    deck_words,
    device_line,
    fault_words,
    round_state,
    rule_words,
)

#: seconds between two status requests when nothing is pushed
REFRESH_SECONDS = 2.0
#: the least time between two status requests that pushes ask for: a burst of pushes (a
#: card each) becomes one request, and the view's requests stay well inside the caller's
#: line budget on the socket (20 a second), which `tablectl op` of the same user shares
PUSH_REFRESH_SECONDS = 0.2
#: below this many columns the decks and the devices are drawn one above the other
WIDE_COLUMNS = 120
#: seconds before the subscription is tried again after the daemon went away
RECONNECT_SECONDS = 1.0


async def request_async(
    socket_path: str | Path, message: Mapping[str, Any], timeout: float = 5.0
) -> dict[str, Any]:
    """`request` on a running event loop: one line out, one reply back.

    Here rather than in operator_client, which `tablectl op` and `status` import: they need
    not pay for asyncio at start.
    """
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(socket_path), limit=1024 * 1024), timeout
        )
    except TimeoutError:
        raise OperatorClientError(f"{socket_path}: no answer within {timeout} s") from None
    except OSError as error:
        raise OperatorClientError(f"{socket_path}: cannot connect: {error.strerror}") from error
    try:
        with contextlib.suppress(ConnectionError):
            writer.write((json.dumps(versioned(message)) + "\n").encode())
            await writer.drain()
        try:
            line = await asyncio.wait_for(reader.readline(), timeout)
        except TimeoutError:
            raise OperatorClientError(f"{socket_path}: no answer within {timeout} s") from None
        except (ConnectionError, ValueError) as error:
            raise OperatorClientError(f"{socket_path}: {error}") from error
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return reply_of(socket_path, line)


class AlarmLog(RichLog):
    """The alarms, newest in sight also when the box shrinks: a notification arriving grows
    the panel above it, and the log kept its old scroll, the newest alarm below the box."""

    def on_resize(self, event: events.Resize) -> None:
        self.scroll_end(animate=False)


def _clock() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S")


class TableWatch(App[int]):
    """The live table view; `shown` keeps the plain text of each panel as last drawn."""

    TITLE = "tablectl watch"
    CSS = """
    #round { height: auto; padding: 0 1; border: round $accent; }
    #tables { height: auto; max-height: 14; }
    #tables.narrow { layout: vertical; }
    #decks, #devices { width: 1fr; height: auto; border: round $primary; }
    #notifications { height: auto; padding: 0 1; border: round $warning; }
    #alarms { height: 1fr; border: round $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "acknowledge", "Acknowledge notifications (supervisor)"),
        Binding("r", "refresh", "Refresh"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self, socket_path: str | Path, *, refresh_seconds: float = REFRESH_SECONDS
    ) -> None:
        super().__init__()
        self.socket_path = Path(socket_path)
        # who acknowledges, as the daemon will see it (it fills `by` from the peer credentials)
        self.user = getpass.getuser()
        self.refresh_seconds = refresh_seconds
        self.status: dict[str, Any] = {}
        self.shown: dict[str, str] = {}
        self.alarms: list[str] = []
        # rule id -> the reason of the notify_supervisor decision, as pushed while watching
        self.reasons: dict[str, str] = {}
        self._refreshing = asyncio.Lock()
        self._refresh_due: Any = None  # the timer of the refresh pushes asked for, if any
        self._last_refresh = 0.0
        self.status_requests = 0  # how many the daemon was sent

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=True)
        yield Static("connecting ...", id="round")
        with Horizontal(id="tables"):
            yield DataTable(id="decks", show_cursor=False)
            yield DataTable(id="devices", show_cursor=False)
        yield Static("", id="notifications")
        # min_width: RichLog renders a line at least 78 columns wide by default, wider than
        # its box on an 80-column screen: the line ran out of the box instead of wrapping
        yield AlarmLog(id="alarms", wrap=True, markup=False, min_width=20)
        yield Footer()

    async def on_mount(self) -> None:
        decks = self.query_one("#decks", DataTable)
        decks.border_title = "Decks"
        decks.add_columns("deck", "state", "stub count (S1)", "in the shoe")
        self._fit(self.size.width)
        devices = self.query_one("#devices", DataTable)
        devices.border_title = "Devices"
        devices.add_columns("device", "state")
        self.query_one("#round", Static).border_title = "Round"
        self.query_one("#notifications", Static).border_title = "Supervisor notifications"
        self.query_one("#alarms", RichLog).border_title = "Alarms and decisions"
        self.sub_title = str(self.socket_path)
        self.run_worker(self._follow(), name="subscription", group="subscription")
        self.set_interval(self.refresh_seconds, self.action_refresh)
        await self.action_refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        """Decks and devices side by side on a wide screen, one above the other on a narrow
        one (80 columns): side by side, each got 40 columns and the decks' were cut."""
        narrow = width < WIDE_COLUMNS
        with contextlib.suppress(NoMatches):
            self.query_one("#tables").set_class(narrow, "narrow")
            # one above the other, the devices' "device  state" header says nothing the
            # rows do not: its line goes to the alarms
            self.query_one("#devices", DataTable).show_header = not narrow

    # -- talking to the daemon -----------------------------------------------------------

    async def action_refresh(self) -> None:
        """Ask for the status and redraw; a daemon that does not answer is said so."""
        if self._refreshing.locked():
            return
        async with self._refreshing:
            self._last_refresh = asyncio.get_running_loop().time()
            self.status_requests += 1
            try:
                reply = await request_async(self.socket_path, {"type": "status"})
            except OperatorClientError as error:
                self._show_unreachable(str(error))
                return
            if reply.get("reply") != "status":
                self._show_unreachable(f"{reply.get('reply')}: {reply.get('error')}")
                return
            self.status = dict(reply.get("status") or {})
            with contextlib.suppress(NoMatches):  # the app is closing: nothing left to draw
                self._draw(self.status)

    async def _follow(self) -> None:
        """The subscription: each pushed message is logged (alarms) and triggers a redraw."""
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(
                    str(self.socket_path), limit=1024 * 1024
                )
            except OSError as error:
                self._show_unreachable(f"{self.socket_path}: cannot connect: {error.strerror}")
                await asyncio.sleep(RECONNECT_SECONDS)
                continue
            self.log(f"subscribed to {self.socket_path}")
            try:
                writer.write((json.dumps(versioned({"type": "subscribe"})) + "\n").encode())
                await writer.drain()
                try:
                    reply_of(self.socket_path, await reader.readline())  # "subscribed"
                except OperatorClientError as error:
                    self._show_unreachable(str(error))
                    await asyncio.sleep(RECONNECT_SECONDS)
                    continue
                while line := await reader.readline():
                    with contextlib.suppress(ValueError):
                        message = json.loads(line)
                        if isinstance(message, dict):
                            await self._pushed(message)
            except (ConnectionError, ValueError) as error:
                self.log(f"subscription: {error!r}")
            finally:
                writer.close()
            self._log_line(f"{_clock()}  the daemon closed the connection; reconnecting")
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _pushed(self, message: Mapping[str, Any]) -> None:
        kind = message.get("message")
        if kind == "alarm":
            self._log_line(f"{_clock()}  ALARM  {self._describe_pushed(message)}")
            if message.get("decision") == "notify_supervisor" and message.get("rule_id"):
                self.reasons[str(message["rule_id"])] = str(message.get("reason") or "")
        elif kind == "decision":
            self._log_line(f"{_clock()}  {self._describe_pushed(message)}")
        if kind in ("alarm", "decision", "state"):
            self._refresh_soon()

    def _refresh_soon(self) -> None:
        """One status request for the pushes up to it, at most every PUSH_REFRESH_SECONDS."""
        if self._refresh_due is not None:
            return  # the refresh already due covers this push too
        wait = self._last_refresh + PUSH_REFRESH_SECONDS - asyncio.get_running_loop().time()
        # (a timer of 0 s is not one Textual takes: 10 ms at the least)
        self._refresh_due = self.set_timer(max(wait, 0.01), self._refresh_pushed)

    async def _refresh_pushed(self) -> None:
        self._refresh_due = None  # a push from now on asks for the next one
        if self._refreshing.locked():
            self._refresh_soon()  # an answer on its way may predate the push: ask again after
            return
        await self.action_refresh()

    @staticmethod
    def _describe_pushed(message: Mapping[str, Any]) -> str:
        """A decision's name, rule and reason, or a daemon alarm's kind, device and reason."""
        if "decision" in message:
            text = f"{message['decision']} [{message.get('rule_id')}]"
        else:
            text = f"{message.get('alarm', 'alarm')} {message.get('device', '')}".rstrip()
        reason = message.get("reason")
        return f"{text}: {reason}" if reason else text

    async def action_acknowledge(self) -> None:
        """`a`: acknowledge every pending supervisor notification (supervisor_ack)."""
        pending = list(self.status.get("pending_supervisor_notifications") or [])
        if not pending:
            self._log_line(f"{_clock()}  nothing to acknowledge")
            return
        try:
            reply = await request_async(self.socket_path, {"type": "supervisor_ack"})
        except OperatorClientError as error:
            self._log_line(f"{_clock()}  acknowledgement not sent: {error}")
            return
        if reply.get("reply") != "decisions":
            self._log_line(
                f"{_clock()}  acknowledgement refused: {reply.get('error') or reply.get('reply')}"
            )
        else:
            rejected = [d for d in reply.get("decisions", []) if d.get("decision") == "rejected"]
            if rejected:
                self._log_line(f"{_clock()}  acknowledgement rejected: {rejected[0].get('reason')}")
            else:
                self._log_line(
                    f"{_clock()}  acknowledged by {self.user}: {', '.join(map(str, pending))}"
                )
                for rule in pending:
                    self.reasons.pop(str(rule), None)
        await self.action_refresh()

    # -- drawing -----------------------------------------------------------------------------

    def _log_line(self, text: str) -> None:
        self.alarms.append(text)
        with contextlib.suppress(NoMatches):
            log = self.query_one("#alarms", RichLog)
            # wrapped here, a line per write: RichLog's own wrapping scrolled to the end
            # before it counted the lines a long alarm became, leaving its end below the box
            width = log.scrollable_content_region.width - 1
            parts = textwrap.wrap(text, width, subsequent_indent=" " * 10) if width > 20 else []
            for part in parts or [text]:
                log.write(part)

    def _show_unreachable(self, why: str) -> None:
        text = f"the daemon does not answer: {why}"
        if self.shown.get("round") != text:
            self.shown["round"] = text
            with contextlib.suppress(NoMatches):
                self.query_one("#round", Static).update(text)

    def _draw(self, status: Mapping[str, Any]) -> None:
        self.title = f"table {status.get('table', '?')}"
        round_text = (
            f"{str(status.get('game', '?')).replace('_', ' ')}: round {status.get('round', 0)}, "
            f"{round_state(status.get('state'))}\n"
            f"cards dealt: {cards_dealt_line(status.get('cards_dealt') or {})}"
        )
        current = status.get("current_deck")
        if current:
            round_text += f"    dealing from deck {current}"
        self.shown["round"] = round_text
        self.query_one("#round", Static).update(round_text)

        decks = self.query_one("#decks", DataTable)
        decks.clear()
        deck_rows = []
        for name, deck in (status.get("decks") or {}).items():
            columns = deck_words(deck, short=True)  # status's words (status_words), in columns
            row = (str(name), *columns, *["-"] * (3 - len(columns)))
            decks.add_row(*row)
            deck_rows.append("  ".join(row))
        self.shown["decks"] = "\n".join(deck_rows)

        devices = self.query_one("#devices", DataTable)
        devices.clear()
        down = status.get("devices_down") or {}
        faults = status.get("device_faults") or {}
        device_rows = []
        for name, state in (status.get("devices") or {}).items():
            line = device_line(str(name), state == "up", down.get(name))
            _, _, words = line.partition(": ")
            if name in faults:
                words += f"; fault: {fault_words(faults[name])}"
            devices.add_row(str(name), words)
            device_rows.append(f"{name}: {words}")
        self.shown["devices"] = "\n".join(device_rows)

        notes = notification_text(
            status.get("pending_supervisor_notifications") or [], self.reasons
        )
        self.shown["notifications"] = notes
        self.query_one("#notifications", Static).update(notes)


def notification_text(pending: list[Any], reasons: Mapping[str, str]) -> str:
    """The notifications waiting, one line each: the rule and the decision's own reason when
    the view saw it pushed (it says what happened, where the catalogue's summary says what
    the rule is: both was the same sentence twice for H2), else the catalogue's summary."""
    if not pending:
        return "none waiting"
    lines = [f"{len(pending)} waiting; a supervisor presses  a  to acknowledge"]
    for rule in pending:
        reason = reasons.get(str(rule))
        lines.append(f"  {rule}: {reason}" if reason else f"  {rule_words(rule)}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_socket_choice(parser)
    parser.add_argument(
        "--refresh",
        type=float,
        default=REFRESH_SECONDS,
        metavar="SECONDS",
        help=f"status refresh when nothing happens (default {REFRESH_SECONDS:g})",
    )


def run(args: argparse.Namespace) -> int:
    try:
        path = args.socket or default_socket(args.table)
    except OperatorClientError as error:
        print(f"tablectl watch: {error}", file=sys.stderr)
        return 2
    if args.refresh <= 0:
        print("tablectl watch: --refresh: SECONDS must be more than 0", file=sys.stderr)
        return 2
    app = TableWatch(path, refresh_seconds=args.refresh)
    return app.run() or 0
