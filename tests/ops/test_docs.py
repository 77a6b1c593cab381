"""docs/operations.md stays accurate to the files it describes."""

from __future__ import annotations

import re

from opstools import KNOWN_METRICS, PROMETHEUS_DIR, REPO, SYSTEMD_DIR

DOC = (REPO / "docs" / "operations.md").read_text()


def test_every_alert_is_documented() -> None:
    alerts = re.findall(r"- alert:\s*(\S+)", (PROMETHEUS_DIR / "alerts.yml").read_text())
    assert alerts
    for alert in alerts:
        assert f"`{alert}`" in DOC, f"{alert} missing from docs/operations.md"


def test_every_metric_is_documented() -> None:
    for metric in KNOWN_METRICS:
        assert f"`{metric}`" in DOC, f"{metric} missing from docs/operations.md"


def test_every_shipped_systemd_file_is_documented() -> None:
    for path in SYSTEMD_DIR.iterdir():
        assert f"systemd/{path.name}" in DOC, f"systemd/{path.name} missing from the install steps"


def test_fixed_names() -> None:
    unit = (SYSTEMD_DIR / "tablectl@.service").read_text()
    assert "ExecStart=/usr/bin/tablectl run --config /etc/tablectl/%i.toml" in unit
    for name in (
        "/usr/bin/tablectl",
        "/etc/tablectl/TABLE.toml",
        "/var/lib/tablectl/TABLE/journal.sqlite",
        "/run/tablectl/TABLE/operator.sock",
        "127.0.0.1:8337",
        "tablectl-op",
    ):
        assert name in DOC, name
