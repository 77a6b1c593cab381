"""Generate the shell completions and the man page from the command line's parser.

`make manuals` (`python -m tablectl.controller.manuals`) rewrites controller/share/:
bash-completion/tablectl and zsh/_tablectl (shtab), man/tablectl.1 (argparse-manpage).
They are committed and shipped; tests/unit/test_manuals.py fails when they no longer match
the parser. shtab and argparse-manpage are needed only here (the `test` extra), never at
run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tablectl.controller import __version__
from tablectl.controller.cli import build_parser

SHARE = Path(__file__).resolve().parent / "share"
#: the man page's date (.TH): the release's month, fixed so the page is reproducible
MANUAL_DATE = "November 2026"


def generated() -> dict[str, str]:
    """Path under share/ -> its content, generated now."""
    import shtab
    from argparse_manpage.manpage import Manpage

    parser = build_parser()
    page = Manpage(
        parser,
        _data={
            "version": __version__,
            "project_name": "tablectl",
            "description": "controller daemon for casino card tables",
            "date": MANUAL_DATE,
            "manual_title": "tablectl manual",
        },
    )
    return {
        "bash-completion/tablectl": shtab.complete(parser, shell="bash"),
        "zsh/_tablectl": shtab.complete(parser, shell="zsh"),
        "man/tablectl.1": str(page),
    }


def main(argv: list[str] | None = None) -> int:
    target = Path(argv[0]) if argv else SHARE
    for name, text in generated().items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
