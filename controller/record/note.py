"""Signed notes, checkpoints and cosignatures (C2SP signed-note, tlog-checkpoint,
tlog-cosignature v1), Ed25519 through `cryptography`; no I/O but the identity key file.

The table signs a *checkpoint* of its journal's Merkle log (controller/record/merkle.py) with
its Ed25519 *identity key*; witnesses outside the casino add *cosignatures*. Both are lines of
one signed note; Go's `golang.org/x/mod/sumdb/note` opens the table's signature (tests/gotlog).

A signed note::

    <text, UTF-8, each line ending in "\\n">
    <blank line>
    — <key name> <base64(4-byte key ID || signature)>      (one line per signature)

Keys are named; key IDs are SHA-256(name || "\\n" || type || public key)[:4], type 0x01 for a
note signature (Ed25519 over the text), 0x04 for a cosignature/v1 (Ed25519 over
"cosignature/v1\\ntime <unix>\\n" + text, the signature prefixed by the 8-byte big-endian
time). A verifier key (*vkey*) is printed as `name+<8 hex key ID>+base64(type || public key)`;
an identity key file holds Go's private-key text `PRIVATE+KEY+name+<key ID>+base64(0x01 ||
32-byte seed)` (mode 0600, written through controller/record/durable.py).

Use::

    key = create_identity_key(path, "tablectl.invalid/table/T1")   # or load_identity_key(path)
    body = Checkpoint(key.name, size, root).body()
    signed = sign_note(body, key)                                  # the table's checkpoint
    line = cosign(body, witness_key, timestamp=int(time.time()))  # a witness's cosignature
    signed = add_signature_lines(signed, [line])
    opened = open_note(signed, [Verifier.parse(table_vkey), Verifier.parse(witness_vkey)])
    checkpoint = parse_checkpoint(opened.text)
    opened.signed_by(table_vkey_name)   # -> Signature (with .timestamp for a cosignature)

`open_note` raises NoteError naming what is wrong: a malformed note, a signature by a known key
that does not verify, or no signature by any known key. Signatures by unknown keys are kept in
`OpenedNote.unknown` and never trusted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from tablectl.controller.record.durable import write_private_file

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
SIGNATURE_PREFIX = "\u2014 "  # an em dash and a space (C2SP signed-note)
MAX_SIGNATURES = 100  # as Go's note.Open
COSIGNATURE_HEADER = "cosignature/v1\n"
_ALG_NAMES = {ALG_ED25519: "Ed25519 note signature", ALG_COSIGNATURE_V1: "cosignature/v1"}


class NoteError(ValueError):
    """A note, checkpoint, key or signature that is malformed or does not verify."""


def _check_name(name: str) -> None:
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise NoteError(f"key name {name!r} is empty or holds whitespace or '+'")


def key_id(name: str, alg: int, public_key: bytes) -> int:
    """SHA-256(name || 0x0A || alg || public key), first 4 bytes, big-endian."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise NoteError(f"{what} is not base64: {error}") from error


@dataclass(frozen=True)
class Verifier:
    """A public key that checks one kind of signature line: a note signature (0x01) or a
    cosignature/v1 (0x04)."""

    name: str
    alg: int
    public_key: bytes

    @property
    def key_id(self) -> int:
        return key_id(self.name, self.alg, self.public_key)

    def __str__(self) -> str:
        """The vkey text: name+hexkeyid+base64(alg || public key)."""
        material = base64.b64encode(bytes([self.alg]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{material}"

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """A vkey as printed by `tablectl journal setup-keys` or `tablectl witness`."""
        parts = text.strip().split("+", 2)  # base64 may hold "+"
        if len(parts) != 3:
            raise NoteError(
                f"verifier key {text.strip()!r} is not NAME+KEYID+BASE64 (three fields joined "
                "by '+')"
            )
        name, hex_id, material = parts
        _check_name(name)
        if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise NoteError(f"verifier key for {name}: key ID {hex_id!r} is not 8 hex digits")
        raw = _b64decode(material, f"verifier key for {name}")
        if len(raw) != 33 or raw[0] not in _ALG_NAMES:
            raise NoteError(
                f"verifier key for {name}: not an Ed25519 key (type 0x01 or 0x04, 32 bytes)"
            )
        verifier = cls(name, raw[0], raw[1:])
        if verifier.key_id != int(hex_id, 16):
            raise NoteError(
                f"verifier key for {name}: key ID {hex_id} does not match the key "
                f"({verifier.key_id:08x}): the key was altered or mistyped"
            )
        return verifier

    def verify(self, text: str, signature: bytes) -> int | None:
        """Check a signature's bytes (after the key ID) over the note text; the cosignature's
        timestamp, or None for a note signature. Raises NoteError when it does not verify."""
        public = Ed25519PublicKey.from_public_bytes(self.public_key)
        timestamp: int | None = None
        if self.alg == ALG_COSIGNATURE_V1:
            if len(signature) != 8 + 64:
                raise NoteError(f"cosignature by {self.name}: {len(signature)} bytes, not 72")
            stamp = int.from_bytes(signature[:8], "big")
            if stamp >= 1 << 63:
                raise NoteError(f"cosignature by {self.name}: timestamp out of range")
            timestamp, message, payload = stamp, cosigned_message(text, stamp), signature[8:]
        else:
            if len(signature) != 64:
                raise NoteError(f"signature by {self.name}: {len(signature)} bytes, not 64")
            message, payload = text.encode(), signature
        try:
            public.verify(payload, message)
        except InvalidSignature as error:
            raise NoteError(
                f"the {_ALG_NAMES[self.alg]} by {self.name} ({self.key_id:08x}) does not verify:"
                " the note was altered after it was signed, or the signature is forged"
            ) from error
        return timestamp


@dataclass(frozen=True)
class IdentityKey:
    """A named Ed25519 private key: the table's (note signatures) or a witness's
    (cosignatures, `alg=ALG_COSIGNATURE_V1`)."""

    name: str
    private_key: Ed25519PrivateKey = field(repr=False)
    alg: int = ALG_ED25519

    @classmethod
    def generate(cls, name: str, alg: int = ALG_ED25519) -> IdentityKey:
        _check_name(name)
        return cls(name, Ed25519PrivateKey.generate(), alg)

    @property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def verifier(self) -> Verifier:
        return Verifier(self.name, self.alg, self.public_key)

    @property
    def vkey(self) -> str:
        return str(self.verifier)

    def private_text(self) -> str:
        """Go's skey text: PRIVATE+KEY+name+hexkeyid+base64(alg || seed)."""
        seed = self.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        material = base64.b64encode(bytes([self.alg]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id:08x}+{material}"

    @classmethod
    def parse(cls, text: str, where: str = "the key") -> IdentityKey:
        parts = text.strip().split("+", 4)  # base64 may hold "+"
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError(f"{where}: not a private key (PRIVATE+KEY+NAME+KEYID+BASE64)")
        name, hex_id, material = parts[2:]
        _check_name(name)
        raw = _b64decode(material, where)
        if len(raw) != 33 or raw[0] not in _ALG_NAMES:
            raise NoteError(f"{where}: not an Ed25519 private key (type 0x01 or 0x04)")
        key = cls(name, Ed25519PrivateKey.from_private_bytes(raw[1:]), raw[0])
        if f"{key.verifier.key_id:08x}" != hex_id:
            raise NoteError(f"{where}: key ID {hex_id} does not match the key: altered")
        return key


def create_identity_key(path: str | Path, name: str, alg: int = ALG_ED25519) -> IdentityKey:
    """Draw a new key and write it to `path` (mode 0600, whole or not at all)."""
    key = IdentityKey.generate(name, alg)
    target = Path(path)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private_file(target, key.private_text() + "\n")
    except OSError as error:
        raise NoteError(f"{target}: cannot write the identity key: {error}") from error
    return key


def load_identity_key(path: str | Path) -> IdentityKey:
    target = Path(path)
    try:
        text = target.read_text()
    except (OSError, UnicodeError) as error:
        raise NoteError(f"{target}: cannot read the identity key: {error}") from error
    return IdentityKey.parse(text, str(target))


# --- signed notes -----------------------------------------------------------------------------


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("a note's text must end with a newline")
    if "\n\n" in text:
        raise NoteError("a note's text must not hold a blank line")
    for char in text:
        if (char < " " and char != "\n") or char == "\ufffd":
            raise NoteError(f"a note's text holds the control character {char!r}")


def signature_line(name: str, key_hash: int, signature: bytes) -> str:
    payload = base64.b64encode(key_hash.to_bytes(4, "big") + signature).decode()
    return f"{SIGNATURE_PREFIX}{name} {payload}\n"


def cosigned_message(text: str, timestamp: int) -> bytes:
    """What a cosignature/v1 signs: its header, the time, then the whole note text."""
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{text}".encode()


def sign_note(text: str, *keys: IdentityKey) -> str:
    """The signed note: `text`, a blank line, one Ed25519 note signature line per key."""
    _check_text(text)
    lines = []
    for key in keys:
        if key.alg != ALG_ED25519:
            raise NoteError(f"{key.name}: a cosigner key signs with cosign(), not sign_note()")
        lines.append(
            signature_line(key.name, key.verifier.key_id, key.private_key.sign(text.encode()))
        )
    return text + "\n" + "".join(lines)


def cosign(text: str, key: IdentityKey, *, timestamp: int) -> str:
    """A witness's cosignature/v1 line over a checkpoint's text (C2SP tlog-cosignature)."""
    _check_text(text)
    if key.alg != ALG_COSIGNATURE_V1:
        raise NoteError(f"{key.name}: not a cosigner key (type 0x04)")
    if not 0 <= timestamp < 1 << 63:
        raise NoteError(f"cosignature timestamp {timestamp} out of range")
    signature = key.private_key.sign(cosigned_message(text, timestamp))
    return signature_line(key.name, key.verifier.key_id, struct.pack(">Q", timestamp) + signature)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    signature: bytes  # after the key ID
    timestamp: int | None = None  # a verified cosignature's time

    @property
    def line(self) -> str:
        return signature_line(self.name, self.key_id, self.signature)


@dataclass(frozen=True)
class OpenedNote:
    text: str
    verified: tuple[Signature, ...]
    unknown: tuple[Signature, ...]

    def signed_by(self, name: str, alg: int | None = None) -> Signature | None:
        """The verified signature of the key named `name` (of type `alg`), if any."""
        for signature in self.verified:
            if signature.name == name and (
                alg is None or (signature.timestamp is not None) == (alg == ALG_COSIGNATURE_V1)
            ):
                return signature
        return None


def split_note(note: str) -> tuple[str, list[Signature]]:
    """The text and the (unverified) signature lines of a signed note."""
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("not a signed note: no blank line before the signatures")
    text, block = note[: split + 1], note[split + 2 :]
    _check_text(text)
    if not block.endswith("\n"):
        raise NoteError("not a signed note: the last signature line does not end with a newline")
    signatures = []
    for number, line in enumerate(block[:-1].split("\n"), start=1):
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError(f"signature line {number} does not start with '\u2014 ': {line!r}")
        name, _, payload = line[len(SIGNATURE_PREFIX) :].partition(" ")
        _check_name(name)
        raw = _b64decode(payload, f"signature line {number} ({name})")
        if len(raw) < 5:
            raise NoteError(f"signature line {number} ({name}) is too short")
        signatures.append(Signature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
    if len(signatures) > MAX_SIGNATURES:
        raise NoteError(f"a note with {len(signatures)} signatures (at most {MAX_SIGNATURES})")
    return text, signatures


def open_note(note: str, verifiers: Iterable[Verifier]) -> OpenedNote:
    """Verify a signed note; NoteError names the first problem (see the module doc)."""
    text, signatures = split_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    verified: list[Signature] = []
    unknown: list[Signature] = []
    for signature in signatures:
        verifier = known.get((signature.name, signature.key_id))
        if verifier is None:
            unknown.append(signature)
            continue
        timestamp = verifier.verify(text, signature.signature)
        verified.append(Signature(signature.name, signature.key_id, signature.signature, timestamp))
    if not verified:
        names = ", ".join(f"{n} ({k:08x})" for n, k in known) or "none given"
        found = ", ".join(f"{s.name} ({s.key_id:08x})" for s in signatures) or "none"
        raise NoteError(
            f"the note carries no signature by a known key (known: {names}; signed by: {found})"
        )
    return OpenedNote(text, tuple(verified), tuple(unknown))


def add_signature_lines(note: str, lines: Sequence[str]) -> str:
    """A signed note with more signature lines (a witness's cosignatures) appended; a line
    already present is not repeated."""
    split_note(note)  # well-formed
    out = note
    for line in lines:
        line = line if line.endswith("\n") else line + "\n"
        if not line.startswith(SIGNATURE_PREFIX) or line.count("\n") != 1:
            raise NoteError(f"not a signature line: {line!r}")
        if line not in out:
            out += line
    split_note(out)
    return out


# --- checkpoints (C2SP tlog-checkpoint) -------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head's text: origin, size, base64 root hash, optional extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def body(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode()]
        text = "\n".join([*lines, *self.extensions]) + "\n"
        _check_text(text)
        return text


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint's text (a note's text, the signatures removed); NoteError says what is
    malformed."""
    _check_text(text)
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError(
            f"a checkpoint has at least 3 lines (origin, size, root hash), this has {len(lines)}"
        )
    origin, size_text, root_text, *extensions = lines
    if not origin:
        raise NoteError("checkpoint: the origin line is empty")
    if not re.fullmatch(r"0|[1-9][0-9]*", size_text):
        raise NoteError(f"checkpoint {origin}: size {size_text!r} is not a decimal number")
    root = _b64decode(root_text, f"checkpoint {origin}: root hash")
    if len(root) != 32:
        raise NoteError(f"checkpoint {origin}: root hash of {len(root)} bytes, not 32")
    if any(not line for line in extensions):
        raise NoteError(f"checkpoint {origin}: an empty extension line")
    return Checkpoint(origin, int(size_text), root, tuple(extensions))
