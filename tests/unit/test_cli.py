"""The command line's dispatch: unknown commands fail clearly, help lists commands."""

import argparse

from tablectl.controller.commands import cli


def test_unknown_command_exits_2_and_names_it(capsys):
    assert cli.main(["no-such-command"]) == 2
    assert "no-such-command" in capsys.readouterr().err


def test_no_command_prints_the_help_on_stderr_and_exits_2(capsys):
    """A usage error, as for any missing argument: `tablectl && next` must not go on."""
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "commands:" in captured.err and "a COMMAND is required" in captured.err


def test_a_mistyped_command_gets_did_you_mean(capsys):
    assert cli.main(["stauts"]) == 2
    assert "tablectl: unknown command 'stauts'; did you mean 'status'?" in capsys.readouterr().err
    assert cli.main(["jornal", "verify"]) == 2
    assert "did you mean 'journal'?" in capsys.readouterr().err
    assert cli.main(["xyzzy"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # nothing close: no guess


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`tablectl replay FILE | head -1`: no traceback when the pipe closes early."""
    import subprocess
    import sys

    scenario = tmp_path / "many.jsonl"
    lines = ['{"type": "table", "game": "three_card_21", "options": {}}']
    # Every bets_closed with 7 positions is a rejected decision (C11): plenty of output.
    lines += ['{"type": "bets_closed", "positions": [1, 2, 3, 4, 5, 6, 7]}'] * 20000
    scenario.write_text("\n".join(lines) + "\n")
    replay = subprocess.Popen(
        [sys.executable, "-m", "tablectl.controller", "replay", str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert replay.stdout is not None and replay.stderr is not None
    first = replay.stdout.readline()
    replay.stdout.close()  # the reader goes away, as `head -1` does
    status = replay.wait(timeout=60)
    assert b'"rule_id": "C11"' in first
    assert b"Traceback" not in replay.stderr.read()
    assert status == 141


def test_the_top_level_help_lists_what_a_table_runs_first() -> None:
    """A table's people and IT look for run, status and check-config: first in the list, the
    developers' tools (replay, diagram, sim, ...) after (issue 34)."""
    assert list(cli.COMMANDS)[:3] == ["run", "status", "check-config"]
    assert list(cli.COMMANDS).index("replay") > list(cli.COMMANDS).index("journal")


def test_the_journal_summary_names_every_journal_action() -> None:
    parser = cli.build_parser()
    journal = next(
        action.choices["journal"]
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    actions = next(
        action.choices
        for action in journal._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    summary = cli.COMMANDS["journal"].help
    for name in actions:
        word = {"setup-keys": "setup-keys", "show": "cards", "prove": "proof"}.get(name, name)
        assert word in summary.replace("back up", "backup"), (name, summary)
