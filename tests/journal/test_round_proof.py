"""`tablectl journal prove` and `tablectl proof verify` on a journal the demo wrote: a round's
proof holds offline, and every tampering with it is refused with the reason; a round in play
is refused, named."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.record.checkpoints import CheckpointSigner, identity_key_path
from tablectl.controller.record.journal import Journal, row_hash
from tablectl.controller.record.note import (
    ALG_COSIGNATURE_V1,
    IdentityKey,
    add_signature_lines,
    cosign,
    load_identity_key,
)

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TABLECTL, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("proof")
    done = subprocess.run(
        [
            *TABLECTL,
            "demo",
            "--state-dir",
            str(directory),
            "--metrics-listen",
            "127.0.0.1:0",
            "--fast",
            "--rounds",
            "3",
            "--seed",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return directory


def table_key(state: Path) -> str:
    return (state / "table-key").read_text().strip()


def prove(
    state: Path, round_number: int, out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return tablectl(
        "journal", "prove", str(state), "--round", str(round_number), "--output", str(out), *extra
    )


def test_a_round_proved_and_checked_offline(state: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "round2.json"
    made = prove(state, 2, bundle)
    assert made.returncode == 0, made.stderr
    assert bundle.stat().st_size < 64 * 1024  # kilobytes, not the journal
    # offline: the bundle alone, moved away from the journal
    alone = tmp_path / "elsewhere" / "round2.json"
    alone.parent.mkdir()
    shutil.move(bundle, alone)
    checked = tablectl("proof", "verify", str(alone), "--table-key", table_key(state))
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert "round 2 of tablectl/demo" in lines[0] and "signed by the table" in lines[0]
    data = json.loads(alone.read_text())
    cards = [
        json.loads(r["body"])["card"] for r in data["rows"] if '"type":"card_drawn"' in r["body"]
    ]
    assert cards, "round 2 dealt cards"
    shown = [line for line in lines if "card_drawn" in line]
    assert [line.split("card=")[1].split()[0] for line in shown] == cards
    assert all(line.startswith("row ") for line in lines[1:] if not line.startswith("("))
    assert all(json.loads(r["body"]).get("nonce") for r in data["rows"])  # released with it


def tamper(bundle: dict[str, Any], how: str, witness: IdentityKey | None = None) -> dict[str, Any]:
    rows = bundle["rows"]
    card_row = next(r for r in rows if '"card":"' in r["body"])
    if how == "card":
        body = json.loads(card_row["body"])
        body["card"] = "As" if body["card"] != "As" else "Kd"
        card_row["body"] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    elif how == "card_rehashed":  # a forger recomputes the row's hash (and the next prev)
        body = json.loads(card_row["body"])
        body["card"] = "As" if body["card"] != "As" else "Kd"
        card_row["body"] = json.dumps(body, sort_keys=True, separators=(",", ":"))
        card_row["hash"] = row_hash(
            card_row["prev_hash"],
            card_row["seq"],
            card_row["kind"],
            card_row["round"],
            card_row["recorded_at"],
            card_row["body"],
        )
        # every later row rehashed too: the chain inside the bundle holds again
        index = rows.index(card_row)
        for earlier, nxt in zip(rows[index:], rows[index + 1 :], strict=False):
            nxt["prev_hash"] = earlier["hash"]
            nxt["hash"] = row_hash(
                nxt["prev_hash"],
                nxt["seq"],
                nxt["kind"],
                nxt["round"],
                nxt["recorded_at"],
                nxt["body"],
            )
    elif how == "row_dropped":
        del rows[len(rows) // 2]
    elif how == "proof":
        proof = card_row["proof"]
        raw = bytearray(base64.b64decode(proof[0]))
        raw[0] ^= 1
        proof[0] = base64.b64encode(bytes(raw)).decode()
    elif how == "checkpoint":
        text = bundle["checkpoint"]
        lines = text.split("\n")
        lines[1] = str(int(lines[1]) + 1)
        bundle["checkpoint"] = "\n".join(lines)
    elif how == "other_round":
        bundle["round"] = bundle["round"] + 1
    return bundle


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("card", "edited: its content does not match its hash"),
        ("card_rehashed", "inclusion proof fails"),
        ("row_dropped", "missing from the bundle"),
        ("proof", "inclusion proof fails"),
        ("checkpoint", "does not verify"),
        ("other_round", "not round 3"),
    ],
)
def test_a_tampered_bundle_is_refused_with_the_reason(
    state: Path, tmp_path: Path, how: str, reason: str
) -> None:
    bundle = tmp_path / "b.json"
    assert prove(state, 2, bundle).returncode == 0
    data = tamper(json.loads(bundle.read_text()), how)
    bundle.write_text(json.dumps(data))
    checked = tablectl("proof", "verify", str(bundle), "--table-key", table_key(state))
    assert checked.returncode == 1, checked.stdout
    assert "REFUSED" in checked.stderr and reason in checked.stderr, checked.stderr


def test_another_key_and_a_missing_witness_are_refused(state: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b.json"
    assert prove(state, 1, bundle).returncode == 0
    impostor = IdentityKey.generate("tablectl/demo")
    refused = tablectl("proof", "verify", str(bundle), "--table-key", impostor.vkey)
    assert refused.returncode == 1 and "no signature by a known key" in refused.stderr
    witness = IdentityKey.generate("witness.example/w1", ALG_COSIGNATURE_V1)
    missing = tablectl(
        "proof",
        "verify",
        str(bundle),
        "--table-key",
        table_key(state),
        "--witness-key",
        witness.vkey,
    )
    assert missing.returncode == 1
    assert "no cosignature by the witness witness.example/w1" in missing.stderr
    # cosigned (as a witness would), the same bundle holds with the witness's key
    data = json.loads(bundle.read_text())
    text = data["checkpoint"][: data["checkpoint"].index("\n\n") + 1]
    data["checkpoint"] = add_signature_lines(
        data["checkpoint"], [cosign(text, witness, timestamp=1_800_000_000)]
    )
    bundle.write_text(json.dumps(data))
    held = tablectl(
        "proof",
        "verify",
        str(bundle),
        "--table-key",
        table_key(state),
        "--witness-key",
        witness.vkey,
    )
    assert held.returncode == 0, held.stderr
    assert "cosigned by witness.example/w1 at 1800000000" in held.stdout


def test_a_round_in_play_is_refused_naming_it(state: Path, tmp_path: Path) -> None:
    """A fourth round begun and signed (its cards face down): no proof of it, named."""
    copy = tmp_path / "copy"
    shutil.copytree(state, copy, ignore=shutil.ignore_patterns("*.lock", "dev"))
    journal = Journal(copy / "journal.sqlite")
    journal.append(
        "event",
        {"type": "card_drawn", "card": "Qs", "face_up": False, "device": "shoe"},
        round_number=4,
    )
    signer = CheckpointSigner(journal, load_identity_key(identity_key_path(copy / "sealing-key")))
    assert signer.sign() is not None
    journal.close()
    refused = prove(copy, 4, tmp_path / "b4.json")
    assert refused.returncode == 1
    assert "round 4 is still in play" in refused.stderr
    assert not (tmp_path / "b4.json").exists()
    absent = prove(copy, 9, tmp_path / "b9.json")
    assert absent.returncode == 1 and "round 9 is not in the journal" in absent.stderr


def test_the_daemon_signs_at_every_rounds_end_and_at_its_stop(state: Path) -> None:
    """The demo's daemon (3 rounds): a checkpoint signed after each round's rows were
    committed, and one at the stop covering every row; each is the journal's tree."""
    from tablectl.controller.record.checkpoints import read_checkpoint_file
    from tablectl.controller.record.merkle_log import MerkleLog
    from tablectl.controller.record.note import Verifier

    signed = [
        json.loads(line)
        for line in (state / "daemon.log").read_text().splitlines()
        if '"checkpoint_signed"' in line
    ]
    assert len(signed) >= 4, signed  # three rounds' ends and the stop
    live = state / "journal.sqlite"
    newest = read_checkpoint_file(live, Verifier.parse(table_key(state)))
    assert newest is not None
    with MerkleLog(live) as log:
        assert newest.size == log.size()
        for each in signed:
            assert log.root(each["size"]).hex() == each["root"]
