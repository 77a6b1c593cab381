"""A table is sealed unless its configuration says otherwise in words: `check-config` and `run`
refuse a table with no sealing key, naming the key's path and `tablectl journal setup-keys`;
`sealing = "off"` under `[journal]` runs it unsealed, and nothing else does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.journal.history import write_config

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TABLECTL, *args], capture_output=True, text=True, timeout=60)


def as_installed(directory: Path) -> Path:
    """A configuration as an installer writes it: nothing said about sealing."""
    path = write_config(directory, sealing="on")
    path.write_text(path.read_text().replace('sealing = "on"\n', ""))
    assert "sealing" not in path.read_text()
    return path


def test_a_table_without_its_sealing_key_is_refused_until_setup_keys(tmp_path: Path) -> None:
    config = as_installed(tmp_path / "t")
    key = tmp_path / "t" / "sealing-key"
    checked = tablectl("check-config", str(config))
    assert checked.returncode == 1, checked.stdout
    message = f"{config}: journal.sealing: no sealing key at {key}: create it with `tablectl "
    assert message in checked.stderr
    assert f"journal setup-keys --config {config}`" in checked.stderr
    assert "off this PC" in checked.stderr and 'sealing = "off"' in checked.stderr

    started = tablectl("run", "--config", str(config))
    assert started.returncode == 2, started.stderr
    assert message in started.stderr and "not started" in started.stderr
    assert not (tmp_path / "t" / "journal.sqlite").exists()  # refused before touching it

    made = tablectl("journal", "setup-keys", "--config", str(config))
    assert made.returncode == 0, made.stderr
    assert key.is_file()
    ok = tablectl("check-config", str(config))
    assert ok.returncode == 0, ok.stderr
    assert "sealing" not in ok.stderr


@pytest.mark.long  # minutes under load: make test-long
def test_unsealed_only_when_the_configuration_says_off_in_words(tmp_path: Path) -> None:
    config = as_installed(tmp_path / "t")
    text = config.read_text()
    config.write_text(text.replace("[journal]\n", '[journal]\nsealing = "off"\n'))
    assert tablectl("check-config", str(config)).returncode == 0
    for word in ("false", '"no"', '"OFF"', "0"):
        config.write_text(text.replace("[journal]\n", f"[journal]\nsealing = {word}\n"))
        refused = tablectl("check-config", str(config))
        assert refused.returncode == 1, word
        assert f"{config}: journal.sealing: " in refused.stderr and '"off"' in refused.stderr
