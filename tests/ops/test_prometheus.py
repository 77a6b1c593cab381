"""Alert rules: promtool check/test, coverage of every alert, and only known metrics."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from opstools import ALLOWED_SERIES, PROMETHEUS_DIR, metric_names, run

ALERTS = PROMETHEUS_DIR / "alerts.yml"
ALERTS_TEST = PROMETHEUS_DIR / "alerts_test.yml"
REQUIRED_ALERTS = {
    "TablectlDeviceJam",
    "TablectlDeckRemoved",
    "TablectlDeviceDown",
    "TablectlStubCountOverdue",
    "TablectlSupervisorNotificationUnanswered",
    "TablectlDealingStopped",
    "TablectlJournalSpaceLow",
    "TablectlJournalSpaceCritical",
    "TablectlJournalLarge",
}


def alert_names() -> list[str]:
    return re.findall(r"^\s*- alert:\s*(\S+)\s*$", ALERTS.read_text(), re.MULTILINE)


def alert_exprs() -> list[str]:
    """Each rule's expr, block scalar or inline."""
    exprs = []
    lines = ALERTS.read_text().splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if not match:
            continue
        indent, rest = len(match.group(1)), match.group(2).strip()
        if rest not in {"|", ">", "|-", ">-"}:
            exprs.append(rest)
            continue
        body = []
        for follower in lines[index + 1 :]:
            if follower.strip() and len(follower) - len(follower.lstrip()) <= indent:
                break
            body.append(follower.strip())
        exprs.append(" ".join(body))
    return exprs


def test_promtool_check_rules(require_tool: Callable[[str], str]) -> None:
    result = run([require_tool("promtool"), "check", "rules", str(ALERTS)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in result.stdout


def test_promtool_test_rules(require_tool: Callable[[str], str]) -> None:
    result = run([require_tool("promtool"), "test", "rules", ALERTS_TEST.name], cwd=PROMETHEUS_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_issue_alerts_exist() -> None:
    assert set(alert_names()) >= REQUIRED_ALERTS


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    """Each alert has at least one case where it fires and one where it must not."""
    text = ALERTS_TEST.read_text()
    cases = re.split(r"^\s*- eval_time:", text, flags=re.MULTILINE)[1:]
    firing: set[str] = set()
    silent: set[str] = set()
    for case in cases:
        name = re.search(r"alertname:\s*(\S+)", case)
        assert name, f"test case without alertname: {case[:80]!r}"
        if re.search(r"exp_alerts:\s*\[\]", case):
            silent.add(name.group(1))
        elif re.search(r"exp_alerts:\s*\n\s*- exp_labels:", case):
            firing.add(name.group(1))
    for alert in alert_names():
        assert alert in firing, f"{alert} is never tested firing"
        assert alert in silent, f"{alert} is never tested not firing"


def test_alerts_use_only_known_metrics() -> None:
    for expr in alert_exprs():
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        assert names <= ALLOWED_SERIES, f"unknown metric(s) {names - ALLOWED_SERIES} in {expr!r}"


def test_rule_tests_catch_a_broken_rule(require_tool: Callable[[str], str], tmp_path: Path) -> None:
    """The rule tests can fail: drop the notification's grace period and they must."""
    promtool = require_tool("promtool")
    broken = ALERTS.read_text().replace(
        "expr: tablectl_supervisor_notifications_pending > 0\n        for: 5m\n",
        "expr: tablectl_supervisor_notifications_pending > 0\n",
    )
    assert broken != ALERTS.read_text()
    (tmp_path / "alerts.yml").write_text(broken)
    shutil.copy(ALERTS_TEST, tmp_path / "alerts_test.yml")
    result = run([promtool, "test", "rules", "alerts_test.yml"], cwd=tmp_path)
    assert result.returncode != 0
    assert "TablectlSupervisorNotificationUnanswered" in result.stdout + result.stderr


def test_every_alert_is_in_the_operations_guide_and_no_other() -> None:
    """docs/operations.md's alert table lists exactly the alerts alerts.yml defines (issue 34:
    TablectlClockStep fired with no line in the guide the on-call reads)."""
    guide = (PROMETHEUS_DIR.parents[1] / "docs" / "operations.md").read_text()
    table = guide.split("\nAlerts (", 1)[1].split("\n\n", 2)[1]
    documented = re.findall(r"^\| `(Tablectl\w+)` \|", table, re.MULTILINE)
    assert sorted(documented) == sorted(alert_names())
    assert len(documented) == len(set(documented))


def heading_anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer gives the headings (GitHub's: lower case, punctuation
    dropped, spaces to hyphens)."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_alert_has_a_runbook_url_into_a_section_of_the_operations_guide() -> None:
    """Each alert links where the on-call reads what to do: a section of docs/operations.md as
    the package installs it (/usr/share/doc/tablectl/, the unit's Documentation=)."""
    guide = (PROMETHEUS_DIR.parents[1] / "docs" / "operations.md").read_text()
    anchors = heading_anchors(guide)
    urls = re.findall(r"^\s*runbook_url:\s*\"([^\"]+)\"\s*$", ALERTS.read_text(), re.MULTILINE)
    assert len(urls) == len(alert_names())
    for url in urls:
        page, _, anchor = url.partition("#")
        assert page == "file:///usr/share/doc/tablectl/operations.md", url
        assert anchor in anchors, f"{url}: no such section in docs/operations.md"
