"""The installed import package is `tablectl`: nothing of ours lands at the top of site-packages.

The names `controller`, `drivers` and `simulators` belong to unrelated projects on PyPI;
installing one of them beside tablectl must not overwrite or delete our files (#13).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("controller", "drivers", "simulators", "games")


def source_packages() -> set[str]:
    """Every folder of ours that is a Python package, as its import name under tablectl."""
    found = set()
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("tablectl", *parts)))
    return found


def test_the_wheel_holds_every_package_under_tablectl_and_nothing_else(tmp_path):
    # Built from a copy: setuptools reuses a build/ folder, which may hold packages since moved.
    source = tmp_path / "source"
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    # every folder that ships is a package setuptools was told of (issue 34: `make demo` and
    # `make test` printed 120 lines of "Package would be ignored" for controller/share/*)
    assert "Package would be ignored" not in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("tablectl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith((".dist-info", ".data"))} == {"tablectl"}
    packaged = {
        name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")
    }
    assert packaged == source_packages()
    for folder in FOLDERS:
        assert f"tablectl/{folder}/py.typed" in names
    assert any(
        n.startswith("tablectl/simulators/scenarios/") and n.endswith(".jsonl") for n in names
    )
    # the shell completions and the man page, where bash-completion, zsh and man look
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    assert data == {
        "share/bash-completion/completions/tablectl",
        "share/zsh/site-functions/_tablectl",
        *(f"share/man/man1/{page}.1" for page in MAN_PAGES),
    }
    # installed under a prefix of its own; --ignore-installed, or pip would first uninstall
    # the tablectl of the environment running the tests
    prefix = tmp_path / "prefix"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--ignore-installed",
            "-q",
            "--prefix",
            str(prefix),
            wheel,
        ],
        check=True,
        capture_output=True,
    )
    for path in data:
        shipped = ROOT / "controller" / "share" / _shipped(path)
        assert (prefix / path).read_text() == shipped.read_text()
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert (
        "tablectl = tablectl.controller.commands.cli:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )


def _shipped(installed: str) -> str:
    """share/man/man1/tablectl.1 -> man/tablectl.1 (its place under controller/share/)."""
    if installed.startswith("share/man/man1/"):
        return "man/" + installed.removeprefix("share/man/man1/")
    return {
        "share/bash-completion/completions/tablectl": "bash-completion/tablectl",
        "share/zsh/site-functions/_tablectl": "zsh/_tablectl",
    }[installed]


#: tablectl(1) and a page per role-facing command (controller/commands/manuals.py COMMAND_PAGES)
MAN_PAGES = ("tablectl", "tablectl-run", "tablectl-op", "tablectl-journal", "tablectl-floor")


def test_the_checkout_import_root_maps_the_same_folders():
    """`.src/tablectl/` (mypy, PYTHONPATH from a checkout) links each folder, no more, no less."""
    links = {p.name: p for p in (ROOT / ".src" / "tablectl").iterdir()}
    assert set(links) == set(FOLDERS)
    for name, link in links.items():
        assert link.is_symlink() and link.resolve() == ROOT / name


def test_the_installed_package_is_the_one_imported():
    import tablectl.controller as controller_package

    assert controller_package.__name__ == "tablectl.controller"
    assert Path(controller_package.__file__).resolve().parent == ROOT / "controller"


def test_controller_holds_only_what_a_table_pc_runs():
    """Play (the demo, the automatic dealer, the round generator) lives in simulators/:
    no module of controller/ imports tablectl.simulators (the CLI only names the `demo` and
    `sim` commands' modules, imported when those commands run)."""
    import ast

    offenders = []
    for path in (ROOT / "controller").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("tablectl.simulators")]
    assert offenders == []
