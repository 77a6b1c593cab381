"""Forward-secure seals over the journal (systemd-journald's FSS is the model).

`tablectl journal setup-keys` draws a random 32-byte seed. The seed is the *verification key*
(printed once, kept away from the table PC); the *sealing key* file next to the journal holds
the key of the current epoch only. Time is cut into epochs (default 15 minutes) from a start
time; the key of epoch e+1 is SHA-256 over a fixed label and the key of epoch e, a one-way
step. At the end of each epoch (and at a clean stop, and before a segment closes) the daemon
appends a `seal` row whose `mac` is HMAC-SHA-256, under the epoch's key, of the seal's other
fields: the epoch, the previous seal's epoch, the time, and the seq and hash of the row
before it (which the hash chain ties to every earlier row). The key is then evolved and the
file rewritten, so the old key is gone: whoever takes the table PC later holds only keys of
epochs to come and cannot forge a seal over rows already sealed. A verifier with the seed
derives any epoch's key and checks every seal.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.record.durable import write_private_file

DEFAULT_EPOCH_SECONDS = 900
_EVOLVE_LABEL = b"tablectl-fss-evolve-v1\0"
_KEY_FILE_FORMAT = 1
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


def setup_keys(
    path: str | Path, *, interval: int = DEFAULT_EPOCH_SECONDS, now: float | None = None
) -> VerificationKey:
    """Draw a new seed, write the sealing key file (epoch 0) and return the verification key."""
    if interval <= 0:
        raise SealingError(f"{path}: the epoch interval must be 1 second or more")
    key_path = Path(path)
    started = int(datetime.datetime.now(datetime.UTC).timestamp() if now is None else now)
    verification_key = VerificationKey(secrets.token_bytes(32), started, interval)
    try:
        key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private_file(
            key_path, _key_file_text(verification_key.seed, 0, None, started, interval)
        )
    except OSError as error:
        raise SealingError(f"{key_path}: cannot write the sealing key: {error}") from error
    return verification_key


def _key_file_text(
    key: bytes, epoch: int, last_epoch: int | None, start: int, interval: int
) -> str:
    return (
        json.dumps(
            {
                "format": _KEY_FILE_FORMAT,
                "key": key.hex(),
                "epoch": epoch,
                "last_sealed_epoch": last_epoch,
                "start": start,
                "interval": interval,
            },
            sort_keys=True,
        )
        + "\n"
    )


class Sealer:
    """The daemon's side: holds the current epoch's key, seals, evolves, erases."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            data = json.loads(self.path.read_text())
            self._key = bytes.fromhex(data["key"])
            self.epoch = int(data["epoch"])
            last = data.get("last_sealed_epoch")
            self.last_sealed_epoch: int | None = None if last is None else int(last)
            self.start = int(data["start"])
            self.interval = int(data["interval"])
        except OSError as error:
            raise SealingError(f"{self.path}: cannot read the sealing key: {error}") from error
        except (ValueError, KeyError, TypeError) as error:
            raise SealingError(f"{self.path}: not a sealing key file: {error!r}") from error
        if len(self._key) != 32 or self.interval <= 0 or self.epoch < 0:
            raise SealingError(f"{self.path}: not a sealing key file (bad key, epoch or interval)")

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
        try:
            write_private_file(
                self.path,
                _key_file_text(key, epoch, self.last_sealed_epoch, self.start, self.interval),
                fault="key.before_rename",
            )
        except OSError as error:
            raise SealingError(f"{self.path}: cannot write the evolved key: {error}") from error
        self._key, self.epoch = key, epoch


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
        A first seal (no predecessor) vouches for every row before it: no earliest stamp.
        """
        assert self.deriver is not None
        key = self.deriver.verification_key
        latest = _utc_text(
            key.start + (epoch + 1) * key.interval + max(key.interval, SEAL_LATE_SECONDS)
        )
        if prev_epoch is None:
            return None, latest
        if epoch > prev_epoch + 1:
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
            return (
                f"row {self._low_seq} is stamped {self._low}, before seal row {seq} (epoch "
                f"{epoch}, after {after}) can vouch for it: the rows under that seal must be "
                f"stamped from {earliest} to {latest}. A row backdated under a later key (seals "
                f"removed and the rows resealed with a key stolen later), or written under a "
                f"clock stepped back{clock}"
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
