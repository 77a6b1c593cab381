"""`tablectl check-config FILE`: validate a table's configuration without starting anything."""

from __future__ import annotations

import argparse
import sys

from tablectl.controller.config import ConfigError, check_drivers, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the table's TOML configuration")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{args.file}: {len(error.problems)} problem(s)", file=sys.stderr)
        return 1
    # each driver installed, and its [devices.NAME.settings] valid by the driver's own schema
    driver_problems = check_drivers(config)
    if driver_problems:
        for problem in driver_problems:
            print(problem, file=sys.stderr)
        print(f"{args.file}: {len(driver_problems)} problem(s)", file=sys.stderr)
        return 1
    devices = ", ".join(
        f"{d.name} ({d.kind}, {d.driver}, {d.transport.type})" for d in config.devices
    )
    print(
        f"{args.file}: OK: table {config.table_id}, game {config.game}, "
        f"devices: {devices or 'none'}; journal {config.journal_path}; "
        f"metrics {config.metrics_host}:{config.metrics_port}; "
        f"operator socket {config.operator_socket} (group {config.operator_group})"
    )
    return 0
