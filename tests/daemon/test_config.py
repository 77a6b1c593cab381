"""Table configuration: the examples load; each garbled key is named with file and allowance."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.common.config import (
    DEFAULT_METRICS_PORT,
    ConfigError,
    SerialTransportConfig,
    UsbTransportConfig,
    load_config,
    parse_listen_address,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
EXAMPLES = sorted(CONFIG_DIR.glob("*.toml"))

MINIMAL = """
[table]
id = "t01"
game = "five_card_hilo"

[devices.shoe]
kind = "shoe"
driver = "reference"
allowed_serials = ["S1"]
allowed_firmware_sha256 = ["{sha}"]
[devices.shoe.transport]
type = "usb"
vendor_id = 0x1209
product_id = 0x7a02
""".replace("{sha}", "ab" * 32)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    for problem in caught.value.problems:
        assert problem.startswith(f"{path}: "), problem
    return caught.value.problems


def test_four_commented_examples_one_per_game():
    games = {load_config(path).game for path in EXAMPLES}
    assert games == {"three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"}
    for path in EXAMPLES:
        assert path.read_text().count("#") >= 10, f"{path} should be commented"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_pass_check_config(path, capsys):
    assert cli.main(["check-config", "--file-only", str(path)]) == 0
    assert "OK" in capsys.readouterr().out


def test_minimal_config_takes_systemd_defaults(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.table_id == "t01"
    assert config.journal_path == Path("/var/lib/tablectl/t01/journal.sqlite")
    assert config.operator_socket == Path("/run/tablectl/t01/operator.sock")
    assert config.operator_group == "tablectl-op"
    assert (config.metrics_host, config.metrics_port) == ("127.0.0.1", 8337)
    assert config.gaming_day_start == datetime.time(6, 0)
    assert config.log_level == "info"
    (shoe,) = config.devices
    assert shoe.transport == UsbTransportConfig(vendor_id=0x1209, product_id=0x7A02)
    assert config.table_dict() == {
        "type": "table",
        "game": "five_card_hilo",
        # a real table watches its shuffles (Q1, Q2) unless its configuration says not to
        "options": {"gaming_day_start": "06:00", "interpretations": {"shuffle_integrity": True}},
    }


def test_default_metrics_port_is_outside_exporter_range_and_ephemeral_ports():
    assert not 9100 <= DEFAULT_METRICS_PORT <= 9999
    assert DEFAULT_METRICS_PORT < 32768


def test_serial_transport_parsed(tmp_path):
    text = MINIMAL.replace(
        'type = "usb"\nvendor_id = 0x1209\nproduct_id = 0x7a02',
        'type = "serial"\nport = "/dev/ttyUSB0"\nbaudrate = 57600',
    )
    (shoe,) = load_config(write(tmp_path, text)).devices
    assert shoe.transport == SerialTransportConfig(port="/dev/ttyUSB0", baudrate=57600)


@pytest.mark.parametrize(
    ("old", "new", "key", "allowed"),
    [
        ('game = "five_card_hilo"', 'game = "baccarat"', "table.game", "'asia_poker'"),
        ('id = "t01"', 'id = "T 01!"', "table.id", "[a-z0-9_-]"),
        ('kind = "shoe"', 'kind = "toaster"', "devices.shoe.kind", "'hole_card_reader'"),
        ('type = "usb"', 'type = "bluetooth"', "devices.shoe.transport.type", "'serial'"),
        ("vendor_id = 0x1209", "vendor_id = 70000", "devices.shoe.transport.vendor_id", "0xffff"),
        ('["S1"]', "[]", "devices.shoe.allowed_serials", "non-empty list"),
        ('["' + "ab" * 32 + '"]', '["xyz"]', "devices.shoe.allowed_firmware_sha256[0]", "0-9a-f"),
        (
            'game = "five_card_hilo"',
            'game = "five_card_hilo"\ncolour = "red"',
            "table.colour",
            "allowed keys",
        ),
        (
            'game = "five_card_hilo"',
            'game = "five_card_hilo"\ngaming_day_start = "25:00"',
            "table.gaming_day_start",
            "HH:MM",
        ),
        (
            'game = "five_card_hilo"',
            'game = "five_card_hilo"\nlog_level = "loud"',
            "table.log_level",
            "'debug'",
        ),
    ],
)
def test_each_error_names_file_key_and_allowance(tmp_path, old, new, key, allowed):
    assert old in MINIMAL
    problems = problems_of(tmp_path, MINIMAL.replace(old, new))
    matching = [p for p in problems if f": {key}: " in p]
    assert matching, problems
    assert allowed in matching[0]


def test_every_problem_reported_at_once(tmp_path):
    text = MINIMAL.replace('"five_card_hilo"', '"poker"') + '\n[metrics]\nlisten = "nowhere"\n'
    problems = problems_of(tmp_path, text)
    keys = {p.split(": ")[1] for p in problems}
    assert {"table.game", "metrics.listen"} <= keys


def test_garbled_toml_names_file_and_position(tmp_path):
    path = write(tmp_path, "[table\nid = ")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value)
    assert "line 1" in str(caught.value)


def test_check_config_exit_1_with_problems_on_stderr(tmp_path, capsys):
    path = write(tmp_path, MINIMAL.replace('kind = "shoe"', 'kind = "toaster"'))
    assert cli.main(["check-config", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: devices.shoe.kind: 'toaster' is not allowed" in err


def test_the_examples_together_can_run_on_one_pc(capsys):
    """Each example has its own metrics port, journal, socket and id: check-config of all passes."""
    assert cli.main(["check-config", "--file-only", *map(str, EXAMPLES)]) == 0
    assert capsys.readouterr().out.count(": OK: ") == len(EXAMPLES)


def test_two_tables_sharing_a_port_or_journal_are_named(tmp_path, capsys):
    first = write(tmp_path, MINIMAL)
    (tmp_path / "second").mkdir()
    second = write(tmp_path / "second", MINIMAL)
    assert cli.main(["check-config", "--file-only", str(first), str(second)]) == 1
    err = capsys.readouterr().err
    assert f"{first}, {second}: the same metrics port" in err and "127.0.0.1:8338" in err
    assert f"{first}, {second}: the same journal" in err
    assert f"{first}, {second}: the same table id" in err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["check-config", str(tmp_path / "absent.toml")]) == 1
    assert "absent.toml: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8337", ("127.0.0.1", 8337)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:9", ("localhost", 9)),
    ],
)
def test_listen_address_parsing(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["8337", "host.example:80", "1.2.3.4:70000", "[::1]8337"])
def test_bad_listen_address_refused(text):
    with pytest.raises(ValueError):
        parse_listen_address(text)


def test_missing_or_malformed_transport_is_one_clear_problem(tmp_path):
    start = MINIMAL.index("[devices.shoe.transport]")
    without = MINIMAL[:start]
    problems = problems_of(tmp_path, without)
    assert [p for p in problems if "transport" in p] == [
        f"{tmp_path / 'table.toml'}: devices.shoe.transport: is required: a table with "
        "type = 'serial', 'usb'"
    ]
    problems = problems_of(tmp_path, without + 'x = "usb"\n')
    assert any(": devices.shoe.x: unknown key" in p for p in problems)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_configured_transport_builds_with_the_transport_layer(path):
    from tablectl.drivers import transport as transport_module

    for device in load_config(path).devices:
        transport = transport_module.make_transport(
            device.transport.type, **device.transport.transport_options()
        )
        assert isinstance(transport, transport_module.Transport)


def test_operator_roles_and_limits_are_read_and_checked():
    from tablectl.controller.common.config import OperatorLimits, parse_config

    base = {"table": {"id": "t1", "game": "five_card_hilo"}}
    config = parse_config(base, "t1.toml")
    assert config.supervisor_group == "tablectl-sup"
    assert config.operator_limits == OperatorLimits()
    config = parse_config(
        {**base, "operator": {"supervisor_group": "floor", "idle_timeout": 5, "event_burst": 2}},
        "t1.toml",
    )
    assert config.supervisor_group == "floor"
    assert config.operator_limits.idle_timeout == 5 and config.operator_limits.event_burst == 2
    with pytest.raises(ConfigError) as error:
        parse_config(
            {
                **base,
                "operator": {
                    "supervisor_group": "Floor Staff",
                    "max_connections": 10_000,
                    "event_burst": 1.5,
                    "max_conections": 3,
                },
            },
            "t1.toml",
        )
    problems = "\n".join(error.value.problems)
    assert "t1.toml: operator.supervisor_group: 'Floor Staff' is not allowed" in problems
    assert "operator.max_connections: 10000 is not allowed; expected a whole number 1-512" in (
        problems
    )
    assert "operator.event_burst: 1.5 is not allowed; expected a whole number 1-1000" in problems
    assert "operator.max_conections: unknown key" in problems
