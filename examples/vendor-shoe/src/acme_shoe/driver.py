"""The tablectl driver of the Acme CS-9 shoe (registered as ``acme-cs9``).

Everything session-wide (reconnect with backoff, identity checks against the allow-list,
``device_connected`` / ``device_lost``, metrics) is tablectl's ``DeviceDriver``; this class
only speaks the wire of ``acme_shoe.protocol`` and turns its frames into EVENTS.md events.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, ClassVar

from acme_shoe import protocol as p
from tablectl.drivers import (
    CommandRefused,
    DeviceTimeout,
    DeviceUnavailable,
    Identity,
    Shoe,
)


class AcmeShoe(Shoe):
    """Acme CS-9 card-reading shoe over a serial line (9600 8E1)."""

    #: the driver API this driver is written for (tablectl.drivers.DRIVER_API_VERSION)
    driver_api = "1.0"
    serial_defaults: ClassVar[dict[str, Any]] = dict(p.SERIAL_LINE)
    #: the CS-9 has an FTDI FT232R USB-serial bridge inside (its own vendor/product ids)
    usb_ids: ClassVar[tuple[tuple[int, int], ...]] = ((0x0403, 0x6001),)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "status_poll_seconds": {
                "type": "number",
                "minimum": 0.2,
                "maximum": 60,
                "description": "how often the shoe is asked for its status (the heartbeat)",
            },
            "command_tries": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5,
                "description": "a command NAKed by the shoe is sent again up to this many times",
            },
        },
        "additionalProperties": False,
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.poll_seconds = float(self.device_settings.get("status_poll_seconds", 2.0))
        self.command_tries = int(self.device_settings.get("command_tries", p.MAX_TRIES))
        self.deframer = p.Deframer()
        self._in_session = False
        self._identity: asyncio.Future[Identity] | None = None
        #: reply letter ("L", "T") -> the future awaiting it
        self._replies: dict[str, asyncio.Future[list[str]]] = {}
        self._last_command: bytes | None = None
        self._nak_tries = 0
        self._early: list[list[str]] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._counted = (0, 0)

    # -- session -----------------------------------------------------------------------

    async def open_session(self) -> Identity:
        self.deframer = p.Deframer()
        self._counted = (0, 0)
        self._in_session = False
        self._early = None
        self._identity = self.loop.create_future()
        self._write(b"", p.frame("V"))
        timeout = self.settings.handshake_timeout
        try:
            return await asyncio.wait_for(self._identity, timeout)
        except TimeoutError:
            self.count_error("timeout")
            raise DeviceTimeout(
                f"{self.name}: no identity from {self.transport.name} within {timeout}s"
            ) from None
        finally:
            self._identity = None

    def session_accepted(self) -> None:
        self._in_session = True
        early, self._early = self._early, None
        for fields in early or []:
            self._event(fields)
        self._poller = self.loop.create_task(self._poll(), name=f"{self.name} status poll")

    def session_lost(self, reason: str) -> None:
        super().session_lost(reason)
        if self._identity is not None and not self._identity.done():
            self._identity.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))

    def close_session(self, reason: str) -> None:
        self._in_session = False
        self._early = None
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        replies, self._replies = self._replies, {}
        for future in replies.values():
            if not future.done():
                future.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))
        if self._identity is not None and not self._identity.done():
            self._identity.set_exception(DeviceUnavailable(f"{self.name}: {reason}"))

    async def _poll(self) -> None:
        """The heartbeat: a status request; no answer in time means the shoe is gone."""
        while self._in_session:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self._request("S", "T")
            except DeviceTimeout:
                self.session_lost("no answer to the status request")
                return
            except DeviceUnavailable:
                return

    # -- bytes -------------------------------------------------------------------------

    def _write(self, ack: bytes, data: bytes) -> None:
        if self.transport.is_open:
            self.transport.write(ack + data)

    def on_data(self, data: bytes) -> None:
        for kind, text in self.deframer.feed(data):
            if kind == "bad":
                self._write(bytes((p.NAK,)), b"")
            elif kind == "nak":
                self._resend()
            elif kind == "frame":
                self._frame(text.split(","))
        garbage, bad = self.deframer.garbage, self.deframer.bad_lrc
        if garbage != self._counted[0]:
            self.count_error("garbage", garbage - self._counted[0])
        if bad != self._counted[1]:
            self.count_error("crc", bad - self._counted[1])
        self._counted = (garbage, bad)

    def _resend(self) -> None:
        """The shoe NAKed our last command (a line error): send it again, a few times."""
        if self._last_command is None or self._nak_tries >= self.command_tries:
            return
        self._nak_tries += 1
        self.count_error("nak")
        self._write(b"", self._last_command)

    def _frame(self, fields: list[str]) -> None:
        letter = fields[0]
        try:
            if letter == "I":
                self._on_identity(fields)
            elif letter in ("A", "E"):
                self._reply(fields[1] if len(fields) > 1 else "?", fields)
            elif letter == "T":
                self._reply("T", fields)
            else:
                self._write(bytes((p.ACK,)), b"")  # an event: acknowledged at once
                if self._early is not None:
                    self._early.append(fields)
                elif self._in_session:
                    self._event(fields)
                else:
                    self.count_error("before_handshake")
        except (p.ProtocolError, ValueError, IndexError) as bad:
            # the message names the field, never its content (it may be a card: rule H7)
            self.count_error("payload")
            self.log.warning("bad_payload", message=letter, error=type(bad).__name__)

    def _on_identity(self, fields: list[str]) -> None:
        if len(fields) != 5:
            raise p.ProtocolError(f"identity has {len(fields)} fields, not 5")
        _, model, serial, firmware, sha256 = fields
        identity = Identity("shoe", model, serial, firmware, sha256.lower())
        if self._identity is not None and not self._identity.done():
            self._early = []
            self._identity.set_result(identity)
        elif self._in_session:
            self.session_lost("the shoe identified itself again mid-session (it restarted)")

    def _reply(self, key: str, fields: list[str]) -> None:
        future = self._replies.pop(key, None)
        if future is None or future.done():
            self.count_error("unexpected_reply")
            return
        future.set_result(fields)

    def _event(self, fields: list[str]) -> None:
        letter = fields[0]
        if letter == "C":
            if len(fields) != 3 or fields[2] not in ("F", "B"):
                raise p.ProtocolError("card message needs a card and F or B")
            self.emit("card_drawn", card=p.card_from_wire(fields[1]), face_up=fields[2] == "F")
        elif letter == "K":
            count = int(fields[1])
            if count != len(fields) - 2 or count < 1:
                raise p.ProtocolError(f"stack says {fields[1]} cards, carries {len(fields) - 2}")
            self.emit("stack_dispensed", cards=[p.card_from_wire(c) for c in fields[2:]])
        elif letter == "X":
            self.emit("cut_card_reached")
        elif letter == "N":
            deck = fields[1] if len(fields) > 1 and fields[1] != "-" else None
            self.emit("shoe_loaded", **({} if deck is None else {"deck": deck}))
        elif letter == "F":
            code = fields[1]
            detail = ",".join(fields[2:])
            fault = p.FAULTS.get(code, "other")
            self.emit("shoe_fault", fault=fault, **({"detail": detail} if detail else {}))
        elif letter == "D":
            if fields[1] not in ("0", "1"):
                raise p.ProtocolError("lock state is not 0 or 1")
            self.emit("dispensing_locked", locked=fields[1] == "1")
        else:
            self.count_error("unknown_message")
            self.log.warning("unknown_message", message=letter)

    # -- commands ----------------------------------------------------------------------

    async def _request(self, text: str, key: str) -> list[str]:
        if not self._in_session:
            raise DeviceUnavailable(f"{self.name}: not connected, cannot send {text!r}")
        if key in self._replies:
            raise DeviceUnavailable(f"{self.name}: a {key!r} request is already waiting")
        future: asyncio.Future[list[str]] = self.loop.create_future()
        self._replies[key] = future
        self._last_command = p.frame(text)
        self._nak_tries = 0
        self._write(b"", self._last_command)
        try:
            return await asyncio.wait_for(future, self.settings.command_timeout)
        except TimeoutError:
            self.count_error("timeout")
            raise DeviceTimeout(
                f"{self.name}: no answer to {text!r} within {self.settings.command_timeout}s"
            ) from None
        finally:
            with contextlib.suppress(KeyError):
                if self._replies.get(key) is future:
                    del self._replies[key]

    async def _set_lock(self, locked: bool) -> None:
        fields = await self._request(f"L,{int(locked)}", "L")
        if fields[0] == "E":
            code = fields[2] if len(fields) > 2 else "?"
            self.count_error("command_refused")
            raise CommandRefused("LOCK" if locked else "UNLOCK", 0, code, ",".join(fields[3:]))

    async def lock_dispensing(self) -> None:
        await self._set_lock(True)

    async def unlock_dispensing(self) -> None:
        await self._set_lock(False)


__all__ = ["AcmeShoe"]
