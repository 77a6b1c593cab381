"""`tablectl completion bash|zsh`: the shell completion script shipped with tablectl.

The scripts are generated from the command line's parser (`make manuals`, with shtab) and
shipped in the package; the wheel also installs them where bash-completion and zsh look
(share/bash-completion/completions/tablectl, share/zsh/site-functions/_tablectl). This
command prints the shipped one, for a user install: `tablectl completion bash >
~/.local/share/bash-completion/completions/tablectl`.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources

#: shell -> the shipped file under tablectl/controller/share/
SCRIPTS = {"bash": "bash-completion/tablectl", "zsh": "zsh/_tablectl"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=sorted(SCRIPTS), help="the shell")


def shipped(name: str) -> str:
    """A file of tablectl/controller/share/, as text."""
    return resources.files("tablectl.controller").joinpath("share", *name.split("/")).read_text()


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(shipped(SCRIPTS[args.shell]))
    return 0
