"""A lossyfs mount per test (tests/powercut/lossyfs.py), unmounted whatever happens; the tally
of the session's power cuts, by mode and site, printed at its end and written to
`powercut-tally.txt` and `.json` in the session's temporary directory (pytest's basetemp)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powercut.harness import TABLES, tally, tally_text
from tests.powercut.lossyfs import LossyMount, fuse_missing

TALLY_KEY = pytest.StashKey[str]()


def need_fuse() -> None:
    why = fuse_missing()
    if why is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"lossyfs cannot run: {why} (tests/tools/install-system-tools.sh)")
        pytest.skip(f"lossyfs cannot run: {why}")


@pytest.fixture
def lossy(tmp_path: Path) -> Iterator[LossyMount]:
    need_fuse()
    mount = LossyMount(tmp_path / "disk", tmp_path / "mnt")
    mount.mount()
    try:
        yield mount
    finally:
        mount.unmount()


@pytest.fixture(scope="session", autouse=True)
def _cut_tally(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """After the session's last power-cut test: the tally of its cuts, written and kept for
    the terminal summary (the CI log shows it without -s)."""
    yield
    rows = tally(TABLES)
    if not rows:
        return
    text = tally_text(rows)
    where = tmp_path_factory.getbasetemp()
    (where / "powercut-tally.txt").write_text(text + "\n")
    (where / "powercut-tally.json").write_text(json.dumps(rows, indent=1) + "\n")
    pytestconfig.stash[TALLY_KEY] = f"{text}\n(written to {where / 'powercut-tally.txt'})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    text = terminalreporter.config.stash.get(TALLY_KEY, None)
    if text is not None:
        terminalreporter.write_sep("=", "power cuts by mode and site (tests/powercut)")
        terminalreporter.write_line(text)
