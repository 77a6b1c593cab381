"""Forward-secure seals over the journal (systemd-journald's FSS is the model).

`tablectl journal setup-keys` draws a random 32-byte seed. The seed is the *verification key*
(printed once, kept away from the table PC); the *sealing key* file next to the journal holds
the key of the current epoch only. Time is cut into epochs (default 15 minutes) from a start
time; the key of epoch e+1 is SHA-256 over a fixed label and the key of epoch e, a one-way
step. At the end of each epoch (and at a clean stop, and before a segment closes) the daemon
appends a `seal` row whose `mac` is HMAC-SHA-256, under the epoch's key, of the seal's other
fields: the epoch, the previous seal's epoch, the time, and the seq and hash of the row
before it (which the hash chain ties to every earlier row). The key is then evolved and
written over the old one in the key file's own blocks (two slots, `Sealer._store`), so the
old key is gone from the disk too: whoever takes the table PC later holds only keys of
epochs to come and cannot forge a seal over rows already sealed. A verifier with the seed
derives any epoch's key and checks every seal.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.common.faults import fault_point
from tablectl.controller.record.durable import write_private_file

DEFAULT_EPOCH_SECONDS = 900
_EVOLVE_LABEL = b"tablectl-fss-evolve-v1\0"
_VERIFY_KEY_PATTERN = re.compile(r"^([0-9a-f]{64})/([0-9a-f]{1,16})-([0-9a-f]{1,16})$")


class SealingError(RuntimeError):
    """The sealing key cannot be read, written or used; the message names the file."""


def evolve(key: bytes) -> bytes:
    """The next epoch's key: one SHA-256 step, which cannot be undone."""
    return hashlib.sha256(_EVOLVE_LABEL + key).digest()


def seal_mac(key: bytes, fields: Mapping[str, Any]) -> str:
    """HMAC-SHA-256 (hex) of the seal's fields (every field but `mac`), canonical JSON."""
    text = json.dumps(
        {k: v for k, v in fields.items() if k != "mac"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class VerificationKey:
    """The seed and the epoch clock: `SEED/START-INTERVAL` (hex), as journald prints its key."""

    seed: bytes
    start: int
    interval: int

    def __str__(self) -> str:
        return f"{self.seed.hex()}/{self.start:x}-{self.interval:x}"

    @classmethod
    def parse(cls, text: str) -> VerificationKey:
        match = _VERIFY_KEY_PATTERN.match(text.strip().lower())
        if not match:
            raise ValueError(
                "a verification key is SEED/START-INTERVAL: 64 hex digits, '/', then two "
                "hex numbers joined by '-' (as `tablectl journal setup-keys` printed it)"
            )
        interval = int(match.group(3), 16)
        if interval <= 0:
            raise ValueError("the verification key's epoch interval is 0")
        return cls(bytes.fromhex(match.group(1)), int(match.group(2), 16), interval)


class KeyDeriver:
    """Keys of increasing epochs from a verification key, each derived from the last one."""

    def __init__(self, verification_key: VerificationKey) -> None:
        self.verification_key = verification_key
        self._epoch = 0
        self._key = verification_key.seed

    def key_for(self, epoch: int) -> bytes:
        if epoch < self._epoch:
            self._epoch, self._key = 0, self.verification_key.seed
        while self._epoch < epoch:
            self._key = evolve(self._key)
            self._epoch += 1
        return self._key


#: The key file: two fixed slots of one block each, so that a new key is written over the
#: blocks that held the old one (never renamed over it: a rename frees the old blocks with the
#: erased key still in them) and a power cut at any instruction leaves one whole slot.
KEY_FILE_SIZE = 8192
_SLOT_SIZE = KEY_FILE_SIZE // 2
_SLOT_MAGIC = b"tablectl sealing key slot v2\n"


@dataclass(frozen=True)
class KeyState:
    """What the key file holds: the current epoch's key and what the daemon knows of its seals.
    `generation` counts the writes: of two whole slots, the higher one is the newest."""

    key: bytes
    epoch: int
    last_sealed_epoch: int | None
    start: int
    interval: int
    generation: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key.hex(),
            "epoch": self.epoch,
            "last_sealed_epoch": self.last_sealed_epoch,
            "start": self.start,
            "interval": self.interval,
            "generation": self.generation,
        }


def _slot_bytes(state: KeyState) -> bytes:
    """One slot: the magic line, the state as JSON, the SHA-256 of both, zeroes to its end."""
    body = _SLOT_MAGIC + json.dumps(state.as_dict(), sort_keys=True).encode() + b"\n"
    data = body + hashlib.sha256(body).hexdigest().encode() + b"\n"
    return data + bytes(_SLOT_SIZE - len(data))


def _parse_slot(raw: bytes) -> KeyState | None:
    """The slot's state, or None when it is not whole (zeroes, torn, another file's bytes)."""
    if not raw.startswith(_SLOT_MAGIC):
        return None
    text = raw.rstrip(b"\0")
    body, _, digest = text[:-1].rpartition(b"\n")
    body += b"\n"
    if not text.endswith(b"\n") or digest != hashlib.sha256(body).hexdigest().encode():
        return None
    try:
        data = json.loads(body[len(_SLOT_MAGIC) :])
        last = data["last_sealed_epoch"]
        state = KeyState(
            bytes.fromhex(data["key"]),
            int(data["epoch"]),
            None if last is None else int(last),
            int(data["start"]),
            int(data["interval"]),
            int(data["generation"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return state if len(state.key) == 32 and state.interval > 0 and state.epoch >= 0 else None


def _legacy_state(raw: bytes) -> KeyState | None:
    """A key file of format 1 (JSON, replaced by a rename at every evolution), or None."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != 1:
            return None
        last = data.get("last_sealed_epoch")
        return KeyState(
            bytes.fromhex(data["key"]),
            int(data["epoch"]),
            None if last is None else int(last),
            int(data["start"]),
            int(data["interval"]),
            0,
        )
    except (ValueError, KeyError, TypeError):
        return None


def read_key_file(path: str | Path) -> KeyState:
    """The newest whole slot of a key file (or a format-1 file's state); SealingError naming
    the file when there is none."""
    key_path = Path(path)
    try:
        raw = key_path.read_bytes()
    except OSError as error:
        raise SealingError(f"{key_path}: cannot read the sealing key: {error}") from error
    return _key_state(key_path, raw)[0]


def _key_state(path: Path, raw: bytes) -> tuple[KeyState, int, bool]:
    """(the state, the slot it is in, whether it is a format-1 file's); SealingError when the
    file holds none. A format-1 file (its JSON in slot 0's block) is read whatever follows
    it: a cut inside its conversion may have grown the file with slot 1 not yet whole."""
    state, index = _newest_slot(raw) if len(raw) == KEY_FILE_SIZE else (None, 0)
    if state is not None:
        return state, index, False
    legacy = _legacy_state(raw[:_SLOT_SIZE].rstrip(b"\0"))
    if legacy is None:
        raise SealingError(
            f"{path}: not a sealing key file (no whole slot: damaged, or not written by "
            "`tablectl journal setup-keys`)"
        )
    return legacy, 0, True


def _newest_slot(raw: bytes) -> tuple[KeyState | None, int]:
    slots = [_parse_slot(raw[i * _SLOT_SIZE : (i + 1) * _SLOT_SIZE]) for i in (0, 1)]
    whole = [(s.generation, i, s) for i, s in enumerate(slots) if s is not None]
    if not whole:
        return None, 0
    _, index, state = max(whole)
    return state, index


def _write_at(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view, offset = view[written:], offset + written
    os.fsync(descriptor)


def setup_keys(
    path: str | Path, *, interval: int = DEFAULT_EPOCH_SECONDS, now: float | None = None
) -> VerificationKey:
    """Draw a new seed, write the sealing key file (epoch 0) and return the verification key.

    A key file already there (`setup-keys --force`) is overwritten in place, as an evolution
    is: its blocks never go back to the filesystem holding a key."""
    if interval <= 0:
        raise SealingError(f"{path}: the epoch interval must be 1 second or more")
    key_path = Path(path)
    started = int(datetime.datetime.now(datetime.UTC).timestamp() if now is None else now)
    verification_key = VerificationKey(secrets.token_bytes(32), started, interval)
    state = KeyState(verification_key.seed, 0, None, started, interval, 1)
    content = _slot_bytes(state) + bytes(_SLOT_SIZE)
    try:
        key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if key_path.is_file():
            descriptor = os.open(key_path, os.O_WRONLY)
            try:
                _write_at(descriptor, content, 0)
                os.ftruncate(descriptor, KEY_FILE_SIZE)  # a longer file's tail: not a key
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        else:
            write_private_file(key_path, content)
    except OSError as error:
        raise SealingError(f"{key_path}: cannot write the sealing key: {error}") from error
    return verification_key


class Sealer:
    """The daemon's side: holds the current epoch's key, seals, evolves, erases.

    An evolution writes the new key into the key file's free slot and fsyncs it, then
    overwrites the old key's slot with zeroes and fsyncs again: the same blocks, no rename,
    no temporary file. A cut after the first fsync leaves both slots whole (the newer one
    wins); the next open wipes the older one. A format-1 key file (JSON, before this) is
    converted the same way at its first open."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: what the open put right (a format-1 file converted, an erased key's slot wiped)
        self.repaired: list[str] = []
        try:
            raw = self.path.read_bytes()
        except OSError as error:
            raise SealingError(f"{self.path}: cannot read the sealing key: {error}") from error
        found, self._slot, legacy = _key_state(self.path, raw)
        if len(found.key) != 32 or found.interval <= 0 or found.epoch < 0:
            raise SealingError(f"{self.path}: not a sealing key file (bad key, epoch or interval)")
        self._key = found.key
        self.epoch = found.epoch
        self.last_sealed_epoch: int | None = found.last_sealed_epoch
        self.start = found.start
        self.interval = found.interval
        self._generation = found.generation
        if legacy:
            # the JSON file's bytes are in slot 0's block: the state goes to slot 1 first
            self._store(self._key, self.epoch)
            self.repaired.append(
                f"converted {self.path} from key file format 1 (JSON) to two slots in place"
            )
        elif raw[(1 - self._slot) * _SLOT_SIZE : (2 - self._slot) * _SLOT_SIZE].strip(b"\0"):
            # a cut between writing the new slot and wiping the old one: wipe it now
            self._wipe_slot(1 - self._slot)
            self.repaired.append(
                f"wiped the older slot of {self.path} (a cut left it between two writes)"
            )

    def _wipe_slot(self, index: int) -> None:
        try:
            descriptor = os.open(self.path, os.O_WRONLY)
            try:
                _write_at(descriptor, bytes(_SLOT_SIZE), index * _SLOT_SIZE)
            finally:
                os.close(descriptor)
        except OSError as error:
            raise SealingError(f"{self.path}: cannot erase the old key: {error}") from error

    def _store(self, key: bytes, epoch: int) -> None:
        """The new state into the free slot (fsynced), then the old slot zeroed (fsynced)."""
        state = KeyState(
            key, epoch, self.last_sealed_epoch, self.start, self.interval, self._generation + 1
        )
        free = 1 - self._slot
        try:
            descriptor = os.open(self.path, os.O_WRONLY)
            try:
                _write_at(descriptor, _slot_bytes(state), free * _SLOT_SIZE)
                fault_point("key.after_new_slot")
                self._key, self.epoch, self._generation, self._slot = (
                    key,
                    epoch,
                    state.generation,
                    free,
                )
                _write_at(descriptor, bytes(_SLOT_SIZE), (1 - free) * _SLOT_SIZE)
            finally:
                os.close(descriptor)
        except OSError as error:
            raise SealingError(f"{self.path}: cannot write the evolved key: {error}") from error

    def epoch_at(self, when: datetime.datetime) -> int:
        return max(0, int((when.timestamp() - self.start) // self.interval))

    def due(self, now: datetime.datetime) -> bool:
        return self.epoch_at(now) > self.epoch

    def level_with(self, last_seal: Mapping[str, Any] | None) -> str | None:
        """At start: the journal, not the key file, says which epoch was sealed last.

        A crash between a seal row's commit and the evolved key file landing leaves the key
        file one step behind the journal: it still holds the sealed epoch's key and names an
        earlier `last_sealed_epoch`, so the next seal would name the wrong predecessor and
        `verify --verify-key` would call the journal tampered for ever. The key is evolved
        past the journal's last sealed epoch (that epoch's key erased, as the seal meant) and
        the predecessor taken from the journal. What was done, or None when level already.
        """
        if last_seal is None:
            return None
        try:
            sealed = int(last_seal["epoch"])
        except (KeyError, TypeError, ValueError):
            return None
        if sealed >= self.epoch:
            behind = (self.epoch, self.last_sealed_epoch)
            self.last_sealed_epoch = sealed
            self._evolve_to(sealed + 1)
            return (
                f"the sealing key was at epoch {behind[0]} (last sealed {behind[1]}) but the "
                f"journal's last seal is epoch {sealed}: the key is evolved to epoch "
                f"{self.epoch}, epoch {sealed}'s key erased"
            )
        if self.last_sealed_epoch != sealed:
            said = self.last_sealed_epoch
            self.last_sealed_epoch = sealed
            self._evolve_to(self.epoch)  # rewritten with the journal's last sealed epoch
            return f"the key file named epoch {said} as last sealed; the journal says {sealed}"
        return None

    def catch_up(self, now: datetime.datetime) -> None:
        """At start: epochs passed while the daemon was down get no seal; their keys go."""
        current = self.epoch_at(now)
        if current > self.epoch:
            self._evolve_to(current)

    def seal_body(self, last_seq: int, head: str, now: datetime.datetime) -> dict[str, Any]:
        """The seal row's body for the rows up to `last_seq` (hash `head`), under this epoch."""
        body: dict[str, Any] = {
            "type": "seal",
            "epoch": self.epoch,
            "prev_epoch": self.last_sealed_epoch,
            "sealed_at": now.astimezone(datetime.UTC).isoformat(timespec="microseconds"),
            "last_seq": last_seq,
            "head": head,
        }
        body["mac"] = seal_mac(self._key, body)
        return body

    def sealed(self, body: Mapping[str, Any], now: datetime.datetime) -> None:
        """The seal is durable in the journal: erase this epoch's key (evolve at least once)."""
        self.last_sealed_epoch = int(body["epoch"])
        self._evolve_to(max(self.epoch + 1, self.epoch_at(now)))

    def _evolve_to(self, epoch: int) -> None:
        key = self._key
        for _ in range(epoch - self.epoch):
            key = evolve(key)
        self._store(key, epoch)


#: Rows a seal vouches for may be stamped this long after its epoch ended: the seal is written
#: at the first upkeep tick after the epoch's end, under the event lock (a loop held up by a
#: slow disk or a loaded machine writes it late). At least one epoch, at least a minute.
SEAL_LATE_SECONDS = 60


def _utc_text(seconds: float) -> str:
    """A Unix time as the journal stamps rows (UTC, microseconds): comparable as text."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="microseconds")


def _stamp_text(stamp: str) -> str | None:
    """A row's `recorded_at` in the journal's own spelling (UTC, microseconds), so stamps
    compare as text; None when it is not a time."""
    if len(stamp) == 32 and stamp.endswith("+00:00") and stamp[10] == "T":
        return stamp
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).isoformat(timespec="microseconds")


@dataclass
class SealCheck:
    """Checks seal rows met in order along a verified chain (journal verify --verify-key).

    Without a key (`deriver` None: the daemon's own checks, `journal verify` without
    `--verify-key`) only what needs no key is checked: each seal names the row right before
    it (its seq and hash) and the seal before it, and epochs increase. With a key, also each
    MAC and the *span* of every seal: the rows after the seal of epoch P and before the seal
    of epoch E must be stamped inside the time the key of E was held (`span`), so that a key
    stolen in a later epoch cannot vouch for rows stamped in the epochs whose seals it replaced.
    """

    deriver: KeyDeriver | None
    last_epoch: int | None = None
    last_sealed_at: str | None = None
    last_seal_seq: int | None = None
    seals: int = 0
    continued: bool = (
        False  # the chain starts after archived segments: the first prev_epoch is unknown
    )
    first_epoch: int | None = None
    first_stamp: str | None = None  # the first row's stamp: where the proven history begins
    # the earliest and latest stamps among the rows since the last seal, and their rows
    _low: str | None = None
    _low_seq: int = 0
    _high: str | None = None
    _high_seq: int = 0
    _clock_note: int | None = None  # a clock_step note among them (named in a failure)

    def row(self, seq: int, recorded_at: str, kind: str, body: str) -> str | None:
        """Note a row's stamp for the next seal's span check (with a key); None, or why the
        stamp is not a time."""
        stamp = _stamp_text(recorded_at)
        if stamp is None:
            return f"row {seq}: recorded_at {recorded_at!r} is not a time"
        if self.first_stamp is None:
            self.first_stamp = stamp
        if self._low is None or stamp < self._low:
            self._low, self._low_seq = stamp, seq
        if self._high is None or stamp > self._high:
            self._high, self._high_seq = stamp, seq
        if kind == "note" and '"clock_step"' in body:
            self._clock_note = seq
        return None

    def span(self, epoch: int, prev_epoch: int | None) -> tuple[str | None, str]:
        """The stamps the rows under the seal of `epoch` may carry: (earliest or None, latest).

        The key of E is held from the moment it is made until the seal of E is written, and
        every row written meanwhile is under that seal. It is made by evolving past a seal
        (the predecessor P) or by the start's catch-up over epochs that passed while the
        daemon was down. When E is P+1 it was made as P's seal was written: no row under E is
        stamped before the epoch in which P's seal was written (at a clean stop in epoch P,
        at the upkeep's tick just after P, or later when a restart sealed what a crash left).
        When E is later than P+1 it was made in epoch E itself (`Sealer.sealed`/`catch_up`
        evolve to the clock's epoch): no row under it is stamped before E began. Either way no
        row is stamped after E ended plus SEAL_LATE_SECONDS (the tick that writes the seal).
        A first seal (no predecessor) is of the seed's epoch 0, made by `setup-keys` at the
        key's start, or of the epoch the start's catch-up evolved the key to: no row under it
        is stamped before its own epoch began (as journald's verifier holds every entry to its
        tag's epoch). A seal cannot vouch for rows stamped before its key could exist.
        """
        assert self.deriver is not None
        key = self.deriver.verification_key
        latest = _utc_text(
            key.start + (epoch + 1) * key.interval + max(key.interval, SEAL_LATE_SECONDS)
        )
        if prev_epoch is None or epoch > prev_epoch + 1:
            return _utc_text(key.start + epoch * key.interval), latest
        if self.last_sealed_at is None or self.last_epoch != prev_epoch:
            return None, latest  # the predecessor is archived: its time is not known here
        written = datetime.datetime.fromisoformat(self.last_sealed_at).timestamp()
        written_epoch = max(0, int((written - key.start) // key.interval))
        return _utc_text(key.start + written_epoch * key.interval), latest

    def _span_problem(self, seq: int, epoch: int, prev_epoch: int | None) -> str | None:
        if self._low is None or self._high is None:
            return None
        earliest, latest = self.span(epoch, prev_epoch)
        after = "no earlier seal" if prev_epoch is None else f"the seal of epoch {prev_epoch}"
        clock = (
            f"; a clock_step note at row {self._clock_note} says the clock was stepped"
            if self._clock_note is not None
            else ""
        )
        if earliest is not None and self._low < earliest:
            why = (
                "A first seal vouches for no row stamped before its own epoch: the seals of "
                "the earlier epochs were removed and the rows resealed with a key stolen later, "
                "the rows were written before the sealing key existed, or under a clock stepped "
                "back"
                if prev_epoch is None
                else "A row backdated under a later key (seals removed and the rows resealed "
                "with a key stolen later), or written under a clock stepped back"
            )
            return (
                f"row {self._low_seq} is stamped {self._low}, before seal row {seq} (epoch "
                f"{epoch}, after {after}) can vouch for it: the rows under that seal must be "
                f"stamped from {earliest} to {latest}. {why}{clock}"
            )
        if self._high > latest:
            return (
                f"row {self._high_seq} is stamped {self._high}, after epoch {epoch} of seal row "
                f"{seq} ended ({latest} with the seal's grace): a seal vouches only for rows "
                f"written while its key was held{clock}"
            )
        return None

    def check(self, seq: int, body: Mapping[str, Any], prev_seq: int, prev_hash: str) -> str | None:
        """None when the seal row at `seq` is valid here, else what is wrong with it."""
        try:
            epoch = body["epoch"]
            prev_epoch = body["prev_epoch"]
            sealed_at = body["sealed_at"]
            if type(epoch) is not int or epoch < 0 or not isinstance(sealed_at, str):
                return f"seal row {seq} is malformed"
            if prev_epoch is not None and type(prev_epoch) is not int:
                return f"seal row {seq} is malformed: prev_epoch {prev_epoch!r}"
            if body.get("last_seq") != prev_seq or body.get("head") != prev_hash:
                return (
                    f"seal row {seq} does not seal the rows before it (it names seq "
                    f"{body.get('last_seq')}): rows under it were rewritten"
                )
            if self.deriver is not None:
                key = self.deriver.key_for(epoch)
                if not hmac.compare_digest(str(body.get("mac")), seal_mac(key, body)):
                    return (
                        f"seal row {seq} (epoch {epoch}) fails its MAC: the sealed rows or the "
                        "seal were rewritten, or it was sealed with another key"
                    )
            # the time is what the seal states (a clock may be stepped back): parsed, not ordered
            datetime.datetime.fromisoformat(sealed_at)
            if self.last_epoch is not None and epoch <= self.last_epoch:
                return (
                    f"seal row {seq}: epoch {epoch} after epoch {self.last_epoch}: reordered "
                    "(a seal's epoch must be after its predecessor's)"
                )
            if prev_epoch is not None and epoch <= prev_epoch:
                return (
                    f"seal row {seq}: epoch {epoch} is not after its predecessor's ({prev_epoch})"
                )
            if self.last_epoch is None and self.seals == 0:
                if prev_epoch is not None and not self.continued:
                    return (
                        f"seal row {seq} follows the seal of epoch {prev_epoch}, which is not in "
                        "the journal: a sealed range was removed"
                    )
            elif prev_epoch != self.last_epoch:
                return (
                    f"seal row {seq} follows the seal of epoch {prev_epoch}, but the last seal "
                    f"found was epoch {self.last_epoch}: a sealed epoch is missing"
                )
            if self.deriver is not None:
                problem = self._span_problem(seq, epoch, prev_epoch)
                if problem is not None:
                    return problem
        except (KeyError, TypeError, ValueError) as error:
            return f"seal row {seq} is malformed: {error!r}"
        if self.first_epoch is None:
            self.first_epoch = epoch
        self.last_epoch = epoch
        self.last_sealed_at = sealed_at
        self.last_seal_seq = seq
        self.seals += 1
        self._low = self._high = None
        self._clock_note = None
        return None
