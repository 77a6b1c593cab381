"""Running `tablectl demo` as a process, and reading what it left behind."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tablectl.controller.record.journal import read_rows

#: a card anywhere in a line (the summary must never show one; it shows no card at all)
CARD_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:10|[2-9TJQKA])[cdhs](?![A-Za-z0-9])|\bJK\b")
SUMMARY = re.compile(r"^round +(\d+) (\S+) +(\S+) +positions (\S+) +cards +(\d+) decisions (.*)$")


def demo_command(state_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tablectl.controller",
        "demo",
        "--state-dir",
        str(state_dir),
        "--metrics-listen",
        "127.0.0.1:0",
        "--fast",
        *extra,
    ]


def run_demo(state_dir: Path, *extra: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        demo_command(state_dir, *extra), capture_output=True, text=True, timeout=timeout
    )


def verify_journal(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "journal", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def summary_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("round ")]


def line_decisions(line: str) -> set[str]:
    """The `rule_id:decision` entries of a summary line (x2 counts dropped)."""
    match = SUMMARY.match(line)
    assert match, f"not a summary line: {line!r}"
    text = match.group(6).split(" fault ")[0].split(" devices ")[0].split(" | ")[0]
    return {re.sub(r"x\d+$", "", item) for item in text.split() if item != "-"}


def line_faults(line: str) -> list[str]:
    match = re.search(r" fault (\S+)(?: devices \S+)? \|", line)
    return match.group(1).split("+") if match else []


def journal_rows(path: Path) -> list[Any]:
    return list(read_rows(path))


def events(rows: Sequence[Any], event_type: str | None = None) -> list[dict[str, Any]]:
    return [
        row.body
        for row in rows
        if row.kind == "event" and (event_type is None or row.body.get("type") == event_type)
    ]


def decisions(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [row.body for row in rows if row.kind == "decision"]
