"""`tablectl check-config FILE`: everything `run` would refuse, found without starting anything.

The file's own checks first, then the preflight `run` does before it opens the journal (the
operator group, the metrics address, the directories, free space, drivers, the serial ports),
all problems at once with the same messages as `run`. `--file-only` checks the file alone
(for a file written on another machine).
"""

from __future__ import annotations

import argparse
import sys

from tablectl.controller.config import ConfigError, load_config
from tablectl.controller.preflight import ERROR, preflight
from tablectl.controller.tablelock import lock_path_for, running_holder

EXIT_CODES = """exit status:
  0  the file is valid and `tablectl run` would start (warnings, if any, on stderr)
  1  problems found (each on stderr, naming the file and key); `tablectl run` would exit 2"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.add_argument("file", metavar="FILE", help="the table's TOML configuration")
    parser.add_argument(
        "--file-only",
        action="store_true",
        help="check the file alone, not this machine (group, ports, directories, devices)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{args.file}: {len(error.problems)} problem(s)", file=sys.stderr)
        return 1
    running = None if args.file_only else running_holder(config.journal_path)
    if running is not None:
        who = f"PID {running}" if running else "a process"
        print(
            f"{args.file}: note: this table is running ({who} holds "
            f"{lock_path_for(config.journal_path)}); its metrics address and socket are its own",
            file=sys.stderr,
        )
    problems = [] if args.file_only else preflight(config, running=running is not None)
    for found in problems:
        print(found.text(config.source), file=sys.stderr)
    failed = [p for p in problems if p.severity == ERROR]
    if failed:
        print(f"{args.file}: {len(failed)} problem(s)", file=sys.stderr)
        return 1
    devices = ", ".join(
        f"{d.name} ({d.kind}, {d.driver}, {d.transport.type})" for d in config.devices
    )
    print(
        f"{args.file}: OK: table {config.table_id}, game {config.game}, "
        f"devices: {devices or 'none'}; journal {config.journal_path}; "
        f"metrics {config.metrics_host}:{config.metrics_port}; "
        f"operator socket {config.operator_socket} (group {config.operator_group}, "
        f"supervisors {config.supervisor_group})"
        + (
            f"; ships to the floor store: {config.floor.dsn}"
            + (f" (passfile {config.floor.passfile})" if config.floor.passfile else "")
            if config.floor is not None
            else ""
        )
    )
    return 0
