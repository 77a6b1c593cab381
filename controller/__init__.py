"""tablectl: the controller daemon of one casino card table.

The modules of ``controller/`` moved into packages by layer in 0.1 (engine/, common/,
record/, service/, commands/): a program written for the old paths (say
``tablectl.controller.ledger``) still imports them, with a DeprecationWarning naming the new
path, until 0.2 (``_MOVED``). Games and drivers import the public APIs instead:
``tablectl.games`` and ``tablectl.drivers``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__version__ = "0.1.0"

#: old module (under tablectl.controller) -> where it lives now; removed in 0.2. Two old paths
#: are packages now and are not here: ``engine`` (its former names are forwarded by
#: engine/__init__.py) and ``service`` (the daemon's own, which no game or driver imported).
_MOVED = {
    "machine": "engine.machine",
    "ledger": "engine.ledger",
    "conservation": "engine.conservation",
    "rules": "engine.rules",
    "decisions": "engine.decisions",
    "events": "engine.events",
    "cards": "engine.cards",
    "table": "engine.table",
    "registry": "engine.registry",
    "interpretations": "engine.interpretations",
    "shuffle_integrity": "engine.shuffle_integrity",
    "gaming_day": "engine.gaming_day",
    "games": "engine.games",
    "config": "common.config",
    "logs": "common.logs",
    "metrics": "common.metrics",
    "faults": "common.faults",
    "journal": "record.journal",
    "sealing": "record.sealing",
    "journal_verifier": "record.journal_verifier",
    "journal_upkeep": "record.journal_upkeep",
    "export": "record.export",
    "tablelock": "record.tablelock",
    "seat_bias": "record.seat_bias",
    "daemon": "service.daemon",
    "operator": "service.operator",
    "operator_client": "service.operator_client",
    "sdnotify": "service.sdnotify",
    "preflight": "service.preflight",
    "status_words": "service.status_words",
    "resources": "service.resources",
    "eager": "service.eager",
    "cli": "commands.cli",
    "watch": "commands.watch",
    "manuals": "commands.manuals",
    "replay": "commands.replay",
    "diagram": "commands.diagram",
}


def _new_name(fullname: str) -> str | None:
    prefix = f"{__name__}."
    if not fullname.startswith(prefix):
        return None
    first, dot, rest = fullname[len(prefix) :].partition(".")
    moved = _MOVED.get(first)
    return None if moved is None else f"{prefix}{moved}{dot}{rest}"


class _Alias(importlib.abc.Loader):
    """Hands out the module at its new path under the old name (the same object)."""

    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new_name)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the old name's spec on the module: give it its own back
        module.__spec__ = self.own_spec


class _MovedModules(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = _new_name(fullname)
        if new_name is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new_name} and the old path goes in tablectl 0.2"
            " (games import tablectl.games, drivers tablectl.drivers)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.util.spec_from_loader(fullname, _Alias(new_name))


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    # first: a submodule of a moved package (tablectl.controller.games.X) must not be found
    # again under its old name by the path finder, as a second copy of the module
    sys.meta_path.insert(0, _MovedModules())
