"""The command line's dispatch: unknown commands fail clearly, help lists commands."""

from controller import cli


def test_unknown_command_exits_2_and_names_it(capsys):
    assert cli.main(["no-such-command"]) == 2
    assert "no-such-command" in capsys.readouterr().err


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
