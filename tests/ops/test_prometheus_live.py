"""The alerts and the dashboard against a real Prometheus scraping a real daemon.

Debian's `prometheus` server runs in a temp dir (its own TSDB, a free port picked by binding
port 0, scrape and rule evaluation every second) with config/prometheus/alerts.yml, scraping
`tablectl run` on simulated devices (tests/e2e's rig). The table goes through the states the
alerts and panels are for, and Prometheus is asked what a person would see:

- each panel's query of config/grafana/tablectl.json returns data (the floor's panels none:
  this table has no floor, and a floor metric it does not have must not read 0, "fine");
- a start with a device unplugged and a one-second unplug raise no TablectlDeviceReconnecting
  (it counts link losses over minutes, not retries) while the retries climb; DeviceDown stays
  pending within its minute of grace.

The alerts' timing over minutes is promtool's (alerts_test.yml); this is the real thing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opstools import GRAFANA_DIR, PROMETHEUS_DIR

from tablectl.simulators.ports import port_held_for_life
from tests.e2e.conftest import Table
from tests.e2e.test_daemon_process import clean, in_shoe, shuffle_into_shoe

#: what Grafana puts for its variables: every instance; a rate window of a few scrapes
GRAFANA_VARIABLES = {"$__rate_interval": "10s", "$instance": ".*"}
#: panels of a table that ships to a floor store; this table has none
FLOOR_PANELS = ("Floor store: how far behind", "Floor store: ship errors")
#: panels of a table with witnesses ([witness]); this table has none either
WITNESS_PANELS = ("Witnesses: how far behind, refusals",)


class Prometheus:
    """A Prometheus server of our own in a temp dir, on a free port, asked over its HTTP API."""

    def __init__(self, binary: str, root: Path, target_port: int) -> None:
        self.root = root
        config = root / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {PROMETHEUS_DIR / 'alerts.yml'}\n"
            "scrape_configs:\n  - job_name: tablectl\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n"
        )
        self.port = port_held_for_life()
        self.log = (root / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        deadline = time.monotonic() + 30
        while not self._ready():
            assert self.process.poll() is None, (root / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Prometheus did not become ready"
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                return True
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}{query}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            body = json.loads(reply.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]

    def scraped(self) -> float:
        """The time of the last successful scrape of the daemon (0: none yet)."""
        up = self.query("timestamp(up)")
        return float(up[0]["value"][1]) if up else 0.0

    def wait_scrapes(self, count: int = 3) -> None:
        """Until `count` more scrapes (and rule evaluations) than now have happened."""
        since = time.time()
        deadline = since + 30
        while self.scraped() < since + count - 1:
            assert time.time() < deadline, "no scrape of the daemon"
            time.sleep(0.2)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log.close()


@pytest.fixture
def prometheus_binary(require_tool: Callable[[str], str]) -> str:
    return require_tool("prometheus")


@pytest.fixture
def hilo(tmp_path: Path) -> Iterator[Table]:
    # Prometheus is configured with the target before the daemon starts, as on a floor: the
    # one place a port number is chosen ahead of its listener
    table = Table("five_card_hilo", metrics_port=port_held_for_life())
    try:
        yield table
    finally:
        table.close()


def panels() -> list[tuple[str, list[str]]]:
    board = json.loads((GRAFANA_DIR / "tablectl.json").read_text())
    found: list[tuple[str, list[str]]] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("targets"):
            exprs = [target["expr"] for target in node["targets"]]
            for variable, value in GRAFANA_VARIABLES.items():
                exprs = [expr.replace(variable, value) for expr in exprs]
            found.append((node["title"], exprs))
        for child in node.get("panels", []):
            walk(child)

    walk(board)
    return found


def has_data(result: list[dict[str, Any]]) -> bool:
    """A sample a panel can draw: present and a number (NaN is a gap on a graph)."""
    return any(not math.isnan(float(sample["value"][1])) for sample in result)


def no_alert(prometheus: Prometheus, name: str) -> None:
    alerts = prometheus.alerts(name)
    assert alerts == [], f"{name}: {alerts}"


@pytest.mark.long  # ~45 s: a Prometheus, a daemon, a round and the retries of a minute
def test_alerts_and_every_panel_against_a_real_prometheus(
    prometheus_binary: str, hilo: Table, tmp_path: Path
) -> None:
    report: list[str] = []
    # Prometheus first, as on a floor; then a start with the shoe unplugged: the daemon
    # becomes ready degraded and the driver retries.
    prometheus = Prometheus(prometheus_binary, tmp_path, hilo.metrics_port)
    try:
        hilo.sim("unplug", "shoe")
        hilo.start("--device-wait", "1")
        # the retries climb past what the old rule (attempts over 15 minutes > 3) fired on
        old_rule = "increase(tablectl_driver_reconnect_attempts_total[15m]) > 3"
        deadline = time.monotonic() + 30
        while not (retries := prometheus.query(old_rule)):
            assert time.monotonic() < deadline, "the retries never passed 3"
            time.sleep(0.5)
        prometheus.wait_scrapes(3)
        no_alert(prometheus, "TablectlDeviceReconnecting")
        down = prometheus.alerts("TablectlDeviceDown")
        assert [a["state"] for a in down] == ["pending"], down  # its minute of grace
        assert down[0]["labels"]["table"] == hilo.status()["table"]  # the table, not a port
        report.append(
            f"start with the shoe unplugged: retries {retries[0]['value'][1]}, "
            f"Reconnecting none, DeviceDown {down[0]['state']}"
        )

        hilo.sim("replug", "shoe")
        hilo.until(lambda s: s["devices"]["shoe"] == "up", timeout=15, what="the shoe up")
        # one unplug of a second
        hilo.sim("unplug", "shoe")
        time.sleep(1.0)
        hilo.sim("replug", "shoe")
        hilo.until(lambda s: s["devices"]["shoe"] == "up", timeout=15, what="the shoe back")
        prometheus.wait_scrapes(4)
        losses = prometheus.query('tablectl_device_link_losses_total{device="shoe"}')
        assert float(losses[0]["value"][1]) == 1, losses
        no_alert(prometheus, "TablectlDeviceReconnecting")
        report.append("one-second unplug: 1 link loss, Reconnecting none")

        # A round, then a stack dispensed before "no more bets": a C9 notification pending.
        shuffle_into_shoe(hilo)
        clean(hilo.op("bets_closed", positions=[1, 3]))
        for _ in range(3):
            assert hilo.sim("call", "shoe", method="dispense") is not None
        in_shoe(hilo, 37)
        clean(hilo.op("deal_completed"))
        clean(hilo.op("stub_counted", count=37))
        clean(hilo.op("hands_collected"))
        hilo.sim("call", "shuffler", method="load")
        shuffle_into_shoe(hilo)
        assert hilo.sim("call", "shoe", method="dispense") is not None
        hilo.until(lambda s: s["pending_supervisor_notifications"] == ["C9"], what="C9 pending")
        # and the same again at once: the repeats are folded into one alarm and counted
        for _ in range(2):
            assert hilo.sim("call", "shoe", method="dispense") is not None
        deadline = time.monotonic() + 10
        while not hilo.metric("tablectl_alarms_coalesced_total"):
            assert time.monotonic() < deadline, "no alarm coalesced"
            time.sleep(0.1)
        for _ in range(5):  # events within the rate window of the latency panels
            clean(hilo.op("dealer_changed"))
        prometheus.wait_scrapes(3)

        empty: list[str] = []
        for title, exprs in panels():
            results = [prometheus.query(expr) for expr in exprs]
            shown = any(has_data(result) for result in results)
            report.append(f"panel {title!r}: {[len(r) for r in results]} series")
            if title in FLOOR_PANELS + WITNESS_PANELS:
                assert not any(results), f"{title}: data on a table without it: {results}"
            elif not shown:
                empty.append(f"{title}: {exprs}")
        assert not empty, "panels without data:\n" + "\n".join(empty)
        pending = prometheus.query(panels_expr("Supervisor notifications pending"))
        waiting = len(hilo.status()["pending_supervisor_notifications"])
        assert waiting >= 1 and [float(s["value"][1]) for s in pending] == [waiting], pending
        assert pending[0]["metric"].get("table") == "e2e"
    finally:
        prometheus.close()
        if os.environ.get("TABLECTL_PROMETHEUS_REPORT"):
            Path(os.environ["TABLECTL_PROMETHEUS_REPORT"]).write_text("\n".join(report) + "\n")


def panels_expr(title: str) -> str:
    return next(exprs[0] for name, exprs in panels() if name == title)
