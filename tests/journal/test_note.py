"""Signed notes, checkpoints and cosignatures (controller/record/note.py): C2SP formats,
Ed25519 through `cryptography`; every tampering is refused with the reason."""

from __future__ import annotations

import base64
import hashlib
import stat
from pathlib import Path

import pytest

from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    IdentityKey,
    NoteError,
    Verifier,
    add_signature_lines,
    cosign,
    create_identity_key,
    key_id,
    load_identity_key,
    open_note,
    parse_checkpoint,
    sign_note,
)

ROOT = hashlib.sha256(b"root").digest()


def test_key_id_and_vkey_follow_signed_note() -> None:
    key = IdentityKey.generate("tablectl.invalid/table/T1")
    pub = key.public_key
    expected = hashlib.sha256(b"tablectl.invalid/table/T1\n\x01" + pub).digest()[:4]
    assert key.verifier.key_id == int.from_bytes(expected, "big")
    name, hex_id, material = key.vkey.split("+", 2)
    assert (name, hex_id) == ("tablectl.invalid/table/T1", expected.hex())
    assert base64.b64decode(material) == b"\x01" + pub
    assert Verifier.parse(key.vkey) == key.verifier
    witness = IdentityKey.generate("witness.example/w1", ALG_COSIGNATURE_V1)
    assert witness.verifier.key_id == key_id("witness.example/w1", 0x04, witness.public_key)


def test_checkpoint_round_trip_and_signature() -> None:
    key = IdentityKey.generate("tablectl.invalid/table/T1")
    checkpoint = Checkpoint(key.name, 41, ROOT)
    body = checkpoint.body()
    assert body == f"tablectl.invalid/table/T1\n41\n{base64.b64encode(ROOT).decode()}\n"
    note = sign_note(body, key)
    assert note.startswith(body + "\n\u2014 tablectl.invalid/table/T1 ")
    opened = open_note(note, [key.verifier])
    assert parse_checkpoint(opened.text) == checkpoint
    assert opened.signed_by(key.name) is not None
    with_extension = Checkpoint(key.name, 1, ROOT, ("ext line",))
    assert parse_checkpoint(with_extension.body()) == with_extension


def test_cosignature_v1() -> None:
    table = IdentityKey.generate("tablectl.invalid/table/T1")
    witness = IdentityKey.generate("witness.example/w1", ALG_COSIGNATURE_V1)
    body = Checkpoint(table.name, 7, ROOT).body()
    line = cosign(body, witness, timestamp=1_700_000_000)
    raw = base64.b64decode(line.split(" ")[2])
    assert raw[4:12] == (1_700_000_000).to_bytes(8, "big")
    note = add_signature_lines(sign_note(body, table), [line])
    opened = open_note(note, [table.verifier, witness.verifier])
    cosigned = opened.signed_by(witness.name)
    assert cosigned is not None and cosigned.timestamp == 1_700_000_000
    # the same line under another checkpoint does not verify
    other = sign_note(Checkpoint(table.name, 8, ROOT).body(), table)
    with pytest.raises(NoteError, match=r"cosignature/v1 by witness.example/w1 .* does not verify"):
        open_note(add_signature_lines(other, [line]), [table.verifier, witness.verifier])
    # a cosignature's time is signed: another time does not verify
    forged = bytearray(raw)
    forged[11] ^= 1
    bad_line = line.split(" ")[0] + " " + line.split(" ")[1] + " "
    bad_line += base64.b64encode(bytes(forged)).decode() + "\n"
    with pytest.raises(NoteError, match="does not verify"):
        open_note(sign_note(body, table) + bad_line, [table.verifier, witness.verifier])


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda n: n.replace("\n41\n", "\n42\n"), "does not verify"),
        (lambda n: n.replace("\n\n", "\n"), "no blank line"),
        (lambda n: n.rstrip("\n"), "does not end with a newline"),
        (lambda n: n.replace("\u2014 ", "- "), "does not start with"),
        (lambda n: n[: n.rindex(" ") + 1] + "!!!!\n", "not base64"),
    ],
)
def test_tampered_notes_are_refused_with_the_reason(edit, reason) -> None:  # type: ignore[no-untyped-def]
    key = IdentityKey.generate("tablectl.invalid/table/T1")
    note = sign_note(Checkpoint(key.name, 41, ROOT).body(), key)
    with pytest.raises(NoteError, match=reason):
        open_note(edit(note), [key.verifier])


def test_unknown_keys_are_not_trusted() -> None:
    key = IdentityKey.generate("tablectl.invalid/table/T1")
    impostor = IdentityKey.generate("tablectl.invalid/table/T1")
    note = sign_note(Checkpoint(key.name, 1, ROOT).body(), impostor)
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(note, [key.verifier])


def test_malformed_checkpoints_and_keys() -> None:
    for text, reason in [
        ("origin\n12\n", "at least 3 lines"),
        ("origin\n012\n" + base64.b64encode(ROOT).decode() + "\n", "not a decimal"),
        ("origin\n12\n" + base64.b64encode(ROOT[:31]).decode() + "\n", "31 bytes"),
        ("\n12\n" + base64.b64encode(ROOT).decode() + "\n", "origin line is empty"),
    ]:
        with pytest.raises(NoteError, match=reason):
            parse_checkpoint(text)
    key = IdentityKey.generate("a")
    name, hex_id, material = key.vkey.split("+", 2)
    with pytest.raises(NoteError, match="does not match the key"):
        Verifier.parse(f"{name}+{int(hex_id, 16) ^ 1:08x}+{material}")
    with pytest.raises(NoteError, match="three fields"):
        Verifier.parse("nothing")
    with pytest.raises(NoteError, match="whitespace"):
        IdentityKey.generate("a b")


def test_identity_key_file(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "identity.key"
    key = create_identity_key(path, "tablectl.invalid/table/T1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+tablectl.invalid/table/T1+")
    loaded = load_identity_key(path)
    assert loaded.vkey == key.vkey
    path.write_text(path.read_text().replace("PRIVATE", "PUBLIC", 1))
    with pytest.raises(NoteError, match=str(path)):
        load_identity_key(path)
    with pytest.raises(NoteError, match="cannot read"):
        load_identity_key(tmp_path / "missing")
