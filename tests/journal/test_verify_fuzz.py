"""`journal verify` gives a verdict on any file whatever its damage: never a traceback.

Random damage to a real journal file (bytes flipped, runs overwritten, zeroed pages, the file
cut short or padded): every outcome is 0 (intact: the damage hit unused space), 1 (tampered or
damaged at a named row) or 2 (not a readable journal).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.record.journal import EXIT_TAMPERED, EXIT_UNREADABLE, verify_journal
from tablectl.controller.record.sealing import VerificationKey
from tests.journal.sealed import build_sealed

CASES = 300
VERIFY = [sys.executable, "-m", "tablectl.controller", "journal", "verify"]


def damage(data: bytearray, rng: random.Random) -> bytearray:
    """One random kind of damage."""
    kind = rng.randrange(5)
    if kind == 0:  # a few bytes flipped anywhere
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # a run overwritten with random bytes
        start = rng.randrange(len(data))
        length = rng.randint(1, 512)
        data[start : start + length] = rng.randbytes(min(length, len(data) - start))
    elif kind == 2:  # a page zeroed
        page = rng.randrange(max(1, len(data) // 4096))
        data[page * 4096 : (page + 1) * 4096] = bytes(min(4096, len(data) - page * 4096))
    elif kind == 3:  # cut short
        del data[rng.randrange(1, len(data)) :]
    else:  # a header byte changed (the first 100 bytes describe the file)
        data[rng.randrange(100)] = rng.randrange(256)
    return data


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, VerificationKey]:
    directory = tmp_path_factory.mktemp("pristine")
    sealed = build_sealed(directory, epochs=6, rows=25)
    return sealed.path.read_bytes(), sealed.verification_key


def test_every_random_damage_gets_a_verdict(tmp_path: Path, pristine) -> None:
    data, key = pristine
    rng = random.Random(20261123)
    outcomes = {0: 0, 1: 0, 2: 0}
    for case in range(CASES):
        path = tmp_path / f"case{case}.sqlite"
        path.write_bytes(bytes(damage(bytearray(data), rng)))
        for verification_key in (None, key):
            result = verify_journal(path, verification_key=verification_key)
            assert result.exit_code in (0, 1, 2), (case, result)
            if result.exit_code == EXIT_TAMPERED:
                assert result.first_bad_seq is not None and str(result.first_bad_seq) in (
                    result.message
                ), (case, result.message)
            if result.exit_code == EXIT_UNREADABLE:
                assert "not" in result.message, (case, result.message)
        outcomes[result.exit_code] += 1
        path.unlink()
    # the damage is real: most cases are found, in both ways
    assert outcomes[1] > CASES // 10 and outcomes[2] > CASES // 10, outcomes


@pytest.mark.long  # minutes under load: make test-long
def test_the_command_line_never_ends_in_a_traceback(tmp_path: Path, pristine) -> None:
    data, key = pristine
    rng = random.Random(7)
    for case in range(12):
        path = tmp_path / f"cli{case}.sqlite"
        path.write_bytes(bytes(damage(bytearray(data), rng)))
        done = subprocess.run(
            [*VERIFY, str(path), "--verify-key", str(key)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode in (0, 1, 2), done
        assert "Traceback" not in done.stderr, done.stderr


def test_a_directory_with_a_damaged_segment_gets_a_verdict(tmp_path: Path, pristine) -> None:
    data, _ = pristine
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "journal.sqlite").write_bytes(data[:5000])
    shutil.copyfile(tmp_path / "d" / "journal.sqlite", tmp_path / "d" / "other.sqlite")
    result = verify_journal(tmp_path / "d")
    assert result.exit_code in (1, 2)
    assert verify_journal(tmp_path / "missing").exit_code == 2
