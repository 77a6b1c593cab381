"""`[witness]` in a table's configuration, through `tablectl check-config` (the file's shape
in config.py, each key's signature in note.py): clear errors naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.record.note import ALG_COSIGNATURE_V1, IdentityKey

ROOT = Path(__file__).resolve().parents[2]
WITNESS_KEY = IdentityKey.generate("regulator.example/w1", ALG_COSIGNATURE_V1).vkey
OTHER_KEY = IdentityKey.generate("floor.example/w2", ALG_COSIGNATURE_V1).vkey
TABLE_KEY = IdentityKey.generate("casino.example/t1").vkey
# one character of the key material changed: its key ID no longer matches it
ALTERED_KEY = WITNESS_KEY[:-3] + ("B" if WITNESS_KEY[-3] == "A" else "A") + WITNESS_KEY[-2:]


def check(tmp_path: Path, section: str) -> subprocess.CompletedProcess[str]:
    text = (ROOT / "config" / "three_card_21.toml").read_text() + "\n" + section
    path = tmp_path / "table.toml"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "check-config", "--file-only", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_valid_witness_section(tmp_path: Path) -> None:
    done = check(
        tmp_path,
        f"""[witness]
quorum = 1
witnesses = [
  {{ url = "http://10.1.2.3:7380", key = "{WITNESS_KEY}" }},
  {{ url = "https://floor.example/witness", key = "{OTHER_KEY}" }},
]
""",
    )
    assert done.returncode == 0, done.stderr
    assert "witnesses: regulator.example/w1, floor.example/w2 (quorum 1)" in done.stdout


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ("[witness]\nquorum = 1\n", "witness.witnesses: is required"),
        (
            f'[witness]\nwitnesses = [{{ url = "ftp://x", key = "{WITNESS_KEY}" }}]\n',
            "witness.witnesses[0].url: 'ftp://x' is not an http:// or https:// URL",
        ),
        (
            f'[witness]\nquorum = 2\nwitnesses = [{{ url = "http://a:1", key = "{WITNESS_KEY}" }}]'
            "\n",
            "witness.quorum: 2 is not allowed; expected a whole number 1-1",
        ),
        (
            '[witness]\nwitnesses = [{ url = "http://a:1", key = "not a key" }]\n',
            "witness.witnesses[0].key: 'not a key' is not a witness public key",
        ),
        (
            f'[witness]\nwitnesses = [{{ url = "http://a:1", key = "{WITNESS_KEY}" }},'
            f' {{ url = "http://b:1", key = "{WITNESS_KEY}" }}]\n',
            "a second witness named 'regulator.example/w1'",
        ),
        (
            f'[witness]\nwitnesses = [{{ url = "http://a:1", key = "{TABLE_KEY}" }}]\n',
            "witness.witnesses[0].key: casino.example/t1: a table's signing key",
        ),
        (
            f'[witness]\nwitnesses = [{{ url = "http://a:1", key = "{ALTERED_KEY}" }}]\n',
            "does not match the key",
        ),
        (
            f'[witness]\nwitnesses = [{{ url = "http://a:1", key = "{WITNESS_KEY}", name = "x" }}]'
            "\n",
            "witness.witnesses[0]",
        ),
    ],
)
def test_bad_witness_sections_are_named(tmp_path: Path, section: str, said: str) -> None:
    done = check(tmp_path, section)
    assert done.returncode == 1
    assert said in done.stderr, done.stderr
