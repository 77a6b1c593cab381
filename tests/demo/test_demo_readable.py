"""The demo a person can follow: a line per step with rules and reasons, the daemon's log in
a file, a summary that matches the journal, and a reused state dir resumed or refused in words."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from demo_helpers import CARD_TOKEN, decisions, demo_command, events, journal_rows, run_demo

from tablectl.simulators.demo import DEFAULT_PACE, add_arguments

STEP = re.compile(r"^  \d\d:\d\d:\d\d  (\S+) +(.+)$")


def test_the_demo_is_paced_by_default_and_fast_on_request() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default = parser.parse_args([])
    assert default.pace == DEFAULT_PACE > 0 and not default.fast
    assert parser.parse_args(["--fast"]).fast
    with pytest.raises(SystemExit):
        parser.parse_args(["--fast", "--pace", "1"])


@pytest.mark.slow
def test_default_output_shows_each_step_with_its_rule_and_a_summary_from_the_journal(
    tmp_path: Path,
) -> None:
    # the default output, with a short pause so the test stays quick (`run_demo` adds --fast,
    # which --pace may not be given with)
    command = [arg for arg in demo_command(tmp_path) if arg != "--fast"]
    result = subprocess.run(
        [*command, "--rounds", "2", "--seed", "4", "--pace", "0.01"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    steps = [line for line in out.splitlines() if STEP.match(line)]
    assert steps, out
    # each round's deal, card by card, with the count each hand holds; never a card
    assert any("a card leaves the shoe" in line and "position 1 1" in line for line in steps)
    assert any("no more bets (positions" in line for line in steps)
    burn = [line for line in steps if "-> burn_card [G2]: " in line]
    assert burn and "burned" in burn[0]  # the decision with its rule and its reason in words
    assert not CARD_TOKEN.search(out), out
    # the daemon's log went to its file, not into the lines a person reads
    assert not any(line.lstrip().startswith("{") for line in (out + result.stderr).splitlines())
    log = (tmp_path / "daemon.log").read_text().splitlines()
    assert log and all(json.loads(line)["event"] for line in log)
    assert f"daemon log: {tmp_path / 'daemon.log'}" in out

    rows = journal_rows(tmp_path / "journal.sqlite")
    ruled = Counter(f"{d['rule_id']}:{d['decision']}" for d in decisions(rows))
    expected_rules = ", ".join(f"{key} x{n}" for key, n in sorted(ruled.items()))
    collected = len(events(rows, "hands_collected"))
    assert collected == 2
    assert (
        f"summary (counted from the journal): {len(events(rows))} events, {collected} rounds "
        f"ended ({collected} completed, 0 voided)"
    ) in out
    assert f"  decisions by rule: {expected_rules}" in out
    # the three counts of events, each said for what it is (issue 34): since ready, handled
    # (the event-processing line), journaled; and the rows they make with the rest
    since_ready = int(out.split("stopped after ")[1].split()[0])
    handled = int(out.split("tablectl_event_processing_seconds, ")[1].split()[0])
    journaled = len(events(rows))
    assert handled == journaled
    assert (
        f"  the counts: {since_ready} events since ready + {journaled - since_ready} as the "
        f"table started (before ready) = {journaled} events, each handled by the daemon and "
        f"journaled; the journal's {len(rows)} rows of this run are those events, their "
        f"{len(decisions(rows))} decision"
    ) in out


@pytest.mark.slow
def test_a_reused_state_dir_resumes_or_says_why_not(tmp_path: Path) -> None:
    first = run_demo(tmp_path, "--game", "five_card_hilo", "--rounds", "1", "--seed", "2")
    assert first.returncode == 0, first.stderr
    again = run_demo(tmp_path, "--game", "five_card_hilo", "--rounds", "1", "--seed", "3")
    assert again.returncode == 0, again.stderr
    assert "resuming " in again.stdout and "round    2" in again.stdout
    assert "1 rounds ended (1 completed, 0 voided)" in again.stdout  # this run's round only

    other = run_demo(tmp_path, "--game", "asia_poker", "--rounds", "1", timeout=30)
    assert other.returncode == 2  # refused to start, nothing changed
    message = other.stderr.strip().splitlines()[-1]
    assert "was written for five_card_hilo" in message and "asks for asia_poker" in message
    assert "resume it with --game five_card_hilo --dealing manual_shoe" in message
    assert "--state-dir" in message


@pytest.mark.slow
def test_the_demo_says_where_its_table_is_and_the_exact_command_that_resumes_it(
    tmp_path: Path,
) -> None:
    """A second `make demo` starts a new table: the start says so and where its state is, and
    the stop prints the command that goes on with this one (run here, as printed)."""
    env = {k: v for k, v in os.environ.items() if k != "MAKELEVEL"}
    state = tmp_path / "state"
    first = subprocess.run(
        [*demo_command(state, "--game", "asia_poker"), "--rounds", "1", "--seed", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert first.returncode == 0, first.stderr
    assert f"state in {state} (a new table)" in first.stdout
    command = f"tablectl demo --state-dir {state} --game asia_poker --metrics-listen 127.0.0.1:0"
    assert f"resume this table later with: {command}" in first.stdout
    assert first.stdout.rstrip().splitlines()[-1] == f"resume this table with: {command}"
    # the printed command, run as printed, resumes the same table
    argv = shlex.split(command)
    assert argv[0] == "tablectl"
    again = subprocess.run(
        [*demo_command(state)[:3], *argv[1:], "--fast", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert f"state in {state} (resumed)" in again.stdout
    assert "resuming " in again.stdout and "round    2" in again.stdout
    # under make, the command is make's
    made = subprocess.run(
        [*demo_command(state, "--game", "asia_poker"), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "MAKELEVEL": "1"},
    )
    assert made.returncode == 0, made.stderr
    assert (
        f'resume this table with: make demo DEMO_ARGS="--state-dir {state} --game asia_poker '
        '--metrics-listen 127.0.0.1:0"'
    ) in made.stdout
