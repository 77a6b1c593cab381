"""Shell completion and man page: generated from the parser, shipped, and working for real."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.commands.completion import SCRIPTS, shipped
from tablectl.controller.commands.manuals import SHARE, generated


def test_the_shipped_files_are_those_the_parser_generates_now(tmp_path: Path) -> None:
    """A changed option without `make manuals` fails here, so nothing shipped goes stale.

    Generated in a process of its own, as `make manuals` does: tests in this process may
    register games of their own (a toy game), which would appear among the choices.
    """
    subprocess.run(
        [sys.executable, "-m", "tablectl.controller.commands.manuals", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    names = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(map(str, names)) == sorted(generated())
    for name in names:
        fresh = (tmp_path / name).read_text()
        assert (SHARE / name).read_text() == fresh, f"{name} is stale: run `make manuals`"


def test_the_man_page_documents_every_command_and_reads_with_man() -> None:
    page = (SHARE / "man" / "tablectl.1").read_text()
    for name in cli.COMMANDS:
        assert f"'tablectl {name.replace('-', chr(92) + '-')}'" in page, name
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    shown = subprocess.run(
        ["man", "-l", str(SHARE / "man" / "tablectl.1")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"MANPAGER": "cat", "PAGER": "cat", "COLUMNS": "100", "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    assert "tablectl - controller daemon for casino card tables" in shown
    assert "--gaming-day" in shown and "--pace" in shown


@pytest.mark.parametrize("page", ["tablectl", "tablectl-run", "tablectl-op", "tablectl-journal",
                                  "tablectl-floor"])  # fmt: skip
def test_each_page_has_exit_status_files_environment_and_see_also(page: str) -> None:
    """A man page, not a --help dump: what the exit statuses mean, the files and variables it
    reads, where to read on; one page per role-facing command, as `man tablectl-run` finds it."""
    text = (SHARE / "man" / f"{page}.1").read_text()
    for heading in ("EXIT STATUS", "FILES", "ENVIRONMENT", "SEE ALSO"):
        assert f".SH {heading}\n" in text, (page, heading)
    assert text.startswith(f'.TH {page.upper().replace("-", chr(92) + "-")} "1"'), text[:80]
    if page != "tablectl":
        command = page.removeprefix("tablectl-")
        assert f".B tablectl {command}\n" in text  # the synopsis is the command typed
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    shown = subprocess.run(
        ["man", "-l", str(SHARE / "man" / f"{page}.1")],
        capture_output=True, text=True, timeout=30, check=True,
        env={"MANPAGER": "cat", "PAGER": "cat", "COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    assert "EXIT STATUS" in shown and "/var/lib/tablectl/TABLE/journal.sqlite" in shown
    assert ("NOTIFY_SOCKET" in shown and "SEE ALSO" in shown and "tablectl(1)" in shown) or (
        page == "tablectl" and "tablectl-run(1)" in shown
    )


def bash_complete(*words: str) -> list[str]:
    """What bash completes for `tablectl WORDS...` (the last word being typed)."""
    script = SHARE / "bash-completion" / "tablectl"
    line = " ".join(("tablectl", *words))
    program = (
        f"source {script}\n"
        f"COMP_WORDS=(tablectl {' '.join(words)}); COMP_CWORD={len(words)}\n"
        f"COMP_LINE='{line}'; COMP_POINT={len(line)}\n"
        # the function the script registers for tablectl (shtab's, or the one wrapping it)
        "$(complete -p tablectl | sed -E 's/.*-F ([^ ]+).*/\\1/') tablectl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout.split()


def test_bash_completes_commands_actions_and_options() -> None:
    assert "journal" in bash_complete("jou")
    assert set(bash_complete("journal", "")) >= {"verify", "show", "export"}
    assert "--format" in bash_complete("journal", "export", "--fo")
    assert set(bash_complete("watch", "--")) >= {"--socket", "--table", "--refresh"}
    assert set(bash_complete("demo", "--game", "")) >= {"three_card_21", "asia_poker"}
    # the games an example configuration is printed for (issue 34: nothing was offered)
    assert set(bash_complete("example-config", "")) >= {"three_card_21", "five_card_hilo"}
    assert bash_complete("example-config", "asia") == ["asia_poker"]


def test_bash_completes_ops_events_and_each_events_fields() -> None:
    """`tablectl op <TAB>`: the operator events; `tablectl op EVENT --<TAB>`: its fields."""
    assert bash_complete("op", "bets") == ["bets_closed"]
    assert {"stub_counted", "supervisor_ack", "hands_collected"} <= set(bash_complete("op", ""))
    assert "card_drawn" not in bash_complete("op", "")  # a device's event, not an operator's
    assert "--positions" in bash_complete("op", "bets_closed", "--")
    assert bash_complete("op", "--table", "t1", "stub_counted", "--hand") == ["--hand_counts"]
    assert "--time" not in bash_complete("op", "stub_counted", "--")  # stamped by the daemon


def test_completion_prints_the_shipped_script(capsys: pytest.CaptureFixture[str]) -> None:
    for shell, name in SCRIPTS.items():
        assert cli.main(["completion", shell]) == 0
        assert capsys.readouterr().out == shipped(name) == (SHARE / name).read_text()
    if shutil.which("zsh"):
        checked = subprocess.run(["zsh", "-n", str(SHARE / "zsh" / "_tablectl")], check=False)
        assert checked.returncode == 0
