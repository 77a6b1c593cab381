"""The installed import package is `tablectl`: nothing of ours lands at the top of site-packages.

The names `controller`, `drivers` and `simulators` belong to unrelated projects on PyPI;
installing one of them beside tablectl must not overwrite or delete our files (#13).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("controller", "drivers", "simulators")


def source_packages() -> set[str]:
    """Every folder of ours that is a Python package, as its import name under tablectl."""
    found = set()
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("tablectl", *parts)))
    return found


def test_the_wheel_holds_every_package_under_tablectl_and_nothing_else(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tablectl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"tablectl"}
    packaged = {
        name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")
    }
    assert packaged == source_packages()
    for folder in FOLDERS:
        assert f"tablectl/{folder}/py.typed" in names
    assert any(
        n.startswith("tablectl/controller/scenarios/") and n.endswith(".jsonl") for n in names
    )
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert (
        "tablectl = tablectl.controller.cli:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )


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
