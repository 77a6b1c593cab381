"""A daemon a failed test left running is stopped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.journal.history import STARTED


@pytest.fixture(autouse=True)
def _stop_left_daemons() -> Iterator[None]:
    yield
    while STARTED:
        started = STARTED.pop()
        if started.process.poll() is None:
            started.process.kill()
        started.stop()
