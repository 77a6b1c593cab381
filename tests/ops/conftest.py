"""Fixtures for tests/ops: the real tools, found or skipped/failed (see opstools)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opstools import require_tool as _require_tool


@pytest.fixture
def require_tool() -> Callable[[str], str]:
    return _require_tool
