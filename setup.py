"""Maps the repository's top-level folders into the `tablectl` import package.

pyproject.toml holds everything else; only this mapping needs code, so that a new
sub-package (say controller/games/) is packaged without editing a list.
"""

from setuptools import find_packages, setup

FOLDERS = ("controller", "drivers", "simulators")

setup(
    packages=[f"tablectl.{name}" for name in find_packages(include=[f"{f}*" for f in FOLDERS])],
    package_dir={f"tablectl.{folder}": folder for folder in FOLDERS},
)
