"""Device tests run over every attachment device_bench knows."""

from __future__ import annotations

import pytest
from device_bench import ATTACHMENTS


@pytest.fixture(params=sorted(ATTACHMENTS))
def attachment(request: pytest.FixtureRequest) -> str:
    return str(request.param)
