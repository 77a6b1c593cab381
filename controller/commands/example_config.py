"""`tablectl example-config GAME`: print a commented configuration to start a table from.

The examples ship with the package (controller.resources), so an install from a wheel has
them: ``tablectl example-config GAME > /etc/tablectl/TABLE.toml``, then edit.
A game installed as a package of its own (the ``tablectl.games`` entry points,
docs/games.md) ships no file here: its example is written from the game's module (its
profile and its options), without devices. ``--path systemd`` prints the folder of the
shipped unit, udev rules, sysusers and tmpfiles entries (``--path config``: example
configs, alert rules, dashboard; ``--path docs``), for the install steps of
docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tablectl.controller.common.config import (
    DEFAULT_CHECKPOINT_ROUNDS,
    DEFAULT_LOG_LEVEL,
    DEFAULT_METRICS_HOST,
    DEFAULT_METRICS_PORT,
    JOURNAL_PATH_TEMPLATE,
    OPERATOR_GROUP,
    OPERATOR_SOCKET_TEMPLATE,
    SUPERVISOR_GROUP,
)
from tablectl.controller.engine.registry import (
    ENTRY_POINT_GROUP,
    GameLoadError,
    GameNotFound,
    bundled_game_names,
    find_game,
    game_names,
)
from tablectl.controller.engine.table import SHUFFLERS
from tablectl.controller.service.resources import NotShipped, example_config, shared

#: The shell function completing GAME (the completion script's preamble, `completion_preamble`).
COMPLETE_GAME = {"bash": "_tablectl_games", "zsh": "_tablectl_games"}


def completion_preamble() -> dict[str, str]:
    """bash and zsh functions offering the bundled games' names for `example-config GAME`."""
    names = " ".join(bundled_game_names())
    return {
        "bash": f"\n# tablectl example-config: the games\n_tablectl_games() {{\n"
        f'  compgen -W "{names}" -- "$1"\n}}\n',
        "zsh": f"\n# tablectl example-config: the games\n_tablectl_games() {{\n"
        f"  compadd -- {names}\n}}\n",
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    game = parser.add_argument(
        "game",
        nargs="?",
        metavar="GAME",
        help=f"the table's game: {', '.join(bundled_game_names())}, or one installed "
        f"through the {ENTRY_POINT_GROUP} entry points",
    )
    game.complete = COMPLETE_GAME  # type: ignore[attr-defined]  # shtab reads it
    parser.add_argument(
        "--path",
        nargs="?",
        const="",
        default=None,
        metavar="FOLDER",
        help="print where the shipped files are: config, systemd, docs (default: share/ itself)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.path is not None:
            print(shared(args.path))
            return 0
        if args.game is None:
            print(
                f"tablectl example-config: name a game: {', '.join(game_names())}",
                file=sys.stderr,
            )
            return 2
        try:
            game = find_game(args.game)
        except GameLoadError as error:
            print(f"tablectl example-config: {error}", file=sys.stderr)
            return 1
        except GameNotFound as error:
            print(f"tablectl example-config: {error}", file=sys.stderr)
            return 2
        if args.game in bundled_game_names():
            sys.stdout.write(example_config(args.game))
        else:
            sys.stdout.write(written_example(game))
    except NotShipped as missing:
        print(f"tablectl example-config: {missing}", file=sys.stderr)
        return 1
    return 0


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def written_example(game: Any) -> str:
    """A commented configuration for ``game`` from its module: every option it takes at its
    default, no devices (each one's section is described), the usual paths."""
    profile = game.profile
    table_id = game.name.replace("_", "")[:8].lower() + "01"
    lines = [
        f"# tablectl: configuration of one table playing {profile.title}: the game",
        f"# {game.name!r}, installed through the {ENTRY_POINT_GROUP} entry points (docs/games.md).",
        "# Installed as /etc/tablectl/TABLE.toml and run as tablectl@TABLE.service",
        "# (`tablectl check-config FILE` validates it without starting anything).",
        "",
        "[table]",
        "# The table's id: 1-32 of [a-z0-9_-]; it names the systemd instance and the state paths.",
        f"id = {_toml(table_id)}",
        f"game = {_toml(game.name)}",
        "# When the gaming day starts, local time HH:MM.",
        'gaming_day_start = "06:00"',
        "# The casino's time zone (IANA name): the gaming day and the events' local times.",
        "# Without it, the PC's own zone (check-config warns on a PC kept in UTC).",
        'timezone = "America/New_York"',
        "# debug, info, warning, error or critical. No face-down card is ever logged (H7).",
        f"log_level = {_toml(DEFAULT_LOG_LEVEL)}",
        "",
        "[table.options]",
        f"# Player positions (at most {profile.max_positions}, C11).",
        f"positions = {profile.max_positions}",
        f"# {', '.join(profile.methods)}.",
        f"dealing = {_toml(profile.methods[0])}",
        f"# {', '.join(SHUFFLERS)} (a counting shuffler counts the cards after each shuffle, C7).",
        'shuffler = "counting"',
    ]
    if profile.may_dual_deck:
        lines += ["# Two decks alternating every round (D1).", "dual_deck = false"]
    for option in game.game_options:
        if option.note:
            lines.append(f"# {option.note}")
        lines.append(f"{option.name} = {_toml(option.default)}")
    lines += [
        "rack_tolerance = 2",
        "",
        "# Devices: one [devices.NAME] section each (kind, driver, allowed_serials,",
        "# allowed_firmware_sha256 and a [devices.NAME.transport]), as in the bundled",
        "# games' examples (`tablectl example-config --path config`) and docs/operations.md.",
        "# Without any, the dealer's terminal (`tablectl op`) is the only source of events.",
        "",
        "[journal]",
        "# The tamper-evident SQLite journal (mode 0600, readable by the service user only).",
        f"path = {_toml(JOURNAL_PATH_TEMPLATE.format(table=table_id))}",
        f"checkpoint_rounds = {DEFAULT_CHECKPOINT_ROUNDS}",
        "",
        "[metrics]",
        "# Prometheus endpoint; each table of a PC needs its own port.",
        f"listen = {_toml(f'{DEFAULT_METRICS_HOST}:{DEFAULT_METRICS_PORT}')}",
        "",
        "[operator]",
        f"socket = {_toml(OPERATOR_SOCKET_TEMPLATE.format(table=table_id))}",
        f"group = {_toml(OPERATOR_GROUP)}",
        f"supervisor_group = {_toml(SUPERVISOR_GROUP)}",
    ]
    return "\n".join(lines) + "\n"
