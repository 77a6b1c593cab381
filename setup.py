"""Maps the repository's top-level folders into the `tablectl` import package.

pyproject.toml holds everything else; only this mapping needs code, so that a new
sub-package (say controller/engine/games/) is packaged without editing a list.

Besides the code, the files an installed tablectl hands out ship as package data under
`tablectl/share/` (share/README.md): the folder `share/` itself, and the repository's
`config/`, `systemd/` and `docs/` as `tablectl/share/config/` and so on. Every file in
those folders ships; `tablectl.controller.service.resources` finds them.
"""

import os

from setuptools import find_packages, setup

FOLDERS = ("controller", "drivers", "simulators", "games")
#: folder -> the package its files ship in (data only: no Python is imported from these)
DATA_FOLDERS = {
    "share": "tablectl.share",
    "config": "tablectl.share.config",
    "systemd": "tablectl.share.systemd",
    "docs": "tablectl.share.docs",
    # the manual pages and completion scripts `make manuals` writes (pyproject's data-files)
    "controller/share": "tablectl.controller.share",
}


def data_packages() -> dict[str, str]:
    """Each data folder and its sub-folders (named like packages) -> its folder.

    setuptools treats every folder as a package; naming them keeps its build quiet.
    """
    found = {}
    for folder, package in DATA_FOLDERS.items():
        for path, _dirs, _files in os.walk(folder):
            parts = os.path.relpath(path, folder).split(os.sep)
            parts = [] if parts == ["."] else parts
            if all(part.isidentifier() for part in parts):
                found[".".join([package, *parts])] = path
    return found


DATA_PACKAGES = data_packages()

setup(
    packages=[f"tablectl.{name}" for name in find_packages(include=[f"{f}*" for f in FOLDERS])]
    + list(DATA_PACKAGES),
    package_dir={f"tablectl.{folder}": folder for folder in FOLDERS} | DATA_PACKAGES,
    package_data={package: ["**/*"] for package in DATA_PACKAGES},
)
