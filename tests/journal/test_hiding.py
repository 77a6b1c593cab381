"""A hash of a card is the card unless the row carries secret randomness (issue 30): a real
brute force (52 cards x the device's `time` field) against everything a witness, a floor
reader or a log line can see of a live round's rows — each signed checkpoint's root, the
consistency proofs a witness is sent, the leaf hashes in them, even the chain's head hash —
recovers no card from the journal's rows (each carries its nonce), and recovers every card
from the same rows hashed as the journal hashed them before (no nonce)."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

from tablectl.controller.record import merkle
from tablectl.controller.record.checkpoints import CheckpointSigner
from tablectl.controller.record.journal import GENESIS_HASH, Journal, canonical_json, row_hash
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import IdentityKey

RANKS = "23456789TJQKA"
DECK = [rank + suit for rank in RANKS for suit in "cdhs"]
WINDOW_US = 800  # the device's clock, as a reader knows it: within 0.8 ms of the stamp


def device_time(moment: datetime.datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds")


def brute_force(
    template: dict[str, object],
    seq: int,
    round_number: int,
    recorded_at: str,
    prev_hash: str,
    seen: set[bytes],
) -> str | None:
    """Every card x every device time in the window: the card whose row (as the template
    says it is written) hashes to anything seen, or None."""
    stamp = datetime.datetime.fromisoformat(recorded_at)
    for card in DECK:
        for offset in range(WINDOW_US):
            guess = {
                **template,
                "card": card,
                "time": device_time(stamp - datetime.timedelta(microseconds=offset)),
            }
            digest = row_hash(
                prev_hash, seq, "event", round_number, recorded_at, canonical_json(guess)
            )
            raw = bytes.fromhex(digest)
            if raw in seen or merkle.leaf_hash(raw) in seen:
                return card
    return None


def live_round(tmp_path: Path) -> tuple[list[dict[str, object]], set[bytes], list[tuple[str, str]]]:
    """A round in play: face-down cards journaled, a checkpoint signed after each (as the
    daemon signs every 2 minutes), each sent to a witness with its consistency proof."""
    rng = random.Random(30)
    journal = Journal(tmp_path / "journal.sqlite")
    signer = CheckpointSigner(journal, IdentityKey.generate("tablectl/T1"))
    journal.append("event", {"type": "bets_closed", "positions": [1, 2]}, round_number=1)
    signer.sign()
    dealt = []
    seen: set[bytes] = set()
    heads: list[tuple[str, str]] = []  # (the head before, the head after): the floor's view
    previous = signer.latest
    for _ in range(4):
        card = rng.choice(DECK)
        before = journal.last_hash
        now = datetime.datetime.now(datetime.UTC)
        moment = now - datetime.timedelta(microseconds=rng.randrange(WINDOW_US // 2))
        body = {
            "type": "card_drawn",
            "card": card,
            "face_up": False,
            "device": "shoe",
            "time": device_time(moment),
        }
        seq = journal.append("event", body, round_number=1)
        signed = signer.sign()
        assert signed is not None and previous is not None
        with MerkleLog(journal.path) as log:
            proof = log.consistency_proof(previous.size, signed.size)
        seen |= {signed.root, previous.root, *proof}
        seen.add(bytes.fromhex(journal.last_hash))  # even the head hash, as the floor had it
        heads.append((before, journal.last_hash))
        row = journal.tail_rows(1)[0]
        assert row.seq == seq
        dealt.append(
            {
                "card": card,
                "seq": seq,
                "recorded_at": row.recorded_at,
                "prev": before,
                "body": body,
                "nonce": row.nonce,
            }
        )
        previous = signed
    journal.close()
    return dealt, seen, heads


def test_a_brute_force_recovers_no_card_of_a_live_round(tmp_path: Path) -> None:
    dealt, seen, _ = live_round(tmp_path)
    template = {"type": "card_drawn", "face_up": False, "device": "shoe"}
    recovered = [
        brute_force(template, row["seq"], 1, row["recorded_at"], row["prev"], seen)  # type: ignore[arg-type]
        for row in dealt
    ]
    assert recovered == [None] * len(dealt)
    # the attack itself works: given the nonce (released with the round) it finds each card
    for row in dealt:
        with_nonce = {**template, "nonce": row["nonce"]}
        assert (
            brute_force(with_nonce, row["seq"], 1, row["recorded_at"], row["prev"], seen)
            == row["card"]
        )  # type: ignore[arg-type]


def test_the_same_brute_force_recovers_every_card_without_the_nonce(tmp_path: Path) -> None:
    """The rows as the journal hashed them before format 2 (the body without a nonce): the
    head hash a floor reader saw (and the tree over such rows) is a card oracle."""
    dealt, _, _ = live_round(tmp_path)
    prev = GENESIS_HASH
    seen: set[bytes] = set()
    leaves = []
    for row in dealt:
        digest = row_hash(
            prev, row["seq"], "event", 1, row["recorded_at"], canonical_json(row["body"])
        )  # type: ignore[arg-type]
        seen.add(bytes.fromhex(digest))
        leaves.append(merkle.leaf_hash(bytes.fromhex(digest)))
        row["prev_today"] = prev
        prev = digest
    seen.add(merkle.root_of(leaves))
    template = {"type": "card_drawn", "face_up": False, "device": "shoe"}
    recovered = [
        brute_force(template, row["seq"], 1, row["recorded_at"], row["prev_today"], seen)  # type: ignore[arg-type]
        for row in dealt
    ]
    assert recovered == [row["card"] for row in dealt]
    print(json.dumps({"recovered_without_nonce": len(recovered), "of": len(dealt)}))
