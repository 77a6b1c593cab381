"""The command line's dispatch: unknown commands fail clearly, help lists commands."""

from tablectl.controller import cli


def test_unknown_command_exits_2_and_names_it(capsys):
    assert cli.main(["no-such-command"]) == 2
    assert "no-such-command" in capsys.readouterr().err


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
