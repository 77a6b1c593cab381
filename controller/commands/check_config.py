"""`tablectl check-config FILE...`: validate tables' configurations without starting anything.

Given several files (all the tables of one PC: `/etc/tablectl/*.toml`), it also checks them
together: two tables may not share a metrics address, a journal, an operator socket or a
table id, since on one PC the second daemon would fail to start or, worse, write into the
first one's journal.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from tablectl.controller.config import ConfigError, TableConfig, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="the table's TOML configuration (or several)"
    )


def run(args: argparse.Namespace) -> int:
    status = 0
    configs: dict[str, TableConfig] = {}
    for path in args.files:
        try:
            config = load_config(path)
        except ConfigError as error:
            for problem in error.problems:
                print(problem, file=sys.stderr)
            print(f"{path}: {len(error.problems)} problem(s)", file=sys.stderr)
            status = 1
            continue
        configs[path] = config
        devices = ", ".join(
            f"{d.name} ({d.kind}, {d.driver}, {d.transport.type})" for d in config.devices
        )
        print(
            f"{path}: OK: table {config.table_id}, game {config.game}, "
            f"devices: {devices or 'none'}; journal {config.journal_path}; "
            f"metrics {config.metrics_host}:{config.metrics_port}; "
            f"operator socket {config.operator_socket} (group {config.operator_group})"
        )
    clashes = collisions(configs)
    for clash in clashes:
        print(clash, file=sys.stderr)
    return 1 if clashes else status


def collisions(configs: dict[str, TableConfig]) -> list[str]:
    """What two or more tables of one PC share and must not, each naming the files."""
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, config in configs.items():
        port = config.metrics_port
        # port 0 picks a free port each start: it never collides
        if port != 0:
            shared[("metrics port", str(port))].append(path)
        shared[("journal", str(config.journal_path.resolve()))].append(path)
        shared[("operator socket", str(config.operator_socket))].append(path)
        shared[("table id", config.table_id)].append(path)
    return [
        f"{', '.join(paths)}: the same {what} {value}: give each table its own"
        + (" (metrics.listen, e.g. 127.0.0.1:8338)" if what == "metrics port" else "")
        for (what, value), paths in shared.items()
        if len(paths) > 1
    ]
