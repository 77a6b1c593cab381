"""`tablectl check-config FILE...`: everything `run` would refuse, found without starting anything.

The file's own checks first, then the preflight `run` does before it opens the journal (the
operator group, the metrics address, the directories, free space, drivers, the serial ports),
all problems at once with the same messages as `run`. `--file-only` checks the file alone
(for a file written on another machine).

Given several files (all the tables of one PC: `/etc/tablectl/*.toml`), it also checks them
together: two tables may not share a metrics port, a journal, an operator socket or a table
id, since on one PC the second daemon would fail to start or, worse, write into the first
one's journal.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from tablectl.controller.common.config import ConfigError, TableConfig, load_config
from tablectl.controller.record.tablelock import lock_path_for, running_holder
from tablectl.controller.service.preflight import check_witness_keys, errors, preflight

EXIT_CODES = """exit status:
  0  the files are valid and `tablectl run` would start (warnings, if any, on stderr)
  1  problems found (each on stderr, naming the file and key); `tablectl run` would exit 2"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="the table's TOML configuration (or several)"
    )
    parser.add_argument(
        "--file-only",
        action="store_true",
        help="check the file alone, not this machine (group, ports, directories, devices)",
    )


def run(args: argparse.Namespace) -> int:
    status = 0
    configs: dict[str, TableConfig] = {}
    for path in args.files:
        config = _check_one(path, file_only=args.file_only)
        if config is None:
            status = 1
        else:
            configs[path] = config
    clashes = collisions(configs)
    for clash in clashes:
        print(clash, file=sys.stderr)
    return 1 if clashes else status


def _check_one(path: str, *, file_only: bool) -> TableConfig | None:
    """One file and this machine's preflight for it; the configuration when nothing failed."""
    try:
        config = load_config(path)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{path}: {len(error.problems)} problem(s)", file=sys.stderr)
        return None
    running = None if file_only else running_holder(config.journal_path)
    if running is not None:
        who = f"PID {running}" if running else "a process"
        print(
            f"{path}: note: this table is running ({who} holds "
            f"{lock_path_for(config.journal_path)}); its metrics address and socket are its own",
            file=sys.stderr,
        )
    problems = (
        check_witness_keys(config) if file_only else preflight(config, running=running is not None)
    )
    for found in problems:
        print(found.text(config.source), file=sys.stderr)
    failed = errors(problems)
    if failed:
        print(f"{path}: {len(failed)} problem(s)", file=sys.stderr)
        return None
    devices = ", ".join(
        f"{d.name} ({d.kind}, {d.driver}, {d.transport.type})" for d in config.devices
    )
    print(
        f"{path}: OK: table {config.table_id}, game {config.game}, "
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
        + (
            f"; witnesses: {', '.join(w.name for w in config.witness.witnesses)} (quorum "
            f"{config.witness.quorum})"
            if config.witness is not None
            else ""
        )
    )
    return config


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
