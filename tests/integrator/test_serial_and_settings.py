"""`[devices.NAME.transport]` takes the whole serial line and the driver's timeouts; a free
`[devices.NAME.settings]` is checked by the driver's own schema (check-config, daemon start)."""

from __future__ import annotations

import asyncio
import grp
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import serial

from tablectl.controller.commands import cli
from tablectl.controller.common.config import ConfigError, DriverTimeouts, load_config
from tablectl.controller.common.logs import configure_logging
from tablectl.controller.service.daemon import run_daemon
from tablectl.drivers.transport import make_transport
from tablectl.simulators.pty import PtyAttachment
from tests.unsealed import UNSEALED

TABLE = """
[table]
id = "t01"
game = "five_card_hilo"
[devices.shoe]
kind = "shoe"
driver = "{driver}"
allowed_serials = ["S1"]
allowed_firmware_sha256 = ["{sha}"]
[devices.shoe.transport]
type = "serial"
port = "{port}"
{transport}
[devices.shoe.settings]
{settings}
"""


def table(tmp_path: Path, *, driver="acme-cs9", port="/dev/null", transport="", settings=""):
    path = tmp_path / "t01.toml"
    path.write_text(
        TABLE.format(
            driver=driver, sha="ab" * 32, port=port, transport=transport, settings=settings
        )
    )
    return path


class Sink:
    def connect(self, send):
        pass

    def receive(self, data):
        pass

    def disconnect(self):
        pass


def test_the_serial_line_reaches_pyserial(tmp_path):
    async def main():
        pty = PtyAttachment(Sink(), asyncio.get_running_loop())
        config = load_config(
            table(
                tmp_path,
                port=pty.plug(),
                transport="baudrate = 9600\nbytesize = 7\nparity = 'O'\nstopbits = 2\n"
                "xonxoff = true\nrtscts = true\nexclusive = true\n"
                "handshake_timeout = 3.5\ncommand_timeout = 0.5",
            )
        )
        (device,) = config.devices
        assert device.transport.timeouts == DriverTimeouts(
            handshake_timeout=3.5, command_timeout=0.5
        )
        transport = make_transport("serial", **device.transport.transport_options())
        await transport.open(asyncio.get_running_loop(), lambda data: None, lambda exc: None)
        try:
            port = transport._serial
            assert (port.baudrate, port.bytesize, port.parity, port.stopbits) == (9600, 7, "O", 2)
            assert (port.xonxoff, port.rtscts, port.dsrdtr) == (True, True, False)
            # exclusive: a second process (or a second open) cannot take the port
            with pytest.raises(serial.SerialException):
                serial.Serial(pty.path, exclusive=True)
        finally:
            await transport.close()
            pty.unplug()

    asyncio.run(main())


def test_a_bad_serial_line_is_named_key_by_key(tmp_path):
    path = table(
        tmp_path,
        transport="bytesize = 9\nparity = 'X'\nstopbits = 3\nrtscts = 'yes'\n"
        "command_timeout = 0\nflow = 'hw'",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = "\n".join(caught.value.problems)
    for expected in (
        "devices.shoe.transport.bytesize: 9 is not allowed; allowed: 5, 6, 7, 8",
        "devices.shoe.transport.parity: 'X' is not allowed; allowed: N, E, O, M, S",
        "devices.shoe.transport.stopbits: 3 is not allowed; allowed: 1, 1.5, 2",
        "devices.shoe.transport.rtscts: 'yes' is not allowed; expected true or false",
        "devices.shoe.transport.command_timeout: 0 is not allowed; expected seconds",
        "devices.shoe.transport.flow: unknown key",
    ):
        assert f"{path}: {expected}" in text


def test_check_config_validates_settings_by_the_drivers_schema(tmp_path, capsys):
    good = _daemon_table(tmp_path, "status_poll_seconds = 0.5\ncommand_tries = 2", CS9_LINE)
    assert cli.main(["check-config", str(good)]) == 0, capsys.readouterr().err
    bad = _daemon_table(tmp_path, "status_poll_seconds = 'often'\ncommand_tries = 9", CS9_LINE)
    assert cli.main(["check-config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{bad}: devices.shoe.settings.status_poll_seconds: 'often' is not of type 'number'" in err
    )
    assert f"{bad}: devices.shoe.settings.command_tries: 9 is greater than the maximum of 5" in err
    # the reference driver takes no settings at all
    ref = _daemon_table(tmp_path, "speed = 3", driver="reference")
    assert cli.main(["check-config", str(ref)]) == 1
    assert "devices.shoe.settings.speed: unknown setting for this driver; allowed: none" in (
        capsys.readouterr().err
    )


#: the Acme CS-9's line, as its driver declares it (acme_shoe.protocol.SERIAL_LINE)
CS9_LINE = "baudrate = 9600\nbytesize = 8\nparity = 'E'\nstopbits = 1"


def test_check_config_compares_the_serial_line_with_the_drivers(tmp_path, capsys):
    """A CS-9 is 9600 8E1: a table that leaves the line out (115200 8N1 by default) or gives
    another is refused, each differing setting named with the driver's value."""
    left_out = _daemon_table(tmp_path, "")
    assert cli.main(["check-config", str(left_out)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{left_out}: devices.shoe.transport.baudrate: 115200 (the default), but the acme-cs9 "
        "driver declares 9600 for its device's serial line: set baudrate = 9600" in err
    )
    assert f"{left_out}: devices.shoe.transport.parity: 'N' (the default), but" in err
    assert "devices.shoe.transport.bytesize" not in err  # 8, as declared
    wrong = _daemon_table(tmp_path, "", CS9_LINE.replace("'E'", "'O'"))
    assert cli.main(["check-config", str(wrong)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{wrong}: devices.shoe.transport.parity: 'O', but the acme-cs9 driver declares 'E' "
        'for its device\'s serial line: set parity = "E"' in err
    )
    assert "baudrate" not in err
    right = _daemon_table(tmp_path, "", CS9_LINE)
    assert cli.main(["check-config", str(right)]) == 0, capsys.readouterr().err


def test_no_settings_are_checked_without_jsonschema_unless_the_schema_asks_for_some():
    """A table with no `settings` starts without importing jsonschema; a driver whose schema
    requires a setting still has it named when it is missing."""
    probe = (
        "import sys\n"
        "from tablectl.drivers.reference import ReferenceShoe\n"
        "assert ReferenceShoe.settings_problems({}) == []\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported for no settings'\n"
        "class Needs(ReferenceShoe):\n"
        "    settings_schema = {'type': 'object', 'required': ['speed'],\n"
        "                       'properties': {'speed': {'type': 'number'}}}\n"
        "print(Needs.settings_problems({}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "'speed' is a required property" in result.stdout


def test_check_config_names_a_driver_that_is_not_installed(tmp_path, capsys):
    path = _daemon_table(tmp_path, "", driver="nosuch-shoe")
    assert cli.main(["check-config", str(path)]) == 1
    assert (
        f"{path}: devices.shoe.driver: no shoe driver named 'nosuch-shoe' "
        "(available: acme-cs9, reference)"
    ) in capsys.readouterr().err


def _daemon_table(
    tmp_path: Path, settings: str, transport: str = "", driver: str = "acme-cs9"
) -> Path:
    """A table whose state lives under tmp_path, so the machine's preflight passes too."""
    path = table(tmp_path, driver=driver, port=str(tmp_path / "no-such-port"),
                 transport=transport, settings=settings)  # fmt: skip
    path.write_text(
        path.read_text()
        + f"""
[journal]
path = "{tmp_path}/journal.sqlite"
{UNSEALED}
[metrics]
listen = "127.0.0.1:0"
[operator]
socket = "{tmp_path}/op.sock"
group = "{grp.getgrgid(os.getgid()).gr_name}"
supervisor_group = "{grp.getgrgid(os.getgid()).gr_name}"
"""
    )
    return path


def test_the_daemon_refuses_to_start_on_settings_the_driver_refuses(tmp_path):
    path = _daemon_table(tmp_path, settings="status_poll_seconds = 'often'")
    run = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "run", "--config", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode != 0
    assert (
        f"{path}: devices.shoe.settings.status_poll_seconds: 'often' is not of type 'number'"
        in run.stderr
    )


def test_the_daemon_hands_the_settings_and_timeouts_to_the_driver(tmp_path):
    config = load_config(
        _daemon_table(tmp_path, "status_poll_seconds = 0.4", transport="command_timeout = 0.7")
    )

    # the daemon logs through structlog: to a stream of this test's own, not one an earlier
    # test configured and pytest has since closed
    log = io.StringIO()
    configure_logging("warning", mode="json", stream=log)

    async def main():
        stop = asyncio.Event()
        seen = {}

        def on_ready(daemon):
            shoe = daemon.drivers["shoe"]
            seen.update(
                settings=shoe.device_settings,
                poll=shoe.poll_seconds,
                timeout=shoe.settings.command_timeout,
                parity=shoe.transport.parity,
            )
            stop.set()

        status = await run_daemon(
            config, stop=stop, on_ready=on_ready, device_wait=0.2, handle_signals=False
        )
        return status, seen

    status, seen = asyncio.run(main())
    assert status == 0, log.getvalue()
    assert seen == {
        "settings": {"status_poll_seconds": 0.4},
        "poll": 0.4,
        "timeout": 0.7,
        "parity": "N",  # not configured: 8N1, whatever the driver's manual says
    }
