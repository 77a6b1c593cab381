"""The integrator's command-line options refuse bad input naming it, before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from tablectl.controller import cli

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
