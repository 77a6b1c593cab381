"""A lossyfs mount per test (tests/powercut/lossyfs.py), unmounted whatever happens."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powercut.lossyfs import LossyMount, fuse_missing


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
