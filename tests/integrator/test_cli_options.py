"""The integrator's command-line options refuse bad input naming it, before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from tablectl.controller.commands import cli

CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--driver", "dealer=acme-cs9"], "'dealer=acme-cs9': expected DEVICE=DRIVER"),
        (["--driver", "shoe"], "'shoe': expected DEVICE=DRIVER"),
        (
            ["--game", "three_card_21", "--driver", "reader=acme-cs9"],
            "is a shoe, not a hole_card_reader",
        ),
        (["--game", "five_card_hilo", "--driver", "reader=reference"], "no device 'reader'"),
        (["--driver", "shoe=nosuch"], "no simulator registered for driver 'nosuch'"),
    ],
)
def test_demo_refuses_a_driver_it_cannot_seat(args, message, capsys, tmp_path):
    saved = structlog.get_config()  # the demo configures logging to this test's stderr
    try:
        status = cli.main(
            ["demo", "--rounds", "1", "--metrics-listen", "127.0.0.1:0", "--state-dir",
             str(tmp_path), *args]
        )  # fmt: skip
    finally:
        structlog.configure(**saved)
    assert status == 2
    assert message in capsys.readouterr().err


def test_example_config_prints_each_games_file_and_names_what_is_missing(capsys):
    for path in CONFIG.glob("*.toml"):
        assert cli.main(["example-config", path.stem]) == 0
        assert capsys.readouterr().out == path.read_text()
    assert cli.main(["example-config"]) == 2
    assert "name a game: three_card_21" in capsys.readouterr().err
    assert cli.main(["example-config", "--path", "systemd"]) == 0
    assert (Path(capsys.readouterr().out.strip()) / "tablectl@.service").is_file()


def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for deeper, subsub in _subparsers(sub):
                    yield f"{name} {deeper}", subsub


def _visible_options(parser) -> set[str]:
    import argparse

    return {
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
    }


def test_one_option_name_per_idea_the_old_names_kept_hidden(tmp_path):
    """A file or directory written is --output; a table is --table, in every command. The old
    names (--out, --report, --table-id) still work for a release, hidden from the help."""
    parsers = dict(_subparsers(cli.build_parser()))
    for command, parser in parsers.items():
        shown = _visible_options(parser)
        assert not shown & {"--out", "--report", "--table-id"}, (command, shown)
    assert "--output" in _visible_options(parsers["floor report"])
    assert "--output" in _visible_options(parsers["conformance"])
    assert "--output" in _visible_options(parsers["journal export"])
    assert "--table" in _visible_options(parsers["demo"])
    old = parsers["floor report"].parse_args(
        ["--dsn", "x", "--gaming-day", "2026-11-23", "--out", str(tmp_path)]
    )
    assert old.output == tmp_path
    assert parsers["demo"].parse_args(["--table-id", "t9"]).table_id == "t9"
    assert parsers["demo"].parse_args(["--table", "t9"]).table_id == "t9"
    assert parsers["demo"].parse_args([]).table_id == "demo"
    conformance = ["shoe", "--driver", "reference", "--report", "r.md"]
    assert parsers["conformance"].parse_args(conformance).output == Path("r.md")
