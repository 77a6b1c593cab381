"""The round engine: events in, decisions out. Pure.

What lives here: the card ledger, the decks and the table's specification, the `transitions`
chart with its rule conditions (``rules``, named by rule ID), the decisions and the event
language, shuffle integrity's checks, the gaming day's arithmetic, and one module per game
under ``games/`` over a core (``core.Engine``) that names no game. The core is composed of
rule families, each a class of its own module that keeps its own state: ``deck`` (one object
per deck), ``rack`` (the discard rack), ``reader`` (the hole-card reader), ``integrity``
(shuffle integrity); ``family`` is what a family may ask of the table (a family never
imports the core). The round's life is in parts of their own, objects the core holds and
routes events to: ``round_life`` (open, deal, play, collect, void), ``dealing``,
``stub_count``, ``shuffles``, ``devices`` and ``snapshot``; the Engine itself is
``table_state`` (state, helpers), ``hooks`` (what a game sets, and the families' rules a game
subclasses: deal, stub, decks, rack, reader) and ``gates``
(the chart's rule conditions, by rule ID).

What it may import: the standard library and `transitions`, nothing else of tablectl. No
I/O, no clock and no randomness of its own: time comes in the event, randomness is injected.
The same event stream always yields the same decisions, which is what replay, crash recovery
and a dispute's reconstruction rest on. ``tests/unit/test_architecture.py`` enforces this.
"""

from __future__ import annotations

import warnings
from typing import Any

#: What ``tablectl.controller.engine`` was as a module before the packages by layer (0.1):
#: a game written for it still imports these from here, with a DeprecationWarning, until 0.2.
#: A game imports ``tablectl.games`` now.
_FORMER_MODULE_NAMES = frozenset(
    {"SNAPSHOT_VERSION", "UNASSIGNED", "LAYOUT_TARGET_NAMES", "DEVICE_KINDS", "DEVICE_ALIASES"}
    | {"device_kind", "SnapshotError", "Deck", "Round", "Engine"}
)


def __getattr__(name: str) -> Any:
    if name not in _FORMER_MODULE_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"tablectl.controller.engine.{name} is deprecated and goes in tablectl 0.2: "
        "a game imports tablectl.games (docs/games.md)",
        DeprecationWarning,
        stacklevel=2,
    )
    from tablectl.controller.engine import core

    return getattr(core, name)
