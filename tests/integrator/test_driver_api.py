"""The driver API version: the registry refuses a driver written for another major version
(or a later minor one, or none), naming both versions, wherever a driver is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.drivers.base import DRIVER_API_VERSION
from tablectl.drivers.registry import DriverApiMismatch, DriverNotFound, _import

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.integrator.api_drivers"


def test_this_apis_driver_is_taken() -> None:
    assert DRIVER_API_VERSION == "1.0"
    assert _import(f"{MODULE}:ShoeForThisApi").driver_api == "1.0"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("ShoeForApi2", "is written for the driver API 2.0, and this tablectl provides 1.0"),
        ("ShoeForApi0", "is written for the driver API 0.9, and this tablectl provides 1.0"),
        ("ShoeForApi1Later", "is written for the driver API 1.7, and this tablectl provides 1.0"),
        ("ShoeSayingNothing", "declares no driver API version"),
    ],
)
def test_a_driver_for_another_api_is_refused_by_name(name: str, said: str) -> None:
    with pytest.raises(DriverApiMismatch) as refused:
        _import(f"{MODULE}:{name}")
    assert isinstance(refused.value, DriverNotFound)  # every caller already says these
    assert said in str(refused.value) and f"{MODULE}:{name}" in str(refused.value)


def test_the_conformance_kit_refuses_it_with_the_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "conformance", "shoe", "--driver",
         f"{MODULE}:ShoeForApi2", "--simulator", "reference"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is written for the driver API 2.0, and this tablectl provides 1.0" in done.stderr
    assert "Traceback" not in done.stderr
