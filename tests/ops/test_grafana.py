"""The Grafana dashboard: valid JSON, every query parses and uses only known metrics."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from opstools import (
    ALLOWED_SERIES,
    GRAFANA_DIR,
    HISTOGRAMS,
    KNOWN_METRICS,
    metric_names,
    run,
)

DASHBOARD = GRAFANA_DIR / "tablectl.json"
#: Grafana's own variables, replaced by what they stand for when a query runs.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$instance": ".*"}


def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panel_exprs(node: Any) -> Iterator[tuple[str, str]]:
    """(panel title, expr) for every query target, rows' nested panels included."""
    if isinstance(node, dict):
        for target in node.get("targets", []):
            yield node.get("title", "?"), target["expr"]
        for child in node.get("panels", []):
            yield from panel_exprs(child)


def expand(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def test_dashboard_is_valid_json_with_panels() -> None:
    board = dashboard()
    assert board["uid"] == "tablectl"
    assert board["panels"], "dashboard has no panels"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_every_expression_uses_only_known_metrics() -> None:
    exprs = list(panel_exprs(dashboard()))
    assert exprs
    for title, expr in exprs:
        names = metric_names(expand(expr))
        assert names, f"panel {title!r}: no metric in {expr!r}"
        unknown = names - ALLOWED_SERIES
        assert not unknown, f"panel {title!r}: unknown metric(s) {sorted(unknown)} in {expr!r}"


def test_variable_queries_use_known_metrics() -> None:
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"]
        match = re.fullmatch(r"label_values\((\w+)(?:\{[^}]*\})?,\s*(\w+)\)", query)
        assert match, f"variable {variable['name']}: unexpected query {query!r}"
        assert match.group(1) in KNOWN_METRICS


def test_every_metric_is_on_the_dashboard() -> None:
    shown = set()
    for _title, expr in panel_exprs(dashboard()):
        for name in metric_names(expand(expr)):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            shown.add(base if base in HISTOGRAMS else name)
    assert shown >= KNOWN_METRICS, f"not on the dashboard: {sorted(KNOWN_METRICS - shown)}"


def test_every_expression_parses(require_tool: Callable[[str], str], tmp_path: Path) -> None:
    """promtool parses each query, written as a recording rule."""
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for index, (_title, expr) in enumerate(panel_exprs(dashboard())):
        lines += [
            f"      - record: dashboard:query_{index}",
            f"        expr: {json.dumps(expand(expr))}",
        ]
    rules = tmp_path / "dashboard_rules.yml"
    rules.write_text("\n".join(lines) + "\n")
    result = run([require_tool("promtool"), "check", "rules", str(rules)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_metric_checker_sees_a_stranger() -> None:
    """The name check can fail: a misspelt metric is reported."""
    assert metric_names("rate(tablectl_round_total[5m])") - ALLOWED_SERIES == {
        "tablectl_round_total"
    }
