"""[journal] options: checked like every key, each problem naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablectl.controller.common.config import ConfigError, parse_config


def config(**journal: object):
    return parse_config(
        {"table": {"id": "t1", "game": "five_card_hilo"}, "journal": journal}, "t.toml"
    )


def test_defaults_and_values() -> None:
    plain = config(path="/var/lib/tablectl/t1/journal.sqlite")
    assert plain.checkpoint_rounds == 25 and plain.retain_days == 0
    assert plain.archive_dir is None
    assert plain.sealing_key_path == Path("/var/lib/tablectl/t1/sealing-key")
    set_ = config(
        path="/j/journal.sqlite",
        sealing_key="/k/key",
        checkpoint_rounds=10,
        retain_days=90,
        archive_dir="/a",
    )
    assert (set_.sealing_key_path, set_.checkpoint_rounds, set_.retain_days, set_.archive_dir) == (
        Path("/k/key"),
        10,
        90,
        Path("/a"),
    )


def test_each_bad_value_is_named() -> None:
    with pytest.raises(ConfigError) as raised:
        config(checkpoint_rounds=0, retain_days=-1, archive_dir="relative", sealing_key=3, x=1)
    problems = "\n".join(raised.value.problems)
    for key in ("checkpoint_rounds", "retain_days", "archive_dir", "sealing_key", "journal.x"):
        assert f"journal.{key}" in problems or key in problems, problems
    assert "'relative' is not an absolute path" in problems
