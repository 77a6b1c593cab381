"""Generate the shell completions and the man page from the command line's parser.

`make manuals` (`python -m tablectl.controller.commands.manuals`) rewrites controller/share/:
bash-completion/tablectl and zsh/_tablectl (shtab; `op` completes its events and each event's
fields), man/tablectl.1 and a page per role-facing command, man/tablectl-run.1, -op, -journal,
-floor (argparse-manpage, with EXIT STATUS, FILES, ENVIRONMENT and SEE ALSO).
They are committed and shipped; tests/unit/test_manuals.py fails when they no longer match
the parser. shtab and argparse-manpage are needed only here (the `test` extra), never at
run time.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tablectl.controller import __version__
from tablectl.controller.commands.cli import build_parser

SHARE = Path(__file__).resolve().parents[1] / "share"
#: the man page's date (.TH): the release's month, fixed so the page is reproducible
MANUAL_DATE = "November 2026"


#: The role-facing commands that get a page of their own (tablectl-run(1) ...), besides the
#: whole command line's tablectl(1).
COMMAND_PAGES = ("run", "op", "journal", "floor")

EXIT_STATUS = {
    "tablectl": [
        ("0", "success; `status`: the table is healthy"),
        (
            "1",
            "a problem found and named on stderr: `check-config` (a file or this machine), "
            "`journal verify` (tampered, damaged, sealed too short), `floor verify`; `status`: "
            "the table is degraded (a device down, a notification pending, dealing stopped or "
            "held)",
        ),
        (
            "2",
            "the command line cannot be read (no command, an unknown one, a bad option); "
            "`run` refused to start (the configuration, the preflight, the table's lock); "
            "`status` and `op`: the daemon is stopped or unreachable; a journal that is not one",
        ),
        (
            "3",
            "`run`: dealing stopped after a journal write failed (fail-stop); systemd restarts it",
        ),
        ("141", "the reader of the output went away (`| head`): stopped quietly, as on SIGPIPE"),
    ],
    "run": [
        ("0", "a clean stop (SIGTERM, SIGINT)"),
        ("1", "failed while running (an unexpected error; systemd restarts it)"),
        (
            "2",
            "refused to start: the configuration, the preflight (see check-config), the "
            "sealing key, another daemon holding the table's lock, or a journal that fails its "
            "start check; nothing was touched",
        ),
        ("3", "dealing stopped after a journal write failed; the devices were locked first"),
        (
            "130, 143",
            "a second SIGINT or SIGTERM while the first one's stop was held up: it exits at once",
        ),
    ],
    "op": [
        ("0", "the daemon accepted the event (its decisions are printed)"),
        ("1", "the daemon refused it (a rule, a role): its reason is printed"),
        (
            "2",
            "the command line or the event's fields cannot be read, or the daemon is "
            "stopped or unreachable",
        ),
    ],
    "journal": [
        ("0", "verify: intact (and sealed as far as asked); the other actions: done"),
        (
            "1",
            "verify: tampered or damaged at a named row, or sealed only until earlier than "
            "--expect-until",
        ),
        ("2", "not a readable journal, or a destination that cannot be written"),
        ("141", "export or show: the reader went away (`| head`)"),
    ],
    "floor": [
        ("0", "done; verify: every table's rows intact"),
        ("1", "verify or compare: a difference, named by table and row"),
        ("2", "the floor store cannot be reached, or a table or day it does not hold"),
    ],
}
FILES = [
    ("/etc/tablectl/TABLE.toml", "a table's configuration (`tablectl example-config GAME`)"),
    (
        "/var/lib/tablectl/TABLE/journal.sqlite",
        "the table's journal (mode 0600): every "
        "event and decision, hash-chained; closed segments beside it",
    ),
    (
        "/var/lib/tablectl/TABLE/sealing-key",
        "the sealing key (`tablectl journal setup-keys`); "
        "the verification key it prints belongs off the table PC",
    ),
    ("/run/tablectl/TABLE/operator.sock", "the operator socket of a running table"),
    ("/usr/lib/systemd/system/tablectl@.service", "the unit: tablectl@TABLE runs a table"),
    ("/usr/share/doc/tablectl/operations.md", "install, run, watch and troubleshoot"),
]
ENVIRONMENT = [
    ("NOTIFY_SOCKET", "`run`: systemd's notification socket (READY=1, STATUS=, WATCHDOG=1)"),
    ("WATCHDOG_USEC, WATCHDOG_PID", "`run`: systemd's watchdog interval and its process"),
    ("JOURNAL_STREAM", "`run`: logs go to systemd-journald with their fields when set"),
    ("MAKELEVEL", "`demo`: set by make; the resume command printed is `make demo ...`"),
]
SEE_ALSO = {
    "tablectl": "tablectl-run(1), tablectl-op(1), tablectl-journal(1), tablectl-floor(1), "
    "systemd.service(5), prometheus(1)",
    "run": "tablectl(1), tablectl-op(1), tablectl-journal(1), systemctl(1), systemd.service(5)",
    "op": "tablectl(1), tablectl-run(1)",
    "journal": "tablectl(1), tablectl-run(1), tablectl-floor(1), sqlite3(1)",
    "floor": "tablectl(1), tablectl-journal(1), psql(1)",
}


def _roff(text: str) -> str:
    """Plain text for a roff paragraph: backslashes and hyphens escaped, `code` in bold."""
    import re

    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"`([^`]*)`", r"\\fB\1\\fR", text)


def _items(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f".TP\n.B {_roff(term)}\n{_roff(text)}" for term, text in pairs) + "\n"


def _page(parser: Any, name: str, description: str, command: str) -> str:
    from argparse_manpage.manpage import Manpage

    page = Manpage(
        parser,
        _data={
            "version": __version__,
            "project_name": "tablectl",
            "description": description,
            "date": MANUAL_DATE,
            "manual_title": "tablectl manual",
        },
    )
    page.add_section("exit status", "=", _items(EXIT_STATUS[command]))
    page.add_section("files", "=", _items(FILES))
    page.add_section("environment", "=", _items(ENVIRONMENT))
    page.add_section("see also", "=", _roff(SEE_ALSO[command]) + "\n")
    text = str(page)
    if command != "tablectl":  # the page is tablectl-run(1); the command typed is `tablectl run`
        text = text.replace(f".B tablectl\\-{command}\n", f".B tablectl {command}\n", 1)
    return text


def generated() -> dict[str, str]:
    """Path under share/ -> its content, generated now."""
    import argparse

    import shtab

    from tablectl.controller.commands.cli import COMMANDS
    from tablectl.controller.commands.example_config import completion_preamble as games
    from tablectl.controller.commands.op import BASH_EPILOGUE, completion_preamble

    parser = build_parser()
    preamble = {shell: text + games()[shell] for shell, text in completion_preamble().items()}
    bash = shtab.complete(parser, shell="bash", preamble=preamble["bash"]) + BASH_EPILOGUE
    files = {
        "bash-completion/tablectl": bash,
        "zsh/_tablectl": shtab.complete(parser, shell="zsh", preamble=preamble["zsh"]),
        "man/tablectl.1": _page(
            parser, "tablectl", "controller daemon for casino card tables", "tablectl"
        ),
    }
    subcommands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    for command in COMMAND_PAGES:
        sub = subcommands.choices[command]
        sub.prog = f"tablectl-{command}"  # the page's title and NAME: tablectl-run
        files[f"man/tablectl-{command}.1"] = _page(
            sub, f"tablectl-{command}", COMMANDS[command].help, command
        )
    return files


def main(argv: list[str] | None = None) -> int:
    target = Path(argv[0]) if argv else SHARE
    for name, text in generated().items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
