"""The files tablectl ships besides its code: example configs, units, rules, docs.

They are package data under ``tablectl/share/`` (setup.py, share/README.md), so an install
from a wheel has them as a checkout does; ``shared("systemd/tablectl@.service")`` is one.
The data folders are namespace packages (no ``__init__.py``), found by their import spec:
importlib.resources' namespace support cannot read them in an editable install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: the first part of a shared path -> the package holding it (setup.py's DATA_FOLDERS)
_PACKAGES = {
    "config": "tablectl.share.config",
    "systemd": "tablectl.share.systemd",
    "docs": "tablectl.share.docs",
}


class NotShipped(FileNotFoundError):
    """The installation lacks a shipped file (a broken install); the message names it."""


def _folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        if Path(location).is_dir():
            return Path(location)
    raise NotShipped(f"{package}: not installed (tablectl's shipped files are missing)")


def shared(path: str = "") -> Path:
    """The shipped file or folder at ``path`` (e.g. ``config/five_card_hilo.toml``)."""
    head, _, rest = path.strip("/").partition("/")
    if head in _PACKAGES:
        return _folder(_PACKAGES[head]) / rest
    return _folder("tablectl.share") / path.strip("/")


def example_config(game: str) -> str:
    """The commented example configuration of ``game`` (config/GAME.toml)."""
    path = shared(f"config/{game}.toml")
    if not path.is_file():
        raise NotShipped(f"{path}: no example configuration for {game!r}")
    return path.read_text(encoding="utf-8")
