"""`tablectl run --config FILE`: the table's daemon (what tablectl@TABLE.service starts).

The start is refused (exit 2) before anything is touched when the configuration is invalid,
another daemon holds the table's lock, or the preflight (shared with `check-config`) finds a
problem; every problem is printed at once, each naming the file and key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tablectl.controller.common.config import ConfigError, load_config
from tablectl.controller.record.tablelock import (
    LockError,
    TableLock,
    TableLocked,
    acquire_table_lock,
)

# Mirrors of controller.daemon's, which is imported only once the lock is held: a second
# instance is told within a fraction of a second, before the daemon's imports (~0.5 s).
DEFAULT_DEVICE_WAIT = 20.0
DEFAULT_FAIL_STOP_LINGER = 20.0
EXIT_REFUSED = 2

EXIT_CODES = """exit status:
  0  stopped cleanly (SIGTERM or SIGINT; a second signal exits at once with 128+signal)
  1  failed while running (an unexpected error; systemd restarts it)
  2  refused to start, nothing changed: the configuration, the preflight (the operator group,
     the metrics address, the journal's and the socket's directories, free space under the
     journal, drivers, a live socket), another daemon holds the table's lock, or the journal
     failed its start check (an edited or cut journal: the log's journal_damaged names the
     row; --accept-damaged-journal starts anyway, docs/journal.md)
  3  stopped dealing: a journal write failed (e.g. a full disk); the dispensing devices were
     locked and an alarm raised before the exit (docs/operations.md)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="the table's TOML configuration"
    )
    parser.add_argument(
        "--device-wait",
        type=float,
        default=DEFAULT_DEVICE_WAIT,
        metavar="SECONDS",
        help="how long to wait for every device's handshake before READY regardless "
        f"(default {DEFAULT_DEVICE_WAIT:g})",
    )
    parser.add_argument(
        "--accept-damaged-journal",
        action="store_true",
        help="start even when the journal fails its start check (exit 2 otherwise): the fact "
        "is journaled and an alarm raised (docs/journal.md)",
    )
    parser.add_argument(
        "--fail-stop-linger",
        type=float,
        default=DEFAULT_FAIL_STOP_LINGER,
        metavar="SECONDS",
        help="after a journal write failure, how long the daemon stays up (devices locked, "
        "answering status and /metrics) before it exits 3 "
        f"(default {DEFAULT_FAIL_STOP_LINGER:g})",
    )
    parser.add_argument(
        "--log-format",
        choices=("auto", "journald", "json", "console"),
        default="auto",
        help="log rendering (auto: journald under systemd, console on a terminal, else JSON)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{args.config}: {len(error.problems)} problem(s); not started", file=sys.stderr)
        return EXIT_REFUSED
    for name in ("device_wait", "fail_stop_linger"):
        if getattr(args, name) < 0:
            flag = "--" + name.replace("_", "-")
            print(f"tablectl run: {flag}: must be 0 or more seconds", file=sys.stderr)
            return EXIT_REFUSED
    # First the table's lock (before anything else is touched), then the preflight.
    lock: TableLock | None = None
    lock_problem: str | None = None
    try:
        lock = acquire_table_lock(config.journal_path)
    except TableLocked as locked:
        print(f"tablectl run: {locked}", file=sys.stderr)
        return EXIT_REFUSED
    except LockError as error:
        lock_problem = f"{config.source}: journal.path: {error}"
    from tablectl.controller.service.preflight import errors, preflight

    problems = preflight(config)
    failed = errors(problems)
    if failed or lock_problem:
        for found in problems:
            print(found.text(config.source), file=sys.stderr)
        if lock_problem:
            print(lock_problem, file=sys.stderr)
        count = len(failed) + (1 if lock_problem else 0)
        print(f"{args.config}: {count} problem(s); not started", file=sys.stderr)
        if lock is not None:
            lock.release()
        return EXIT_REFUSED
    assert lock is not None
    import structlog

    from tablectl.controller.common.logs import configure_logging, get_logger
    from tablectl.controller.service.daemon import run_daemon

    configure_logging(config.log_level, mode=args.log_format)
    # every line names its table (TABLE= in the journal: two tables on one PC told apart)
    structlog.contextvars.bind_contextvars(table=config.table_id)
    log = get_logger("daemon")
    for warning in problems:  # warnings only
        log.warning("preflight", problem=warning.text(config.source))
    return asyncio.run(
        run_daemon(
            config,
            device_wait=args.device_wait,
            accept_damaged_journal=args.accept_damaged_journal,
            lock=lock,
            fail_stop_linger=args.fail_stop_linger,
        )
    )
