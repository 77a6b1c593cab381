"""Configurations of simulated tables for the end-to-end tests (and the benches)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tests.unsealed import UNSEALED

#: Per game: the table options the e2e rounds are written for, and its devices (name -> kind).
GAMES: dict[str, dict[str, Any]] = {
    "five_card_hilo": {
        "options": {"dealing": "automated_shoe", "shuffler": "counting", "positions": 7},
        "devices": {"shuffler": "shuffler", "shoe": "shoe", "rack": "discard_rack"},
        "shoe": {"automated": True, "decks": 1},
    },
    "heads_up_holdem": {
        "options": {"dealing": "manual_shoe", "shuffler": "counting", "positions": 6},
        "devices": {"shuffler": "shuffler", "shoe": "shoe"},
        "shoe": {"decks": 1},
    },
    "asia_poker": {
        "options": {"dealing": "manual_shoe", "shuffler": "counting", "positions": 6},
        "devices": {"shuffler": "shuffler", "shoe": "shoe"},
        "shoe": {"decks": 1, "joker": True},
    },
    "three_card_21": {
        "options": {
            "decks": 6,
            "dealing": "manual_shoe",
            "shuffler": "counting",
            "reader": "concealed",
        },
        "devices": {
            "shuffler": "shuffler",
            "shoe": "shoe",
            "reader": "hole_card_reader",
            "rack": "discard_rack",
        },
        "shoe": {"decks": 6},
    },
    # the example game installed as a package of its own (examples/high-card-game)
    "high_card": {
        "options": {"dealing": "manual_shoe", "shuffler": "counting", "positions": 5},
        "devices": {"shuffler": "shuffler", "shoe": "shoe"},
        "shoe": {"decks": 1},
    },
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def table_toml(
    game: str,
    state_dir: Path,
    devices: dict[str, dict[str, Any]],
    *,
    metrics_port: int,
    table_id: str = "e2e",
    group: str = "root",
    supervisor_group: str = "root",
    log_level: str = "info",
) -> str:
    """A table's TOML: `devices` maps a device name to its kind, port (or usb), serial, hash."""
    lines = [
        "[table]",
        f'id = "{table_id}"',
        f'game = "{game}"',
        f'log_level = "{log_level}"',
        "[table.options]",
    ]
    lines += [f"{k} = {_toml_value(v)}" for k, v in GAMES[game]["options"].items()]
    for name, device in devices.items():
        lines += [
            f"[devices.{name}]",
            f'kind = "{device["kind"]}"',
            'driver = "reference"',
            f'allowed_serials = ["{device["serial"]}"]',
            f'allowed_firmware_sha256 = ["{device["firmware_sha256"]}"]',
            f"[devices.{name}.transport]",
        ]
        if device.get("usb"):
            lines += [
                'type = "usb"',
                f"vendor_id = {REFERENCE_VENDOR_ID}",
                f"product_id = {REFERENCE_PRODUCT_IDS[device['kind']]}",
                f'serial = "{device["serial"]}"',
            ]
        else:
            lines += ['type = "serial"', f'port = "{device["port"]}"']
    lines += [
        "[journal]",
        f'path = "{state_dir / "journal.sqlite"}"',
        UNSEALED,
        "[metrics]",
        f'listen = "127.0.0.1:{metrics_port}"',
        "[operator]",
        f'socket = "{state_dir / "operator.sock"}"',
        f'group = "{group}"',
        f'supervisor_group = "{supervisor_group}"',
    ]
    return "\n".join(lines) + "\n"
