"""The `tablectl` command line.

Each subcommand lives in its own module, imported only when chosen, so that
`tablectl run` does not pay for the simulators and `tablectl replay` does not
pay for pyusb. A command module provides::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, cast

from tablectl.controller import __version__


class Command(NamedTuple):
    module: str
    help: str


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


#: The shell's status for a process ended by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141

# name -> the module implementing it. Add a line here for a new subcommand. In the order the
# top-level help lists them: what a table's people and IT run first (run, status,
# check-config), the developers' tools last.
COMMANDS: dict[str, Command] = {
    "run": Command(
        "tablectl.controller.commands.run", "run a table's daemon (tablectl@TABLE.service)"
    ),
    "status": Command(
        "tablectl.controller.commands.status", "show the running table's public status"
    ),
    "check-config": Command(
        "tablectl.controller.commands.check_config", "validate a table's configuration file"
    ),
    "op": Command(
        "tablectl.controller.commands.op", "send one operator event to the running table"
    ),
    "watch": Command(
        "tablectl.controller.commands.watch",
        "a live view of the running table; a supervisor acknowledges with a key",
    ),
    "journal": Command(
        "tablectl.controller.commands.journal",
        "verify, export, back up or seal a journal (setup-keys); a round's cards or proof; "
        "seat-bias (Q3)",
    ),
    "example-config": Command(
        "tablectl.controller.commands.example_config",
        "print a game's commented example configuration (--path: the shipped files)",
    ),
    "floor": Command(
        "tablectl.controller.commands.floor",
        "the floor store in PostgreSQL: init, verify, compare, round, prove, report",
    ),
    "witness": Command(
        "tablectl.controller.commands.witness",
        "a witness for tables' journals (C2SP tlog-witness): setup-key, serve",
    ),
    "proof": Command(
        "tablectl.controller.commands.proof",
        "check a round's proof (journal prove) offline: its rows, the signed checkpoint",
    ),
    "demo": Command(
        "tablectl.simulators.demo", "the whole daemon on a simulated table, dealt automatically"
    ),
    "sim": Command(
        "tablectl.simulators.cli", "start a simulated device on a pty or a simulated USB bus"
    ),
    "probe": Command(
        "tablectl.drivers.cli", "handshake with a device on a serial port, print its identity"
    ),
    "conformance": Command(
        "tablectl.simulators.conformance.cli",
        "put a device driver through every check of its kind; a report to attach",
    ),
    "replay": Command(
        "tablectl.controller.commands.replay", "replay a scenario file; decisions as JSON lines"
    ),
    "diagram": Command(
        "tablectl.controller.commands.diagram", "print a game's round state chart (mermaid)"
    ),
    "completion": Command(
        "tablectl.controller.commands.completion", "print the shell completion script (bash, zsh)"
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line as one parser with a subparser per command.

    `main` dispatches lazily and never builds it; the shell completion and the man page are
    generated from it (tablectl.controller.commands.manuals), so they always match the options.
    """
    parser = argparse.ArgumentParser(
        prog="tablectl",
        description="controller daemon for casino card tables: devices, round engine, "
        "New Jersey rules, tamper-evident journal, metrics",
    )
    parser.add_argument("--version", action="version", version=f"tablectl {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        module = cast(CommandModule, importlib.import_module(command.module))
        sub = commands.add_parser(name, help=command.help, description=command.help)
        module.add_arguments(sub)
    return parser


def usage() -> str:
    width = max((len(name) for name in COMMANDS), default=0)
    lines = [
        f"tablectl {__version__}: controller daemon for casino card tables",
        "",
        "usage: tablectl COMMAND [options]   (tablectl COMMAND --help for its options)",
        "",
        "commands:",
    ]
    lines += [f"  {name.ljust(width)}  {cmd.help}" for name, cmd in COMMANDS.items()]
    return "\n".join(lines)


def add_old_option_name(
    parser: argparse.ArgumentParser, old: str, dest: str, **options: Any
) -> None:
    """Accept ``old`` for the option now stored in ``dest`` under a new name (one name per idea
    across commands: --output, --table), hidden from --help and the man page; kept for one
    release, then removed."""
    parser.add_argument(
        old,
        dest=dest,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        **options,
    )


def did_you_mean(name: str) -> str:
    """ "; did you mean 'status'?" for a near miss of a command's name, else ""."""
    close = difflib.get_close_matches(name, COMMANDS, n=2, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(word) for word in close) + "?"


#: Commands whose process runs a table for hours: their start and memory are goals (DESIGN.md).
TABLE_PROCESSES = frozenset({"run", "demo"})


def import_structlog_without_rich() -> None:
    """Import structlog with `rich` (and `better_exceptions`) out of its sight.

    structlog imports rich, when it is installed, for its console tracebacks, and rich is
    installed with textual (`tablectl watch`). In the daemon that was 80-130 ms of a ~500 ms
    start on this project's VM and 4.4 MiB of resident memory (tests/bench/ready.py), for
    tracebacks it never prints: its console lines use plain tracebacks instead. Only
    structlog's import is shielded; rich imports as usual afterwards.
    """
    if "structlog" in sys.modules:
        return
    shielded = [name for name in ("rich", "better_exceptions") if name not in sys.modules]
    for name in shielded:
        sys.modules[name] = None  # type: ignore[assignment]  # import rich -> ImportError
    try:
        import structlog  # noqa: F401
    finally:
        for name in shielded:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


#: Exit status of a command line that cannot be read (argparse's, and the shell's habit).
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        # No command is a usage error, as argparse says for a missing argument: the help
        # goes to stderr and the status is 2, so `tablectl && next` does not go on.
        print(f"{usage()}\n\ntablectl: a COMMAND is required", file=sys.stderr)
        return EXIT_USAGE
    if args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if args[0] == "--version":
        print(f"tablectl {__version__}")
        return 0
    name = args[0]
    command = COMMANDS.get(name)
    if command is None:
        print(f"tablectl: unknown command {name!r}{did_you_mean(name)}", file=sys.stderr)
        print(f"\n{usage()}", file=sys.stderr)
        return EXIT_USAGE
    if name in TABLE_PROCESSES:
        import_structlog_without_rich()
    module = cast(CommandModule, importlib.import_module(command.module))
    parser = argparse.ArgumentParser(prog=f"tablectl {name}", description=command.help)
    module.add_arguments(parser)
    try:
        return module.run(parser.parse_args(args[1:]))
    except BrokenPipeError:
        # The reader went away (`tablectl replay FILE | head`): stop quietly, as Unix tools
        # do. Point stdout at /dev/null so the interpreter's final flush cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
