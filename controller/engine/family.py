"""What a rule family may ask of the table it belongs to (controller/engine/rack.py, ...).

The :class:`~tablectl.controller.engine.core.Engine` is a composition of rule families, each
a class of its own module that keeps its own state; a family decides through the table (so
every decision takes its citation from the catalogue, for the game in play) and never imports
the core: it names the table by this protocol, and the core builds it with itself.
"""

from __future__ import annotations

from typing import Any, Protocol

from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.interpretations import Interpretations
from tablectl.controller.engine.table import TableOptions


class RackLevelRules(Protocol):
    """A game's own rules on the discard rack's level (hooks.py's ``RackRules``)."""

    def level(self, level: int) -> list[Decision]: ...


class Table(Protocol):
    """The table's services a family uses."""

    options: TableOptions
    interp: Interpretations
    device_faults: dict[str, str]

    def _d(self, decision: str, rule_id: str, reason: str, **extras: Any) -> Decision: ...

    def _notify(self, rule_id: str, reason: str) -> Decision: ...

    def _in_round(self) -> bool: ...

    @property
    def rack_rules(self) -> RackLevelRules: ...
