"""Forward-secure seals: every tamper case of issue 11 against `journal verify --verify-key`.

Each case edits the real SQLite file (triggers dropped, as with the sqlite3 shell) and runs the
real command line; a case that went unnoticed would exit 0.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.record.sealing import VerificationKey, evolve, read_key_file
from tests.journal.sealed import (
    KEYS_MADE,
    build_sealed,
    edit_body,
    read_all,
    rehash,
    stolen_key,
    write_all,
)


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["journal", "verify", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_an_intact_sealed_journal_is_proven_and_says_until_when(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    code, out = verify(capsys, str(sealed.path), "--verify-key", str(sealed.verification_key))
    assert code == 0, out
    assert f"sealed until {sealed.seal_times[-1].isoformat()}" in out
    assert f"last seal row {sealed.seal_seqs[-1]}, 4 seals, proven" in out
    assert "3 rows unsealed after it" in out
    rows = read_all(sealed.path)
    assert f"head {rows[-1][6]}" in out


def test_the_key_file_is_private_and_holds_no_earlier_key(tmp_path):
    sealed = build_sealed(tmp_path, epochs=3)
    assert stat.S_IMODE(os.stat(sealed.key_path).st_mode) == 0o600
    held = read_key_file(sealed.key_path).as_dict()
    seed = sealed.verification_key.seed
    earlier = [seed]
    for _ in range(held["epoch"] - 1):
        earlier.append(evolve(earlier[-1]))
    assert held["epoch"] == 3  # epochs 0-2 sealed, their keys erased
    assert bytes.fromhex(held["key"]) not in earlier  # only the epoch to come is on disk


def _tamper_and_verify(tmp_path, capsys, mutate, *extra: str) -> tuple[int, str]:
    sealed = build_sealed(tmp_path)
    rows = read_all(sealed.path)
    write_all(sealed.path, mutate(sealed, rows))
    return verify(capsys, str(sealed.path), "--verify-key", str(sealed.verification_key), *extra)


def test_an_edited_sealed_row_fails(tmp_path, capsys):
    def mutate(sealed, rows):
        edit_body(rows, 5, lambda body: body.update(n=99))
        return rows

    code, out = _tamper_and_verify(tmp_path, capsys, mutate)
    assert code == 1 and "row 5 edited" in out, out


def test_a_removed_sealed_row_fails(tmp_path, capsys):
    code, out = _tamper_and_verify(tmp_path, capsys, lambda s, rows: rows[:4] + rows[5:])
    assert code == 1 and "row 5 deleted" in out, out


def test_reordered_sealed_rows_fail(tmp_path, capsys):
    def mutate(sealed, rows):
        rows[3][1:], rows[4][1:] = rows[4][1:], rows[3][1:]
        return rows

    code, out = _tamper_and_verify(tmp_path, capsys, mutate)
    assert code == 1 and "row 4 reordered" in out, out


def test_a_consistent_rewrite_of_sealed_rows_fails_at_the_seal(tmp_path, capsys):
    """Hashes recomputed from the edit on: the chain holds, the seal over it does not."""

    def mutate(sealed, rows):
        edit_body(rows, 9, lambda body: body.update(n=42))
        return rehash(rows)

    code, out = _tamper_and_verify(tmp_path, capsys, mutate)
    assert code == 1, out
    assert "seal row" in out and "rewritten" in out, out
    # without the key, the seal's own head (the hash of the row before it) already shows it
    sealed_path = tmp_path / "journal.sqlite"
    assert cli.main(["journal", "verify", str(sealed_path)]) == 1
    # ...but a rewrite that also recomputes every seal's head is invisible without the key
    # (its MACs cannot be checked): that is what the verification key is for
    rows = read_all(sealed_path)
    write_all(sealed_path, rehash(rows, reseal=bytes(32)))
    assert cli.main(["journal", "verify", str(sealed_path)]) == 0
    key = str(build_sealed(tmp_path / "other").verification_key)  # any other key: no matter
    code, out = verify(capsys, str(sealed_path), "--verify-key", key)
    assert code == 1 and "fails its MAC" in out, out


def test_a_consistent_rewrite_resealed_with_the_stolen_current_key_fails(tmp_path, capsys):
    """Forward security: the intruder holds today's key, not the erased keys of sealed epochs."""

    def mutate(sealed, rows):
        edit_body(rows, 3, lambda body: body.update(n=7))
        return rehash(rows, reseal=stolen_key(sealed.key_path))

    code, out = _tamper_and_verify(tmp_path, capsys, mutate)
    assert code == 1 and "fails its MAC" in out, out


def test_a_missing_epoch_inside_the_sealed_range_fails(tmp_path, capsys):
    """Epoch 1's rows and seal taken out, the rest renumbered and rehashed."""

    def mutate(sealed, rows):
        first, second = sealed.seal_seqs[0], sealed.seal_seqs[1]
        kept = [r for r in rows if not first < int(r[0]) <= second]
        return rehash(kept)

    code, out = _tamper_and_verify(tmp_path, capsys, mutate)
    assert code == 1, out
    assert "epoch" in out and ("missing" in out or "does not seal" in out), out


def test_a_tail_cut_before_the_last_seal_shows_and_fails_with_expect_until(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    rows = read_all(sealed.path)
    keep = sealed.seal_seqs[1]  # cut after the second seal: epochs 2 and 3 are gone
    write_all(sealed.path, [r for r in rows if int(r[0]) <= keep])
    key = str(sealed.verification_key)
    code, out = verify(capsys, str(sealed.path), "--verify-key", key)
    assert code == 0, out  # a shorter journal is still a consistent one...
    assert f"sealed until {sealed.seal_times[1].isoformat()}" in out  # ...sealed until earlier
    until = sealed.seal_times[-1].isoformat()
    code, out = verify(capsys, str(sealed.path), "--verify-key", key, "--expect-until", until)
    assert code == 1, out
    assert "a cut tail" in out and f"after row {keep}" in out, out


def test_an_intact_journal_passes_expect_until_its_last_seal(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    until = sealed.seal_times[-1].isoformat()
    code, out = verify(
        capsys,
        str(sealed.path),
        "--verify-key",
        str(sealed.verification_key),
        "--expect-until",
        until,
    )
    assert code == 0, out


def test_another_verification_key_fails_and_a_malformed_one_is_refused(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    other = VerificationKey(bytes(32), KEYS_MADE, 60)
    code, out = verify(capsys, str(sealed.path), "--verify-key", str(other))
    assert code == 1 and "fails its MAC" in out, out
    code, out = verify(capsys, str(sealed.path), "--verify-key", "not-a-key")
    assert code == 2 and "SEED/START-INTERVAL" in out, out


def test_setup_keys_writes_a_private_key_and_prints_the_verification_key(tmp_path):
    journal = tmp_path / "state" / "journal.sqlite"
    config = tmp_path / "t.toml"
    config.write_text(
        f'[table]\nid = "t1"\ngame = "five_card_hilo"\n[journal]\npath = "{journal}"\n'
    )
    run = [sys.executable, "-m", "tablectl.controller", "journal", "setup-keys"]
    done = subprocess.run(
        [*run, "--config", str(config), "--interval", "30"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    key = VerificationKey.parse(done.stdout.strip())
    assert key.interval == 30
    key_file = journal.parent / "sealing-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert read_key_file(key_file).key.hex() == key.seed.hex()  # epoch 0: the seed
    again = subprocess.run(
        [*run, "--config", str(config)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 1 and "exists" in again.stderr
    assert read_key_file(key_file).key.hex() == key.seed.hex()  # not replaced


def test_verify_needs_the_key_for_expect_until(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    code, out = verify(capsys, str(sealed.path), "--expect-until", "2026-01-01T00:00:00+00:00")
    assert code == 2 and "needs --verify-key" in out


def test_a_sealed_journal_verifies_from_another_directory_by_path(tmp_path: Path, capsys):
    """`verify DIR` over a directory holding one journal file is the same verdict."""
    sealed = build_sealed(tmp_path)
    code, out = verify(capsys, str(tmp_path), "--verify-key", str(sealed.verification_key))
    assert code == 0, out


def test_the_head_file_and_the_sealing_key_are_written_one_way_private_and_whole(tmp_path):
    """journal.write_private_file, the one writer of both: mode 0600 whatever the umask, the
    old file replaced whole, no temporary file left beside it."""
    import os
    import stat

    from tablectl.controller.record.durable import write_private_file
    from tablectl.controller.record.journal import read_head_file, write_head_file

    target = tmp_path / "key"
    old = os.umask(0)
    try:
        write_private_file(target, "first\n")
        write_private_file(target, "second\n")
        write_head_file(tmp_path / "journal.sqlite", 7, "ab" * 32)
    finally:
        os.umask(old)
    assert target.read_text() == "second\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert read_head_file(tmp_path / "journal.sqlite") == (7, "ab" * 32)
    heads = [p for p in tmp_path.iterdir() if p.name != "key"]
    assert len(heads) == 1 and stat.S_IMODE(heads[0].stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _crashed_table(
    tmp_path: Path, restart_after: float
) -> tuple[Path, list[int], int, VerificationKey]:
    """A table's service writes rows, seals at the end of epoch 1, writes more and "crashes"
    (the file closed with no seal and no head, as a kill -9 leaves it); then a new service
    opens the journal `restart_after` seconds after the keys were made, as `tablectl run`
    does at a start: the sealer, then seal_unsealed_at_start. The journal, its seal seqs and
    the seq of the last row written before the crash."""
    import asyncio
    import random

    from tablectl.controller.engine.table import TableSpec
    from tablectl.controller.record.journal import Journal, read_rows
    from tablectl.controller.record.sealing import Sealer, setup_keys
    from tablectl.controller.service.service import TableService
    from tablectl.simulators.roundgen import legal_stream
    from tests.bench.service import table_config
    from tests.journal.sealed import EPOCH, EpochClock, at, stamp_rows

    key_path = tmp_path / "sealing-key"
    verification_key = setup_keys(key_path, interval=EPOCH, now=KEYS_MADE)
    config = table_config(tmp_path, "three_card_21", {})
    events = legal_stream(TableSpec.from_dict({"game": "three_card_21"}), random.Random(4), 3)

    async def play() -> int:
        service = TableService(config, Journal(config.journal_path))
        service.sealer = Sealer(key_path)
        clock = EpochClock(5)  # rows stamped in the epochs the seals name, as the daemon's are
        stamp_rows(service.journal, clock)
        await service.start()
        for event in events[:30]:
            await service.handle_event(event)
        clock.set(EPOCH + 1)
        service.seal(at(EPOCH + 1))
        for event in events[30:45]:
            await service.handle_event(event)
        service.journal.flush()
        last = service.journal.last_seq
        service.journal.discard()  # no seal, no head file: a crash
        return last

    crashed_at = asyncio.run(play())
    restarted = TableService(config, Journal(config.journal_path))
    restarted.sealer = Sealer(key_path)
    restarted.seal_unsealed_at_start(at(restart_after))
    restarted.close()
    seals = [row.seq for row in read_rows(config.journal_path) if row.kind == "seal"]
    return config.journal_path, seals, crashed_at, verification_key


def test_rows_left_unsealed_by_a_crash_are_sealed_at_the_next_start(tmp_path, capsys):
    from tests.journal.sealed import EPOCH

    journal, seals, crashed_at, verification_key = _crashed_table(tmp_path, 3 * EPOCH + 5)
    # the seal at the end of epoch 1, then the start's seal right after the crash's last row
    assert len(seals) == 2 and seals[1] == crashed_at + 1, (seals, crashed_at)
    key = read_key_file(tmp_path / "sealing-key").as_dict()
    assert key["epoch"] == 3  # the epochs that passed while down: their keys erased unused
    code, out = verify(capsys, str(journal), "--verify-key", str(verification_key))
    assert code == 0, out
    assert f"last seal row {seals[1]}, 2 seals, proven); 0 rows unsealed after it" in out, out


def test_a_start_in_the_epoch_of_the_last_seal_leaves_the_rows_for_its_end(tmp_path):
    from tests.journal.sealed import EPOCH

    _, seals, _, _ = _crashed_table(tmp_path, EPOCH + 30)
    assert len(seals) == 1  # the held key seals them when its epoch ends, not now


# --- every seal vouches only for rows stamped while its key was held ----------------------------


def _reseal_with_every_key(rows, verification_key: VerificationKey):
    """A rewrite by someone holding every epoch's key (the seed): each seal's head and MAC
    recomputed under its own epoch's key, so only the stamps can tell."""
    from tablectl.controller.record.journal import row_hash
    from tablectl.controller.record.sealing import KeyDeriver, seal_mac

    deriver = KeyDeriver(verification_key)
    prev = str(rows[0][5])
    out = []
    for row in rows:
        seq, kind, rnd, when, body = int(row[0]), str(row[1]), row[2], str(row[3]), str(row[4])
        if kind == "seal":
            fields = json.loads(body)
            fields["last_seq"], fields["head"] = seq - 1, prev
            fields["mac"] = seal_mac(deriver.key_for(fields["epoch"]), fields)
            body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        digest = row_hash(prev, seq, kind, rnd, when, body)
        out.append([seq, kind, rnd, when, body, prev, digest])
        prev = digest
    return out


def _restamp(rows, seq: int, seconds: float) -> None:
    from tests.journal.sealed import at

    for row in rows:
        if row[0] == seq:
            row[3] = at(seconds).isoformat(timespec="microseconds")
            return
    raise AssertionError(f"no row {seq}")


def test_a_row_stamped_after_its_seals_epoch_ended_fails_naming_the_row_and_the_seal(
    tmp_path, capsys
):
    from tests.journal.sealed import EPOCH

    sealed = build_sealed(tmp_path)
    rows = read_all(sealed.path)
    under_second = sealed.seal_seqs[1] - 2  # a row under the seal of epoch 1
    _restamp(rows, under_second, 4 * EPOCH + 5)  # stamped in epoch 4: after epoch 1 + grace
    write_all(sealed.path, _reseal_with_every_key(rows, sealed.verification_key))
    code, out = verify(capsys, str(sealed.path), "--verify-key", str(sealed.verification_key))
    assert code == 1, out
    assert f"row {under_second} is stamped" in out, out
    assert f"after epoch 1 of seal row {sealed.seal_seqs[1]} ended" in out, out


def test_a_row_stamped_before_its_seals_span_fails_naming_the_row_and_the_seal(tmp_path, capsys):
    """A row under the seal of epoch 2 (after the seal of epoch 1, written in epoch 2)
    stamped in epoch 0: backdated."""
    sealed = build_sealed(tmp_path)
    rows = read_all(sealed.path)
    backdated = sealed.seal_seqs[1] + 2
    _restamp(rows, backdated, 10)
    write_all(sealed.path, _reseal_with_every_key(rows, sealed.verification_key))
    code, out = verify(capsys, str(sealed.path), "--verify-key", str(sealed.verification_key))
    assert code == 1, out
    assert f"row {backdated} is stamped" in out, out
    assert f"before seal row {sealed.seal_seqs[2]} (epoch 2, after the seal of epoch 1)" in out


def test_a_seal_whose_epoch_is_not_after_its_predecessors_fails(tmp_path, capsys):
    sealed = build_sealed(tmp_path)
    rows = read_all(sealed.path)
    edit_body(rows, sealed.seal_seqs[2], lambda body: body.update(epoch=1, prev_epoch=1))
    write_all(sealed.path, _reseal_with_every_key(rows, sealed.verification_key))
    code, out = verify(capsys, str(sealed.path), "--verify-key", str(sealed.verification_key))
    assert code == 1, out
    assert f"seal row {sealed.seal_seqs[2]}: epoch 1" in out, out


def test_restarts_within_one_epoch_run_the_key_ahead_of_the_clock_and_still_verify(
    tmp_path, capsys
):
    """Each clean stop seals and erases its key, so three stops inside epoch 5 leave seals of
    epochs 5, 6 and 7 written in epoch 5, over rows stamped in epoch 5: legitimate (each key
    was made as its predecessor's seal was written), and they verify."""
    from tablectl.controller.record.journal import Journal
    from tablectl.controller.record.sealing import Sealer, setup_keys
    from tests.journal.sealed import EPOCH, TABLE, EpochClock, at, stamp_rows

    key_path = tmp_path / "sealing-key"
    key = setup_keys(key_path, interval=EPOCH, now=KEYS_MADE)
    path = tmp_path / "journal.sqlite"
    clock = EpochClock(5 * EPOCH + 1)
    for restart in range(3):
        sealer = Sealer(key_path)
        sealer.catch_up(at(clock.seconds))
        with Journal(path) as journal:
            stamp_rows(journal, clock)
            if restart == 0:
                journal.append("table", TABLE)
            for index in range(4):
                journal.append("event", {"type": "card_drawn", "n": index, "run": restart})
            now = at(clock.seconds + 1)  # the clean stop, still in epoch 5
            body = sealer.seal_body(journal.last_seq, journal.last_hash, now)
            journal.append("seal", body, durable=True)
            sealer.sealed(body, now)
            clock.set(clock.seconds + 2)
    epochs = [json.loads(str(r[4]))["epoch"] for r in read_all(path) if r[1] == "seal"]
    assert epochs == [5, 6, 7]
    code, out = verify(capsys, str(path), "--verify-key", str(key))
    assert code == 0, out
