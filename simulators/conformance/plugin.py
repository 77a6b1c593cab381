"""The conformance kit as a pytest plugin (registered through the `pytest11` entry point).

A vendor's test suite asks for the ``tablectl_conformance`` fixture::

    def test_our_shoe_conforms(tablectl_conformance):
        report = tablectl_conformance("shoe", "acme-cs9")
        assert report.passed, report.markdown()

Each run's report table is printed in pytest's terminal summary, and written to
``--tablectl-conformance-report DIR`` (one markdown file per run) when given. On a real
device: ``tablectl_conformance("shoe", "acme-cs9", port="/dev/ttyUSB0")``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tablectl.simulators.conformance.kit import Report, conformance

_REPORTS: list[Report] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tablectl conformance")
    group.addoption(
        "--tablectl-conformance-report",
        metavar="DIR",
        default=None,
        help="write each tablectl conformance report (markdown) into DIR",
    )


@pytest.fixture
def tablectl_conformance(
    request: pytest.FixtureRequest,
) -> Callable[..., Report]:
    """Run the conformance kit: ``(kind, driver, port=None, **options) -> Report``."""

    def run(kind: str, driver: str, port: str | None = None, **options: Any) -> Report:
        report = conformance(kind, driver, port, **options)
        _REPORTS.append(report)
        folder = request.config.getoption("--tablectl-conformance-report")
        if folder:
            path = Path(folder)
            path.mkdir(parents=True, exist_ok=True)
            name = driver.replace(":", "_").replace("/", "_")
            (path / f"{kind}-{name}.md").write_text(report.markdown())
        return report

    return run


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for report in _REPORTS:
        terminalreporter.write_sep("-", f"tablectl conformance: {report.kind} {report.driver}")
        terminalreporter.write(report.markdown())
